package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes of every verifying command.
const (
	ExitPass  = 0
	ExitError = 1
	ExitDrift = 2
)

// errDrift makes a command exit 2 without printing an error.
var errDrift = errors.New("drift")

// IO carries the standard streams.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// Run executes the command line args and returns the exit code.
func Run(ctx context.Context, streams IO, version string, args []string) int {
	root := newRoot(streams, version)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitPass
	case errors.Is(err, errDrift):
		return ExitDrift
	default:
		// The exit code reports the failure even if stderr is gone.
		// One line, escaped: an error may quote what a file or the
		// network said.
		_, _ = fmt.Fprintf(streams.Err, "runtimetruth: error: %s\n", printable(err.Error()))
		return ExitError
	}
}

func newRoot(streams IO, version string) *cobra.Command {
	root := &cobra.Command{
		Use:   "runtimetruth",
		Short: "Prove what is actually running: inspect, diff and verify runtime evidence",
		Long: `runtimetruth captures evidence of the effective runtime of a target (a git
repository, a process, a systemd unit, a Codex workspace) as a schema-v1
snapshot, and verifies the current runtime against a reviewed baseline.

Exit codes of verify: 0 runtime matches the baseline, 2 drift detected,
1 collection, input or comparison error (usage errors included).`,
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE:          helpRun,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.SetVersionTemplate("runtimetruth {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see '%s --help')", c.CommandPath(), err, c.CommandPath())
	})
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddCommand(
		newInspectCmd(),
		newDiffCmd(),
		newVerifyCmd(),
		newDigestCmd(),
		newAttestCmd(),
		newVerifyAttestationCmd(),
		newIntegrityCmd(),
		newManifestCmd(),
		newUpCmd(),
		newBaselineCmd(),
		newHostCmd(),
		newStatusCmd(),
		newCollectCmd(),
		newConsoleCmd(),
		newAuditCmd(version),
		newVersionCmd(version),
	)
	return root
}

// usageArgs accepts between lo and hi positional arguments and otherwise
// names the expected usage.
func usageArgs(lo, hi int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return fmt.Errorf("usage: %s (got %d argument(s); see '%s --help')", c.UseLine(), len(args), c.CommandPath())
		}
		return nil
	}
}

// helpRun prints help and exits 0, for commands that only group others.
func helpRun(c *cobra.Command, _ []string) error { return c.Help() }

func newVersionCmd(version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the runtimetruth version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(c.OutOrStdout(), "runtimetruth %s\n", version)
			return err
		},
	}
}
