package git

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/subproc"
)

// Evidence kinds and provenance of the records Collect returns.
const (
	// KindRepository is RuntimeTruth's git.repository kind.
	KindRepository = "git.repository"
	// KindRemotes is the git.remotes extension kind.
	KindRemotes = "git.remotes"
	// CollectorName is the source.collector of both records.
	CollectorName = "git"
	// MethodRepository is git.repository's source.method.
	MethodRepository = "git rev-parse/status"
	// MethodRemotes is git.remotes' source.method.
	MethodRemotes = "git config remote.*.url"
)

// localEnv are the variables `git rev-parse --local-env-vars` lists that
// redirect git to another repository, index or object store. They are
// removed from git's environment so that -C <path> decides what is
// inspected. GIT_CONFIG_PARAMETERS and GIT_CONFIG_COUNT (the caller's own
// -c options) are kept.
var localEnv = map[string]bool{
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_CONFIG":                       true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_IMPLICIT_WORK_TREE":           true,
	"GIT_GRAFT_FILE":                   true,
	"GIT_INDEX_FILE":                   true,
	"GIT_NO_REPLACE_OBJECTS":           true,
	"GIT_REPLACE_REF_BASE":             true,
	"GIT_PREFIX":                       true,
	"GIT_INTERNAL_SUPER_PREFIX":        true,
	"GIT_SHALLOW_FILE":                 true,
	"GIT_COMMON_DIR":                   true,
	// Set again below.
	"GIT_OPTIONAL_LOCKS": true,
	"LC_ALL":             true,
}

// Collector runs git. The zero value uses "git" from PATH and the default
// timeout.
type Collector struct {
	// Binary is the git executable: a name looked up in PATH or a path.
	// Empty means "git".
	Binary string
	// Timeout bounds each git invocation; 0 means subproc.DefaultTimeout.
	Timeout time.Duration
}

// Collect returns the git.repository and git.remotes records of the work
// tree containing path, using the zero Collector.
func Collect(ctx context.Context, path string) ([]snapshot.Record, error) {
	return Collector{}.Collect(ctx, path)
}

// Collect returns the git.repository and git.remotes records, in that order,
// of the work tree containing path. It fails with ErrNotRepository when path
// is not inside a work tree.
func (c Collector) Collect(ctx context.Context, path string) ([]snapshot.Record, error) {
	repo, err := c.Repository(ctx, path)
	if err != nil {
		return nil, err
	}
	root, _ := repo.Data["repository_root"].Str()
	remotes, err := c.Remotes(ctx, root)
	if err != nil {
		return nil, err
	}
	return []snapshot.Record{repo, remotes}, nil
}

// Repository returns the git.repository record of the work tree containing
// path, with RuntimeTruth's keys and nothing else.
func (c Collector) Repository(ctx context.Context, path string) (snapshot.Record, error) {
	fail := func(err error) (snapshot.Record, error) {
		return snapshot.Record{}, fmt.Errorf("collect git %s: %w", path, err)
	}
	if path == "" {
		return fail(errors.New("empty path"))
	}
	if fi, err := os.Stat(path); err != nil {
		return fail(err)
	} else if !fi.IsDir() {
		return fail(errors.New("not a directory"))
	}

	out, err := c.git(ctx, path, "rev-parse", "--show-toplevel")
	if err != nil {
		return fail(err)
	}
	root := trimLine(out)
	if root == "" {
		return fail(ErrNotRepository)
	}

	out, err = c.git(ctx, root, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return fail(err)
	}
	head := trimLine(out)
	if head == "" {
		return fail(errors.New("git rev-parse --verify HEAD printed nothing"))
	}

	branch := snapshot.Null()
	out, err = c.git(ctx, root, "symbolic-ref", "--quiet", "--short", "HEAD")
	var exitErr *subproc.ExitError
	switch {
	case err == nil:
		branch = snapshot.String(trimLine(out))
	case errors.As(err, &exitErr) && exitErr.Status == 1:
		// Detached HEAD: HEAD is not a symbolic ref.
	default:
		return fail(err)
	}

	var status nonEmpty
	if err := c.run(ctx, root, &status, "status", "--porcelain=v1", "--untracked-files=normal"); err != nil {
		return fail(err)
	}

	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   KindRepository,
		Source: snapshot.Source{Collector: CollectorName, Method: MethodRepository},
		Data: snapshot.Data{
			"repository_root": snapshot.String(root),
			"head_commit":     snapshot.String(head),
			"branch":          branch,
			"detached":        snapshot.Bool(branch.Type() == snapshot.TypeNull),
			"dirty":           snapshot.Bool(bool(status)),
		},
	}, nil
}

