// Package e2e holds the in-process end-to-end tests of the pipeline: the
// four services (collector, verifier, auditor, attestor) embedded in one
// test process against an in-process nats-server (or a three-node
// cluster) running the configuration buspolicy renders, each service
// connected as the user rendered for it and the test as the operator
// (never as an unrestricted user), with in-memory
// OpenTelemetry exporters, checking the trace one collection leaves across
// the services and the metrics each reports. It lives under the command
// because only the command may import every service (.golangci.yml
// depguard rules); it has no code of its own.
package e2e
