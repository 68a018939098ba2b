package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
)

// codexFlags are the options of a Codex probe, shared by inspect and verify.
type codexFlags struct {
	resolveThread bool
	resolveMCP    bool
	binary        string
	timeout       time.Duration
	config        []string
	runAs         string
}

func (f *codexFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&f.resolveThread, "resolve-thread", false, "start an ephemeral Codex thread (no turn) to record the effective model, sandbox and instruction files")
	c.Flags().BoolVar(&f.resolveMCP, "resolve-mcp", false, "also list MCP servers and fingerprint their tool catalogs (starts the servers, calls no tool; implies --resolve-thread)")
	c.Flags().StringVar(&f.binary, "codex-binary", "", "codex executable (default: codex on PATH)")
	c.Flags().DurationVar(&f.timeout, "timeout", codex.DefaultTimeout, "overall deadline for the Codex probe")
	c.Flags().StringArrayVarP(&f.config, "config", "c", nil, "Codex config override `key=value` passed to the app-server (repeatable)")
	c.Flags().StringVar(&f.runAs, "codex-run-as", "", "run the Codex probe, and the MCP servers it starts, as `USER` (default: yourself; as root, the owner of the workspace, never root)")
}

// collect runs the Codex probe in cwd as the collector would
// (collector.CodexAccount): never as root. Run as root, it runs the probe
// as --codex-run-as, else as the owner of cwd, and refuses when that is
// root; as the account, with the account's environment, but for
// CODEX_HOME, which when set still names the Codex home.
func (f *codexFlags) collect(ctx context.Context, cwd string, seedOnly bool) (*snapshot.Snapshot, error) {
	if f.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	acct, err := collector.CodexAccount(cwd, f.runAs, "--codex-run-as")
	if err != nil {
		return nil, err
	}
	var env []string
	if home := os.Getenv("CODEX_HOME"); home != "" && acct != nil {
		env = []string{"CODEX_HOME=" + home}
	}
	target, records, err := codex.Collect(ctx, cwd, codex.Options{
		Binary:          f.binary,
		ResolveThread:   f.resolveThread,
		ResolveMCP:      f.resolveMCP,
		Timeout:         f.timeout,
		ConfigOverrides: f.config,
		SeedOnly:        seedOnly,
		RunAs:           acct,
		Env:             env,
	})
	if err != nil {
		return nil, err
	}
	return snapshot.New(target, records...), nil
}

func parsePID(s string) (int, error) {
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("invalid process id %s: want a positive integer", snapshot.Quote(s))
	}
	return pid, nil
}

func newInspectCmd() *cobra.Command {
	var (
		pretty   bool
		seedOnly bool
	)
	c := &cobra.Command{
		Use:   "inspect",
		Short: "Capture a schema-v1 snapshot of a target's effective runtime",
		Long: `Capture evidence of a target's effective runtime and print it as a schema-v1
snapshot (compact sorted JSON; --pretty to indent). Redirect it to a file to
keep it as a baseline; nothing is written otherwise.`,
		Args: cobra.NoArgs,
		RunE: helpRun,
	}
	c.PersistentFlags().BoolVar(&pretty, "pretty", false, "indent the JSON output")
	c.PersistentFlags().BoolVar(&seedOnly, "seed-only", false, "emit only the evidence kinds RuntimeTruth emits (omit linux.process_identity, git.remotes, codex.mcp_tools)")

	opts := func() inspect.Options { return inspect.Options{SeedOnly: seedOnly} }
	emit := func(c *cobra.Command, s *snapshot.Snapshot, err error) error {
		if err != nil {
			return err
		}
		return writeSnapshot(c.OutOrStdout(), s, pretty)
	}
	git := &cobra.Command{
		Use:   "git PATH",
		Short: "Git repository identity: root, head commit, branch, dirty state, remotes (credentials stripped)",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := inspect.Git(c.Context(), args[0], opts())
			return emit(c, s, err)
		},
	}
	process := &cobra.Command{
		Use:   "process PID",
		Short: "Process identity from procfs (executable and its hash, cwd, start time, boot id, uids) and its git repository",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			pid, err := parsePID(args[0])
			if err != nil {
				return err
			}
			s, err := inspect.Process(c.Context(), pid, opts())
			return emit(c, s, err)
		},
	}
	unit := &cobra.Command{
		Use:   "systemd UNIT",
		Short: "systemd unit state (allowlisted properties), its main process and git repository",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := systemd.ValidateUnit(args[0]); err != nil {
				return err
			}
			s, err := inspect.Systemd(c.Context(), args[0], opts())
			return emit(c, s, err)
		},
	}
	var cf codexFlags
	cx := &cobra.Command{
		Use:   "codex CWD",
		Short: "Codex effective settings, instruction fingerprints and MCP tool catalogs for a workspace",
		Long: `Capture what a Codex agent would actually run with in CWD, through Codex's own
app-server: the executable and version, the resolved configuration, and with
--resolve-thread the effective settings of an ephemeral thread (no turn is
started) and SHA-256 fingerprints of its instruction files; with --resolve-mcp
the MCP servers with per-tool digests. Secrets, instruction text and tool
descriptions are never recorded.

Codex, and so every MCP server it starts, never runs as root: run as root,
the probe runs as --codex-run-as USER, else as the owner of CWD, with that
account's environment (and CODEX_HOME when set), and a root-owned CWD is
refused before Codex starts (verify --codex does the same).`,
		Args: usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := cf.collect(c.Context(), args[0], seedOnly)
			return emit(c, s, err)
		},
	}
	cf.register(cx)
	py := inspectIntegrityCmd("python ENV [NAME ...]",
		"Installed-code integrity of a Python environment's distributions (python.distributions)",
		func(f *integrityFlags) *string { return &f.python }, emit)
	nd := inspectIntegrityCmd("node DIR [NAME ...]",
		"Installed-code integrity of a Node project and its dependencies (node.packages)",
		func(f *integrityFlags) *string { return &f.node }, emit)
	c.AddCommand(git, process, unit, cx, py, nd)
	return c
}

