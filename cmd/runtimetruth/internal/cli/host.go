package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newHostCmd() *cobra.Command {
	var bus busFlags
	c := &cobra.Command{
		Use:   "host",
		Short: "Manage the host registry: the key each host's collector signs its evidence with",
		Long: `Each collector signs its events with its own Ed25519 key
(runtimetruth-collector --print-identity prints it). The host registry, the
bus's "hosts" key-value bucket (created by the verifier), holds each host's
keys: pending (seen, waiting for approval), enrolled or revoked, with who
changed each and when.`,
		Args: cobra.NoArgs,
		RunE: helpRun,
	}
	by := os.Getenv("USER")
	if by == "" {
		by = "operator"
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the hosts and their keys",
		Args:  usageArgs(0, 0),
		RunE: bus.onHosts(func(c *cobra.Command, h *verifier.Hosts, _ []string) error {
			recs, err := h.List(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if recs == nil {
					recs = []events.HostRecord{}
				}
				return writeIndentedJSON(c.OutOrStdout(), recs)
			}
			return printHosts(c.OutOrStdout(), recs)
		}),
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var key string
	approve := &cobra.Command{
		Use:   "approve HOST",
		Short: "Enroll a key of HOST: its pending key, or --key KEY",
		Long: `Enroll a key of HOST: the one key it has pending (seen on its evidence), or
the key --key names (ed25519:<base64>, as runtimetruth-collector
--print-identity prints it), which may be enrolled before the host's first
evidence. The host's other enrolled keys are revoked.`,
		Args: usageArgs(1, 1),
		RunE: bus.onHosts(func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			k, err := h.Approve(c.Context(), args[0], key, by)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "enrolled %s for host %s\n", k.Key, printable(args[0]))
			return err
		}),
	}
	approve.Flags().StringVar(&key, "key", "", "the `KEY` to enroll (default: the host's one pending key)")

	revoke := &cobra.Command{
		Use:   "revoke HOST",
		Short: "Revoke every key of HOST: its evidence is refused until a new key is approved",
		Args:  usageArgs(1, 1),
		RunE: bus.onHosts(func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			if err := h.Revoke(c.Context(), args[0], by); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "revoked every key of host %s\n", printable(args[0]))
			return err
		}),
	}
	rotate := &cobra.Command{
		Use:   "rotate HOST",
		Short: "Expect a new key from HOST: it waits for approval, and approving it revokes the current one",
		Args:  usageArgs(1, 1),
		RunE: bus.onHosts(func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			if err := h.Rotate(c.Context(), args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "host %s: its next new key waits for `runtimetruth host approve`\n", printable(args[0]))
			return err
		}),
	}
	for _, sub := range []*cobra.Command{list, approve, revoke, rotate} {
		bus.register(sub)
		c.AddCommand(sub)
	}
	return c
}

// onHosts is the RunE of a host subcommand: it connects, opens the
// registry and runs fn.
func (b *busFlags) onHosts(fn func(*cobra.Command, *verifier.Hosts, []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		nc, hosts, err := b.hosts(c.Context())
		if err != nil {
			return err
		}
		defer nc.Close()
		return fn(c, hosts, args)
	}
}

// hosts connects and opens the host registry; the caller closes the
// connection.
func (b *busFlags) hosts(ctx context.Context) (*nats.Conn, *verifier.Hosts, error) {
	nc, js, err := b.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		err = fmt.Errorf("no %q bucket on this bus: a verifier creates it when it starts", topology.BucketHosts)
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	// The CLI never admits a key: the mode does not matter here.
	return nc, verifier.NewHosts(kv, verifier.EnrollManual), nil
}

// printHosts prints one line per key: host, state, key, since, by.
func printHosts(w io.Writer, recs []events.HostRecord) error {
	if len(recs) == 0 {
		_, err := fmt.Fprintln(w, "no hosts")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "HOST\tSTATE\tKEY\tSINCE\tBY")
	for _, r := range recs {
		host := printable(r.Host)
		if r.Rotating {
			host += " (rotating)"
		}
		for _, k := range r.Keys {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", host, k.State, printable(k.Key),
				k.Changed.UTC().Format(time.RFC3339), printable(k.By))
		}
	}
	return tw.Flush()
}
