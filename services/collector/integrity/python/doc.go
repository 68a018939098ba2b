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
// for the first). A RECORD path that leads outside the environment's
// prefix, after cleaning, makes that distribution an error and is never
// opened. New files dropped into a package folder are not reported: RECORD
// only lists what was installed.
//
// # Where the code came from (PEP 610)
//
// No direct_url.json means an index install (Source "index"). dir_info
// with editable set is an editable install: skipped, shown as nothing. Any
// other direct URL — a local folder, a local or remote wheel or sdist, a
// VCS URL — is a "local build", checked like an index install. A
// direct_url.json that cannot be read also counts as a local build.
//
// # The marker environment
//
// Markers are evaluated for the environment's own interpreter, which Open
// runs once as `python -I -S -c <script>` (isolated, without site, so no
// .pth file of the checked environment executes) to print
// platform.python_version(), sys.platform and the other PEP 508 variables.
// With OpenOptions.NoExec, or when that fails, they are derived: the
// Python version from pyvenv.cfg (or the lib/pythonX.Y path, with micro
// version 0), CPython, and the host's OS, machine and uname.
//
// Evidence turns a report into the python.distributions record.
package python
