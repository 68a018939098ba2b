package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// busFlags say how a command reaches the bus: --nats, else
// $RUNTIMETRUTH_NATS_URL, else the URL `runtimetruth up` wrote into its data
// directory, else nats://127.0.0.1:4222; with the credentials and TLS of
// the --nats-* flags, named as the services' flags are (natsbus.Config).
type busFlags struct {
	url     string
	dataDir string
	// conn holds the credentials and TLS flags (its URL is unused: url
	// holds --nats).
	conn natsbus.Config
}

// register adds the flags of a command on the bus: the connection flags
// and --data-dir.
func (b *busFlags) register(c *cobra.Command) {
	b.registerConn(c, "NATS `URL` (default: $RUNTIMETRUTH_NATS_URL, else the one `runtimetruth up` is serving)")
	c.Flags().StringVar(&b.dataDir, "data-dir", "", "data `DIR` of `runtimetruth up` (default ~/.local/state/runtimetruth/up)")
}

// registerConn adds --nats, with urlUsage, and the credentials and TLS
// flags.
func (b *busFlags) registerConn(c *cobra.Command, urlUsage string) {
	f := c.Flags()
	for _, nf := range natsbus.Flags {
		target, usage := nf.Field(&b.conn), nf.Usage
		if nf.Key == "url" {
			target, usage = &b.url, urlUsage
		}
		f.StringVar(target, nf.Name, "", usage)
	}
	f.StringVar(&b.conn.CredsFile, "creds", "", "NATS credentials `FILE`")
	_ = f.MarkDeprecated("creds", "use --nats-creds")
}

// natsConfig is the connection to url with the flags' credentials and TLS.
func (b *busFlags) natsConfig(url string) natsbus.Config {
	cfg := b.conn
	cfg.URL = url
	return cfg
}

// secured reports whether a credentials or TLS flag is set.
func (b *busFlags) secured() bool {
	c := b.conn
	return c.CredsFile != "" || c.User != "" || c.PasswordFile != "" || c.TLS != (natsbus.TLSConfig{})
}

// connArgs are the flags that take another command to url with the same
// credentials and TLS (file names only, never a secret).
func (b *busFlags) connArgs(url string) []string {
	args := []string{"--nats", url}
	for _, f := range []struct{ name, value string }{
		{"--nats-creds", b.conn.CredsFile}, {"--nats-user", b.conn.User}, {"--nats-password-file", b.conn.PasswordFile},
		{"--nats-tls-ca", b.conn.TLS.CAFile}, {"--nats-tls-cert", b.conn.TLS.CertFile}, {"--nats-tls-key", b.conn.TLS.KeyFile},
	} {
		if f.value != "" {
			args = append(args, f.name, f.value)
		}
	}
	return args
}

const urlFile = "nats.url"

func defaultDataDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	state, err := stateDirectory("")
	if err != nil {
		return "", err
	}
	return filepath.Join(state, "up"), nil
}

func (b *busFlags) resolve() (string, error) {
	if b.url != "" {
		return b.url, nil
	}
	if u := os.Getenv("RUNTIMETRUTH_NATS_URL"); u != "" {
		return u, nil
	}
	dir, err := defaultDataDir(b.dataDir)
	if err != nil {
		return "", err
	}
	if data, err := os.ReadFile(filepath.Join(dir, urlFile)); err == nil {
		return strings.TrimSpace(string(data)), nil
	}
	return nats.DefaultURL, nil
}

func (b *busFlags) connect(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
	url, err := b.resolve()
	if err != nil {
		return nil, nil, err
	}
	nc, err := natsbus.Dial(b.natsConfig(url), "runtimetruth-cli")
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is `runtimetruth up` running? see --nats)", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, ctx.Err()
}

// shellArgs quotes args for a command line a user can paste.
func shellArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = snapshot.ShellQuote(a)
	}
	return strings.Join(out, " ")
}
