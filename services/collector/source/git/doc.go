// Package git collects live evidence about a git work tree by running the git
// executable, the way RuntimeTruth does.
//
// Collect returns two records. git.repository has exactly RuntimeTruth's keys
// (repository_root, head_commit, branch, detached, dirty), so baselines taken
// by either tool compare. git.remotes, an extension kind, lists the
// configured remote URLs with credentials removed (see RedactURL).
//
// # Which configuration git uses
//
// git runs with the collector's own environment and configuration (system
// and global config are respected), with these exceptions:
//   - GIT_OPTIONAL_LOCKS=0, so `git status` never rewrites the index of the
//     inspected repository;
//   - LC_ALL=C, so git's messages are the ones this package classifies;
//   - the repository-local variables git itself clears for submodules
//     (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...) are removed, so the path
//     asked about is the repository inspected even when the collector runs
//     inside a git hook;
//   - -c core.fsmonitor=false, so inspecting a repository never starts a
//     file-system monitor daemon or runs an fsmonitor hook.
//
// # Repositories owned by another user
//
// git refuses to read a repository owned by another user ("detected dubious
// ownership") because the repository's own config can make git run
// arbitrary commands (filters, fsmonitor) as the inspecting user. A
// collector running as root for a service's work tree hits this. The
// collector does not pass -c safe.directory=* to get past it: doing so would
// let anyone who can write that repository's .git/config run code as root.
// Collect fails with ErrDubiousOwnership instead, and the operator decides:
// run the collector as the repository's owner, or trust the path explicitly
// with `git config --global --add safe.directory <path>` for the user the
// collector runs as.
package git
