// Package attestor signs reviewed baselines with Sigstore (in-toto statements, key-based or keyless) on request over NATS.
//
// The module exists so the workspace has its final shape; the service is
// built by a later milestone (see docs/architecture.md, "Status"). Until
// then the single-machine commands of cmd/runtimetruth cover its logic
// through pkg/evidence.
package attestor
