// Package topology defines the JetStream streams, consumers and key-value
// buckets of runtimetruth in one place, and creates or updates them
// idempotently (Ensure) when a service starts.
//
// Nothing is dropped silently. The pipeline streams (EVIDENCE, VERDICTS)
// use interest retention: a message stays until every consumer interested
// in its subject has acknowledged it, so MaxBytes bounds the backlog, not
// the history. Every stream discards new messages when full (DiscardNew):
// a stalled consumer makes producers see errors and retry, instead of old
// unprocessed events disappearing. The low-volume streams (BASELINES, DLQ)
// keep their history until MaxAge (limits retention). Each stream
// de-duplicates on Nats-Msg-Id (the CloudEvent id) within DuplicateWindow
// and caps a message at events.MaxEventSize.
//
//	stream     subjects                                    retention  max age  max bytes
//	EVIDENCE   rt.evidence.> rt.integrity.> rt.collect.>   interest   7 days   1 GiB
//	           (at most EvidencePerSubject unconsumed per subject: a host's own)
//	VERDICTS   rt.verdict.>                                interest   7 days   256 MiB
//	BASELINES  rt.baseline.> rt.attestation.>              limits     1 year   256 MiB
//	DLQ        rt.dlq.>                                    limits     30 days  256 MiB
//	           (the newest DeadLettersPerHost per rt.dlq.<stream>.<host>)
//
// MaxBytes is reserved against the server's JetStream storage (by default
// 75% of the free disk when it starts), so the defaults stay small enough
// for a laptop; a fleet deployment raises them on the returned Topology.
//
// Consumers are durable pull consumers with explicit acks. An interest
// stream acknowledges, and drops, a message no consumer is interested in,
// so Ensure gives a stream it creates interest retention only once its
// consumers exist (it starts as a limits stream, storing what it takes):
// a publisher retrying while the topology is first made never sees its
// event acknowledged and lost. The consumers:
//
//	stream     consumer  filter           max deliver  max ack pending
//	EVIDENCE   verifier  rt.evidence.>    10           256
//	EVIDENCE   auditor   (all)            unlimited    4096
//	VERDICTS   auditor   (all)            unlimited    4096
//	BASELINES  auditor   (all)            unlimited    4096
//	DLQ        auditor   (all)            unlimited    4096
//
// The auditor's larger window lets it append in batches of 2048 (large
// ClickHouse inserts, one fsync per batch) with two batches in flight.
//
// An unacknowledged delivery (a crashed handler) is redelivered after
// AckWait; a handler that wants a retry naks with RetryDelay. Consumers set
// no BackOff: with one, the server stretches every NakWithDelay by
// BackOff[n] - AckWait, so retries would wait minutes instead of seconds.
// A consumer with a delivery limit must dead-letter a message itself on its
// last delivery (Last): JetStream only emits an advisory when it stops
// redelivering.
//
// Key-value buckets: baselines (a target's baseline, 16 revisions kept)
// and verdicts-latest (the last verdict per host and target).
//
// The verifier ensures Verifier(replicas, consumer): all of the above, its
// durable consumer on EVIDENCE under the name it is configured with, and
// two more buckets: evidence-latest (the latest snapshot per host and
// target, which `runtimetruth baseline approve` promotes) and hosts (the
// host registry, which `runtimetruth host` changes). New leaves them out
// because the other services that ensure the topology at start (the
// auditor) neither use them nor may touch them (pkg/platform/buspolicy).
package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
)

// Stream names.
const (
	StreamEvidence  = "EVIDENCE"
	StreamVerdicts  = "VERDICTS"
	StreamBaselines = "BASELINES"
	StreamDLQ       = "DLQ"
)

// Durable consumer names (unique per stream).
const (
	ConsumerVerifier = "verifier"
	ConsumerAuditor  = "auditor"
)

