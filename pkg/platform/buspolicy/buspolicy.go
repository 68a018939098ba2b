// Package buspolicy is the one statement of what each runtimetruth service
// may do on NATS: the subjects it may publish to and subscribe to, and
// whether it answers requests, and the limits that hold whatever a
// collector's credentials are used for. Deployments give each service a
// NATS user with exactly these permissions (ServerConfig renders them,
// with the limits, as nats-server configuration), the tests run an
// embedded server with them, and docs/security.md shows them (Markdown),
// so the three cannot drift apart.
//
// The grants follow the services' defaults: the verifier's durable
// consumer "verifier", the attestor's request subject rt.ctl.attest, the
// buckets of package topology. A deployment that renames one adjusts the
// grants to match.
//
// In short: a collector publishes evidence (rt.evidence, rt.integrity,
// rt.collect.failed) and nothing else, and answers only collect-now
// requests; with a credential of its own (Host, HostRole: per-host users
// of ServerConfig, or in operator mode the users OperatorMode's scoped
// signing key issues, operator.go), only its own host's; only the verifier publishes verdicts; only the attestor
// answers sign requests and publishes attestations; the auditor reads every
// stream and publishes nothing. No service may delete or purge a stream,
// a bucket or a durable consumer (the verifier deletes only the ephemeral
// consumers of its own key-value watches, on the buckets' streams); the services that create the topology at start
// (verifier, auditor, attestor) may create and update only their streams,
// consumers and buckets.
//
// Limits (limits.go): the server takes no message over MaxPayload (an event
// at the codec's limits, and room for server-added headers). The
// collectors, whose credentials sit on every inspected host, have an
// account of their own (AccountCollectors) with no JetStream storage
// (CollectorJetStream): it can create no stream, and so no consumer, that
// would take the server's storage from the pipeline, and it sees the
// pipeline's account (AccountPipeline) only through the service imports of
// the subjects collectors publish to and the export of their collect-now
// requests, never its JetStream API.
package buspolicy

import (
	"fmt"
	"slices"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Grant is one subject (NATS wildcards allowed) and why it is granted.
type Grant struct {
	Subject string
	Why     string
}

// Role is what one service may do.
type Role struct {
	// Service is the service name: collector, verifier, auditor, attestor.
	Service string
	// Publish and Subscribe are the allowed subjects; anything else is
	// refused with a permissions violation.
	Publish   []Grant
	Subscribe []Grant
	// Responds says whether the service answers requests it receives
	// (nats-server allow_responses: one reply to the reply subject of each
	// request, for a limited time), so that replies need no publish grant
	// on _INBOX.>.
	Responds bool
}

// PublishSubjects lists the subjects of r.Publish.
func (r Role) PublishSubjects() []string { return subjects(r.Publish) }

// SubscribeSubjects lists the subjects of r.Subscribe.
func (r Role) SubscribeSubjects() []string { return subjects(r.Subscribe) }

func subjects(gs []Grant) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Subject
	}
	return out
}

// Service names.
const (
	Collector = "collector"
	Verifier  = "verifier"
	Auditor   = "auditor"
	Attestor  = "attestor"
	Console   = "console"
	Notifier  = "notifier"
)

// NotifierConsumer is the notifier's durable consumers' name
// (notifier.DefaultConsumer), and BucketNotifierAlerts the bucket of its
// alerts (notifier.BucketAlerts): names this package cannot import.
const (
	NotifierConsumer     = "notifier"
	BucketNotifierAlerts = "notifier-alerts"
)

// AttestSubject is the attestor's default sign-request subject
// (attestor.DefaultSubject, which this package cannot import).
const AttestSubject = events.Prefix + ".ctl.attest"

// Inbox is the reply subject space of every client: JetStream API
// responses, publish acknowledgements and pulled messages arrive there.
const Inbox = "_INBOX.>"

// JetStream API and acknowledgement subjects.
func jsAPI(format string, args ...any) string { return "$JS.API." + fmt.Sprintf(format, args...) }

func ackSubject(stream, consumer string) string {
	return fmt.Sprintf("$JS.ACK.%s.%s.>", stream, consumer)
}

// kvStream is the stream behind a key-value bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// BucketEvidenceLatest is the verifier's own bucket of the latest snapshot
// per target.
const BucketEvidenceLatest = topology.BucketEvidence

// ensure grants creating, updating and reading the definition of streams
// (not deleting or purging them).
func ensure(why string, streams ...string) []Grant {
	var out []Grant
	for _, s := range streams {
		for _, op := range []string{"CREATE", "UPDATE", "INFO"} {
			out = append(out, Grant{jsAPI("STREAM.%s.%s", op, s), why})
		}
	}
	return out
}

// ensureConsumers grants creating and updating the durable consumers of
// streams (any name and filter: the subject of a create request carries
// both).
func ensureConsumers(why string, streams ...string) []Grant {
	var out []Grant
	for _, s := range streams {
		out = append(out, Grant{jsAPI("CONSUMER.CREATE.%s.>", s), why})
	}
	return out
}

