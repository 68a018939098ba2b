// Package python checks the installed code of a Python environment against
// pip's records: every file a distribution's .dist-info/RECORD lists with
// a hash is hashed again and compared.
//
// # What is checked
//
// Open takes a virtual environment (a folder with pyvenv.cfg) or a
// site-packages directory. Verify checks the distributions Options select:
// named roots plus their direct dependencies (METADATA Requires-Dist whose
// PEP 508 marker holds for the target interpreter, with no extra
// requested), or every distribution with All.
//
// RECORD rows without a hash (RECORD itself, byte-code) are counted as
// unchecked. md5 and sha1 hashes make the RECORD invalid; sha224, sha256,
// sha384, sha512, sha3_* and blake2b/blake2s are supported. A listed file
// that is missing, replaced by a symbolic link (never followed) or by
// something other than a regular file is reported as modified ("missing"
// for the first). A file whose size is not the one its RECORD row lists is
// reported as modified (observed "size:<bytes>") without being read. A
// RECORD path that leads outside the environment's prefix, after cleaning,
// makes that distribution an error and is never opened. New files dropped
// into a package folder are not reported: RECORD only lists what was
// installed.
//
// # Reading an environment others can write
//
// The environment is inspected, never run: its interpreter is not
// executed, no .pth file or sitecustomize is imported. Every file read
// from it (pyvenv.cfg, METADATA or PKG-INFO, direct_url.json, RECORD,
// entry_points.txt) is read as a regular file only (a FIFO or device is
// refused without blocking), never through a final symbolic link, beneath
// its site-packages directory (a .dist-info reached through a link that
// leads out of it is refused), and within a size cap (pyvenv.cfg and
// direct_url.json 64 KiB, METADATA and entry_points.txt 1 MiB, RECORD
// 64 MiB), refused unread when over it. A metadata file that exists but
// cannot be read so makes its distribution an error naming the file; a
// pyvenv.cfg that cannot be read makes Open fail.
//
// # Where the code came from (PEP 610)
//
// No direct_url.json means an index install (Source "index"). dir_info
// with editable set is an editable install: skipped, shown as nothing. Any
// other direct URL — a local folder, a local or remote wheel or sdist, a
// VCS URL — is a "local build", checked like an index install. A
// direct_url.json that does not parse also counts as a local build.
//
// # The marker environment
//
// Markers are evaluated for the environment's interpreter, whose marker
// variables Open derives from the environment's files and this host (see
// Open): the Python version from pyvenv.cfg (or python_version alone from
// the lib/pythonX.Y folder), the implementation from pyvenv.cfg or the
// lib/ folder (CPython unless they say otherwise), and the OS, machine and
// uname of this host. A variable they do not give is unknown, never
// guessed: a dependency whose marker depends on one (or compares in a way
// PEP 508 leaves undefined) is reported as skipped with the reason "not
// evaluated: ...", naming the requirement, the variables and why they are
// unknown, and is not checked, unless a root or another marker puts it in
// scope.
// A marker that does not depend on the unknown variable (`python_version
// < "3" or sys_platform == "linux"` on Linux) is evaluated.
//
// Evidence turns a report into the python.distributions record.
package python
