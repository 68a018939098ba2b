// Package verifier consumes evidence snapshots from JetStream and verifies each against its reviewed baseline (kept in a key-value bucket), publishing PASS / DRIFT / error verdicts.
//
// The module exists so the workspace has its final shape; the service is
// built by a later milestone (see docs/architecture.md, "Status"). Until
// then the single-machine commands of cmd/runtimetruth cover its logic
// through pkg/evidence.
package verifier
