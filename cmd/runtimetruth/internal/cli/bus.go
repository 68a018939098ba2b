package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// busFlags say how a command reaches the bus: --nats, else
// $RUNTIMETRUTH_NATS_URL, else the URL `runtimetruth up` wrote into its data
// directory, else nats://127.0.0.1:4222.
type busFlags struct {
	url       string
	credsFile string
	dataDir   string
}

func (b *busFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&b.url, "nats", "", "NATS `URL` (default: $RUNTIMETRUTH_NATS_URL, else the one `runtimetruth up` is serving)")
	c.Flags().StringVar(&b.credsFile, "creds", "", "NATS credentials `FILE`")
	c.Flags().StringVar(&b.dataDir, "data-dir", "", "data `DIR` of `runtimetruth up` (default ~/.local/state/runtimetruth/up)")
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
	opts := []nats.Option{nats.Name("runtimetruth-cli"), nats.Timeout(5 * time.Second)}
	if b.credsFile != "" {
		opts = append(opts, nats.UserCredentials(b.credsFile))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w (is `runtimetruth up` running? see --nats)", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, ctx.Err()
}

// parseTarget reads "kind:identifier".
func parseTarget(s string) (events.Target, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok || kind == "" || id == "" {
		return events.Target{}, fmt.Errorf("invalid target %q: want KIND:IDENTIFIER, e.g. git.repository:/srv/app", s)
	}
	return events.Target{Kind: kind, Identifier: id}, nil
}