// consume grants pulling from and acknowledging a durable consumer.
func consume(stream, consumer string) []Grant {
	why := fmt.Sprintf("consume %s as %q", stream, consumer)
	return []Grant{
		{jsAPI("CONSUMER.INFO.%s.%s", stream, consumer), why},
		{jsAPI("CONSUMER.MSG.NEXT.%s.%s", stream, consumer), why},
		{ackSubject(stream, consumer), why + " (ack, nak, term)"},
	}
}

// kvRead grants reading a bucket's entries.
func kvRead(bucket string) []Grant {
	why := fmt.Sprintf("read the %s bucket", bucket)
	return []Grant{
		{jsAPI("STREAM.INFO.%s", kvStream(bucket)), why},
		{jsAPI("DIRECT.GET.%s.>", kvStream(bucket)), why},
		{jsAPI("STREAM.MSG.GET.%s", kvStream(bucket)), why},
	}
}

// kvWatch grants watching a bucket (a key-value watch, and a listing of
// its keys, which is one): nats.go makes an ordered push consumer on the
// bucket's stream, an ephemeral one it creates (its name and filter in the
// create subject, or none), answers the stream's flow control on
// $JS.FC.<stream>.>, and deletes when the watch stops or starts over
// after a gap. Only the bucket's stream is named: the consumers of
// the pipeline's streams stay out of reach.
func kvWatch(bucket string) []Grant {
	why := fmt.Sprintf("watch the %s bucket (an ephemeral ordered consumer)", bucket)
	s := kvStream(bucket)
	return []Grant{
		{jsAPI("CONSUMER.CREATE.%s", s), why},
		{jsAPI("CONSUMER.CREATE.%s.>", s), why},
		{jsAPI("CONSUMER.DELETE.%s.>", s), why + ": deleted when the watch stops"},
		{"$JS.FC." + s + ".>", why + ": flow control replies"},
	}
}

// kvWrite grants writing a bucket's entries (put, create, update).
func kvWrite(bucket string) Grant {
	return Grant{"$KV." + bucket + ".>", fmt.Sprintf("write the %s bucket", bucket)}
}

var inbox = Grant{Inbox, "replies: JetStream API responses, publish acknowledgements, pulled messages"}

var accountInfo = Grant{jsAPI("INFO"), "JetStream account info (checked before a bucket is created)"}

