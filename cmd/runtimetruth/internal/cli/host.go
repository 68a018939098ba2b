package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
		RunE: bus.onHosts(events.Source("cli", by), func(c *cobra.Command, h *verifier.Hosts, _ []string) error {
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
		Use:   "approve HOST --key KEY",
		Short: "Enroll the key --key names as HOST's: its other enrolled keys are revoked",
		Long: `Enroll the key --key names (ed25519:<base64>, as runtimetruth-collector
--print-identity prints it on the host: take it from there, out of band) as
HOST's, before or after its first evidence. The host's other enrolled keys
are revoked. A pending key (seen on evidence in the host's name) is never
enrolled on its own: anyone who may publish in the host's name can make
one; host list shows them as hints.`,
		Args: usageArgs(1, 1),
		RunE: bus.onHosts(events.Source("cli", by), func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			if key == "" {
				return noKeyNamed(c, h, args[0])
			}
			k, err := h.Approve(c.Context(), args[0], key, by)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "enrolled %s for host %s\n", k.Key, printable(args[0]))
			return err
		}),
	}
	approve.Flags().StringVar(&key, "key", "", "the `KEY` to enroll, as the host's runtimetruth-collector --print-identity prints it (required)")

	revoke := &cobra.Command{
		Use:   "revoke HOST",
		Short: "Revoke every key of HOST: its evidence is refused until a new key is approved",
		Args:  usageArgs(1, 1),
		RunE: bus.onHosts(events.Source("cli", by), func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			if err := h.Revoke(c.Context(), args[0], by); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "revoked every key of host %s\n", printable(args[0]))
			return err
		}),
	}
	var next string
	rotate := &cobra.Command{
		Use:   "rotate HOST --key KEY",
		Short: "Enroll HOST's new key beside its current one, until the host signs with it",
		Long: `Enroll the key --key names (the new key, as runtimetruth-collector
--print-identity prints it on the host) beside HOST's current one: both are
accepted until the host's first authentic evidence signed by the new key,
which revokes the old one (or until host approve HOST --key KEY), so the
collector can restart with its new key without a refused event.`,
		Args: usageArgs(1, 1),
		RunE: bus.onHosts(events.Source("cli", by), func(c *cobra.Command, h *verifier.Hosts, args []string) error {
			if next == "" {
				return noKeyNamed(c, h, args[0])
			}
			if err := h.Rotate(c.Context(), args[0], next, by); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "host %s: %s enrolled beside its current key, which is revoked on the host's first evidence signed by it\n",
				printable(args[0]), next)
			return err
		}),
	}
	rotate.Flags().StringVar(&next, "key", "", "the new `KEY`, as the host's runtimetruth-collector --print-identity prints it (required)")
	for _, sub := range []*cobra.Command{list, approve, revoke, rotate} {
		bus.register(sub)
		c.AddCommand(sub)
	}
	return c
}

// onHosts is the RunE of a host subcommand: it connects, opens the
// registry (announcing its changes as source) and runs fn.
func (b *busFlags) onHosts(source string, fn func(*cobra.Command, *verifier.Hosts, []string) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		nc, hosts, err := b.hosts(c.Context(), source)
		if err != nil {
			return err
		}
		defer nc.Close()
		return fn(c, hosts, args)
	}
}

// hosts connects and opens the host registry, announcing its changes as
// source (none when empty: a reader); the caller closes the connection.
func (b *busFlags) hosts(ctx context.Context, source string) (*nats.Conn, *verifier.Hosts, error) {
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
	h := verifier.NewHosts(kv, verifier.EnrollManual)
	if source != "" {
		h = h.Announcing(js, source)
	}
	return nc, h, nil
}

// noKeyNamed is the error of approve or rotate without --key: it names
// the host's pending keys as hints, never picking one.
func noKeyNamed(c *cobra.Command, h *verifier.Hosts, host string) error {
	err := fmt.Errorf("--key is required: %w", verifier.ErrNoKeyNamed)
	rec, gerr := h.Get(c.Context(), host)
	if gerr != nil {
		return err
	}
	var pending []string
	for _, k := range rec.Keys {
		if k.State == events.KeyPending {
			pending = append(pending, printable(k.Key)+" (first seen "+k.FirstSeen.UTC().Format(time.RFC3339)+")")
		}
	}
	if len(pending) == 0 {
		return err
	}
	return fmt.Errorf("%w; pending keys seen on evidence in its name, hints only (anyone who may publish as %s can make one): %s",
		err, printable(host), strings.Join(pending, ", "))
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
		if r.DroppedKeys > 0 {
			host += fmt.Sprintf(" (%d keys dropped)", r.DroppedKeys)
		}
		for _, k := range r.Keys {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", host, k.State, printable(k.Key),
				k.Changed.UTC().Format(time.RFC3339), printable(k.By))
		}
	}
	return tw.Flush()
}
