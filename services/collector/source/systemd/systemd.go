package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/subproc"
)

// Evidence kind and provenance of the record Collect returns.
const (
	// Kind is RuntimeTruth's systemd.unit kind.
	Kind = "systemd.unit"
	// CollectorName is the record's source.collector.
	CollectorName = "systemd"
	// Method is the record's source.method.
	Method = "systemctl show"
	// DefaultRunDir exists exactly when systemd is the running init system.
	DefaultRunDir = "/run/systemd/system"
)

type valueType int

const (
	typeString valueType = iota
	typeInt
	typeBool
)

// property is one allowlisted systemctl property and its evidence key.
type property struct {
	name string
	key  string
	typ  valueType
}

// allowlist is RuntimeTruth's property allowlist, in its order.
var allowlist = []property{
	{"Id", "unit_id", typeString},
	{"LoadState", "load_state", typeString},
	{"ActiveState", "active_state", typeString},
	{"SubState", "sub_state", typeString},
	{"UnitFileState", "unit_file_state", typeString},
	{"FragmentPath", "fragment_path", typeString},
	{"DropInPaths", "drop_in_paths", typeString},
	{"MainPID", "main_pid", typeInt},
	{"ExecMainPID", "exec_main_pid", typeInt},
	{"ExecMainCode", "exec_main_code", typeInt},
	{"ExecMainStatus", "exec_main_status", typeInt},
	{"ExecMainStartTimestampMonotonic", "exec_main_start_timestamp_monotonic", typeInt},
	{"NRestarts", "restart_count", typeInt},
	{"User", "user", typeString},
	{"Group", "group", typeString},
	{"DynamicUser", "dynamic_user", typeBool},
	{"WorkingDirectory", "working_directory", typeString},
	{"ControlGroup", "control_group", typeString},
}

// maxSafeInteger is the largest integer schema v1 data may hold (2^53-1).
const maxSafeInteger = 1<<53 - 1

var unitPattern = regexp.MustCompile(`^[-A-Za-z0-9_.@:]+$`)

// Properties returns the systemctl properties Collect requests, in order.
func Properties() []string {
	names := make([]string, len(allowlist))
	for i, p := range allowlist {
		names[i] = p.name
	}
	return names
}

// ValidateUnit checks a unit name as RuntimeTruth does: non-empty, not
// starting with '-', and matching ^[-A-Za-z0-9_.@:]+$.
func ValidateUnit(unit string) error {
	switch {
	case unit == "":
		return fmt.Errorf("%w: empty", ErrInvalidUnit)
	case strings.HasPrefix(unit, "-"):
		return fmt.Errorf("%w %q: must not start with '-'", ErrInvalidUnit, unit)
	case !unitPattern.MatchString(unit):
		return fmt.Errorf("%w %q: must match %s", ErrInvalidUnit, unit, unitPattern)
	}
	return nil
}

// Parse converts `systemctl show` output into systemd.unit data: allowlisted
// properties only, under their evidence keys, with integers and booleans
// converted (see the package documentation). Blank lines are skipped; a line
// without '=' or a repeated allowlisted property is an error, and unit_id
// must be present and non-empty. Errors name the line number, never the
// line, which may hold a secret.
func Parse(output []byte) (snapshot.Data, error) {
	byName := make(map[string]property, len(allowlist))
	for _, p := range allowlist {
		byName[p.name] = p
	}
	data := make(snapshot.Data, len(allowlist))
	for n, line := range bytes.Split(output, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		name, value, ok := strings.Cut(string(line), "=")
		if !ok {
			return nil, fmt.Errorf("%w: line %d has no '='", ErrMalformedOutput, n+1)
		}
		p, ok := byName[name]
		if !ok {
			continue
		}
		if _, dup := data[p.key]; dup {
			return nil, fmt.Errorf("%w: line %d repeats %s", ErrMalformedOutput, n+1, name)
		}
		v, err := convert(p, value)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrMalformedOutput, n+1, err)
		}
		data[p.key] = v
	}
	if id, _ := data["unit_id"].Str(); id == "" {
		return nil, fmt.Errorf("%w: no Id", ErrMalformedOutput)
	}
	return data, nil
}

func convert(p property, value string) (snapshot.Value, error) {
	if p.typ != typeString && value == "" {
		return snapshot.Null(), nil
	}
	switch p.typ {
	case typeInt:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
			return snapshot.Value{}, fmt.Errorf("%s=%q is not an integer within ±(2^53-1)", p.name, value)
		}
		return snapshot.Int(n), nil
	case typeBool:
		switch value {
		case "yes":
			return snapshot.Bool(true), nil
		case "no":
			return snapshot.Bool(false), nil
		}
		return snapshot.Value{}, fmt.Errorf("%s=%q is not yes or no", p.name, value)
	}
	return snapshot.String(value), nil
}

// Collector runs systemctl. The zero value runs "systemctl" from PATH and
// checks DefaultRunDir.
type Collector struct {
	// Systemctl is the systemctl executable: a name looked up in PATH or a
	// path. Empty means "systemctl".
	Systemctl string
	// RunDir is the directory whose existence means systemd is running;
	// empty means DefaultRunDir.
	RunDir string
	// Timeout bounds the systemctl run; 0 means subproc.DefaultTimeout.
	Timeout time.Duration
}

// Collect returns the systemd.unit record of unit, using the zero
// Collector.
func Collect(ctx context.Context, unit string) (snapshot.Record, error) {
	return Collector{}.Collect(ctx, unit)
}

// Args returns the systemctl arguments Collect runs for unit.
func Args(unit string) []string {
	return []string{"show", "--no-pager", "--property=" + strings.Join(Properties(), ","), unit}
}

// Collect validates unit, checks that systemd is running, runs
// `systemctl show --no-pager --property=<allowlist> <unit>` and returns the
// parsed systemd.unit record. The unit_id in the record is systemd's
// resolved Id, which differs from unit for an alias.
func (c Collector) Collect(ctx context.Context, unit string) (snapshot.Record, error) {
	if err := ValidateUnit(unit); err != nil {
		return snapshot.Record{}, err
	}
	runDir := c.RunDir
	if runDir == "" {
		runDir = DefaultRunDir
	}
	if fi, err := os.Stat(runDir); err != nil || !fi.IsDir() {
		return snapshot.Record{}, fmt.Errorf("%w (no %s); cannot inspect unit %s", ErrSystemdUnavailable, runDir, unit)
	}
	bin := c.Systemctl
	if bin == "" {
		bin = "systemctl"
	}
	out, err := subproc.Command{
		Path:    bin,
		Args:    Args(unit),
		Label:   "systemctl show",
		Timeout: c.Timeout,
	}.Run(ctx)
	if errors.Is(err, subproc.ErrNotFound) {
		err = fmt.Errorf("%w: %w", ErrSystemctlNotFound, err)
	}
	if err != nil {
		return snapshot.Record{}, fmt.Errorf("collect systemd unit %s: %w", unit, err)
	}
	data, err := Parse(out)
	if err != nil {
		return snapshot.Record{}, fmt.Errorf("collect systemd unit %s: %w", unit, err)
	}
	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   Kind,
		Source: snapshot.Source{Collector: CollectorName, Method: Method},
		Data:   data,
	}, nil
}
