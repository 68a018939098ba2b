// Package e2e holds the in-process end-to-end tests of the pipeline: the
// four services (collector, verifier, auditor, attestor) embedded in one
// test process against an in-process JetStream, with in-memory
// OpenTelemetry exporters, checking the trace one collection leaves across
// the services and the metrics each reports. It lives under the command
// because only the command may import every service (.golangci.yml
// depguard rules); it has no code of its own.
package e2e