// Roles returns the roles of the four services, in pipeline order, then
// the console's and the notifier's.
func Roles() []Role {
	allStreams := []string{topology.StreamEvidence, topology.StreamVerdicts, topology.StreamBaselines, topology.StreamDLQ}
	ensureWhy := "create or update the topology at start"

	verifier := Role{Service: Verifier}
	verifier.Publish = append(verifier.Publish,
		Grant{events.FilterVerdict, "publish verdicts (pass, drift, error)"},
		Grant{events.DeadLetterFilter(topology.StreamEvidence), "dead-letter evidence it cannot handle (rt.dlq.EVIDENCE.<host>)"},
		Grant{events.FilterHostKey, "announce a key the registry pinned on first use, recorded as pending or revoked at a rotation's end (host.key.changed)"},
		accountInfo,
	)
	verifier.Publish = append(verifier.Publish, ensure(ensureWhy, append(slices.Clone(allStreams),
		kvStream(topology.BucketBaselines), kvStream(topology.BucketVerdicts), kvStream(BucketEvidenceLatest),
		kvStream(topology.BucketHosts))...)...)
	verifier.Publish = append(verifier.Publish, ensureConsumers(ensureWhy, allStreams...)...)
	verifier.Publish = append(verifier.Publish, consume(topology.StreamEvidence, topology.ConsumerVerifier)...)
	verifier.Publish = append(verifier.Publish, kvRead(topology.BucketBaselines)...)
	verifier.Publish = append(verifier.Publish, kvRead(topology.BucketVerdicts)...)
	verifier.Publish = append(verifier.Publish, kvRead(BucketEvidenceLatest)...)
	verifier.Publish = append(verifier.Publish, kvRead(topology.BucketHosts)...)
	// The silence sweep lists the latest verdicts, and the registry's view
	// follows the host records (services/verifier: stale.go, registry.go).
	verifier.Publish = append(verifier.Publish, kvWatch(topology.BucketVerdicts)...)
	verifier.Publish = append(verifier.Publish, kvWatch(topology.BucketHosts)...)
	verifier.Publish = append(verifier.Publish, kvWrite(topology.BucketVerdicts), kvWrite(BucketEvidenceLatest), kvWrite(topology.BucketHosts))
	verifier.Publish = append(verifier.Publish, Grant{jsAPI("STREAM.MSG.GET.%s", topology.StreamVerdicts),
		"look up a verdict it may have published, by sequence (one verdict per evidence across a stop)"})
	verifier.Subscribe = []Grant{inbox}

	auditor := Role{Service: Auditor}
	auditor.Publish = append(auditor.Publish, accountInfo)
	auditor.Publish = append(auditor.Publish, ensure(ensureWhy, append(slices.Clone(allStreams),
		kvStream(topology.BucketBaselines), kvStream(topology.BucketVerdicts), kvStream(topology.BucketAuditorLeases))...)...)
	auditor.Publish = append(auditor.Publish, kvRead(topology.BucketAuditorLeases)...)
	auditor.Publish = append(auditor.Publish, kvWrite(topology.BucketAuditorLeases))
	auditor.Publish = append(auditor.Publish, ensureConsumers(ensureWhy, allStreams...)...)
	for _, s := range allStreams {
		auditor.Publish = append(auditor.Publish, consume(s, topology.ConsumerAuditor)...)
		auditor.Publish = append(auditor.Publish, Grant{jsAPI("STREAM.MSG.GET.%s", s), "re-read a stored message by sequence"})
	}
	auditor.Subscribe = []Grant{inbox}

	attestor := Role{Service: Attestor, Responds: true}
	attestor.Publish = append(attestor.Publish,
		Grant{events.FilterAttestation, "publish attestation.created"},
		accountInfo,
	)
	attestor.Publish = append(attestor.Publish, ensure(ensureWhy, topology.StreamBaselines, kvStream(topology.BucketBaselines))...)
	attestor.Publish = append(attestor.Publish, kvRead(topology.BucketBaselines)...)
	attestor.Publish = append(attestor.Publish, Grant{"$KV." + topology.BucketBaselines + "." + events.BaselineKeysFilter + events.AttestationKeySuffix,
		"write the attestation record of the baseline it signs (<kind>.<identifier>.attestation), never a baseline"})
	attestor.Subscribe = []Grant{
		{AttestSubject, "sign requests (queue group attestor); replies through allow_responses"},
		inbox,
	}

	// The console reads what the verifier keeps and writes only what an
	// operator decides: a baseline (never its attestation record), a
	// host's key, the baseline.changed and host.key.changed that announce
	// them, and a collect-now request.
	console := Role{Service: Console}
	for _, b := range []string{topology.BucketVerdicts, topology.BucketHosts, topology.BucketBaselines, BucketEvidenceLatest} {
		console.Publish = append(console.Publish, kvRead(b)...)
		console.Publish = append(console.Publish, kvWatch(b)...)
	}
	console.Publish = append(console.Publish,
		Grant{"$KV." + topology.BucketBaselines + "." + events.BaselineKeysFilter, "approve a baseline (<kind>.<identifier>), never an attestation record"},
		kvWrite(topology.BucketHosts),
		Grant{events.FilterBaseline, "announce an approval (baseline.changed)"},
		Grant{events.FilterHostKey, "announce a key it enrolled (host.key.changed)"},
		Grant{events.Prefix + ".ctl.collect.>", "ask a host's collector to collect now (rt.ctl.collect.<host>)"},
	)
	console.Subscribe = []Grant{inbox}

	// The notifier reads verdicts and runnable.modified, through its own
	// durable consumers, each created with its filter (the create subject
	// names it, and the server holds the request to it), and keeps its
	// alerts in a bucket of its own; it publishes no event, not even a
	// dead letter.
	notifier := Role{Service: Notifier}
	for _, c := range []struct{ stream, filter string }{
		{topology.StreamVerdicts, events.FilterVerdict}, {topology.StreamEvidence, events.FilterIntegrity},
	} {
		why := fmt.Sprintf("create its consumer %q on %s, filtered to %s", NotifierConsumer, c.stream, c.filter)
		notifier.Publish = append(notifier.Publish, Grant{jsAPI("CONSUMER.CREATE.%s.%s.%s", c.stream, NotifierConsumer, c.filter), why})
		notifier.Publish = append(notifier.Publish, consume(c.stream, NotifierConsumer)...)
	}
	notifier.Publish = append(notifier.Publish, accountInfo)
	notifier.Publish = append(notifier.Publish, ensure(ensureWhy, kvStream(BucketNotifierAlerts))...)
	notifier.Publish = append(notifier.Publish, kvRead(BucketNotifierAlerts)...)
	notifier.Publish = append(notifier.Publish, kvWatch(BucketNotifierAlerts)...)
	notifier.Publish = append(notifier.Publish, kvWrite(BucketNotifierAlerts))
	notifier.Subscribe = []Grant{inbox}

	return []Role{
		{
			Service: Collector,
			Publish: []Grant{
				{events.FilterEvidence, "publish evidence.collected"},
				{events.FilterIntegrity, "publish runnable.modified"},
				{events.Prefix + ".collect.failed.>", "publish collection.failed"},
			},
			Subscribe: []Grant{
				{CollectNowSubject, "collect-now requests on `rt.ctl.collect.<host>`; replies through allow_responses"},
				{Inbox, "publish acknowledgements"},
			},
			Responds: true,
		},
		verifier,
		auditor,
		attestor,
		console,
		notifier,
	}
}

// Lookup returns the role of a service.
func Lookup(service string) (Role, bool) {
	for _, r := range Roles() {
		if r.Service == service {
			return r, true
		}
	}
	return Role{}, false
}
