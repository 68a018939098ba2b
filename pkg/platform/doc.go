// Package platform is the runtime plumbing every runtimetruth service
// shares:
//
//   - config: strict configuration loading (file, RUNTIMETRUTH_<SERVICE>_
//     environment, overrides);
//   - lifecycle: components started in order and drained in reverse
//     within a deadline;
//   - servicemain: the whole main of a service (flags, config, logging,
//     telemetry, health port, signals, lifecycle);
//   - health: /healthz, /readyz and /metrics;
//   - telemetry: OpenTelemetry providers (Prometheus metrics always,
//     OTLP trace export when configured);
//   - eventtrace: trace context through CloudEvents on NATS;
//   - natsbus: NATS connections (TLS and credentials), the instrumented
//     consume loop and publisher;
//   - buspolicy: the per-service NATS subject permissions, per-host
//     collector credentials (server configuration or operator-mode JWTs),
//     max_payload and the collectors' account limits.
//
// See README.md for the configuration keys and the instrumentation API.
package platform