// Remotes returns the git.remotes record of the repository at path:
// remote_count and, per remote, "remote:<name>" with its configured URL
// passed through RedactURL. A remote with several url entries gets a compact
// JSON array of them, in configuration order. The URLs are read from every
// configuration level git itself uses (system, global, repository), as
// configured, before any url.<base>.insteadOf rewriting. path should be a
// work tree (Collect passes repository_root): outside one, only system and
// global configuration is read.
func (c Collector) Remotes(ctx context.Context, path string) (snapshot.Record, error) {
	out, err := c.git(ctx, path, "config", "-z", "--get-regexp", `^remote\..*\.url$`)
	var exitErr *subproc.ExitError
	if errors.As(err, &exitErr) && exitErr.Status == 1 {
		out, err = nil, nil // no remote configured
	}
	if err != nil {
		return snapshot.Record{}, fmt.Errorf("collect git remotes %s: %w", path, err)
	}
	var names []string
	urls := make(map[string][]string)
	for entry := range strings.SplitSeq(string(out), "\x00") {
		if entry == "" {
			continue
		}
		key, value, _ := strings.Cut(entry, "\n")
		name := strings.TrimSuffix(strings.TrimPrefix(key, "remote."), ".url")
		if _, seen := urls[name]; !seen {
			names = append(names, name)
		}
		urls[name] = append(urls[name], RedactURL(value))
	}
	data := snapshot.Data{"remote_count": snapshot.Int(int64(len(names)))}
	for _, name := range names {
		value := urls[name][0]
		if len(urls[name]) > 1 {
			if value, err = compactJSON(urls[name]); err != nil {
				return snapshot.Record{}, fmt.Errorf("collect git remotes %s: %w", path, err)
			}
		}
		data["remote:"+name] = snapshot.String(value)
	}
	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   KindRemotes,
		Source: snapshot.Source{Collector: CollectorName, Method: MethodRemotes},
		Data:   data,
	}, nil
}

// git runs `git -C dir args...` and returns stdout.
func (c Collector) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	out, err := c.command(dir, args).Run(ctx)
	return out, c.classify(err)
}

// run is git with stdout streamed to w.
func (c Collector) run(ctx context.Context, dir string, w *nonEmpty, args ...string) error {
	cmd := c.command(dir, args)
	cmd.Stdout = w
	_, err := cmd.Run(ctx)
	return c.classify(err)
}

func (c Collector) command(dir string, args []string) subproc.Command {
	bin := c.Binary
	if bin == "" {
		bin = "git"
	}
	return subproc.Command{
		Path:    bin,
		Args:    append([]string{"-c", "core.fsmonitor=false", "-C", dir}, args...),
		Env:     environ(),
		Label:   "git " + strings.Join(args, " "),
		Timeout: c.Timeout,
	}
}

// classify maps git's failures onto this package's sentinels, keeping the
// original error in the chain.
func (c Collector) classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, subproc.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrGitNotFound, err)
	}
	var exitErr *subproc.ExitError
	if !errors.As(err, &exitErr) {
		return err
	}
	tail := exitErr.StderrTail
	switch {
	case bytes.Contains(tail, []byte("detected dubious ownership")):
		return fmt.Errorf("%w: %w", ErrDubiousOwnership, err)
	case bytes.Contains(tail, []byte("not a git repository")),
		bytes.Contains(tail, []byte("must be run in a work tree")):
		return fmt.Errorf("%w: %w", ErrNotRepository, err)
	case bytes.Contains(tail, []byte("Needed a single revision")):
		return fmt.Errorf("%w: %w", ErrNoCommits, err)
	}
	return err
}

func environ() []string {
	env := os.Environ()
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !localEnv[k] {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}

// trimLine removes the one line ending git prints after a value.
func trimLine(b []byte) string {
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
}

// nonEmpty records whether anything was written, without keeping it.
type nonEmpty bool

func (n *nonEmpty) Write(p []byte) (int, error) {
	if len(p) > 0 {
		*n = true
	}
	return len(p), nil
}

func compactJSON(v []string) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
