package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newStatusCmd() *cobra.Command {
	var (
		bus    busFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the latest verdict of every target on the bus",
		Long: `Show the latest verdict of every host and target on the bus: its status
(PASS, DRIFT, ERROR, or STALE when no authentic evidence came for its
stale_after, with the time it was last seen), when, the digest of the
host's latest snapshot (the one "baseline approve --digest" takes; for a
snapshot that had its baseline's evidence, that baseline's) and a one-line
detail. Then, for every host in whose name the verifier refused evidence
since its last authentic one (not signed by its enrolled key, replayed,
out of time), how many, the last reason and when: an impostor, or a
collector whose key changed. --json prints the verdict records, each with
latest_digest and, when its host has refused evidence, rejected.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			st := verifier.NewStatus(js)
			recs, err := st.List(c.Context())
			if err != nil {
				return err
			}
			rejected, err := st.Rejected(c.Context(), recs)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]statusRecord, len(recs))
				for i, r := range recs {
					out[i] = statusRecord{VerdictRecord: r, LatestDigest: verifier.LatestDigest(r)}
					if h, ok := rejected[r.Verdict.Host]; ok && h.SinceAuthentic > 0 {
						out[i].Rejected = &h
					}
				}
				return json.NewEncoder(c.OutOrStdout()).Encode(out)
			}
			return printStatus(c.OutOrStdout(), recs, rejected)
		},
	}
	bus.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// statusRecord is a verdict record as status --json prints it: the
// record's members; latest_digest, the digest of the host's latest
// snapshot that `baseline approve --digest` takes (verifier.LatestDigest);
// rejected, the evidence refused in its host's name since its last
// authentic one, when there is any.
type statusRecord struct {
	verifier.VerdictRecord
	LatestDigest string                   `json:"latest_digest,omitempty"`
	Rejected     *verifier.HostRejections `json:"rejected,omitempty"`
}

func printStatus(w io.Writer, recs []verifier.VerdictRecord, rejected map[string]verifier.HostRejections) error {
	tw := newTable(w)
	_, _ = fmt.Fprintln(tw, "STATUS\tHOST\tTARGET\tWHEN\tLATEST DIGEST\tDETAIL")
	for _, r := range recs {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", verifier.StatusWord(r.Verdict.Status), printable(r.Verdict.Host), printable(r.Verdict.Target.String()),
			r.Time.Format("15:04:05"), printable(verifier.LatestDigest(r)), verdictDetail(r.Verdict))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var hosts []verifier.HostRejections
	for _, h := range rejected {
		if h.SinceAuthentic > 0 {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	slices.SortFunc(hosts, func(a, b verifier.HostRejections) int { return strings.Compare(a.Host, b.Host) })
	_, _ = fmt.Fprintln(w)
	tw = newTable(w)
	_, _ = fmt.Fprintln(tw, "REFUSED\tHOST\tSINCE ITS LAST AUTHENTIC EVIDENCE\tLAST\tLAST REASON")
	for _, h := range hosts {
		n := fmt.Sprint(h.SinceAuthentic)
		if !h.Exact {
			n = "at least " + n
		}
		_, _ = fmt.Fprintf(tw, "REFUSED\t%s\t%s\t%s\t%s\n", printable(h.Host), n, h.Last.Time.Local().Format(time.DateTime), printable(h.Last.Reason))
	}
	return tw.Flush()
}

// verdictDetail summarizes a verdict in one line, control characters
// escaped.
func verdictDetail(v events.Verdict) string { return printable(verifier.Summary(v)) }
