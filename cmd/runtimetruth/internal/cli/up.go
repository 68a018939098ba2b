package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// upFlags configure the embedded all-in-one pipeline.
type upFlags struct {
	// bus is --nats (an external server), its credentials and TLS, and
	// --data-dir, as the commands on the bus take them.
	bus      busFlags
	listen   string
	interval time.Duration
	approve  bool
	once     bool
	noCodex  bool
	codexAs  string
	noAudit  bool
	verbose  bool
	signKey  string
	signPass string
	console  string
}

func newUpCmd() *cobra.Command {
	var f upFlags
	c := &cobra.Command{
		Use:   "up",
		Short: "Run the whole pipeline in one process for this machine (embedded JetStream)",
		Long: `Run the collector, the verifier and the auditor in one process against an
embedded NATS JetStream server storing in the data directory, with a default
set of targets for this machine: the git repository of the current directory,
the current Python environment's installed-code integrity, and Codex in the
current directory when it is installed. Each target's outcome is printed
when it changes (NO BASELINE, PASS, DRIFT with its changed fields, STALE,
ERROR, REJECTED evidence), not again at every collection while it stays
the same.

up serves the web console on loopback (--console, 127.0.0.1 on a free port
by default; not with --once) and prints its address first, with a launch
token that works once: open it in a browser on this machine.

The auditor appends every event to a hash-chained JSONL audit log,
<data-dir>/auditor/audit.jsonl, with checkpoints signed by the key
<data-dir>/auditor/checkpoint.key (made on the first start) in
<data-dir>/auditor/checkpoints.jsonl. up refuses to start over a log that no
longer matches them (rewritten, cut, or its checkpoints replaced); check it
with

  runtimetruth audit verify --jsonl <data-dir>/auditor/audit.jsonl \
      --checkpoints <data-dir>/auditor/checkpoints.jsonl \
      --checkpoint-key <data-dir>/auditor/checkpoint.key

Other terminals reach the embedded server through the URL written to
<data-dir>/nats.url, which runtimetruth baseline and status read by default:

  runtimetruth status
  runtimetruth baseline approve git.repository:/path/to/repo

--nats uses an external NATS server instead of the embedded one, reached
with --nats-creds (or --nats-user and --nats-password-file) and
--nats-tls-ca, --nats-tls-cert and --nats-tls-key as its deployment
requires; there the deployment's runtimetruth-auditor audits, so up embeds
no auditor, and up prints and approves only this host's verdicts.`,
		Args: usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			return runUp(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	c.Flags().StringVar(&f.bus.dataDir, "data-dir", "", "data `DIR` for JetStream, the spool and integrity state (default ~/.local/state/runtimetruth/up)")
	c.Flags().StringVar(&f.listen, "listen", "127.0.0.1:0", "address of the embedded NATS server (port 0 picks a free one)")
	f.bus.registerConn(c, "use the external NATS server at `URL` instead of an embedded one (with the --nats-* credentials and TLS)")
	c.Flags().DurationVar(&f.interval, "interval", 30*time.Second, "time between collections of each target")
	c.Flags().BoolVar(&f.approve, "approve", false, "approve the first snapshot of every target without a baseline (trust on first use)")
	c.Flags().BoolVar(&f.once, "once", false, "collect every target once, print the verdicts, and exit (exit 2 on drift, 1 on an error verdict)")
	c.Flags().BoolVar(&f.noCodex, "no-codex", false, "leave Codex out of the default targets")
	c.Flags().StringVar(&f.codexAs, "codex-run-as", "", "run the Codex probe as `USER` (default: yourself; as root, $SUDO_USER or the owner of the current directory, never root)")
	c.Flags().BoolVar(&f.noAudit, "no-audit", false, "run without the embedded auditor (no audit log)")
	c.Flags().BoolVar(&f.verbose, "verbose", false, "log service start and stop")
	c.Flags().StringVar(&f.signKey, "sign-key", "", "run the attestor with this signing `KEY` (PEM or cosign format): `runtimetruth baseline sign` works against this server, and --approve signs what it approves")
	c.Flags().StringVar(&f.signPass, "sign-key-password-file", "", "`FILE` holding the password of an encrypted --sign-key")
	c.Flags().StringVar(&f.console, "console", "127.0.0.1:0", "serve the web console on this loopback `ADDRESS` (port 0 picks a free one; \"off\" for none; never with --once)")
	return c
}

func runUp(ctx context.Context, out, errw io.Writer, f upFlags) error {
	external := f.bus.url
	if external == "" && f.bus.secured() {
		return errors.New("the --nats-* credentials and TLS flags go with --nats URL: the embedded server takes none")
	}
	dir, err := defaultDataDir(f.bus.dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	logLevel := slog.LevelWarn
	if f.verbose {
		logLevel = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: logLevel}))

	url := external
	var ns *server.Server
	if url == "" {
		ns, url, err = startEmbedded(dir, f.listen)
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
			_ = os.Remove(filepath.Join(dir, urlFile))
		}()
	}
	nc, err := natsbus.Dial(f.bus.natsConfig(url), "runtimetruth-up", natsbus.LogEvents(log))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	targets, left := defaultTargets(ctx, f)
	host, _ := os.Hostname()
	vcfg := verifier.NewDefaultConfig()
	v, err := verifier.New(vcfg, verifier.Settings{Logger: log, Conn: nc})
	if err != nil {
		return err
	}
	ccfg := collector.NewDefaultConfig()
	ccfg.Host = host
	ccfg.StateDir = filepath.Join(dir, "collector")
	ccfg.Targets = targets
	col, err := collector.New(ccfg, collector.Settings{Logger: log, Conn: nc})
	if err != nil {
		return err
	}
	if _, err := enrollSelf(ctx, js, vcfg, ccfg, upBusArgs(f.bus, url, dir, external != "")); err != nil {
		return err
	}

	comps := []lifecycle.Component{v, col}
	var aud *auditor.Auditor
	var auditLog, auditCheckpoints string
	var consoleAudit *console.AuditLog
	if external == "" && !f.noAudit {
		auditLog = filepath.Join(dir, "auditor", "audit.jsonl")
		auditCheckpoints = filepath.Join(dir, "auditor", "checkpoints.jsonl")
		cpKey, err := prepareUpAudit(ctx, auditLog, auditCheckpoints)
		if err != nil {
			return err
		}
		if aud, err = newEmbeddedAuditor(auditLog, auditCheckpoints, cpKey, host, log, nc); err != nil {
			return err
		}
		consoleAudit = &console.AuditLog{Path: auditLog, Checkpoints: auditCheckpoints, CheckpointKey: cpKey}
		// Started first and shut down last: it records what the others
		// published until they stopped.
		comps = append([]lifecycle.Component{aud}, comps...)
	}

	if f.signKey != "" {
		att, err := attestor.New(attestor.NewKeyConfig(f.signKey, f.signPass), attestor.Settings{Logger: log, Conn: nc})
		if err != nil {
			return fmt.Errorf("attestor: %w", err)
		}
		comps = append(comps, att)
	}

	printer := &verdictPrinter{out: out, baselines: verifier.NewBaselines(js, events.Source("up", host)), approve: f.approve,
		host: ccfg.Host, busArgs: upBusArgs(f.bus, url, dir, external != ""), enrollment: vcfg.Enrollment}
	if f.signKey != "" {
		printer.nc = nc
	}
	// This host's verdicts only: an external server carries every host's.
	sub, err := nc.Subscribe(events.Prefix+".verdict."+events.Token(ccfg.Host)+".>", printer.handle)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A collection that fails ends in collection.failed, not in a verdict:
	// the verifier has no snapshot to judge. It is that target's outcome.
	failSub, err := nc.Subscribe(events.CollectFailedSubject(ccfg.Host), printer.handleFailure)
	if err != nil {
		return err
	}
	defer func() { _ = failSub.Unsubscribe() }()
	// Evidence the verifier refused (not authentic) changes no verdict:
	// its dead-letter record is the outcome.
	rejSub, err := nc.Subscribe(events.DeadLetterFilter(topology.StreamEvidence), printer.handleRejected)
	if err != nil {
		return err
	}
	defer func() { _ = rejSub.Unsubscribe() }()

	// The console listens before the banner, which prints its URL.
	if f.console != "off" && !f.once {
		// Who approves through it: the user who started up, as the
		// CLI's baseline approve records it.
		cons, err := console.New(console.Config{Listen: f.console, Approver: os.Getenv("USER"), Audit: consoleAudit}, js, log)
		if err != nil {
			return err
		}
		if err := cons.Start(ctx); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = cons.Shutdown(sctx)
		}()
		_, _ = fmt.Fprintf(out, "console: %s\n", cons.URL())
	}
	_, _ = fmt.Fprintf(out, "runtimetruth up: NATS %s, data %s\n", url, dir)
	switch {
	case aud != nil:
		_, _ = fmt.Fprintf(out, "  audit log        %s (checkpoints %s)\n", auditLog, auditCheckpoints)
	case external != "":
		_, _ = fmt.Fprintln(out, "  audit log        none here: the deployment's runtimetruth-auditor audits NATS at", url)
	default:
		_, _ = fmt.Fprintln(out, "  audit log        none (--no-audit)")
	}
	if f.signKey != "" {
		_, _ = fmt.Fprintf(out, "  attestor         signs with %s on %s\n", f.signKey, events.AttestSubject)
	}
	for _, t := range targets {
		_, _ = fmt.Fprintf(out, "  watching %-7s %s every %s\n", t.Kind, targetWhere(t), f.interval)
	}
	for _, why := range left {
		_, _ = fmt.Fprintf(out, "  not watching     %s\n", why)
	}
	_, _ = fmt.Fprintln(out)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.once {
		var finish sync.Once
		printer.done = func(n int) {
			if n < len(targets) {
				return
			}
			finish.Do(func() {
				go func() {
					defer cancel()
					if aud == nil {
						return
					}
					// The run's events, verdicts included, go into the
					// audit log before it stops.
					sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
					defer scancel()
					if err := aud.Sync(sctx); err != nil {
						log.Warn("audit log incomplete", "err", err)
					}
				}()
			})
		}
	}
	if err := lifecycle.Run(runCtx, log, 30*time.Second, comps...); err != nil {
		return err
	}
	return printer.exitErr(f.once)
}

