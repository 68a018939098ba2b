// Package auditor appends every event of the pipeline to a tamper-evident hash chain stored in ClickHouse, mirrored to syslog and JSONL.
//
// The module exists so the workspace has its final shape; the service is
// built by a later milestone (see docs/architecture.md, "Status"). Until
// then the single-machine commands of cmd/runtimetruth cover its logic
// through pkg/evidence.
package auditor
