package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/modified"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

// integrityFlags select what an integrity check looks at.
type integrityFlags struct {
	python   string
	node     string
	all      bool
	noCache  bool
	snapshot bool
	policy   string
	stateDir string

	// pyEnv is the opened --python environment, kept so that one
	// invocation reads it (pyvenv.cfg, the marker environment) once.
	pyEnv *python.Env
}

func (f *integrityFlags) register(c *cobra.Command, withSelection bool) {
	c.Flags().StringVar(&f.python, "python", "", "a Python virtual environment or site-packages `DIR`")
	c.Flags().StringVar(&f.node, "node", "", "a deployed Node project `DIR` (with node_modules)")
	c.Flags().StringVar(&f.policy, "policy", "", "policy `FILE` whose [[expected]] entries list accepted changes (path pattern + reason)")
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "state `DIR` for the stat cache, Node first-run snapshots and the audit chain (default $RUNTIMETRUTH_STATE_DIR, else ~/.local/state/runtimetruth)")
	c.Flags().BoolVar(&f.noCache, "no-cache", false, "re-hash every file instead of trusting the stat cache")
	if withSelection {
		c.Flags().BoolVar(&f.all, "all", false, "check every installed distribution or package, not just the runnables and their direct dependencies")
		c.Flags().BoolVar(&f.snapshot, "snapshot", false, "Node: take the first-run snapshot again for selected packages without a manifest")
	}
}

func (f *integrityFlags) env() (string, error) {
	switch {
	case f.python != "" && f.node != "":
		return "", errors.New("give either --python or --node, not both")
	case f.python == "" && f.node == "":
		return "", errors.New("give --python ENV or --node DIR")
	}
	return "", nil
}

// pythonEnv opens the --python environment, once per invocation.
func (f *integrityFlags) pythonEnv(ctx context.Context) (*python.Env, error) {
	if f.pyEnv != nil {
		return f.pyEnv, nil
	}
	env, err := python.Open(ctx, f.python, python.OpenOptions{})
	if err != nil {
		return nil, err
	}
	f.pyEnv = env
	return env, nil
}

// stateDirectory returns the state directory the flags or environment name.
func stateDirectory(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if d := os.Getenv("RUNTIMETRUTH_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "runtimetruth"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state directory: %w (set --state-dir)", err)
	}
	return filepath.Join(home, ".local", "state", "runtimetruth"), nil
}

func (f *integrityFlags) allowlist() (*integrity.Allowlist, error) {
	if f.policy == "" {
		return nil, nil
	}
	p, err := loadPolicy(f.policy)
	if err != nil {
		return nil, err
	}
	exps := make([]integrity.Expectation, len(p.Expected))
	for i, e := range p.Expected {
		exps[i] = integrity.Expectation{Package: e.Package, Path: e.Path, Reason: e.Reason}
	}
	return integrity.NewAllowlist(exps)
}

