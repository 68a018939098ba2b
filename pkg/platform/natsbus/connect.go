package natsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Config says how a service reaches NATS. At most one of CredsFile,
// NKeySeedFile and User/Password authenticates the connection; TLS is
// optional (a tls:// URL or a CA file turns it on).
type Config struct {
	// URL is one server URL or a comma-separated list of them
	// (nats://host:4222, tls://host:4222). Credentials in a URL work but
	// belong in User/Password or CredsFile.
	URL string `mapstructure:"url"`
	// CredsFile is a NATS credentials file (user JWT and nkey seed).
	CredsFile string `mapstructure:"creds_file"`
	// User and Password authenticate with a user name and password.
	User     string `mapstructure:"user"`
	Password string `mapstructure:"password"`
	// PasswordFile is a file holding the password instead (a mounted
	// Secret); one trailing newline is ignored.
	PasswordFile string `mapstructure:"password_file"`
	// NKeySeedFile is a file holding an nkey user seed (SU…).
	NKeySeedFile string `mapstructure:"nkey_seed_file"`
	// TLS configures the server CA and a client certificate.
	TLS TLSConfig `mapstructure:"tls"`
	// Name is the connection name shown by the server's monitoring;
	// empty means the name Connect is given.
	Name string `mapstructure:"name"`
}

// TLSConfig holds PEM file paths.
type TLSConfig struct {
	// CAFile verifies the server's certificate (default: the system pool).
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are the client certificate and its key, for
	// servers that verify clients; both or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
}

// DefaultURL is the server a default Config connects to.
const DefaultURL = nats.DefaultURL

// Connection timing. Reconnection never gives up: a service keeps its
// connection object for its whole life and the client buffers publishes
// while it reconnects.
const (
	// DialTimeout bounds one connection attempt (TCP, TLS and the
	// CONNECT handshake).
	DialTimeout = 5 * time.Second
	// PingInterval and MaxPingsOutstanding detect a dead server within
	// about a minute when no traffic flows.
	PingInterval        = 20 * time.Second
	MaxPingsOutstanding = 3
	// ReconnectFirst and ReconnectLongest bound the delay between two passes
	// over the server list: it doubles from ReconnectFirst up to
	// ReconnectLongest, with up to ReconnectJitter added.
	ReconnectFirst   = 250 * time.Millisecond
	ReconnectLongest = 5 * time.Second
	ReconnectJitter  = 500 * time.Millisecond
	// maxPasswordFile bounds a password file (regular files only).
	maxPasswordFile = 64 << 10
)

// NewDefaultConfig returns a Config for a local server without
// authentication.
func NewDefaultConfig() Config { return Config{URL: DefaultURL} }

// Validate checks the URL list and that the authentication settings do
// not conflict.
func (c Config) Validate() error {
	if strings.TrimSpace(c.URL) == "" {
		return fmt.Errorf("%w: nats.url is empty", config.ErrInvalid)
	}
	for u := range strings.SplitSeq(c.URL, ",") {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "nats://" + u // as the client reads a bare host:port
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			return fmt.Errorf("%w: nats.url: %q is not a server URL", config.ErrInvalid, redactURL(u))
		}
		switch p.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%w: nats.url: scheme %q (want nats, tls, ws or wss)", config.ErrInvalid, p.Scheme)
		}
	}
	methods := 0
	for _, set := range []bool{c.CredsFile != "", c.NKeySeedFile != "", c.User != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		return fmt.Errorf("%w: nats: set only one of creds_file, nkey_seed_file and user", config.ErrInvalid)
	}
	if (c.Password != "" || c.PasswordFile != "") && c.User == "" {
		return fmt.Errorf("%w: nats.password without nats.user", config.ErrInvalid)
	}
	if c.Password != "" && c.PasswordFile != "" {
		return fmt.Errorf("%w: nats: set only one of password and password_file", config.ErrInvalid)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("%w: nats.tls: cert_file and key_file go together", config.ErrInvalid)
	}
	return nil
}

// Connect connects to NATS as cfg says, naming the connection cfg.Name or
// else name. It returns an error for a bad configuration or a refused
// authentication or TLS handshake; when the servers are merely unreachable
// it returns a connection that keeps trying in the background, so that a
// service can start (and buffer work) before NATS is up. A connection
// reconnects forever, backing off from ReconnectFirst to ReconnectLongest with
// jitter. opts are applied last (LogEvents, for instance).
//
// Nothing here logs or returns the password, the credentials or a URL's
// user information.
func Connect(cfg Config, name string, opts ...nats.Option) (*nats.Conn, error) {
	return connect(cfg, name, true, opts)
}

// Dial connects as Connect does but makes one attempt: an unreachable
// server is an error, as a command that reports and exits wants. Once
// connected, the connection reconnects as Connect's does.
func Dial(cfg Config, name string, opts ...nats.Option) (*nats.Conn, error) {
	return connect(cfg, name, false, opts)
}

func connect(cfg Config, name string, retry bool, opts []nats.Option) (*nats.Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := options(cfg, name)
	if err != nil {
		return nil, err
	}
	base = append(base, opts...)
	nc, err := nats.Connect(cfg.URL, base...)
	if err == nil {
		return nc, nil
	}
	if !retry || !unreachable(err) {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactURL(cfg.URL), err)
	}
	nc, err = nats.Connect(cfg.URL, append(base, nats.RetryOnFailedConnect(true))...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactURL(cfg.URL), err)
	}
	return nc, nil
}

// unreachable reports whether a first connection failed for want of a
// server (refused, timed out, name not resolved) rather than because one
// refused us.
func unreachable(err error) bool {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"authorization", "authentication", "certificate", "tls:", "x509"} {
		if strings.Contains(msg, s) {
			return false
		}
	}
	return true
}

func options(cfg Config, name string) ([]nats.Option, error) {
	if cfg.Name != "" {
		name = cfg.Name
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Timeout(DialTimeout),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(ReconnectDelay),
	}
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey seed %s: %w", cfg.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case cfg.User != "":
		password := cfg.Password
		if cfg.PasswordFile != "" {
			b, err := regfile.Read(cfg.PasswordFile, maxPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("nats password file: %w", err)
			}
			password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		}
		opts = append(opts, nats.UserInfo(cfg.User, password))
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	if cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	return opts, nil
}

// ReconnectDelay is the wait before pass attempts+1 over the server list:
// ReconnectFirst doubled per pass up to ReconnectLongest, plus random jitter.
func ReconnectDelay(attempts int) time.Duration {
	d := ReconnectLongest
	if attempts < 8 {
		d = min(ReconnectFirst<<max(attempts, 0), ReconnectLongest)
	}
	return d + rand.N(ReconnectJitter)
}

// LogEvents logs the connection's state changes (disconnected,
// reconnected, closed) and asynchronous errors (a slow consumer, a
// permission violation) on log. Server URLs are logged without user
// information.
func LogEvents(log *slog.Logger) nats.Option {
	return func(o *nats.Options) error {
		o.DisconnectedErrCB = func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}
		o.ReconnectedCB = func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}
		o.ClosedCB = func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("nats connection closed", "err", err)
			}
		}
		o.AsyncErrorCB = func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("nats async error", "subject", subject, "err", err)
		}
		return nil
	}
}

// redactURL hides user information in a URL list.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		} else if err != nil && strings.Contains(s, "@") {
			parts[i] = "<unparsable url>"
		}
	}
	return strings.Join(parts, ",")
}