// newEmbeddedAuditor is the auditor of `up`: every stream of the
// embedded server into one JSONL log (the embedded default), with
// checkpoints signed by cpKey every minute and at shutdown in a file
// beside it.
func newEmbeddedAuditor(logPath, checkpoints, cpKey, host string, log *slog.Logger, nc *nats.Conn) (*auditor.Auditor, error) {
	cfg := auditor.NewDefaultConfig()
	cfg.Instance = host
	cfg.JSONL.Path = logPath
	cfg.Checkpoint.File = checkpoints
	cfg.Checkpoint.KeyFile = cpKey
	cfg.IdleWait = 100 * time.Millisecond
	return auditor.New(cfg, auditor.Settings{Logger: log, Conn: nc})
}

// startEmbedded runs a JetStream server storing in dir/jetstream and writes
// its client URL to dir/nats.url.
func startEmbedded(dir, listen string) (*server.Server, string, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "runtimetruth-up",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(dir, "jetstream"),
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, "", fmt.Errorf("embedded NATS: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, "", errors.New("embedded NATS did not start within 10s")
	}
	url := ns.ClientURL()
	if err := os.WriteFile(filepath.Join(dir, urlFile), []byte(url+"\n"), 0o600); err != nil {
		ns.Shutdown()
		return nil, "", err
	}
	return ns, url, nil
}

