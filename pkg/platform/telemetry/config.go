package telemetry

import (
	"fmt"
	"net/url"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
)

// Config is the telemetry section of a service configuration (key
// "telemetry").
type Config struct {
	// OTLP configures trace export (telemetry.otlp.*).
	OTLP OTLPConfig `mapstructure:"otlp"`
	// TraceSampleRatio is the fraction of new traces sampled
	// (telemetry.trace_sample_ratio, 0 to 1, default 1). A message that
	// arrives with a sampled trace context is always sampled.
	TraceSampleRatio float64 `mapstructure:"trace_sample_ratio"`
}

// OTLPConfig configures the OTLP/HTTP trace exporter.
type OTLPConfig struct {
	// Endpoint is the collector's OTLP/HTTP URL, http://host:4318 or
	// https://host:4318 (telemetry.otlp.endpoint). The path /v1/traces is
	// added when the URL has none. Empty (the default) turns export off.
	Endpoint string `mapstructure:"endpoint"`
	// Timeout bounds one export request (telemetry.otlp.timeout, default
	// 10s).
	Timeout time.Duration `mapstructure:"timeout"`
}

// DefaultOTLPTimeout is the default OTLPConfig.Timeout.
const DefaultOTLPTimeout = 10 * time.Second

// NewDefaultConfig returns the defaults: no trace export, every new trace
// sampled.
func NewDefaultConfig() Config {
	return Config{OTLP: OTLPConfig{Timeout: DefaultOTLPTimeout}, TraceSampleRatio: 1}
}

// Validate checks the endpoint URL, the timeout and the ratio.
func (c Config) Validate() error {
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 {
		return fmt.Errorf("%w: telemetry.trace_sample_ratio: %v (want 0 to 1)", config.ErrInvalid, c.TraceSampleRatio)
	}
	if c.OTLP.Endpoint == "" {
		return nil
	}
	if _, err := c.OTLP.tracesURL(); err != nil {
		return err
	}
	if c.OTLP.Timeout <= 0 {
		return fmt.Errorf("%w: telemetry.otlp.timeout: %s (want above 0)", config.ErrInvalid, c.OTLP.Timeout)
	}
	return nil
}

// tracesURL is the endpoint with /v1/traces added when it has no path.
func (c OTLPConfig) tracesURL() (string, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%w: telemetry.otlp.endpoint: %q is not an http:// or https:// URL", config.ErrInvalid, c.Endpoint)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: telemetry.otlp.endpoint: user information is not accepted in the URL", config.ErrInvalid)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}
