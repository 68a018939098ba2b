package attestor

import (
	"net/url"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// Signing modes.
const (
	// ModeKey signs with a static ECDSA P-256 key (signing.key_file).
	ModeKey = "key"
	// ModeKeyless signs with a Fulcio certificate for the identity of an
	// OIDC token (signing.identity_token_file).
	ModeKeyless = "keyless"
)

// Config is the attestor's configuration (README.md lists every key).
// Load it with config.Load(path, "RUNTIMETRUTH_ATTESTOR", &cfg, nil) over
// NewDefaultConfig(). It holds file paths, never a secret itself.
type Config struct {
	// ServiceConfig is how to reach NATS (nats.*; ignored when
	// Settings.Conn is set), the instance named in the source of the
	// attestor's events (/attestor/<instance>) and the replica count of
	// the BASELINES stream and the baselines bucket the attestor ensures.
	natsbus.ServiceConfig `mapstructure:",squash"`
	// Subject is the request-reply subject of sign requests.
	Subject string `mapstructure:"subject"`
	// QueueGroup shares the requests between attestor instances.
	QueueGroup string `mapstructure:"queue_group"`
	// Concurrency is how many requests one instance signs at once.
	Concurrency int `mapstructure:"concurrency"`
	// RequestTimeout bounds the handling of one request (signing
	// included).
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// StartTimeout bounds Start; ShutdownTimeout bounds Shutdown.
	StartTimeout    time.Duration `mapstructure:"start_timeout"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Signing says how to sign.
	Signing SigningConfig `mapstructure:"signing"`
}

// SigningConfig says how the attestor signs.
type SigningConfig struct {
	// Mode is "key" or "keyless".
	Mode string `mapstructure:"mode"`
	// KeyFile is the private key (PEM PKCS #8 or SEC 1, or cosign's
	// encrypted format) of mode key.
	KeyFile string `mapstructure:"key_file"`
	// KeyPasswordFile holds the password of an encrypted KeyFile (its
	// content, trailing newline removed); empty for none.
	KeyPasswordFile string `mapstructure:"key_password_file"`
	// IdentityTokenFile holds the OIDC identity token of mode keyless; it
	// is read again at every signature (projected tokens rotate).
	IdentityTokenFile string `mapstructure:"identity_token_file"`
	// FulcioURL, RekorURL and TSAURL are the keyless services; Rekor or
	// the timestamp authority (or both) must be set.
	FulcioURL string `mapstructure:"fulcio_url"`
	RekorURL  string `mapstructure:"rekor_url"`
	TSAURL    string `mapstructure:"tsa_url"`
	// TrustedRootFile, when set, verifies every keyless bundle right after
	// signing.
	TrustedRootFile string `mapstructure:"trusted_root_file"`
	// Timeout bounds each request to Fulcio, Rekor and the timestamp
	// authority.
	Timeout time.Duration `mapstructure:"timeout"`
}

// DefaultSubject is the default request-reply subject of sign requests,
// events.AttestSubject (rt.ctl.attest): core NATS, outside every stream.
const DefaultSubject = events.AttestSubject

// NewDefaultConfig returns the defaults: a local server, keyless signing
// with public-good Sigstore and a projected token file.
func NewDefaultConfig() Config {
	return Config{
		ServiceConfig:   natsbus.NewDefaultServiceConfig(),
		Subject:         DefaultSubject,
		QueueGroup:      "attestor",
		Concurrency:     2,
		RequestTimeout:  time.Minute,
		StartTimeout:    30 * time.Second,
		ShutdownTimeout: 70 * time.Second,
		Signing: SigningConfig{
			Mode:              ModeKeyless,
			IdentityTokenFile: "/var/run/sigstore/cosign/oidc-token",
			FulcioURL:         "https://fulcio.sigstore.dev",
			RekorURL:          "https://rekor.sigstore.dev",
			Timeout:           30 * time.Second,
		},
	}
}

// NewKeyConfig returns the defaults with signing mode key: the private key
// in keyFile (PEM PKCS #8 or SEC 1, or cosign's encrypted format, whose
// password is the content of passwordFile; "" for none). It is what a
// process embedding the attestor passes to New, with its own connection in
// Settings.Conn and Instance set — runtimetruth up, for one:
//
//	a, err := attestor.New(attestor.NewKeyConfig(keyFile, ""), attestor.Settings{Conn: nc, Logger: log})
//	// a.Start(ctx) … a.Shutdown(ctx)
//
// New reads the key; neither it nor its password appears in an error, a
// log line, a reply or an event.
func NewKeyConfig(keyFile, passwordFile string) Config {
	c := NewDefaultConfig()
	c.Signing = SigningConfig{Mode: ModeKey, KeyFile: keyFile, KeyPasswordFile: passwordFile, Timeout: c.Signing.Timeout}
	return c
}

// Validate checks every value (files are read by New).
func (c *Config) Validate() error {
	if err := c.ServiceConfig.Validate(); err != nil {
		return err
	}
	if !events.ValidSubject(c.Subject) {
		return config.Invalidf("subject: %q is not a subject one can subscribe to without wildcards", c.Subject)
	}
	if strings.HasPrefix(c.Subject, events.Prefix+".") && !strings.HasPrefix(c.Subject, events.Prefix+".ctl.") {
		return config.Invalidf("subject: %q lies under a stream's subjects; use %s.ctl.<...>", c.Subject, events.Prefix)
	}
	if c.QueueGroup == "" || strings.ContainsAny(c.QueueGroup, " \t\r\n*>") {
		return config.Invalidf("queue_group: %q", c.QueueGroup)
	}
	if c.Concurrency < 1 || c.Concurrency > 64 {
		return config.Invalidf("concurrency: %d (want 1 to 64)", c.Concurrency)
	}
	for name, d := range map[string]time.Duration{
		"request_timeout": c.RequestTimeout, "start_timeout": c.StartTimeout, "shutdown_timeout": c.ShutdownTimeout,
	} {
		if d <= 0 {
			return config.Invalidf("%s: %s (want above 0)", name, d)
		}
	}
	return c.Signing.Validate()
}

// Validate checks the signing settings for the mode.
func (s *SigningConfig) Validate() error {
	if s.Timeout <= 0 {
		return config.Invalidf("signing.timeout: %s (want above 0)", s.Timeout)
	}
	switch s.Mode {
	case ModeKey:
		if s.KeyFile == "" {
			return config.Invalidf("signing.key_file: required in mode key")
		}
	case ModeKeyless:
		if s.IdentityTokenFile == "" {
			return config.Invalidf("signing.identity_token_file: required in mode keyless")
		}
		if s.FulcioURL == "" {
			return config.Invalidf("signing.fulcio_url: required in mode keyless")
		}
		if s.RekorURL == "" && s.TSAURL == "" {
			return config.Invalidf("signing: mode keyless needs rekor_url or tsa_url (a short-lived certificate needs a signed time)")
		}
		for name, u := range map[string]string{"fulcio_url": s.FulcioURL, "rekor_url": s.RekorURL, "tsa_url": s.TSAURL} {
			if u == "" {
				continue
			}
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
				return config.Invalidf("signing.%s: want an http(s) URL without user information", name)
			}
		}
	default:
		return config.Invalidf("signing.mode: %q (want %q or %q)", s.Mode, ModeKey, ModeKeyless)
	}
	return nil
}
