package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/subproc"
)

// overrides go before every git subcommand. Command-line configuration
// wins over every file git reads, so whatever the repository's
// configuration (or a file it includes) says, git starts no file-system
// monitor, finds no hook, uses no transport (a partial clone's lazy fetch,
// ssh and core.sshCommand, remote and credential helpers) and no pager.
// status needs more than this (filters cannot be switched off by name in
// advance): it runs in a private repository directory, see status.
var overrides = []string{
	"--no-pager",
	"--no-optional-locks",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "protocol.allow=never",
	"-c", "core.pager=cat",
}

// passEnv are the only variables of the collector's environment git gets:
// where to find programs and itself, and SUDO_UID, through which git
// trusts the repositories of the user who ran sudo as it does for them.
var passEnv = []string{"PATH", "GIT_EXEC_PATH", "SUDO_UID"}

// environ is git's whole environment: no system or global configuration,
// no home directory (HOME=/dev/null can hold no configuration, ignore or
// attributes file), no system attributes file, no prompts, no optional
// locks (status never rewrites the index), C messages (the ones classify
// knows), and none of the caller's GIT_* variables: GIT_DIR and friends do
// not redirect what is inspected and GIT_CONFIG_PARAMETERS adds nothing.
// extra are GIT_DIR and friends for status.
func environ(extra ...string) []string {
	env := make([]string, 0, len(passEnv)+9+len(extra))
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		"HOME=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	)
	return append(env, extra...)
}

// carried are the repository settings that change what `git status`
// reports, by lower-case key. status passes them on the command line; no
// other repository setting reaches it. None of them names a program.
var carried = map[string]bool{
	"core.filemode":               true,
	"core.symlinks":               true,
	"core.ignorecase":             true,
	"core.precomposeunicode":      true,
	"core.autocrlf":               true,
	"core.eol":                    true,
	"core.checkroundtripencoding": true,
	"core.checkstat":              true,
	"core.trustctime":             true,
	"core.excludesfile":           true,
	"core.attributesfile":         true,
	"core.sparsecheckout":         true,
	"core.sparsecheckoutcone":     true,
	"index.sparse":                true,
}

// keyObjectFormat is the one repository setting the private repository
// directory's own config holds: git reads extensions from no other place.
const keyObjectFormat = "extensions.objectformat"

// configPattern selects, in one `git config` run, the remote URLs and the
// settings status carries over.
const configPattern = `^(remote\..*\.url|core\.(filemode|symlinks|ignorecase|precomposeunicode|autocrlf|eol|checkroundtripencoding|checkstat|trustctime|excludesfile|attributesfile|sparsecheckout|sparsecheckoutcone)|index\.sparse|extensions\.objectformat)$`

// configEntry is one `git config -z --get-regexp` entry. set is false for
// a key written without "=" (a boolean true).
type configEntry struct {
	key, value string
	set        bool
}

func parseConfig(out []byte) []configEntry {
	var entries []configEntry
	for entry := range strings.SplitSeq(string(out), "\x00") {
		if entry == "" {
			continue
		}
		key, value, set := strings.Cut(entry, "\n")
		entries = append(entries, configEntry{key: key, value: value, set: set})
	}
	return entries
}