// defaultTargets are this machine's: the git repository of the working
// directory, the current Python environment, Codex in the working
// directory when it is installed.
// defaultTargets are the targets up watches on this machine, and why any
// it would watch are left out.
func defaultTargets(ctx context.Context, f upFlags) (targets []collector.TargetConfig, left []string) {
	cwd, _ := os.Getwd()
	if root, err := exec.CommandContext(ctx, "git", "-C", cwd, "rev-parse", "--show-toplevel").Output(); err == nil {
		targets = append(targets, collector.TargetConfig{Name: "repo", Kind: "git", Path: strings.TrimSpace(string(root)), Interval: f.interval})
	}
	if env := pythonEnv(ctx); env != "" {
		targets = append(targets, collector.TargetConfig{Name: "python", Kind: "python", Env: env, Interval: f.interval})
	}
	if !f.noCodex {
		if _, err := exec.LookPath("codex"); err == nil {
			runAs, why := codexRunAs(f.codexAs, os.Geteuid(), os.Getenv("SUDO_USER"), ownerOf(cwd))
			if why != "" {
				return targets, append(left, "codex   "+why)
			}
			targets = append(targets, collector.TargetConfig{Name: "codex", Kind: "codex", Cwd: cwd, Interval: f.interval,
				Options: collector.TargetOptions{ResolveThread: true, RunAs: runAs}})
		}
	}
	return targets, left
}

