// Package auditor appends every event of the pipeline to tamper-evident
// hash chains, stored in ClickHouse, a JSONL log and syslog.
//
// It consumes every stream of the pipeline (EVIDENCE, VERDICTS, BASELINES,
// DLQ) through the durable "auditor" consumers, one loop per stream, and
// appends each message to its chain in stream order: one chain per stream
// and host for the host-scoped streams ("EVIDENCE/<host>",
// "VERDICTS/<host>", the host taken from the NATS subject) and one chain
// per other stream ("BASELINES", "DLQ"). A stream's loop is the only
// writer of its chains. To scale out, the chains are partitioned
// (Config.Partitions): chain c belongs to partition link.Partition(c, N),
// FNV-1a of its name modulo N; each partition reads every stream through
// its own durable consumer ("auditor-p0of2"), guarded by its own writer
// lease, and links only its chains' messages, acknowledging the others'.
//
// A link (pkg/evidence/chain) commits to the previous link's hash, its
// sequence number and the canonical form of the event: every attribute,
// the data, and the message's stream, stream sequence, subject and store
// time (package link). With a key, links are HMAC-SHA-256. A message that
// is not a valid catalog event is recorded as an auditor-made rejection
// record, never dropped silently, and so is a signed event whose signature cannot
// be its own (a real event's headers on other data, its id changed: the
// claim checked against the message, events.CheckClaim), without its data.
// Each host's messages draw on an allowance of link bytes (AllowanceConfig):
// past it they are recorded by digest and size, then, further past it, left
// out between two notices that say so.
//
// A batch is acknowledged only once its links are durable in every
// required sink (Writer.Commit; a failing sink is retried, the backlog
// waiting in JetStream). A redelivered message already in the chain is
// recognized by its stream sequence and not appended again. Each
// CloudEvent id is linked at most once per chain, whatever JetStream
// remembers: a message whose id its chain holds already (the same event
// published again, or redelivered as a new stream message after a NATS
// restart or past the duplicate window) is acknowledged without a link and
// counted (MetricDuplicateIDs). The writer keeps the last ids it sealed
// exactly and a Bloom filter of every id in the sink it reads back
// (ClickHouse when it is required, else the JSONL log), built at start; an
// id the filter may hold is looked up in that sink (IDReader). messages a
// crashed run took but never recorded are read back from the stream, so
// the chain stays in stream order. At start the auditor resumes from the
// heads stored in the sinks and first brings a sink that lags behind
// level from the one ahead (Writer.Recover). Before it reads a sink's
// heads, to resume or to retry, it waits for the sink's writes still in
// flight (Settler: an insert ClickHouse commits after the auditor gave up
// on it), so that no link is written twice. A ClickHouse sink that cannot
// be reached at start is waited for, not fatal: Start returns, the auditor
// retries with the sinks' backoff and Ready says it waits for it.
//
// What it holds is bounded by bytes (Config.MaxInflightBytes): every pull
// asks the server for no more than the bytes it took from a budget shared
// by the streams, and gives them back once its batch is acknowledged.
//
// Signed checkpoints (chain, seq, head hash; Ed25519) go to syslog and a
// file, so that truncation and a full rewrite are detectable from outside
// the database. `runtimetruth audit verify` recomputes the chains
// (pkg/evidence/chain's verifier), and checks the evidence signatures
// links carry with package signatures.
package auditor