// Key-value bucket names.
const (
	BucketBaselines = "baselines"
	BucketVerdicts  = "verdicts-latest"
	// BucketEvidence holds the latest snapshot per host and target, key
	// <host>.<kind>.<identifier> (VerdictKey); the verifier writes it and
	// `runtimetruth baseline approve` promotes what it holds. Only
	// Verifier's definitions include it.
	BucketEvidence = "evidence-latest"
	// BucketHosts is the host registry: a host's signing keys and where
	// each stands (events.HostRecord), key events.Token(host). The
	// verifier creates it; operators change it (`runtimetruth host`).
	BucketHosts = "hosts"
	// BucketAuditorLeases holds the auditors' writer leases, one key per
	// durable consumer and stream (<consumer>.<stream>), held by the one
	// auditor that writes that stream's chains; AuditorLeases defines it.
	BucketAuditorLeases = "auditor-leases"
)

// Settings shared by the definitions.
const (
	// DuplicateWindow is how long a stream remembers a Nats-Msg-Id.
	DuplicateWindow = 2 * time.Minute
	// AckWait is how long a consumer waits for an ack before redelivering.
	AckWait = 30 * time.Second
	// VerifierMaxDeliver bounds the verifier's deliveries of one message.
	VerifierMaxDeliver = 10
	// EvidencePerSubject is how many messages of one EVIDENCE subject
	// (a host's evidence of one target kind, its runnable.modified, its
	// collection failures) the stream holds unconsumed; a publish past it
	// is refused (maximum messages per subject exceeded) and the collector
	// keeps the event in its spool. A host's targets of one kind at a
	// 60 s interval send a few a minute.
	EvidencePerSubject = 128
	// DeadLettersPerHost is how many dead letters the DLQ stream keeps per
	// host and stream (rt.dlq.<stream>.<host>: its per-subject limit,
	// which drops the oldest): at about 1 KiB a record, a thousand hosts
	// fill a fourth of its 256 MiB.
	DeadLettersPerHost = 1000
	// MaxAckPending bounds a consumer's unacknowledged messages.
	MaxAckPending = 256
	// AuditorMaxAckPending bounds the auditor consumers' unacknowledged
	// messages: the auditor appends in batches of half of it (two batches
	// in flight, one written while the next is sealed), and ClickHouse
	// wants inserts of thousands of rows.
	AuditorMaxAckPending = 4096
	// BaselineHistory is how many revisions of a baseline the bucket keeps.
	BaselineHistory = 16
)

// RetryDelay is the delay for NakWithDelay after the given number of
// deliveries (jetstream.MsgMetadata.NumDelivered): 1s, 5s, 30s, then 1 min.
func RetryDelay(delivered uint64) time.Duration {
	steps := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}
	if delivered == 0 {
		delivered = 1
	}
	return steps[min(delivered, uint64(len(steps)))-1]
}

// Last reports whether a delivery is the last one a consumer config allows,
// when the handler must dead-letter the message instead of asking for a
// retry.
func Last(cfg jetstream.ConsumerConfig, delivered uint64) bool {
	return cfg.MaxDeliver > 0 && delivered >= uint64(cfg.MaxDeliver)
}

// Consumer is a consumer definition and its stream.
type Consumer struct {
	Stream string
	Config jetstream.ConsumerConfig
}

// Topology is the set of definitions Ensure creates. It is plain data: a
// deployment may adjust limits before calling Ensure.
type Topology struct {
	Streams   []jetstream.StreamConfig
	Consumers []Consumer
	Buckets   []jetstream.KeyValueConfig
}

