package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

// collectReportVersion is the report_schema_version of collect --json.
const collectReportVersion = 1

// collectReport is collect --json's report.
type collectReport struct {
	ReportSchemaVersion int    `json:"report_schema_version"`
	Host                string `json:"host"`
	// Target is the target asked for, empty for every target.
	Target string `json:"target"`
	Nonce  string `json:"nonce"`
	// Accepted is the authentic reply, null when none came.
	Accepted *acceptedReply `json:"accepted"`
	// Refused are the replies refused (the first collector.MaxRefusals), and
	// RefusedMore counts the others.
	Refused     []refusedReply `json:"refused"`
	RefusedMore int            `json:"refused_more,omitempty"`
}

type acceptedReply struct {
	// Key is the key id that signed it: the host's enrolled key.
	Key   string                    `json:"key"`
	Reply collector.CollectNowReply `json:"reply"`
}

type refusedReply struct {
	// Key is the key id the reply's envelope names, when it names one.
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
}

func newCollectCmd() *cobra.Command {
	var (
		bus     busFlags
		asJSON  bool
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "collect HOST [TARGET]",
		Short: "Ask HOST's collector to collect now, and check its signed reply",
		Long: `Ask the collector of HOST to collect TARGET (a target name of its
configuration; every target when left out) at once, on the request-reply
subject rt.ctl.collect.<HOST>, and print what it reports per target:
collected (the snapshot's digest and the event id), failed (why), refused
(its spool is full) or error. The verdicts follow from the verifier
("runtimetruth status").

The request carries a fresh random nonce. A reply is accepted only when it
is signed by the key the host registry (the "hosts" bucket) holds as HOST's
enrolled key (under up's first-use enrollment, the key it pinned), and the
reply it signs names HOST, the nonce and TARGET. Any other reply (unsigned,
another key, another host, a replay of an earlier reply) is reported as
refused, with the reason, and never accepted; collect keeps waiting for an
authentic one until --timeout. A HOST without an enrolled key is refused
before any request is sent. Where collectors share one NATS credential, an
impostor that answers first can still make a request fail (the bus passes
one response per request across accounts), never pass for HOST.

Exit codes: 0 an authentic reply with every target collected, 1 otherwise
(no authentic reply, the collector's error, a target not collected).`,
		Args: usageArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want a positive duration", timeout)
			}
			req := collector.CollectNowRequest{}
			if len(args) == 2 {
				req.Target = args[1]
			}
			nc, hosts, err := bus.hosts(c.Context(), "")
			if err != nil {
				return err
			}
			defer nc.Close()
			key, err := hosts.EnrolledKeys(c.Context(), args[0])
			if err != nil {
				return err
			}
			if req.Nonce, err = collector.NewNonce(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			out := c.OutOrStdout()
			if asJSON {
				out = io.Discard
			}
			rep, cerr := collectNow(ctx, nc, args[0], req, key, out)
			if cerr == nil {
				cerr = rep.outcome()
			}
			if asJSON {
				if err := writeIndentedJSON(c.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if rep.Accepted != nil {
				if err := printCollectReply(c.OutOrStdout(), rep.Accepted); err != nil {
					return err
				}
			}
			return cerr
		},
	}
	bus.register(c)
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print a JSON report (report_schema_version 1)")
	f.DurationVar(&timeout, "timeout", collector.ControlTimeout+30*time.Second, "wait up to `D` for an authentic reply")
	return c
}

// collectNow sends req to host's collector and reads replies until one
// verifies (key is host's enrolled keys) or ctx ends (collector.Ask),
// writing each refused one to out as it comes. The report holds the
// accepted reply, if any, and the refusals; the error says why none was
// accepted.
func collectNow(ctx context.Context, nc *nats.Conn, host string, req collector.CollectNowRequest, key func(string) (ed25519.PublicKey, error), out io.Writer) (*collectReport, error) {
	rep := &collectReport{ReportSchemaVersion: collectReportVersion, Host: host, Target: req.Target, Nonce: req.Nonce, Refused: []refusedReply{}}
	keyID, reply, err := collector.Ask(ctx, nc, host, req, key, func(named string, why error) error {
		r := refusedReply{Key: binding.Clip(named, collector.MaxRefusalBytes+len("…"), "…"), Reason: binding.Clip(why.Error(), collector.MaxRefusalBytes+len("…"), "…")}
		if len(rep.Refused) == collector.MaxRefusals {
			rep.RefusedMore++
			return nil
		}
		rep.Refused = append(rep.Refused, r)
		_, err := fmt.Fprintf(out, "REFUSED  a reply: %s\n", printable(r.Reason))
		return err
	})
	switch {
	case errors.Is(err, collector.ErrNoCollector):
		return rep, fmt.Errorf("%w: is the collector of host %s running and connected?", err, printable(host))
	case errors.Is(err, collector.ErrNoAuthenticReply):
		return rep, fmt.Errorf("no authentic reply from host %s within the timeout (%d refused; see --timeout)",
			printable(host), len(rep.Refused)+rep.RefusedMore)
	case err != nil:
		return rep, err
	}
	rep.Accepted = &acceptedReply{Key: keyID, Reply: reply}
	return rep, nil
}

// outcome is the error of an accepted reply that did not collect
// everything: the collector's error, or the targets not collected.
func (r *collectReport) outcome() error {
	rep := r.Accepted.Reply
	if rep.Error != "" {
		return fmt.Errorf("host %s: %s", printable(r.Host), printable(rep.Error))
	}
	bad := 0
	for _, res := range rep.Results {
		if res.Status != collector.StatusCollected {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("host %s: %d of %d target(s) not collected", printable(r.Host), bad, len(rep.Results))
	}
	return nil
}

// printCollectReply prints who signed the reply, and one line per target.
func printCollectReply(w io.Writer, a *acceptedReply) error {
	rep := a.Reply
	if _, err := fmt.Fprintf(w, "host %s replied at %s, signed by its enrolled key %s\n",
		printable(rep.Host), rep.Time.UTC().Format(time.RFC3339), printable(a.Key)); err != nil {
		return err
	}
	if rep.Error != "" {
		return nil
	}
	tw := newTable(w)
	_, _ = fmt.Fprintln(tw, "STATUS\tTARGET\tKIND\tDETAIL")
	for _, r := range rep.Results {
		detail := r.Error
		if r.Status == collector.StatusCollected {
			detail = r.Digest + "  event " + r.EventID
		}
		if r.RunnableModified > 0 {
			detail += fmt.Sprintf("  (%d runnable.modified)", r.RunnableModified)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(printable(r.Status)), printable(r.Target), printable(r.Kind), printable(detail))
	}
	return tw.Flush()
}
