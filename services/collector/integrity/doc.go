// Package integrity is the engine behind installed-code integrity checks:
// it re-hashes the files a package manager installed and compares them with
// the hashes known to be good (pip's RECORD, a manifest shipped in an npm
// package, or a snapshot taken on first check).
//
// The language-specific packages (integrity/python, integrity/node) decide
// which files to check and what they should hash to; this package provides
// what they share:
//
//   - Hasher, a pool of workers that hash a slice of Files in place, each
//     file read once with a per-worker buffer and hash state, so that the
//     per-file path does not allocate, and a file whose size is not its
//     known-good size (File.SetWantSize) not read at all. Confined
//     (Hasher.Root, one root for all files, or Hasher.BeneathDir, each
//     file beneath its own Dir), a file is opened beneath its root
//     (openat2 RESOLVE_BENEATH, or a component-wise walk), never through
//     a final symbolic link, so nothing outside the root is ever read. A
//     stat-cache hit takes the file's status by its path (one fstatat, no
//     read): it can match only an entry the hasher wrote from a file it
//     opened beneath the root, the same inode unchanged, and the periodic
//     full re-hash resolves every path beneath the root again;
//   - Cache, a stat cache keyed on (device, inode, size, mtime, ctime,
//     mode) that lets a check skip re-hashing unchanged files, with a full
//     re-hash forced every FullEvery checks and on demand. The cache file
//     is read whole and decoded in one pass (its strings left in the bytes
//     read), and a cached baseline's files are checked without being
//     copied into Files (List);
//   - Store, the state directory: stat caches and first-run snapshots
//     (package modified keeps the last change reported per package there).
//     A Store also keeps each scope's last committed cache in memory and
//     hands it to the next check while the file on disk is unchanged, so a
//     long-lived process reads a cache file once, not on every check;
//   - the result model (Result, Change, Status, Source, Baseline), the
//     change digest used to report each distinct change once, and the
//     Allowlist of expected changes;
//   - Data, which flattens results into evidence data.
//
// # State directory layout
//
//	<dir>/lock                  flock(2) taken around read-modify-write
//	<dir>/cache/<key>.bin       stat cache of one scope (binary, checksummed)
//	<dir>/cache/<key>.count     checks since the scope's last full re-hash
//	<dir>/baseline/<key>.json   first-run snapshot of one package directory
//	<dir>/last-reported.json    last change reported per package (package modified)
//	<dir>/audit.jsonl           runnable.modified events of the CLI (package modified)
//
// <key> is the first 32 hex digits of SHA-256 over the scope or directory
// path. Every file is written to a temporary file in the same directory,
// fsynced and renamed over the old one (the .count file is not fsynced: a
// lost count only brings the next full re-hash forward), so a crash leaves
// either the old or the new version. A cache file is read whole, at most
// 256 MiB, a regular file not reached through a symbolic link, and checked
// as it is decoded (checksum, version, every record in bounds, order); one
// that fails any of this, whatever damaged it, is discarded (the next
// check hashes everything). A check works on the cache as it read it, so
// the file changing afterwards does not affect it.
//
// # Cache file format
//
// One encoder (cacheFile.encode) and one decoder (decodeCacheFile), which
// reads the whole file. Little-endian, version 3: the magic "RTIC",
// uint32 version (a file of any other version is discarded as damaged),
// uint64 entry count, then per entry (in strictly increasing byte order of
// path, which lookups rely on: a file out of order is damaged): the path
// (uint32 length and bytes), the status it was hashed under (uint64 dev,
// inode, size, mtime ns, ctime ns; uint32 mode), uint64 generation (the
// check that last saw it), uint8 algorithm, uint8 digest length and the
// digest. Then uint64 list count and per parsed baseline (a RECORD, in
// strictly increasing byte order of path): its path, its status,
// generation, uint32 extra count, uint32 file count and per file the
// index of its entry (or 0xffffffff and the path), the known-good digest
// (algorithm, length, bytes), uint64 known-good size plus one (0 when
// unknown) and its label (uint16 offset into the path, or 0xffff and the
// label). Last, the CRC-32C (Castagnoli) of everything before it, which
// detects a torn or damaged file. Nothing may follow, and each count is
// checked against the bytes left before anything is allocated for it.
package integrity