// New returns the definitions with the given replica count (1 for one
// server; 3 or 5 in a cluster).
func New(replicas int) Topology {
	if replicas < 1 {
		replicas = 1
	}
	stream := func(name, desc string, retention jetstream.RetentionPolicy, maxAge time.Duration, maxBytes int64, subjects ...string) jetstream.StreamConfig {
		// A message of an interest stream is gone once its consumers
		// have it, seconds later: compressing it spends the server's CPU
		// on every block (and decompressing on reads and interest
		// checks) to save disk only while a consumer is behind. The
		// streams kept for months are compressed.
		compression := jetstream.S2Compression
		if retention == jetstream.InterestPolicy {
			compression = jetstream.NoCompression
		}
		return jetstream.StreamConfig{
			Name:              name,
			Description:       desc,
			Subjects:          subjects,
			Retention:         retention,
			Discard:           jetstream.DiscardNew,
			MaxAge:            maxAge,
			MaxBytes:          maxBytes,
			MaxMsgs:           -1,
			MaxMsgsPerSubject: -1,
			MaxConsumers:      -1,
			MaxMsgSize:        events.MaxEventSize,
			Duplicates:        DuplicateWindow,
			Storage:           jetstream.FileStorage,
			Compression:       compression,
			Replicas:          replicas,
		}
	}
	const day = 24 * time.Hour
	// A host's dead letters keep to their subject (rt.dlq.<stream>.<host>),
	// its newest DeadLettersPerHost: one host's junk replaces its own
	// older records and never fills the stream for the others.
	dlq := stream(StreamDLQ, "dead-letter records of rejected messages (event.rejected), the newest per host",
		jetstream.LimitsPolicy, 30*day, 256<<20, events.FilterDeadLetter)
	dlq.MaxMsgsPerSubject = DeadLettersPerHost
	// A host's evidence waiting for its consumers keeps to its subjects
	// (rt.evidence.<host>.<kind>, rt.integrity.<host>,
	// rt.collect.failed.<host>), at most EvidencePerSubject each: a host
	// publishing faster than the verifier refuses (junk, replays, ever new
	// keys) is told the subject is full, and its backlog, which every
	// other host's evidence would wait behind, stays a few hundred
	// messages.
	evidence := stream(StreamEvidence, "collector output: evidence snapshots, runnable.modified, collection failures",
		jetstream.InterestPolicy, 7*day, 1<<30, events.FilterEvidence, events.FilterIntegrity, events.FilterCollect)
	evidence.MaxMsgsPerSubject, evidence.DiscardNewPerSubject = EvidencePerSubject, true
	consumer := func(stream, name, desc string, maxDeliver, maxAckPending int, filters ...string) Consumer {
		return Consumer{Stream: stream, Config: jetstream.ConsumerConfig{
			Durable:        name,
			Description:    desc,
			DeliverPolicy:  jetstream.DeliverAllPolicy,
			AckPolicy:      jetstream.AckExplicitPolicy,
			AckWait:        AckWait,
			MaxDeliver:     maxDeliver,
			ReplayPolicy:   jetstream.ReplayInstantPolicy,
			MaxAckPending:  maxAckPending,
			FilterSubjects: filters,
			Replicas:       replicas,
		}}
	}
	return Topology{
		Streams: []jetstream.StreamConfig{
			evidence,
			stream(StreamVerdicts, "verifier output: pass, drift and error verdicts",
				jetstream.InterestPolicy, 7*day, 256<<20, events.FilterVerdict),
			stream(StreamBaselines, "baseline changes, attestations and host key changes",
				jetstream.LimitsPolicy, 365*day, 256<<20, events.FilterBaseline, events.FilterAttestation, events.FilterHostKey),
			dlq,
		},
		Consumers: []Consumer{
			consumer(StreamEvidence, ConsumerVerifier, "verifies evidence snapshots against baselines",
				VerifierMaxDeliver, MaxAckPending, events.FilterEvidence),
			consumer(StreamEvidence, ConsumerAuditor, "appends every event to the audit chain", -1, AuditorMaxAckPending),
			consumer(StreamVerdicts, ConsumerAuditor, "appends every event to the audit chain", -1, AuditorMaxAckPending),
			consumer(StreamBaselines, ConsumerAuditor, "appends every event to the audit chain", -1, AuditorMaxAckPending),
			consumer(StreamDLQ, ConsumerAuditor, "appends every event to the audit chain", -1, AuditorMaxAckPending),
		},
		Buckets: []jetstream.KeyValueConfig{
			{
				Bucket:       BucketBaselines,
				Description:  "baseline per target, key <kind>.<identifier> (events.TargetTokens)",
				History:      BaselineHistory,
				MaxValueSize: events.MaxEventSize,
				Storage:      jetstream.FileStorage,
				Replicas:     replicas,
			},
			{
				Bucket:       BucketVerdicts,
				Description:  "latest verdict per host and target, key <host>.<kind>.<identifier>",
				History:      1,
				MaxValueSize: events.MaxEventSize,
				Storage:      jetstream.FileStorage,
				Replicas:     replicas,
			},
		},
	}
}

