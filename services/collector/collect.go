package collector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex"
	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
	"github.com/runtimetruth/runtimetruth/services/collector/source/process"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

// The statuses of a Result.
const (
	StatusCollected = "collected" // evidence.collected spooled
	StatusFailed    = "failed"    // collection.failed spooled
	StatusRefused   = "refused"   // the spool refused the events (full)
	StatusError     = "error"     // nothing could be spooled
)

// Result is the outcome of one collection.
type Result struct {
	Target string `json:"target"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	// EventID is the id of the evidence.collected or collection.failed
	// event.
	EventID string `json:"event_id,omitempty"`
	// Digest is the snapshot digest (collected only).
	Digest string `json:"digest,omitempty"`
	// RunnableModified counts the runnable.modified events spooled.
	RunnableModified int `json:"runnable_modified,omitempty"`
	// Error says why the collection failed or was not spooled.
	Error string `json:"error,omitempty"`
}

// observation is what one collection saw.
type observation struct {
	snap *snapshot.Snapshot
	// changes are runnable.modified payloads not reported before, and
	// reported marks them reported once spooled.
	changes  []events.RunnableModified
	ids      []string // changes[i]'s event id (runnableEventID)
	reported func(digests []string) error
}

// collect runs one collection of t and spools its events. interval is
// the schedule's (0 for an on-demand collection).
// The collection has a span, whose context its events carry.
func (c *Collector) collect(ctx context.Context, t *target, interval time.Duration) (res Result, rerr error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res = Result{Target: t.cfg.Name, Kind: t.cfg.Kind}
	ctx, span := c.in.startCollection(ctx, t.cfg.Name, t.cfg.Kind)
	began := time.Now()
	defer func() { c.in.endCollection(ctx, span, began, res, rerr) }()

	obs, cerr := c.observe(ctx, t)
	var msgs []spooled
	var digests []string
	if cerr == nil {
		m, digest, err := c.evidenceMsg(ctx, obs.snap, interval, t.cfg.Baseline)
		if err != nil {
			cerr = err // too large, or a snapshot the codec refuses
		} else {
			msgs, res.Digest = append(msgs, m), digest
			for i, p := range obs.changes {
				m, err := c.newMsg(ctx, p, binding.WithID(obs.ids[i]))
				if err != nil {
					c.in.invalid.Add(ctx, 1, ofType(p.Type()))
					c.log.Warn("runnable.modified not publishable", "target", t.cfg.Name, "package", p.Package, "err", err)
					continue
				}
				msgs = append(msgs, m)
				digests = append(digests, p.ChangeDigest)
			}
		}
	}
	if cerr != nil {
		res.Digest = ""
		m, err := c.newMsg(ctx, c.failure(t, cerr))
		if err != nil {
			c.in.invalid.Add(ctx, 1, ofType(events.TypeCollectionFailed))
			res.Status, res.Error = StatusError, err.Error()
			return res, fmt.Errorf("collect %s: %w (and its collection.failed event: %w)", t.cfg.Name, cerr, err)
		}
		msgs, digests = []spooled{m}, nil
	}
	res.EventID = msgs[0].id
	if err := c.enqueue(ctx, msgs); err != nil {
		res.Status, res.Error, res.Digest = StatusRefused, err.Error(), ""
		if !errors.Is(err, ErrSpoolFull) {
			res.Status = StatusError
		}
		return res, fmt.Errorf("collect %s: %w", t.cfg.Name, err)
	}
	res.RunnableModified = len(digests)
	if len(digests) > 0 && obs.reported != nil {
		if err := obs.reported(digests); err != nil {
			// Reported again next time; the derived event id makes
			// JetStream drop the copy within its window.
			c.log.Warn("could not record reported changes", "target", t.cfg.Name, "err", err)
		}
	}
	if cerr != nil {
		if !t.failed {
			c.log.Warn("collection failing", "target", t.cfg.Name, "kind", t.cfg.Kind, "err", cerr)
		}
		t.failed = true
		res.Status, res.Error = StatusFailed, cerr.Error()
		return res, fmt.Errorf("%w: %s: %w", ErrCollectionFailed, t.cfg.Name, cerr)
	}
	if t.failed {
		c.log.Info("collection recovered", "target", t.cfg.Name, "kind", t.cfg.Kind)
	}
	t.failed = false
	res.Status = StatusCollected
	return res, nil
}

// observe collects t's snapshot.
func (c *Collector) observe(ctx context.Context, t *target) (observation, error) {
	tc := t.cfg
	opts := inspect.Options{SeedOnly: tc.Options.SeedOnly}
	var s *snapshot.Snapshot
	var err error
	switch tc.Kind {
	case KindGit:
		s, err = inspect.Git(ctx, tc.Path, opts)
	case KindProcess:
		s, err = inspect.Process(ctx, tc.PID, opts)
	case KindSystemd:
		s, err = inspect.Systemd(ctx, tc.Unit, opts)
	case KindCodex:
		var acct *codex.Account
		if acct, err = codexAccount(tc); err != nil {
			return observation{}, err
		}
		var env []string
		if tc.Options.CodexHome != "" {
			env = []string{"CODEX_HOME=" + tc.Options.CodexHome}
		}
		var tg snapshot.Target
		var recs []snapshot.Record
		tg, recs, err = codex.Collect(ctx, tc.Cwd, codex.Options{
			Binary:        tc.Options.CodexBinary,
			ResolveThread: tc.Options.ResolveThread,
			ResolveMCP:    tc.Options.ResolveMCP,
			SeedOnly:      tc.Options.SeedOnly,
			RunAs:         acct,
			Env:           env,
		})
		if err == nil {
			s = snapshot.New(tg, recs...)
			err = s.Validate()
		}
	case KindPython, KindNode:
		return c.checkIntegrity(ctx, t)
	default:
		err = fmt.Errorf("kind %q", tc.Kind)
	}
	if err != nil {
		return observation{}, err
	}
	return observation{snap: s}, nil
}

// Why the Codex probe does not run (CodexAccount).
var (
	// ErrRootProbe: the probe would run as root.
	ErrRootProbe = errors.New("the Codex probe never runs as root")
	// ErrNoAccount: the account to run it as does not exist.
	ErrNoAccount = errors.New("no such account")
)

// codexAccount is the account a codex target's probe runs as.
func codexAccount(tc TargetConfig) (*codex.Account, error) {
	return CodexAccount(tc.Cwd, tc.Options.RunAs, "options.run_as")
}

// CodexAccount is the account the Codex probe of the workspace cwd runs
// as, nil for this process itself: the one rule of the collector and the
// CLI. The probe starts Codex and, with resolve_mcp, every MCP server its
// configuration names: programs chosen by whoever writes the workspace's
// and the user's Codex configuration, which must not run as root. A
// process running as root runs it as runAs (a user name or numeric uid),
// else as the owner of the workspace, and refuses (ErrRootProbe) when that
// is root. A process that is not root runs it as itself (nil), or as runAs
// when that names another user (which takes CAP_SETUID and CAP_SETGID).
// runAs naming root is refused too. setting is how the caller's user
// gives runAs ("options.run_as", "--codex-run-as"), for the errors.
func CodexAccount(cwd, runAs, setting string) (*codex.Account, error) {
	euid := os.Geteuid()
	var u *user.User
	switch {
	case runAs != "":
		var err error
		if u, err = lookupUser(runAs); err != nil {
			return nil, fmt.Errorf("%w: %s %q: %w", ErrNoAccount, setting, runAs, err)
		}
	case euid != 0:
		return nil, nil
	default:
		st, err := os.Stat(cwd)
		if err != nil {
			return nil, fmt.Errorf("codex working directory: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, fmt.Errorf("codex working directory %s: no owner", cwd)
		}
		if sys.Uid == 0 {
			return nil, fmt.Errorf("%w (it starts the agent and its MCP servers): the workspace %s is owned by root and %s names no user to run it as",
				ErrRootProbe, cwd, setting)
		}
		id := strconv.FormatUint(uint64(sys.Uid), 10)
		if u, err = user.LookupId(id); err != nil {
			return nil, fmt.Errorf("%w: the owner of the workspace %s, uid %s: %w (set %s)", ErrNoAccount, cwd, id, err, setting)
		}
	}
	a, err := account(u)
	if err != nil {
		return nil, err
	}
	switch {
	case a.UID == 0:
		return nil, fmt.Errorf("%w: %s %q is root", ErrRootProbe, setting, runAs)
	case int(a.UID) == euid:
		return nil, nil // this process's own user: nothing to switch
	}
	return a, nil
}

// lookupUser finds an account by name, else by numeric uid.
func lookupUser(s string) (*user.User, error) {
	u, err := user.Lookup(s)
	if err == nil {
		return u, nil
	}
	if _, perr := strconv.ParseUint(s, 10, 32); perr == nil {
		return user.LookupId(s)
	}
	return nil, err
}

// account is u as the probe runs it: its uid, primary gid, supplementary
// groups (/etc/group), name and home.
func account(u *user.User) (*codex.Account, error) {
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("account %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("account %s: gid %q: %w", u.Username, u.Gid, err)
	}
	a := &codex.Account{UID: uint32(uid), GID: uint32(gid), Name: u.Username, Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("account %s: groups: %w", u.Username, err)
	}
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil {
			a.Groups = append(a.Groups, uint32(g))
		}
	}
	return a, nil
}

// spooled is an event encoded for the spool.
type spooled struct {
	id   string
	typ  string // the CloudEvents type
	data []byte
}

// newMsg encodes an event of p for the spool, signed with the collector's
// key, with the trace context of ctx (the collection's span).
func (c *Collector) newMsg(ctx context.Context, p events.Payload, opts ...binding.Option) (spooled, error) {
	m, e, err := binding.NewMsg(c.source, p, append(opts, binding.WithSigner(c.signer))...)
	if err != nil {
		return spooled{}, err
	}
	eventtrace.InjectMsg(ctx, c.in.prop, m)
	return spooled{id: e.ID(), typ: e.Type(), data: encodeMsg(m, time.Now())}, nil
}

func (c *Collector) evidenceMsg(ctx context.Context, s *snapshot.Snapshot, interval time.Duration, baseline string) (spooled, string, error) {
	p, err := events.NewEvidenceCollected(c.cfg.Host, s, interval)
	if err != nil {
		return spooled{}, "", fmt.Errorf("snapshot: %w", err)
	}
	if baseline != "" {
		b := BaselineTarget(baseline, s.Target.Kind)
		p.Baseline = &b
	}
	m, err := c.newMsg(ctx, p)
	if err != nil {
		return spooled{}, "", err
	}
	return m, p.Digest, nil
}

// BaselineTarget is the target whose baseline a target configured with
// baseline (TargetConfig.Baseline) is verified against: KIND:IDENTIFIER
// names it as `runtimetruth baseline` does (a KIND holds no '/'); any other
// value is an identifier of the snapshot's own kind, kind.
func BaselineTarget(baseline, kind string) events.Target {
	if t, err := events.ParseTarget(baseline); err == nil {
		return t
	}
	return events.Target{Kind: kind, Identifier: baseline}
}

// enqueue appends the batch to the spool; a full spool refuses it whole.
func (c *Collector) enqueue(ctx context.Context, msgs []spooled) error {
	recs := make([][]byte, len(msgs))
	for i, m := range msgs {
		recs[i] = m.data
	}
	err := c.spool.Append(recs...)
	switch {
	case errors.Is(err, spool.ErrFull):
		countEvents(ctx, c.in.refused, msgs)
		if c.full.CompareAndSwap(false, true) {
			n, b := c.spool.Pending()
			c.log.Warn("spool full; refusing new events until NATS takes the backlog",
				"pending_events", n, "pending_bytes", b)
		}
		return fmt.Errorf("%w: %w", ErrSpoolFull, err)
	case err != nil:
		c.in.spoolError(ctx, SpoolAppend)
		c.log.Error("spool append failed", "err", err)
		return err
	}
	if c.full.CompareAndSwap(true, false) {
		c.log.Info("spool accepting events again")
	}
	countEvents(ctx, c.in.spooled, msgs)
	if c.onSpooled != nil {
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.id
		}
		c.onSpooled(ids)
	}
	return nil
}

// failure builds the collection.failed payload of err.
func (c *Collector) failure(t *target, err error) events.CollectionFailed {
	reason, retryable := classify(err)
	p := events.CollectionFailed{
		Host:      c.cfg.Host,
		Collector: t.cfg.Kind,
		Reason:    reason,
		Message:   message(t.cfg.Name + ": " + err.Error()),
		Retryable: retryable,
	}
	if tg, ok := configuredTarget(t.cfg); ok {
		p.Target = &tg
	}
	return p
}

// configuredTarget is the target a failed collection was about, as
// configured (a process has no identity before it is read).
func configuredTarget(tc TargetConfig) (events.Target, bool) {
	switch tc.Kind {
	case KindGit:
		return events.Target{Kind: git.KindRepository, Identifier: tc.Path}, true
	case KindSystemd:
		return events.Target{Kind: systemd.Kind, Identifier: tc.Unit}, true
	case KindCodex:
		return events.Target{Kind: codex.TargetKind, Identifier: tc.Cwd}, true
	case KindPython:
		return events.Target{Kind: TargetPythonEnvironment, Identifier: tc.Env}, true
	case KindNode:
		return events.Target{Kind: TargetNodeProject, Identifier: tc.Dir}, true
	}
	return events.Target{}, false
}

// classify maps a collection error to a collection.failed reason and
// whether the next collection may succeed unchanged.
func classify(err error) (reason string, retryable bool) {
	var evErr *events.Error
	switch {
	case errors.As(err, &evErr) && evErr.Reason == events.ReasonTooLarge:
		return "too_large", false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, codex.ErrTimeout):
		return "timeout", true
	case errors.Is(err, os.ErrPermission), errors.Is(err, process.ErrPermission), errors.Is(err, git.ErrDubiousOwnership),
		errors.Is(err, ErrRootProbe):
		return "permission", false
	case errors.Is(err, git.ErrGitNotFound), errors.Is(err, systemd.ErrSystemctlNotFound),
		errors.Is(err, systemd.ErrSystemdUnavailable), errors.Is(err, codex.ErrNotFound):
		return "unavailable", false
	case errors.Is(err, os.ErrNotExist), errors.Is(err, process.ErrDisappeared), errors.Is(err, git.ErrNotRepository),
		errors.Is(err, process.ErrNoExecutable), integrityNotFound(err), errors.Is(err, ErrNoAccount):
		return "not_found", false
	case errors.As(err, &evErr):
		return "invalid", false
	}
	return "error", true
}

// message makes an error text fit a payload: valid UTF-8 without control
// characters, at most events.MaxMessageLength bytes.
func message(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7F {
			return ' '
		}
		return r
	}, s)
	if len(s) > events.MaxMessageLength {
		cut := events.MaxMessageLength - len("…")
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if strings.TrimSpace(s) == "" {
		s = "unknown error"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// runnableEventID derives the id of a runnable.modified event from the
// change it reports and when the files it touched last changed
// (integrity.Result.ChangedAt), so a copy published again (after a crash
// between spooling and recording the change) or by another target on the
// same environment is dropped by JetStream, while a change that comes back
// after another (A, B, A again: written again) is a new event, within the
// stream's duplicate window too.
func runnableEventID(p events.RunnableModified, changedAt int64) string {
	sum := sha256.Sum256([]byte(p.Host + "\x00" + string(p.Ecosystem) + "\x00" + p.Environment + "\x00" +
		p.Package + "\x00" + p.ChangeDigest + "\x00" + strconv.FormatInt(changedAt, 10)))
	return "runnable-modified-" + hex.EncodeToString(sum[:20])
}
