// Package inspect composes the evidence sources into snapshots, the way
// RuntimeTruth's inspect command does.
//
//   - Git: target git.repository (the repository root); records
//     git.repository, git.remotes.
//   - Process: target linux.process (the executable path, without the
//     kernel's " (deleted)" suffix); records linux.process,
//     linux.process_identity, then the git records of the process's working
//     directory when it is inside a work tree.
//   - Systemd: target systemd.unit (the resolved unit Id); records
//     systemd.unit and, when the unit has a main process, that process's
//     records and the git records of its working directory.
//
// Records follow RuntimeTruth's order (systemd.unit, linux.process,
// git.repository) with each extension kind right after the record it
// extends. Options.SeedOnly drops the extension kinds, so the snapshot holds
// exactly what RuntimeTruth emits for the same target.
//
// A working directory that is not in a git work tree contributes no git
// records (git.ErrNotRepository is not an error here), and neither does one
// that was deleted while the process runs. Every other collection failure
// fails the inspection: evidence is never silently partial. In particular a
// repository git refuses to read because another user owns it
// (git.ErrDubiousOwnership) is an error, not a skip.
package inspect