// codexRunAs is the user up runs the Codex probe as ("" for the
// collector's rule: itself, or as root the owner of the workspace), or why
// up leaves Codex out. The probe starts the agent and its MCP servers,
// never as root: up run as root (make run on a fresh machine, sudo) runs it
// as --codex-run-as, else as the user sudo ran it for, else as the owner
// of the current directory, and leaves Codex out when root owns that.
func codexRunAs(flag string, euid int, sudoUser string, cwdOwner int) (runAs, why string) {
	switch {
	case flag != "":
		return flag, ""
	case euid != 0:
		return "", ""
	case sudoUser != "" && sudoUser != "root":
		return sudoUser, ""
	case cwdOwner > 0:
		return "", ""
	}
	return "", "up runs as root in a directory root owns, and the Codex probe never runs as root " +
		"(it starts the agent and its MCP servers): pass --codex-run-as USER, or run up as that user"
}

// ownerOf is the uid that owns path, or -1.
func ownerOf(path string) int {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid)
	}
	return -1
}

// pythonEnv is $VIRTUAL_ENV, else the prefix of the python3 on PATH when it
// is a virtual environment (a system interpreter's packages belong to the
// OS package manager).
func pythonEnv(ctx context.Context) string {
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		return v
	}
	out, err := exec.CommandContext(ctx, "python3", "-c", "import sys; print(sys.prefix if sys.prefix != sys.base_prefix else '')").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func targetWhere(t collector.TargetConfig) string {
	for _, s := range []string{t.Path, t.Env, t.Cwd, t.Dir, t.Unit} {
		if s != "" {
			return s
		}
	}
	if t.PID != 0 {
		return "pid " + strconv.Itoa(t.PID)
	}
	return t.Name
}

