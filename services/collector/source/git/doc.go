// Package git collects live evidence about a git work tree by running the git
// executable, the way RuntimeTruth does.
//
// Collect returns two records. git.repository has exactly RuntimeTruth's keys
// (repository_root, head_commit, branch, detached, dirty), so baselines taken
// by either tool compare. git.remotes, an extension kind, lists the
// configured remote URLs with credentials removed (see RedactURL).
//
// # Running nothing the repository names
//
// The collector may run as root on checkouts other users can write, and a
// repository's configuration (.git/config, the files it includes,
// $GIT_DIR/info/attributes with .gitattributes) can name programs git runs:
// core.fsmonitor, filter drivers (clean, smudge, process), hooks
// (core.hooksPath), pagers, external diffs, ssh commands and credential
// helpers (a partial clone fetches missing objects). Reading git state runs
// none of them:
//
//   - every git runs in a minimal environment: no system or global
//     configuration (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null),
//     HOME=/dev/null, no system attributes, GIT_TERMINAL_PROMPT=0,
//     GIT_OPTIONAL_LOCKS=0, LC_ALL=C, and of the collector's environment
//     only PATH, GIT_EXEC_PATH and SUDO_UID, so GIT_DIR and friends do not
//     redirect what is inspected;
//   - every git gets --no-pager, --no-optional-locks and -c
//     core.fsmonitor=false, core.hooksPath=/dev/null, protocol.allow=never
//     and core.pager=cat, which win over any file git reads;
//   - rev-parse, symbolic-ref and config (the only commands run on the
//     repository's own configuration) reach no filter, hook, diff, pager or
//     transport;
//   - status, which would run filters on files whose stat data is stale
//     (and filters cannot be disabled by a name the repository can change
//     meanwhile), runs against a private repository directory made for the
//     run, pointed at the repository's index, objects and work tree: git
//     there reads no configuration of the repository except the settings
//     that change what status reports (core.fileMode, core.autocrlf,
//     core.excludesFile, ...), which are passed on the command line.
//     Submodules are compared by their checked-out commit only
//     (--ignore-submodules=dirty): looking inside one would run git under
//     its own configuration. Renames are not detected (--no-renames).
//
// Nothing is written into the inspected repository: status reads the index
// without a lock and never refreshes it.
//
// # Repositories owned by another user
//
// git refuses to read a repository owned by another user ("detected dubious
// ownership"). A collector running as root for a service's work tree hits
// this. The collector does not pass -c safe.directory=* to get past it.
// Collect fails with ErrDubiousOwnership instead, and the operator decides:
// run the collector as the repository's owner, or trust the path explicitly
// with `git config --global --add safe.directory <path>` for the user the
// collector runs as. That list (system and global configuration, read
// apart from the minimal environment) is the only safe.directory the
// collector honours; a repository cannot trust itself.
package git
