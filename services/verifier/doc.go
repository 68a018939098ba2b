// Package verifier verifies evidence snapshots against reviewed baselines.
//
// It consumes evidence.collected events from the EVIDENCE stream (durable
// consumer "verifier"), compares each snapshot with its target's baseline
// (bucket baselines) exactly as `runtimetruth verify` does — diff.Compare,
// each protect selector's Check, Result.Protect, report.New — records it as
// its host's latest (bucket evidence-latest) unless it has the baseline's
// evidence, and publishes one verdict per snapshot (verdict.pass,
// verdict.drift or verdict.error, on rt.verdict.<host>.<status>), recorded
// as the latest verdict of the host and target (bucket verdicts-latest).
//
// The verdict's id is derived from the evidence event's id (VerdictID), so
// a redelivered snapshot yields the same id and JetStream drops the copy:
// one verdict per snapshot, across restarts. A snapshot is acknowledged only
// after its verdict is stored. A malformed event is dead-lettered
// (rt.dlq.EVIDENCE.<host>) and the verifier carries on. Snapshots are handled in
// batches of what has arrived, so that the bucket writes, baseline reads and
// publish acknowledgements are shared, never skipped.
//
// Baselines manages the baselines (Put, Get, List, Delete, and Approve,
// which promotes a target's latest snapshot: only the one the operator
// reviewed, named by its digest, and only evidence signed by a key the host
// registry holds as its host's enrolled one; Candidate shows what Approve
// would adopt) and announces every change as a baseline.changed event;
// Status lists the latest verdicts.
package verifier
