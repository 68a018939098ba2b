package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newBaselineCmd() *cobra.Command {
	var bus busFlags
	c := &cobra.Command{
		Use:   "baseline",
		Short: "Manage the reviewed baselines the verifier checks snapshots against",
		Long: `Baselines live in the bus's "baselines" key-value bucket, one per target
(KIND:IDENTIFIER, as in a snapshot's target). Each holds the snapshot, the
selectors that gate it, and who approved it and when.`,
		Args: cobra.NoArgs,
		RunE: helpRun,
	}
	var protect []string
	by := os.Getenv("USER")
	approve := &cobra.Command{
		Use:   "approve TARGET",
		Short: "Promote the latest snapshot of TARGET to its baseline",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			if _, err := diff.ParseSelectors(protect); err != nil {
				return err
			}
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			o := verifier.ApproveOptions{By: by}
			if c.Flags().Changed("protect") {
				o.Protect = protect
			}
			b, err := verifier.NewBaselines(js, events.Source("cli", by)).Approve(c.Context(), t, o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "APPROVED: %s\n  digest: %s\n", t, b.Digest)
			return err
		},
	}
	approve.Flags().StringArrayVar(&protect, "protect", nil, "selectors that gate the baseline (repeatable; default: keep the current ones, or strict)")
	approve.Flags().StringVar(&by, "by", by, "approver recorded in the baseline")

	put := &cobra.Command{
		Use:   "put FILE",
		Short: "Store a reviewed snapshot file as the baseline of its target",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := readSnapshot(args[0], "baseline", c.InOrStdin())
			if err != nil {
				return err
			}
			if _, err := diff.ParseSelectors(protect); err != nil {
				return err
			}
			raw, err := s.Marshal(false)
			if err != nil {
				return err
			}
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			t := events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}
			b, err := verifier.NewBaselines(js, events.Source("cli", by)).Put(c.Context(), verifier.Baseline{
				Target: t, Snapshot: raw, Protect: protect, ApprovedBy: by,
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "STORED: %s\n  digest: %s\n", t, b.Digest)
			return err
		},
	}
	put.Flags().StringArrayVar(&protect, "protect", nil, "selectors that gate the baseline (repeatable)")
	put.Flags().StringVar(&by, "by", by, "approver recorded in the baseline")

	get := &cobra.Command{
		Use:   "get TARGET",
		Short: "Print the baseline snapshot of TARGET",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			b, err := verifier.NewBaselines(js, "").Get(c.Context(), t)
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(append(b.Snapshot, '\n'))
			return err
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the baselines",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			bs, err := verifier.NewBaselines(js, "").List(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(c.OutOrStdout()).Encode(bs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 2, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(tw, "TARGET\tDIGEST\tPROTECT\tAPPROVED")
			for _, b := range bs {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%d selector(s)\t%s by %s\n", b.Target, b.Digest, len(b.Protect), b.ApprovedAt.Format("2006-01-02 15:04:05Z07:00"), b.ApprovedBy)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm TARGET",
		Short: "Remove the baseline of TARGET",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			if err := verifier.NewBaselines(js, events.Source("cli", by)).Delete(c.Context(), t, by); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "REMOVED: %s\n", t)
			return err
		},
	}
	for _, sub := range []*cobra.Command{approve, put, get, list, rm} {
		bus.register(sub)
		c.AddCommand(sub)
	}
	return c
}

func newStatusCmd() *cobra.Command {
	var (
		bus    busFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the latest verdict of every target on the bus",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			nc, js, err := bus.connect(c.Context())
			if err != nil {
				return err
			}
			defer nc.Close()
			recs, err := verifier.NewStatus(js).List(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(c.OutOrStdout()).Encode(recs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 2, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(tw, "STATUS\tHOST\tTARGET\tWHEN\tDETAIL")
			for _, r := range recs {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", statusWord(r.Verdict.Status), r.Verdict.Host, r.Verdict.Target, r.Time.Format("15:04:05"), verdictDetail(r.Verdict))
			}
			return tw.Flush()
		},
	}
	bus.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func statusWord(s events.Status) string {
	switch s {
	case events.StatusPass:
		return "PASS"
	case events.StatusDrift:
		return "DRIFT"
	}
	return "ERROR"
}

// verdictDetail summarizes a verdict in one line.
func verdictDetail(v events.Verdict) string {
	switch {
	case v.Status == events.StatusError:
		return v.Error
	case v.Report != nil && len(v.Report.Changes) > 0:
		n := 0
		for _, c := range v.Report.Changes {
			n += max(1, len(c.Fields))
		}
		first := v.Report.Changes[0]
		field := ""
		if len(first.Fields) > 0 {
			field = "." + first.Fields[0].Field
		}
		return fmt.Sprintf("%d change(s), first %s%s", n, first.Kind, field)
	}
	return ""
}
