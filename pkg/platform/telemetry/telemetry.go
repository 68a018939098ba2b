package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Info identifies the process in every span and metric (the OpenTelemetry
// resource).
type Info struct {
	// Service is the service name, e.g. "runtimetruth-verifier".
	Service string
	// Version is the build version.
	Version string
	// Instance names this process (default: the host name).
	Instance string
}

// Providers are what instrumented code needs. A zero field means the
// OpenTelemetry global one (otel.GetTracerProvider, ...), which is a no-op
// until a main installs Telemetry with SetGlobal.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator
}

// Tracer returns the named tracer of p's tracer provider (or the global).
func (p Providers) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	if p.TracerProvider == nil {
		return otel.GetTracerProvider().Tracer(name, opts...)
	}
	return p.TracerProvider.Tracer(name, opts...)
}

// Meter returns the named meter of p's meter provider (or the global).
func (p Providers) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	if p.MeterProvider == nil {
		return otel.GetMeterProvider().Meter(name, opts...)
	}
	return p.MeterProvider.Meter(name, opts...)
}

// TextMapPropagator returns p's propagator (or the global).
func (p Providers) TextMapPropagator() propagation.TextMapPropagator {
	if p.Propagator == nil {
		return otel.GetTextMapPropagator()
	}
	return p.Propagator
}

// Telemetry holds a service's providers and what serves its metrics.
type Telemetry struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	Propagator     propagation.TextMapPropagator
	// Registry holds the OpenTelemetry metrics (through the Prometheus
	// exporter) and the Go runtime and process collectors.
	Registry *prometheus.Registry
	// Exporting reports whether spans are exported (an OTLP endpoint is
	// configured).
	Exporting bool
}

// Propagator is the propagator every service uses: W3C trace context
// (carried in a CloudEvent's traceparent and tracestate extensions) and W3C
// baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup builds the providers from cfg. Nothing is sent or listened on
// until spans end (export is batched in the background) or the registry is
// scraped; Shutdown flushes and stops.
func Setup(ctx context.Context, info Info, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if info.Instance == "" {
		info.Instance, _ = os.Hostname()
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", info.Service),
		attribute.String("service.version", info.Version),
		attribute.String("service.instance.id", info.Instance),
		attribute.String("service.namespace", "runtimetruth"),
	))
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("register go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("register process collector: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp))

	topts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceSampleRatio))),
	}
	exporting := cfg.OTLP.Endpoint != ""
	if exporting {
		u, _ := cfg.OTLP.tracesURL() // checked by Validate
		te, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u), otlptracehttp.WithTimeout(cfg.OTLP.Timeout))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("otlp trace exporter: %w", err), mp.Shutdown(ctx))
		}
		topts = append(topts, sdktrace.WithBatcher(te))
	}
	return &Telemetry{
		TracerProvider: sdktrace.NewTracerProvider(topts...),
		MeterProvider:  mp,
		Propagator:     Propagator(),
		Registry:       reg,
		Exporting:      exporting,
	}, nil
}

// Providers returns t's providers for instrumented code.
func (t *Telemetry) Providers() Providers {
	return Providers{TracerProvider: t.TracerProvider, MeterProvider: t.MeterProvider, Propagator: t.Propagator}
}

// SetGlobal installs t's providers as the OpenTelemetry globals, so that
// code instrumented through the globals reports through t. Only a main
// calls it.
func (t *Telemetry) SetGlobal() {
	otel.SetTracerProvider(t.TracerProvider)
	otel.SetMeterProvider(t.MeterProvider)
	otel.SetTextMapPropagator(t.Propagator)
}

// MetricsHandler serves the registry in the Prometheus exposition format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{})
}

// Shutdown flushes the spans not yet exported and stops both providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.TracerProvider.Shutdown(ctx), t.MeterProvider.Shutdown(ctx))
}
