// Package telemetry sets up a service's OpenTelemetry providers from its
// configuration: a meter provider that is always on and read by a
// Prometheus registry (served on /metrics by package health), and a tracer
// provider whose spans are exported over OTLP/HTTP only when
// telemetry.otlp.endpoint is set. Spans are created and trace context is
// propagated either way, so a trace stays whole across services that do not
// all export. NewCounters makes the counters of an instrumented package
// from one table.
package telemetry
