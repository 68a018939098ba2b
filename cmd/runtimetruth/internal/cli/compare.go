package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/policy"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

func newDigestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "digest FILE",
		Short: "Print the canonical sha256 digest of a snapshot (RFC 8785)",
		Long: `Print sha256:<hex> over the RFC 8785 canonical JSON of the parsed snapshot.
Whitespace and key order do not change the digest; any change of content does.
The value equals RuntimeTruth's digest of the same snapshot.`,
		Args: usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := readSnapshot(args[0], "snapshot", c.InOrStdin())
			if err != nil {
				return err
			}
			d, err := s.Digest()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), d)
			return err
		},
	}
}

// gate holds the flags that select which differences fail verification.
type gate struct {
	policyFile string
	protect    []string
	json       bool
}

func (g *gate) register(c *cobra.Command) {
	c.Flags().StringVar(&g.policyFile, "policy", "", "TOML policy file with `version = 1` and `protect = [...]` selectors")
	c.Flags().StringArrayVar(&g.protect, "protect", nil, "only fail on drift in this evidence kind or exact field (repeatable; omit for strict full-snapshot verification)")
	c.Flags().BoolVar(&g.json, "json", false, "print a versioned machine-readable report (exit code unchanged)")
}

// selectors loads the policy and merges its selectors with --protect ones
// (policy first, de-duplicated), checking their syntax.
func (g *gate) selectors() ([]diff.Selector, error) {
	var fromPolicy []string
	if g.policyFile != "" {
		p, err := loadPolicy(g.policyFile)
		if err != nil {
			return nil, err
		}
		fromPolicy = p.Protect
	}
	return diff.ParseSelectors(policy.Merge(fromPolicy, g.protect))
}

// check verifies the current snapshot (args[1], or the live runtime when
// there is no second argument) against baseline, through the selectors.
func (g *gate) check(c *cobra.Command, baseline *snapshot.Snapshot, args []string, live *liveSource) (*diff.Result, []diff.Selector, error) {
	sels, err := g.selectors()
	if err != nil {
		return nil, nil, err
	}
	var current *snapshot.Snapshot
	if len(args) == 2 {
		current, err = readSnapshot(args[1], "current", c.InOrStdin())
	} else {
		current, err = live.collect(c.Context())
	}
	if err != nil {
		return nil, nil, err
	}
	res, err := diff.Verify(baseline, current, sels)
	if err != nil {
		return nil, nil, err
	}
	return res, sels, nil
}

func newDiffCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "diff BEFORE AFTER",
		Short: "Show the semantic runtime changes between two snapshots",
		Long: `Show the semantic changes between two snapshots of the same target, grouped
by evidence kind. Only captured_at is ignored; a missing field is distinct from
null. diff exits 0 whenever the comparison succeeds.`,
		Args: usageArgs(2, 2),
		RunE: func(c *cobra.Command, args []string) error {
			before, err := readSnapshot(args[0], "snapshot", c.InOrStdin())
			if err != nil {
				return err
			}
			after, err := readSnapshot(args[1], "snapshot", c.InOrStdin())
			if err != nil {
				return err
			}
			res, err := diff.Compare(before, after)
			if err != nil {
				return err
			}
			if asJSON {
				return writeReport(c.OutOrStdout(), report.New(res, nil))
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), res.Render())
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the changes as a versioned JSON report")
	return c
}

func writeReport(w io.Writer, r *report.Report) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func newVerifyCmd() *cobra.Command {
	var (
		g    gate
		live liveSource
	)
	c := &cobra.Command{
		Use:   "verify BASELINE [CURRENT]",
		Short: "Verify the current runtime against a baseline (exit 0 pass, 2 drift, 1 error)",
		Long: `Verify a current snapshot, or the live runtime collected in memory with one of
--git, --process, --systemd or --codex, against a reviewed baseline.

  PASS: runtime matches baseline.        exit 0
  DRIFT: runtime differs from baseline.  exit 2, followed by the diff
  runtimetruth: error: ...               exit 1 (input, collection, comparison
                                         or usage error)

--protect and --policy narrow verification to selected evidence kinds or
exact fields; a selector naming evidence in neither snapshot is an error.`,
		Args: usageArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if err := live.exclusive(len(args) == 2); err != nil {
				return err
			}
			baseline, err := readSnapshot(args[0], "baseline", c.InOrStdin())
			if err != nil {
				return err
			}
			res, sels, err := g.check(c, baseline, args, &live)
			if err != nil {
				return err
			}
			if err := printVerdict(c.OutOrStdout(), res, sels, g.json); err != nil {
				return err
			}
			if !res.Empty() {
				return errDrift
			}
			return nil
		},
	}
	g.register(c)
	live.register(c)
	return c
}

func printVerdict(w io.Writer, res *diff.Result, sels []diff.Selector, asJSON bool) error {
	if asJSON {
		return writeReport(w, report.New(res, sels))
	}
	if res.Empty() {
		_, err := fmt.Fprintln(w, "PASS: runtime matches baseline.")
		return err
	}
	_, err := fmt.Fprintf(w, "DRIFT: runtime differs from baseline.\n\n%s\n", res.Render())
	return err
}
