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
	repo, cfg, err := c.repository(ctx, path)
	if err != nil {
		return nil, err
	}
	remotes, err := remotesRecord(cfg)
	if err != nil {
		root, _ := repo.Data["repository_root"].Str()
		return nil, fmt.Errorf("collect git remotes %s: %w", root, err)
	}
	return []snapshot.Record{repo, remotes}, nil
}

// Repository returns the git.repository record of the work tree containing
// path, with RuntimeTruth's keys and nothing else.
func (c Collector) Repository(ctx context.Context, path string) (snapshot.Record, error) {
	repo, _, err := c.repository(ctx, path)
	return repo, err
}

// location is where a work tree's repository is, and its HEAD commit.
type location struct {
	root, gitDir, commonDir, head string
}

// session runs the git commands of one inspection.
type session struct {
	c Collector
	// trust is the operator's safe.directory list (-c options), when the
	// repository is owned by another user.
	trust []string
}

// repository returns the git.repository record of the work tree
// containing path, and the repository's configuration entries that
// configPattern selects (its remote URLs among them).
func (c Collector) repository(ctx context.Context, path string) (snapshot.Record, []configEntry, error) {
	fail := func(err error) (snapshot.Record, []configEntry, error) {
		return snapshot.Record{}, nil, fmt.Errorf("collect git %s: %w", path, err)
	}
	s, loc, err := c.locate(ctx, path)
	if err != nil {
		return fail(err)
	}

	branch := snapshot.Null()
	out, err := s.git(ctx, loc.root, "symbolic-ref", "--quiet", "--short", "HEAD")
	var exitErr *subproc.ExitError
	switch {
	case err == nil:
		branch = snapshot.String(trimLine(out))
	case errors.As(err, &exitErr) && exitErr.Status == 1:
		// Detached HEAD: HEAD is not a symbolic ref.
	default:
		return fail(err)
	}

	cfg, err := s.config(ctx, loc.root)
	if err != nil {
		return fail(err)
	}
	dirty, err := s.status(ctx, loc, cfg)
	if err != nil {
		return fail(err)
	}

	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   KindRepository,
		Source: snapshot.Source{Collector: CollectorName, Method: MethodRepository},
		Data: snapshot.Data{
			"repository_root": snapshot.String(loc.root),
			"head_commit":     snapshot.String(loc.head),
			"branch":          branch,
			"detached":        snapshot.Bool(branch.Type() == snapshot.TypeNull),
			"dirty":           snapshot.Bool(dirty),
		},
	}, cfg, nil
}

// locate finds the work tree containing path, its repository directories
// and HEAD commit in one `git rev-parse`. A repository owned by another
// user is retried with the operator's safe.directory list (operatorTrust);
// the session carries it to the next commands.
func (c Collector) locate(ctx context.Context, path string) (session, location, error) {
	if path == "" {
		return session{}, location{}, errors.New("empty path")
	}
	if fi, err := os.Stat(path); err != nil {
		return session{}, location{}, err
	} else if !fi.IsDir() {
		return session{}, location{}, errors.New("not a directory")
	}
	args := []string{"rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir", "--verify", "HEAD"}
	s := session{c: c}
	out, err := s.git(ctx, path, args...)
	if errors.Is(err, ErrDubiousOwnership) {
		trust, terr := c.operatorTrust(ctx)
		if terr != nil {
			return session{}, location{}, fmt.Errorf("%w (and reading safe.directory: %w)", err, terr)
		}
		if len(trust) > 0 {
			s.trust = trust
			out, err = s.git(ctx, path, args...)
		}
	}
	if err != nil {
		return session{}, location{}, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return session{}, location{}, ErrNotRepository
	}
	if len(lines) != 4 || lines[1] == "" || lines[2] == "" || !isObjectID(lines[3]) {
		return session{}, location{}, fmt.Errorf("git rev-parse printed %q, want the work tree, git directory, common directory and HEAD", out)
	}
	return s, location{root: lines[0], gitDir: lines[1], commonDir: lines[2], head: lines[3]}, nil
}

// config returns the configuration entries configPattern selects, from
// the repository's own configuration and the files it includes.
func (s session) config(ctx context.Context, dir string) ([]configEntry, error) {
	out, err := s.git(ctx, dir, "config", "-z", "--get-regexp", configPattern)
	var exitErr *subproc.ExitError
	if errors.As(err, &exitErr) && exitErr.Status == 1 {
		return nil, nil // none set
	}
	if err != nil {
		return nil, err
	}
	return parseConfig(out), nil
}

// Remotes returns the git.remotes record of the repository at path:
// remote_count and, per remote, "remote:<name>" with its configured URL
// passed through RedactURL. A remote with several url entries gets a compact
// JSON array of them, in configuration order. The URLs are read from the
// repository's configuration and the files it includes (system and global
// configuration are not read, see the package documentation), as
// configured, before any url.<base>.insteadOf rewriting. It fails like
// Repository when path is not in a work tree.
func (c Collector) Remotes(ctx context.Context, path string) (snapshot.Record, error) {
	fail := func(err error) (snapshot.Record, error) {
		return snapshot.Record{}, fmt.Errorf("collect git remotes %s: %w", path, err)
	}
	s, loc, err := c.locate(ctx, path)
	if err != nil {
		return fail(err)
	}
	cfg, err := s.config(ctx, loc.root)
	if err != nil {
		return fail(err)
	}
	rec, err := remotesRecord(cfg)
	if err != nil {
		return fail(err)
	}
	return rec, nil
}

// remotesRecord builds the git.remotes record from configuration entries.
func remotesRecord(cfg []configEntry) (snapshot.Record, error) {
	var names []string
	urls := make(map[string][]string)
	for _, e := range cfg {
		lower := strings.ToLower(e.key)
		if !strings.HasPrefix(lower, "remote.") || !strings.HasSuffix(lower, ".url") {
			continue
		}
		name := e.key[len("remote.") : len(e.key)-len(".url")]
		if _, seen := urls[name]; !seen {
			names = append(names, name)
		}
		urls[name] = append(urls[name], RedactURL(e.value))
	}
	data := snapshot.Data{"remote_count": snapshot.Int(int64(len(names)))}
	for _, name := range names {
		value := urls[name][0]
		if len(urls[name]) > 1 {
			var err error
			if value, err = compactJSON(urls[name]); err != nil {
				return snapshot.Record{}, err
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
func (s session) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	out, err := s.command(dir, args).Run(ctx)
	return out, s.c.classify(err)
}

// command is `git <overrides> <trust> -C dir args...` in the environment
// of environ.
func (s session) command(dir string, args []string) subproc.Command {
	full := make([]string, 0, len(overrides)+len(s.trust)+2+len(args))
	full = append(append(append(full, overrides...), s.trust...), "-C", dir)
	return subproc.Command{
		Path:    s.c.binary(),
		Args:    append(full, args...),
		Env:     environ(),
		Label:   "git " + strings.Join(args, " "),
		Timeout: s.c.Timeout,
	}
}

func (c Collector) binary() string {
	if c.Binary == "" {
		return "git"
	}
	return c.Binary
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

// isObjectID reports whether s is a SHA-1 or SHA-256 object name.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
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