// run checks the selected packages. takeSnapshots is what a run hook does
// for Node packages without a manifest; verify does not.
func (f *integrityFlags) run(ctx context.Context, names []string, takeSnapshots bool) (*integrity.Report, error) {
	if _, err := f.env(); err != nil {
		return nil, err
	}
	allow, err := f.allowlist()
	if err != nil {
		return nil, err
	}
	dir, err := stateDirectory(f.stateDir)
	if err != nil {
		return nil, err
	}
	store, err := integrity.OpenStore(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	if f.node != "" {
		return node.Verify(ctx, f.node, node.Options{
			Packages: names, All: f.all, Allow: allow, Store: store,
			TakeSnapshots: takeSnapshots, Resnapshot: f.snapshot, NoCache: f.noCache,
		})
	}
	env, err := f.pythonEnv(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case f.all:
	case len(names) == 0:
		if names, err = runnableDistributions(env); err != nil {
			return nil, err
		}
	default:
		if names, err = distributionNames(env, names); err != nil {
			return nil, err
		}
	}
	return python.Verify(ctx, env, python.Options{Roots: names, All: f.all, Allow: allow, Store: store, NoCache: f.noCache})
}

// runnableDistributions lists the distributions that install console or GUI
// scripts: the runnables of a Python environment.
func runnableDistributions(env *python.Env) ([]string, error) {
	dists, err := env.Distributions()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dists {
		if len(d.Scripts()) > 0 {
			out = append(out, d.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no distribution in %s installs a console script; name the distributions to check or use --all", env.Prefix)
	}
	return out, nil
}

// distributionNames maps the names verify was given to distributions: a
// distribution's name stays as it is; any other name that is a runnable
// (a console script such as pip3) becomes the distribution that provides
// it, found as check --runnable finds it. Names that are neither are kept,
// for Verify to report as not installed.
func distributionNames(env *python.Env, names []string) ([]string, error) {
	dists, err := env.Distributions()
	if err != nil {
		return nil, err
	}
	installed := make(map[string]bool, len(dists))
	for _, d := range dists {
		installed[d.Key] = true
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n
		if installed[python.NormalizeName(n)] {
			continue
		}
		if d, ok, err := env.ScriptOwner(dists, n); err == nil && ok {
			out[i] = d.Name
		}
	}
	return out, nil
}

func newIntegrityCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "integrity",
		Short: "Check that installed Python and Node code is still what was installed",
		Args:  cobra.NoArgs,
		RunE:  helpRun,
	}
	c.AddCommand(newIntegrityVerifyCmd(), newIntegrityCheckCmd())
	return c
}

func newIntegrityVerifyCmd() *cobra.Command {
	var (
		f      integrityFlags
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "verify (--python ENV | --node DIR) [NAME ...]",
		Short: "Re-hash installed packages against their RECORD or manifest (exit 0 ok, 2 modified, 1 error)",
		Long: `Re-hash every file a package installed and compare with the known-good hashes:
pip's .dist-info/RECORD for Python, a runtimetruth-files.json or
runspec-files.json manifest (else the first-run snapshot) for Node.

By default the runnables (distributions with console scripts; the Node
project) and their direct dependencies are checked; name packages to check
those and their direct dependencies, or use --all. Editable installs and
symlinked dependencies are skipped; packages not from an index are shown as
"local build". Accepted changes come from a policy's [[expected]] entries.

Exit codes: 0 nothing modified, 2 something modified, 1 error.`,
		RunE: func(c *cobra.Command, args []string) error {
			rep, err := f.run(c.Context(), args, false)
			if err != nil {
				return err
			}
			if asJSON {
				b, err := json.Marshal(integrityReport{ReportSchemaVersion: 1, Report: rep})
				if err != nil {
					return err
				}
				if _, err := c.OutOrStdout().Write(append(b, '\n')); err != nil {
					return err
				}
			} else if err := renderIntegrity(c.OutOrStdout(), rep, f.node != ""); err != nil {
				return err
			}
			if errs := rep.Errors(); len(errs) > 0 {
				return fmt.Errorf("%d package(s) could not be checked: %s: %s", len(errs), errs[0].Name, errs[0].Reason)
			}
			if len(rep.Modified()) > 0 {
				return errDrift
			}
			return nil
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&asJSON, "json", false, "print a versioned JSON report (exit code unchanged)")
	return c
}

// integrityReport is the --json document of integrity verify.
type integrityReport struct {
	ReportSchemaVersion int `json:"report_schema_version"`
	*integrity.Report
}

// renderIntegrity prints the seed's table: name, version, source,
// (baseline,) status, files, then each changed file.
func renderIntegrity(w io.Writer, rep *integrity.Report, withBaseline bool) error {
	bw := bufio.NewWriter(w)
	if rep.Skipped != "" {
		_, _ = fmt.Fprintf(bw, "Nothing checked: %s\n", printable(rep.Skipped))
		return bw.Flush()
	}
	// Names, versions, sources and paths come from the installed files:
	// escaped, and measured escaped.
	type row struct{ name, version, source string }
	rows := make([]row, len(rep.Results))
	nameW, verW, srcW := 4, 7, 6
	for i, r := range rep.Results {
		rows[i] = row{printable(r.Name), printable(r.Version), printable(string(r.Source))}
		nameW, verW, srcW = max(nameW, len(rows[i].name)), max(verW, len(rows[i].version)), max(srcW, len(rows[i].source))
	}
	for i, r := range rep.Results {
		_, _ = fmt.Fprintf(bw, "  %-*s  %-*s  %-*s  ", nameW, rows[i].name, verW, rows[i].version, srcW, rows[i].source)
		if withBaseline {
			_, _ = fmt.Fprintf(bw, "%-8s  ", r.Baseline)
		}
		_, _ = fmt.Fprintf(bw, "%-12s  %s\n", r.Status, printable(filesColumn(&r)))
		for _, ch := range r.Changes {
			_, _ = fmt.Fprintf(bw, "      %-8s %s\n", printable(changeVerb(ch)), printable(ch.Path))
		}
	}
	modifiedResults := rep.Modified()
	noun := "distribution(s)"
	restore := "Reinstall to restore: pip install --force-reinstall --no-deps <name>==<version>"
	if withBaseline {
		noun = "package(s)"
		restore = "Reinstall to restore them (npm install, or unpack the package again)."
	}
	errResults := rep.Errors()
	if len(modifiedResults) > 0 {
		_, _ = fmt.Fprintf(bw, "\n✗  %d %s modified since install. %s\n", len(modifiedResults), noun, restore)
	}
	if len(errResults) > 0 {
		if len(modifiedResults) == 0 {
			_, _ = bw.WriteString("\n")
		}
		_, _ = fmt.Fprintf(bw, "✗  %d %s could not be checked: %s\n", len(errResults), noun, printable(rep.Summary()))
	}
	if len(modifiedResults) == 0 && len(errResults) == 0 {
		_, _ = fmt.Fprintf(bw, "\n✓  %s\n", printable(rep.Summary()))
	}
	if rep.CacheError != "" {
		_, _ = fmt.Fprintf(bw, "!  stat cache: %s\n", printable(rep.CacheError))
	}
	return bw.Flush()
}

func filesColumn(r *integrity.Result) string {
	switch r.Status {
	case integrity.StatusSkipped, integrity.StatusError:
		return r.Reason
	case integrity.StatusModified:
		return fmt.Sprintf("%d of %d files changed", len(r.Unexpected()), r.Files)
	}
	return fmt.Sprintf("%d files", r.Files)
}

// changeVerb labels a changed file as the seed's table does: "changed" for
// an edit, "missing", "added", or the expected label.
func changeVerb(c integrity.Change) string {
	switch c.Kind {
	case integrity.ChangeExpected:
		return c.Label()
	case integrity.ChangeModified:
		return "changed"
	}
	return string(c.Kind)
}

func newIntegrityCheckCmd() *cobra.Command {
	var (
		f        integrityFlags
		runnable string
	)
	c := &cobra.Command{
		Use:   "check (--python ENV | --node DIR) --runnable NAME",
		Short: "The hook a runner calls before each run: warns on stderr, records once, never blocks",
		Long: `Check the runnable's package and its direct dependencies before a run. The run
always goes ahead (exit 0): when files differ, one warning line goes to stderr
and a runnable.modified event is appended, once per distinct change, to the
hash-chained audit.jsonl in the state directory and to the local syslog.
RUNTIMETRUTH_INTEGRITY=off skips the check.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if strings.EqualFold(os.Getenv("RUNTIMETRUTH_INTEGRITY"), "off") {
				return nil
			}
			if runnable == "" {
				return errors.New("--runnable is required")
			}
			if err := integrityCheck(c.Context(), c.ErrOrStderr(), &f, runnable); err != nil {
				// Never block the run: report and carry on.
				_, _ = fmt.Fprintf(c.ErrOrStderr(), "runtimetruth: warning: integrity check of %s failed: %s\n", printable(runnable), printable(err.Error()))
			}
			return nil
		},
	}
	f.register(c, false)
	c.Flags().StringVar(&runnable, "runnable", "", "the runnable about to run: a console script or distribution name (Python), the project or a package name (Node)")
	return c
}

func integrityCheck(ctx context.Context, stderr io.Writer, f *integrityFlags, runnable string) error {
	names, err := runnableScope(ctx, f, runnable)
	if err != nil {
		return err
	}
	rep, err := f.run(ctx, names, true)
	if err != nil {
		return err
	}
	warnUnchecked(stderr, runnable, rep.Errors())
	if len(rep.Modified()) > 0 {
		warnModified(stderr, runnable, rep.Modified())
	}

	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	sc := modified.Scope{Host: host, Runnable: runnable, Ecosystem: events.Python, Environment: f.python}
	if f.node != "" {
		sc.Ecosystem, sc.Environment = events.Node, f.node
	}
	if abs, err := filepath.Abs(sc.Environment); err == nil {
		sc.Environment = abs
	}
	dir, err := stateDirectory(f.stateDir)
	if err != nil {
		return err
	}
	store, err := integrity.OpenStore(dir)
	if err != nil {
		return err
	}
	// Record also runs when nothing is modified: a clean package forgets
	// its last reported change, so the same edit made again is reported.
	_, err = modified.Record(store, events.Source("cli", host), rep, sc)
	return err
}

// packageLabel is "name version", or the name alone for a package that
// declares no version.
func packageLabel(r *integrity.Result) string {
	if r.Version == "" {
		return r.Name
	}
	return r.Name + " " + r.Version
}

// warnModified prints the seed's one-line warning for modified packages.
func warnModified(stderr io.Writer, runnable string, mods []integrity.Result) {
	var files, pkgs []string
	for i := range mods {
		pkgs = append(pkgs, packageLabel(&mods[i]))
		for _, ch := range mods[i].Unexpected() {
			files = append(files, ch.Path)
		}
	}
	count := fmt.Sprintf("%d installed files differ", len(files))
	if len(files) == 1 {
		count = "1 installed file differs"
	}
	_, _ = fmt.Fprintf(stderr, "⚠  %s: %s from the package (%s): %s. This run is recorded as modified. Reinstall the package to restore it; \"runtimetruth integrity verify\" lists the changes.\n",
		printable(runnable), count, printable(strings.Join(pkgs, ", ")), printable(strings.Join(files, ", ")))
}

// warnUnchecked prints one warning line for the packages that could not
// be checked (a RECORD missing, malformed or escaping the environment, an
// unreadable file): the run still goes ahead.
func warnUnchecked(stderr io.Writer, runnable string, errs []integrity.Result) {
	if len(errs) == 0 {
		return
	}
	why := make([]string, len(errs))
	for i := range errs {
		why[i] = packageLabel(&errs[i]) + ": " + strings.Join(strings.Fields(errs[i].Reason), " ")
	}
	count := fmt.Sprintf("%d installed packages", len(errs))
	if len(errs) == 1 {
		count = "1 installed package"
	}
	_, _ = fmt.Fprintf(stderr, "⚠  %s: %s could not be checked (%s). The run goes ahead unchecked for them; \"runtimetruth integrity verify\" shows why.\n",
		printable(runnable), count, printable(strings.Join(why, "; ")))
}

// runnableScope maps a runnable to the packages to check: for Python the
// distribution that provides the console script of that name (or the
// distribution so named); for Node, nothing (the project and its direct
// dependencies) unless a package is named.
func runnableScope(ctx context.Context, f *integrityFlags, runnable string) ([]string, error) {
	if f.node != "" {
		return nil, nil
	}
	if f.python == "" {
		return nil, errors.New("give --python ENV or --node DIR")
	}
	env, err := f.pythonEnv(ctx)
	if err != nil {
		return nil, err
	}
	dists, err := env.Distributions()
	if err != nil {
		return nil, err
	}
	if d, ok, err := env.ScriptOwner(dists, runnable); err == nil && ok {
		return []string{d.Name}, nil
	}
	return []string{runnable}, nil
}

func newManifestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "manifest [DIR]",
		Short: "Write runtimetruth-files.json: the hash of every file npm pack would publish",
		Long: `Hash every file npm pack would publish from the package in DIR (default .) and
write them to DIR/runtimetruth-files.json. Run it last in prepack, after the
build, and list the file in package.json "files" if there is such a list.`,
		Args: usageArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			m, err := node.WriteManifest(c.Context(), dir)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "wrote %s (%d files)\n", printable(filepath.Join(dir, node.ManifestFile)), len(m.Paths()))
			return err
		},
	}
}

// registerScope adds the flags of an in-memory integrity collection.
func (f *integrityFlags) registerScope(c *cobra.Command) {
	c.Flags().BoolVar(&f.all, "all", false, "integrity: check every installed distribution or package")
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "integrity: state `DIR` (stat cache, Node snapshots)")
	c.Flags().BoolVar(&f.noCache, "no-cache", false, "integrity: re-hash every file")
	c.Flags().StringVar(&f.policy, "integrity-policy", "", "integrity: policy `FILE` with [[expected]] changes")
}

// collect checks the selection and returns it as a snapshot.
func (f *integrityFlags) collect(ctx context.Context, names []string) (*snapshot.Snapshot, error) {
	rep, err := f.run(ctx, names, false)
	if err != nil {
		return nil, err
	}
	return integritySnapshot(f, rep)
}

// integritySnapshot builds a schema-v1 snapshot of an integrity report.
func integritySnapshot(f *integrityFlags, rep *integrity.Report) (*snapshot.Snapshot, error) {
	target := snapshot.Target{Kind: "python.environment", Identifier: rep.Root}
	rec := python.Evidence(rep)
	if f.node != "" {
		target = snapshot.Target{Kind: "node.project", Identifier: rep.Root}
		rec = node.Evidence(rep)
	}
	s := snapshot.New(target, rec)
	return s, s.Validate()
}