// Ensure creates or updates the default definitions (New(replicas)).
func Ensure(ctx context.Context, js jetstream.JetStream, replicas int) error {
	return New(replicas).Ensure(ctx, js)
}

// Verifier returns the definitions the verifier ensures when it starts:
// New(replicas) with the verifier's durable consumer on EVIDENCE named
// consumer (ConsumerVerifier when empty), plus the evidence-latest bucket
// (BucketEvidence), which the baselines store needs to approve a
// snapshot, and the host registry (BucketHosts). Several verifiers sharing a consumer name share its work.
func Verifier(replicas int, consumer string) Topology {
	if consumer == "" {
		consumer = ConsumerVerifier
	}
	t := New(replicas)
	for i := range t.Consumers {
		c := &t.Consumers[i]
		if c.Stream == StreamEvidence && c.Config.Durable == ConsumerVerifier {
			c.Config.Durable = consumer
		}
	}
	t.Buckets = append(t.Buckets, jetstream.KeyValueConfig{
		Bucket:       BucketEvidence,
		Description:  "latest evidence snapshot per host and target, key <host>.<kind>.<identifier>",
		History:      1,
		MaxValueSize: events.MaxEventSize,
		Storage:      jetstream.FileStorage,
		Replicas:     max(replicas, 1),
	}, jetstream.KeyValueConfig{
		Bucket:       BucketHosts,
		Description:  "host registry: each host's signing keys and their states, key <host>",
		History:      8,
		MaxValueSize: 64 << 10,
		Storage:      jetstream.FileStorage,
		Replicas:     max(replicas, 1),
	})
	return t
}

// AuditorLeases is the definition of the auditors' lease bucket: an entry
// lapses ttl after its last write (the bucket's MaxAge), so the lease of
// an auditor that died is free ttl after its last renewal.
func AuditorLeases(replicas int, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketAuditorLeases,
		Description: "runtimetruth auditor writer leases: one writer per stream's chains",
		History:     1,
		TTL:         ttl,
		Replicas:    max(replicas, 1),
		Storage:     jetstream.FileStorage,
	}
}

// EnsureVerifier creates or updates Verifier(replicas, ConsumerVerifier):
// every definition, the evidence-latest bucket included, as a verifier
// with the default consumer name creates them.
func EnsureVerifier(ctx context.Context, js jetstream.JetStream, replicas int) error {
	return Verifier(replicas, ConsumerVerifier).Ensure(ctx, js)
}

// StreamNames returns the names of t's streams and of the streams behind
// its key-value buckets (KV_<bucket>).
func (t Topology) StreamNames() []string {
	names := make([]string, 0, len(t.Streams)+len(t.Buckets))
	for _, s := range t.Streams {
		names = append(names, s.Name)
	}
	for _, b := range t.Buckets {
		names = append(names, "KV_"+b.Bucket)
	}
	return names
}

