package buspolicy

import "github.com/runtimetruth/runtimetruth/pkg/events"

// The accounts ServerConfig renders. A collector runs on every inspected
// host, so its credentials are the ones most exposed; its account holds
// nothing and reaches the pipeline only by publishing its events through
// service imports (and taking collect-now requests through an export), so
// that no collector credential, whatever its permissions, sees the
// pipeline's JetStream API: it cannot read the streams, create a consumer
// on them (an interest-retention consumer that never acknowledges would
// hold every event until the stream is full) or change them.
const (
	// AccountPipeline holds the streams and buckets, the verifier, auditor
	// and attestor users, and the operator's.
	AccountPipeline = "RUNTIMETRUTH"
	// AccountCollectors holds the collector users.
	AccountCollectors = "COLLECTORS"
)

// MaxPayload is the server's max_payload, the largest message (headers
// and data) it takes from a client: an event at the codec's limits
// (events.MaxEventSize, headers and data as NATS counts them) with room for
// a second header block (events.MaxHeaderSize) such as the server adds
// when it hands a stored message on (a direct get, a sourced copy). A
// client is told it when it connects: nats.go refuses a larger publish
// itself (nats.ErrMaxPayload); the server refuses one from a client that
// ignores it, and closes its connection. The streams take at most
// events.MaxEventSize (topology: MaxMsgSize).
const MaxPayload = events.MaxEventSize + events.MaxHeaderSize

// CollectNowSubject is the subject space of the collectors' collect-now
// requests (rt.ctl.collect.<host>).
const CollectNowSubject = events.Prefix + ".ctl.collect.>"

// JetStreamLimits are an account's JetStream limits, as nats-server's
// account jetstream block takes them. nats-server reads a count of 0 as no
// limit; storage of 0 is none.
type JetStreamLimits struct {
	// MaxMemory and MaxStore are the bytes of memory and file storage the
	// account's streams may reserve.
	MaxMemory, MaxStore int64
	// MaxStreams bounds the account's streams, MaxConsumers each
	// stream's consumers.
	MaxStreams, MaxConsumers int
}

// CollectorJetStream are the JetStream limits of AccountCollectors: no
// storage, so that no stream can be created there (every stream reserves
// some) and so no consumer either; the counts are the smallest
// nats-server takes as a limit, in case storage is ever granted.
var CollectorJetStream = JetStreamLimits{MaxMemory: 0, MaxStore: 0, MaxStreams: 1, MaxConsumers: 1}

// AccountOf names the account of a service's users.
func AccountOf(service string) string {
	if service == Collector {
		return AccountCollectors
	}
	return AccountPipeline
}

// CollectorSubjects are the subjects a collector publishes to (its
// role's publish grants), which AccountPipeline exports to it.
func CollectorSubjects() []string {
	r, _ := Lookup(Collector)
	return r.PublishSubjects()
}