// status reports whether `git status --porcelain` prints anything for the
// work tree at loc, without running anything the repository names.
//
// git reads a repository's configuration from its own directory and
// offers no switch to ignore it, and filter drivers (clean, smudge,
// process) can only be disabled by name, which the repository can change
// between a look and the status run. So status runs against a private
// repository directory made for the run: its HEAD is the commit resolved
// before, its config is written here (format and object format only), and
// git is pointed at the inspected repository's index, objects, work tree
// and ignore and attributes files through GIT_INDEX_FILE,
// GIT_OBJECT_DIRECTORY, GIT_WORK_TREE and links. The settings in carried
// come along on the command line. With no filter driver defined anywhere,
// .gitattributes' filter= names nothing; submodules are compared by their
// checked-out commit (--ignore-submodules=dirty), because looking inside
// one would run git under that submodule's own configuration. Renames are
// not detected (--no-renames): whether anything changed does not depend on
// it, and in a partial clone it would read objects that are not there.
//
// Nothing is written into the inspected repository: the index is read
// without a lock and never refreshed.
func (s session) status(ctx context.Context, loc location, cfg []configEntry) (bool, error) {
	dir, err := os.MkdirTemp("", "runtimetruth-git-")
	if err != nil {
		return false, fmt.Errorf("private git directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	var args []string
	format := ""
	for _, e := range cfg {
		k := strings.ToLower(e.key)
		switch {
		case k == keyObjectFormat:
			format = e.value
		case carried[k] && e.set:
			args = append(args, "-c", k+"="+e.value)
		case carried[k]:
			args = append(args, "-c", k)
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	switch format {
	case "", "sha1":
	case "sha256":
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = sha256\n"
	default:
		return false, fmt.Errorf("unsupported object format %q", format)
	}
	if err := writePrivateDir(dir, loc, config); err != nil {
		return false, fmt.Errorf("private git directory: %w", err)
	}

	var dirty nonEmpty
	cmd := s.command(loc.root, append(args, "status", "--porcelain=v1", "--untracked-files=normal", "--ignore-submodules=dirty", "--no-renames"))
	cmd.Env = environ(
		"GIT_DIR="+dir,
		"GIT_WORK_TREE="+loc.root,
		"GIT_INDEX_FILE="+filepath.Join(loc.gitDir, "index"),
		"GIT_OBJECT_DIRECTORY="+filepath.Join(loc.commonDir, "objects"),
	)
	cmd.Stdout = &dirty
	_, err = cmd.Run(ctx)
	return bool(dirty), s.c.classify(err)
}

// writePrivateDir lays out the private repository directory of status.
// info/exclude and info/attributes link to the inspected repository's, so
// its ignore rules and text attributes hold; git follows the links only to
// read them.
func writePrivateDir(dir string, loc location, config string) error {
	for _, d := range []string{"refs", "info"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte(loc.head+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o600); err != nil {
		return err
	}
	for _, name := range []string{"exclude", "attributes"} {
		if err := os.Symlink(filepath.Join(loc.commonDir, "info", name), filepath.Join(dir, "info", name)); err != nil {
			return err
		}
	}
	return nil
}

// operatorTrust is the safe.directory list of the collector's own system
// and global configuration, in git's order, as -c options. git ignores
// both files here (see environ), so an operator who trusted a repository
// owned by another user with `git config --global --add safe.directory`
// would otherwise be refused. A repository cannot add to the list: git
// reads safe.directory from no repository file.
func (c Collector) operatorTrust(ctx context.Context) ([]string, error) {
	var args []string
	for _, scope := range []string{"--system", "--global"} {
		out, err := subproc.Command{
			Path:    c.binary(),
			Args:    []string{"-C", "/", "config", scope, "-z", "--get-all", "safe.directory"},
			Env:     operatorEnv(),
			Label:   "git config " + scope + " --get-all safe.directory",
			Timeout: c.Timeout,
		}.Run(ctx)
		var exitErr *subproc.ExitError
		if errors.As(err, &exitErr) && exitErr.Status == 1 {
			continue // none set
		}
		if err != nil {
			return nil, c.classify(err)
		}
		if len(out) == 0 {
			continue
		}
		// Each value ends with NUL; an empty one resets the list.
		for v := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
			args = append(args, "-c", "safe.directory="+v)
		}
	}
	return args, nil
}

// operatorEnv is the collector's environment for reading its own git
// configuration.
func operatorEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "GIT_") || k == "GIT_CONFIG_GLOBAL" || k == "GIT_CONFIG_NOSYSTEM" || k == "GIT_CONFIG_SYSTEM" || k == "GIT_EXEC_PATH" {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}