// Ensure creates every stream, consumer and bucket that is missing and
// updates the others to the definitions; running it again, or from several
// services at once, changes nothing. A definition the server cannot apply to
// an existing one (a different storage type, say) is an error naming it.
//
// An interest stream it creates is created with limits retention, then
// its consumers, and only then is it given interest retention: in
// between, an interest stream would acknowledge and drop what no consumer
// wants yet (nats-server's processJetStreamMsg skips a message without
// interest). Every Ensure sets interest retention after ensuring the
// consumers, so several at once leave no such gap either.
func (t Topology) Ensure(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range t.Streams {
		ensure := func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		}
		if cfg.Retention == jetstream.InterestPolicy {
			ensure = func(ctx context.Context) error { return createAsLimits(ctx, js, cfg) }
		}
		if err := ensureCall(ctx, ensure); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, c := range t.Consumers {
		if err := ensureCall(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
			return err
		}); err != nil {
			return fmt.Errorf("ensure consumer %s on %s: %w", c.Config.Durable, c.Stream, err)
		}
	}
	for _, cfg := range t.Streams {
		if cfg.Retention != jetstream.InterestPolicy {
			continue
		}
		if err := ensureCall(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, cfg := range t.Buckets {
		if err := ensureCall(ctx, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateKeyValue(ctx, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// createAsLimits creates stream cfg, when it is missing, with limits
// retention (Ensure gives it cfg's once its consumers exist); a stream
// that exists is left as it is.
func createAsLimits(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	_, err := js.Stream(ctx, cfg.Name)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	cfg.Retention = jetstream.LimitsPolicy
	_, err = js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil // made meanwhile by another Ensure, which finishes it as this one does
	}
	return err
}

// ensureAttempt bounds one JetStream API call of Ensure: a request a
// cluster drops (its meta leader changing, as on a loaded machine or
// while servers start together) is sent again rather than waited on until
// ctx ends.
const ensureAttempt = 10 * time.Second

// ensurePolicy is the wait between two attempts of an ensure call.
var ensurePolicy = retry.Policy{First: 100 * time.Millisecond, Max: 2 * time.Second}

// ensureCall runs f until it succeeds, fails for good, or ctx ends. A
// call that lost a race with another creator (the update found nothing,
// then the create found the name taken) is made again at once, up to
// three times in a row; a failure that a forming or recovering cluster
// gives (transient) is retried after a short, growing pause. It returns
// the last error.
func ensureCall(ctx context.Context, f func(ctx context.Context) error) error {
	waits := ensurePolicy.Backoff()
	races := 0
	for {
		actx, cancel := context.WithTimeout(ctx, ensureAttempt)
		err := f(actx)
		cancel()
		switch {
		case err == nil || ctx.Err() != nil:
			return err
		case lostRace(err) && races < 3:
			races++
			continue
		case !transient(err):
			return err
		}
		if !waits.Wait(ctx) {
			return err
		}
		races = 0
	}
}

// lostRace reports whether err says another creator made the stream or
// consumer between this call's lookup and its create.
func lostRace(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || errors.Is(err, jetstream.ErrConsumerExists)
}

// JetStream API error codes of a cluster that is not ready (nats-server
// errors.json): no suitable peers for placement (a peer not yet heard
// from, or offline), and the JetStream system temporarily unavailable.
const (
	codeClusterNoPeers  jetstream.ErrorCode = 10005
	codeClusterNotAvail jetstream.ErrorCode = 10008
)

// transient reports whether err is a failure worth another attempt: the
// attempt timed out, nothing answered (no meta leader yet), or the
// cluster could not place the asset yet.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == codeClusterNoPeers || api.ErrorCode == codeClusterNotAvail)
}

// BaselineKey is the baselines bucket key of a target.
func BaselineKey(t events.Target) string { return events.TargetTokens(t) }

// VerdictKey is the verdicts-latest bucket key of a host's target.
func VerdictKey(host string, t events.Target) string {
	return events.Token(host) + "." + events.TargetTokens(t)
}
