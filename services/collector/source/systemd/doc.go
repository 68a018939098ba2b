// Package systemd collects live evidence about a systemd unit with
// `systemctl show`, exactly as RuntimeTruth does.
//
// Only an allowlist of properties is requested (see Properties); Environment
// and ExecStart, which routinely carry secrets, are never requested, and any
// property systemctl prints that is not on the allowlist is dropped by Parse.
// Unit names are validated before systemctl runs (ValidateUnit), so a name
// can never be read as an option or a path.
//
// # Conversions
//
// MainPID, ExecMainPID, ExecMainCode, ExecMainStatus,
// ExecMainStartTimestampMonotonic and NRestarts become integers and
// DynamicUser (yes/no) a boolean; everything else stays a string, the empty
// string included (drop_in_paths is "" for a unit without drop-ins). An
// integer or boolean property that systemctl prints with an empty value
// becomes null: systemd has no value to report, and inventing 0 would be
// evidence nobody observed (main_pid 0 means "no main process", which is a
// claim). A non-empty value that does not convert is an error.
//
// Collect first checks that systemd is running (/run/systemd/system exists,
// as sd_booted(3) does) so that a host without systemd gets
// ErrSystemdUnavailable rather than a confusing systemctl failure.
package systemd
