// Package node checks the installed code of a Node project: the project
// folder as deployed and each of its direct dependencies in node_modules
// (or every package there, nested ones included, with Options.All).
//
// npm records no per-file hashes, so the known-good hashes come from, in
// order:
//
//  1. a manifest shipped in the package: runtimetruth-files.json, written
//     by WriteManifest (`runtimetruth manifest`) over the files npm pack
//     would publish (PackList), or runspec's runspec-files.json (see
//     Manifest for both formats);
//  2. a snapshot taken on the first check that asks for one
//     (Options.TakeSnapshots), kept in the integrity.Store, retaken with
//     Options.Resnapshot (`--snapshot`).
//
// A package with neither is skipped with baseline "none". Listed files
// that changed or disappeared are reported as modified or missing, and
// any other file in the package folder as added. Symbolic links are
// recorded by target: in a snapshot, and in the manifest's optional
// "links" section; a project folder whose manifest has no such section
// (older manifests, runspec-files.json) has its links ignored, and a
// dependency's listed links are never missing (npm installs none). See
// Manifest.
//
// Development setups are left alone: nothing is checked when the project
// folder is inside a git checkout (.git at or above it); a dependency
// installed as a symbolic link (npm link, a folder dependency) is skipped,
// and so is a dependency folder with its own .git. A dependency installed
// from a tarball, a local folder or git (lockfile "resolved", or an old
// npm's package.json "_resolved") is a "local build".
//
// The tree is read as someone else may have written it (the collector
// runs as root): every file a manifest or snapshot lists is opened
// beneath its package folder, so that one reached through a symbolic
// link out of the folder (lib -> /etc, lib/shadow listed; or into
// another package) is an error for the package (ErrEscape) and is never
// read; package.json, the lockfiles, the manifests and the ignore files
// are read beneath their folder, never through a final symbolic link,
// only when they are regular files (a FIFO or device is refused without
// waiting on it), and only up to a size cap per kind. A dependency name
// that would name a folder outside node_modules is an error (ErrBadName).
// A manifest entry that records a size is compared by size first.
//
// The project snapshot leaves out logs/, bin/, node_modules/ and
// package-lock.json at the top and every dot-file and dot-folder (such as
// .runspec_env). Evidence turns a report into the node.packages record.
package node