// upBusArgs are the flags that take `runtimetruth status` and `baseline`
// to up's server: --nats and its credentials and TLS for an external one,
// else --data-dir unless it is the default.
func upBusArgs(b busFlags, url, dir string, external bool) []string {
	if external {
		return b.connArgs(url)
	}
	if def, err := defaultDataDir(""); err == nil && filepath.Clean(def) == filepath.Clean(dir) {
		return nil
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return []string{"--data-dir", dir}
}

// verdictPrinter prints the verdicts, failed collections and refused
// evidence of host when they change their target's state (targetState),
// and explains, once per target, how to approve a baseline.
type verdictPrinter struct {
	out       io.Writer
	baselines *verifier.Baselines
	approve   bool
	// enrollment is up's verifier's (firstUseApproval).
	enrollment string
	// host is the collector's: verdicts of other hosts (on a shared
	// server) are neither printed, approved nor counted.
	host string
	// busArgs are the flags that take another terminal's runtimetruth to
	// this bus (none for the default data directory).
	busArgs []string
	done    func(int)
	// nc, when set, reaches the embedded attestor: approvals are signed.
	nc *nats.Conn

	mu        sync.Mutex
	explained map[string]bool
	// printed is each target's last printed state.
	printed targetStates
	// seen is each target's last outcome: a verdict's status, or
	// StatusError for a failed collection, whose message is in failed.
	seen   map[string]events.Status
	failed map[string]string
}

func (p *verdictPrinter) init() {
	if p.seen == nil {
		p.explained, p.seen, p.failed = map[string]bool{}, map[string]events.Status{}, map[string]string{}
		p.printed = targetStates{}
	}
}

// decodeMsg is the payload of the event m carries; false when m carries no
// event or no T.
func decodeMsg[T events.Payload](m *nats.Msg) (T, bool) {
	var zero T
	ev, err := binding.FromNATS(m.Header, m.Data)
	if err != nil {
		return zero, false
	}
	v, err := binding.Decode[T](ev)
	if err != nil {
		return zero, false
	}
	return v, true
}

// handleFailure prints a collection.failed event of host, unless its
// target's last line said the same, and counts it as its target's
// outcome, as a verdict would be.
func (p *verdictPrinter) handleFailure(m *nats.Msg) {
	f, ok := decodeMsg[events.CollectionFailed](m)
	if !ok || f.Host != p.host {
		return
	}
	key := f.Collector // a target not known before it is read (a process)
	if f.Target != nil {
		key = f.Target.String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	msg := printable(f.Message)
	if p.printed.changed(key, failureState(f.Reason, msg)) {
		_, _ = fmt.Fprintf(p.out, "%s  ERROR  %s  collection failed (%s): %s\n", time.Now().Format("15:04:05"), key, f.Reason, msg)
	}
	p.seen[key], p.failed[key] = events.StatusError, msg
	if p.done != nil {
		p.done(len(p.seen))
	}
}

// sign asks the embedded attestor, if any, to sign target's baseline.
func (p *verdictPrinter) sign(ctx context.Context, target events.Target, stamp, key string) {
	if p.nc == nil {
		return
	}
	rep, err := attestor.RequestSign(ctx, p.nc, events.AttestSubject, attestor.SignRequest{Target: target})
	if err != nil {
		_, _ = fmt.Fprintf(p.out, "%s  ERROR  %s  sign: %v\n", stamp, key, err)
		return
	}
	_, _ = fmt.Fprintf(p.out, "%s  SIGNED  %s  %s by %s\n", stamp, key, rep.BaselineDigest, rep.KeyHint)
}

func (p *verdictPrinter) handle(m *nats.Msg) {
	v, ok := decodeMsg[events.Verdict](m)
	if !ok || v.Host != p.host {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	key := v.Target.String()
	stamp := time.Now().Format("15:04:05")
	state := verdictState(v)
	switch {
	case state.word == wordNoBaseline && p.approve:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.baselines.Approve(ctx, v.Target, firstUseApproval(v, p.enrollment)); err != nil {
			if p.printed.changed(key, targetState{word: verifier.StatusWord(events.StatusError), detail: "approve: " + err.Error()}) {
				_, _ = fmt.Fprintf(p.out, "%s  ERROR  %s  approve: %v\n", stamp, key, err)
			}
		} else {
			// Every approval is printed, and the verdict after it.
			p.printed[key] = targetState{word: wordApproved}
			_, _ = fmt.Fprintf(p.out, "%s  APPROVED  %s  (first snapshot; the next collection is verified against it)\n", stamp, key)
			p.sign(ctx, v.Target, stamp, key)
		}
		return // the approval's verdict comes with the next collection
	case !p.printed.changed(key, state):
		// As last printed: counted, not printed again.
	case state.word == wordNoBaseline:
		_, _ = fmt.Fprintf(p.out, "%s  NO BASELINE  %s\n", stamp, key)
		if !p.explained[key] {
			p.explained[key] = true
			bus := ""
			if len(p.busArgs) > 0 {
				bus = " " + shellArgs(p.busArgs)
			}
			_, _ = fmt.Fprintf(p.out, "    review it:  runtimetruth status%s; then approve it from another terminal:\n    runtimetruth baseline approve '%s'%s\n",
				bus, key, bus)
		}
	default:
		detail := verdictDetail(v)
		if detail != "" {
			detail = "  " + detail
		}
		_, _ = fmt.Fprintf(p.out, "%s  %-5s  %s%s\n", stamp, verifier.StatusWord(v.Status), key, detail)
		if v.Status == events.StatusDrift && v.Report != nil {
			for _, c := range v.Report.Changes {
				if c.Status != diff.Changed {
					_, _ = fmt.Fprintf(p.out, "    %s: evidence %s\n", c.Kind, c.Status)
				}
				for _, fld := range c.Fields {
					_, _ = fmt.Fprintf(p.out, "    %s.%s: %s -> %s\n", c.Kind, fld.Field, side(fld.Before), side(fld.After))
				}
			}
		}
	}
	p.seen[key] = v.Status
	delete(p.failed, key)
	if p.done != nil {
		p.done(len(p.seen))
	}
}

func side(s report.Side) string {
	if !s.Present {
		return "<missing>"
	}
	return s.Value.String()
}

// exitErr maps the last verdicts to the exit code in --once mode.
func (p *verdictPrinter) exitErr(once bool) error {
	if !once {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	drift := false
	for _, key := range slices.Sorted(maps.Keys(p.seen)) {
		switch p.seen[key] {
		case events.StatusError:
			if msg, ok := p.failed[key]; ok {
				return fmt.Errorf("collection of %s failed: %s", key, msg)
			}
			return fmt.Errorf("verification of %s failed", key)
		case events.StatusDrift:
			drift = true
		case events.StatusStale:
			return fmt.Errorf("no authentic evidence of %s came in time (stale)", key)
		}
	}
	if drift {
		return errDrift
	}
	return nil
}