// inspectIntegrityCmd is `inspect python` or `inspect node`: its first
// argument is the environment or project (the flag root points at), the
// others the packages to inspect (all when none); emit writes the snapshot.
func inspectIntegrityCmd(use, short string, root func(*integrityFlags) *string,
	emit func(*cobra.Command, *snapshot.Snapshot, error) error) *cobra.Command {
	var f integrityFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			*root(&f) = args[0]
			s, err := f.collect(c.Context(), args[1:])
			return emit(c, s, err)
		},
	}
	f.registerScope(c)
	return c
}

// liveSource is verify's in-memory collection of the current runtime.
type liveSource struct {
	git      string
	process  string
	systemd  string
	codex    string
	seedOnly bool
	cf       codexFlags
	intf     integrityFlags
}

func (l *liveSource) register(c *cobra.Command) {
	c.Flags().StringVar(&l.git, "git", "", "collect the current git repository `PATH` in memory")
	c.Flags().StringVar(&l.process, "process", "", "collect the current process `PID` in memory")
	c.Flags().StringVar(&l.systemd, "systemd", "", "collect the current systemd `UNIT` in memory")
	c.Flags().StringVar(&l.codex, "codex", "", "collect the current Codex runtime of workspace `CWD` in memory")
	c.Flags().StringVar(&l.intf.python, "python", "", "collect the installed-code integrity of the Python environment `ENV` in memory")
	c.Flags().StringVar(&l.intf.node, "node", "", "collect the installed-code integrity of the Node project `DIR` in memory")
	c.Flags().BoolVar(&l.seedOnly, "seed-only", false, "collect only the evidence kinds RuntimeTruth emits")
	l.cf.register(c)
	l.intf.registerScope(c)
}

func (l *liveSource) chosen() []string {
	var out []string
	for name, v := range map[string]string{"--git": l.git, "--process": l.process, "--systemd": l.systemd, "--codex": l.codex, "--python": l.intf.python, "--node": l.intf.node} {
		if v != "" {
			out = append(out, name)
		}
	}
	return out
}

// exclusive checks that exactly one of a CURRENT file or a live source is
// given.
func (l *liveSource) exclusive(haveCurrent bool) error {
	chosen := l.chosen()
	slices.Sort(chosen)
	switch {
	case len(chosen) > 1:
		return fmt.Errorf("verify accepts only one live source, got %s", strings.Join(chosen, ", "))
	case haveCurrent && len(chosen) == 1:
		return fmt.Errorf("verify accepts either a current snapshot or %s, not both", chosen[0])
	case !haveCurrent && len(chosen) == 0:
		return errors.New("verify requires a current snapshot or --codex (or --git, --process, --systemd, --python, --node)")
	}
	if l.codex == "" && (l.cf.resolveThread || l.cf.resolveMCP || l.cf.runAs != "") {
		return errors.New("--resolve-thread, --resolve-mcp and --codex-run-as apply only with --codex")
	}
	return nil
}

func (l *liveSource) collect(ctx context.Context) (*snapshot.Snapshot, error) {
	o := inspect.Options{SeedOnly: l.seedOnly}
	switch {
	case l.git != "":
		return inspect.Git(ctx, l.git, o)
	case l.process != "":
		pid, err := parsePID(l.process)
		if err != nil {
			return nil, err
		}
		return inspect.Process(ctx, pid, o)
	case l.systemd != "":
		if err := systemd.ValidateUnit(l.systemd); err != nil {
			return nil, err
		}
		return inspect.Systemd(ctx, l.systemd, o)
	case l.intf.python != "" || l.intf.node != "":
		return l.intf.collect(ctx, nil)
	default:
		return l.cf.collect(ctx, l.codex, l.seedOnly)
	}
}
