// Package process collects live evidence about a running Linux process from
// procfs.
//
// Collect returns two records. linux.process has exactly RuntimeTruth's keys
// (pid, cwd, executable) with the values readlink gives for /proc/<pid>/cwd
// and /proc/<pid>/exe, verbatim: a binary replaced or removed on disk since
// the process started reads as "/usr/bin/agent (deleted)", as it does for
// RuntimeTruth. linux.process_identity, an extension kind, pins down which
// process incarnation was observed and which bytes it is running:
//
//   - process_key "<boot_id>:<pid>:<start_ticks>" is unique per process
//     incarnation, so a restart is visible even when the pid is reused;
//   - executable_sha256 hashes /proc/<pid>/exe, which opens the image the
//     process is running even after the file on disk was replaced or
//     deleted ("unavailable" when it cannot be read);
//   - start_time is the boot time from /proc/stat plus the start ticks at
//     USER_HZ=100 (the kernel's fixed user-space tick rate), in UTC. The
//     kernel derives the boot time from the wall clock, so a stepped clock
//     can move start_time by a second; process_key is the stable identity.
//
// The collector never reads /proc/<pid>/environ or /proc/<pid>/cmdline:
// both routinely hold secrets. It reads stat, status, cwd and exe.
//
// Paths are as the inspected process sees them; for a process in another
// mount namespace (a container) they name files inside that namespace.
package process
