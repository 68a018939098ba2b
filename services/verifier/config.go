package verifier

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// Config is the verifier's configuration (see README.md for every key).
// Load it with config.Load(path, "RUNTIMETRUTH_VERIFIER", &cfg, nil) over
// NewDefaultConfig().
type Config struct {
	// NATS says how to reach NATS; ignored when Settings.Conn is set.
	NATS NATSConfig `mapstructure:"nats"`
	// Instance names this verifier in the source of the events it
	// publishes (/verifier/<instance>); empty means the host name.
	Instance string `mapstructure:"instance"`
	// Replicas is the replica count of the streams, consumers and buckets
	// the verifier ensures (1 for one server, 3 or 5 in a cluster).
	Replicas int `mapstructure:"replicas"`
	// Consumer is the durable consumer on the EVIDENCE stream; every
	// verifier instance sharing it shares the work.
	Consumer string `mapstructure:"consumer"`
	// Concurrency is how many batches one instance verifies at once (each
	// up to 64 snapshots: what has arrived when a worker is free).
	Concurrency int `mapstructure:"concurrency"`
	// HandlerTimeout bounds the handling of one snapshot; with the ack it
	// stays within the consumer's ack wait (30 s), so at most 25 s.
	HandlerTimeout time.Duration `mapstructure:"handler_timeout"`
	// StartTimeout bounds Start: connecting and ensuring the topology.
	StartTimeout time.Duration `mapstructure:"start_timeout"`
	// ShutdownTimeout bounds Shutdown: finishing the snapshots in hand.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Attestation configures the check of baselines that name a required
	// identity.
	Attestation AttestationConfig `mapstructure:"attestation"`
}

// AttestationConfig configures attestation checks.
type AttestationConfig struct {
	// TrustedRootFile is the Sigstore trusted root (trusted_root.json)
	// attestations are verified against; empty: none, and baselines that
	// name a required identity get error verdicts.
	TrustedRootFile string `mapstructure:"trusted_root_file"`
}

// NATSConfig says how to reach NATS. Its keys are those of the shared
// pkg/platform/natsbus connection config.
type NATSConfig struct {
	// URL is one server URL or a comma-separated list of them.
	URL string `mapstructure:"url"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	CredsFile string `mapstructure:"creds_file"`
	// User and Password authenticate with a user name and password.
	User     string `mapstructure:"user"`
	Password string `mapstructure:"password"`
	// NKeySeedFile holds an nkey user seed.
	NKeySeedFile string `mapstructure:"nkey_seed_file"`
	// TLS configures the server CA and a client certificate.
	TLS TLSConfig `mapstructure:"tls"`
	// Name is the connection name the server shows; empty means
	// "runtimetruth-verifier".
	Name string `mapstructure:"name"`
}

// TLSConfig holds PEM file paths.
type TLSConfig struct {
	CAFile   string `mapstructure:"ca_file"`
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
}

// NewDefaultConfig returns the defaults: a local server, one replica, the
// topology's "verifier" consumer.
func NewDefaultConfig() Config {
	return Config{
		NATS:            NATSConfig{URL: nats.DefaultURL},
		Replicas:        1,
		Consumer:        topology.ConsumerVerifier,
		Concurrency:     4,
		HandlerTimeout:  20 * time.Second,
		StartTimeout:    30 * time.Second,
		ShutdownTimeout: 25 * time.Second,
	}
}

// Validate checks every value.
func (c *Config) Validate() error {
	if err := c.NATS.Validate(); err != nil {
		return err
	}
	if strings.IndexFunc(c.Instance, unicode.IsControl) >= 0 || len(c.Instance) > events.MaxNameLength {
		return invalid("instance: control characters or longer than %d bytes", events.MaxNameLength)
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return invalid("replicas: %d (want 1 to 5)", c.Replicas)
	}
	if c.Consumer == "" || len(c.Consumer) > 255 || strings.ContainsAny(c.Consumer, ".*>/\\ \t\r\n") {
		return invalid("consumer: %q is not a durable consumer name", c.Consumer)
	}
	if c.Concurrency < 1 || c.Concurrency > topology.MaxAckPending {
		return invalid("concurrency: %d (want 1 to %d)", c.Concurrency, topology.MaxAckPending)
	}
	if limit := topology.AckWait - natsbus.DefaultAckTimeout; c.HandlerTimeout <= 0 || c.HandlerTimeout > limit {
		return invalid("handler_timeout: %s (want above 0 and at most %s, so that the ack lands within the %s ack wait)", c.HandlerTimeout, limit, topology.AckWait)
	}
	if c.StartTimeout <= 0 {
		return invalid("start_timeout: %s (want above 0)", c.StartTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		return invalid("shutdown_timeout: %s (want above 0)", c.ShutdownTimeout)
	}
	return nil
}

// Validate checks the URL list and that the authentication settings do
// not conflict.
func (c NATSConfig) Validate() error {
	if strings.TrimSpace(c.URL) == "" {
		return invalid("nats.url is empty")
	}
	for u := range strings.SplitSeq(c.URL, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			return invalid("nats.url: an entry is not a server URL")
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return invalid("nats.url: scheme %q (want nats, tls, ws or wss)", p.Scheme)
		}
	}
	methods := 0
	for _, set := range []bool{c.CredsFile != "", c.NKeySeedFile != "", c.User != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return invalid("nats: set only one of creds_file, nkey_seed_file and user")
	}
	if c.Password != "" && c.User == "" {
		return invalid("nats.password without nats.user")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return invalid("nats.tls: cert_file and key_file go together")
	}
	return nil
}

// options maps the configuration to nats.go options: reconnect forever,
// authenticate and use TLS as configured.
func (c NATSConfig) options() ([]nats.Option, error) {
	name := c.Name
	if name == "" {
		name = "runtimetruth-verifier"
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(5 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
	}
	switch {
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed %s: %w", c.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CAFile))
	}
	if c.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile))
	}
	return opts, nil
}

// connect connects as configured. The error never holds the password or
// a URL's user information.
func (c NATSConfig) connect() (*nats.Conn, error) {
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", redact(c.URL), err)
	}
	return nc, nil
}

func redact(list string) string {
	parts := strings.Split(list, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		} else if err != nil {
			parts[i] = "<unparsable url>"
		}
	}
	return strings.Join(parts, ",")
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", config.ErrInvalid, fmt.Sprintf(format, args...))
}
