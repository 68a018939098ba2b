package systemd_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func TestParseCapturedOutput(t *testing.T) {
	tests := []struct {
		file string
		want snapshot.Data
	}{
		{
			file: "agent-worker.show",
			want: snapshot.Data{
				"active_state":                        snapshot.String("active"),
				"control_group":                       snapshot.String("/system.slice/agent-worker.service"),
				"drop_in_paths":                       snapshot.String(""),
				"dynamic_user":                        snapshot.Bool(false),
				"exec_main_code":                      snapshot.Int(0),
				"exec_main_pid":                       snapshot.Int(3036),
				"exec_main_start_timestamp_monotonic": snapshot.Int(18023411),
				"exec_main_status":                    snapshot.Int(0),
				"fragment_path":                       snapshot.String("/etc/systemd/system/agent-worker.service"),
				"group":                               snapshot.String("agent"),
				"load_state":                          snapshot.String("loaded"),
				"main_pid":                            snapshot.Int(3036),
				"restart_count":                       snapshot.Int(0),
				"sub_state":                           snapshot.String("running"),
				"unit_file_state":                     snapshot.String("enabled"),
				"unit_id":                             snapshot.String("agent-worker.service"),
				"user":                                snapshot.String("agent"),
				"working_directory":                   snapshot.String("/srv/agent"),
			},
		},
		{
			file: "stopped.show",
			want: snapshot.Data{
				"active_state":                        snapshot.String("inactive"),
				"control_group":                       snapshot.String(""),
				"drop_in_paths":                       snapshot.String(""),
				"dynamic_user":                        snapshot.Bool(false),
				"exec_main_code":                      snapshot.Int(0),
				"exec_main_pid":                       snapshot.Int(0),
				"exec_main_start_timestamp_monotonic": snapshot.Int(0),
				"exec_main_status":                    snapshot.Int(0),
				"fragment_path":                       snapshot.String("/usr/lib/systemd/system/backup.service"),
				"group":                               snapshot.String(""),
				"load_state":                          snapshot.String("loaded"),
				"main_pid":                            snapshot.Int(0),
				"restart_count":                       snapshot.Int(0),
				"sub_state":                           snapshot.String("dead"),
				"unit_file_state":                     snapshot.String("static"),
				"unit_id":                             snapshot.String("backup.service"),
				"user":                                snapshot.String(""),
				"working_directory":                   snapshot.String(""),
			},
		},
		{
			file: "getty.show",
			want: snapshot.Data{
				"active_state":                        snapshot.String("active"),
				"control_group":                       snapshot.String("/system.slice/system-getty.slice/getty@tty1.service"),
				"drop_in_paths":                       snapshot.String("/usr/lib/systemd/system/getty@.service.d/override.conf /etc/systemd/system/getty@tty1.service.d/local.conf"),
				"dynamic_user":                        snapshot.Bool(true),
				"exec_main_code":                      snapshot.Int(0),
				"exec_main_pid":                       snapshot.Int(812),
				"exec_main_start_timestamp_monotonic": snapshot.Int(4512876),
				"exec_main_status":                    snapshot.Int(0),
				"fragment_path":                       snapshot.String("/usr/lib/systemd/system/getty@.service"),
				"group":                               snapshot.String(""),
				"load_state":                          snapshot.String("loaded"),
				"main_pid":                            snapshot.Int(812),
				"restart_count":                       snapshot.Int(2),
				"sub_state":                           snapshot.String("running"),
				"unit_file_state":                     snapshot.String("enabled"),
				"unit_id":                             snapshot.String("getty@tty1.service"),
				"user":                                snapshot.String(""),
				"working_directory":                   snapshot.String(""),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := systemd.Parse(readTestdata(t, tc.file))
			require.NoError(t, err)
			assert.Equal(t, tc.want, data)
			for k, v := range data {
				assert.NotContains(t, v.String(), "DO-NOT-CAPTURE", k)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	tests := []struct {
		name    string
		output  string
		want    snapshot.Data
		wantErr string
	}{
		{
			name:   "unknown keys ignored, blank lines and CRLF accepted",
			output: "Id=a.service\r\n\nEnvironment=TOKEN=secret\nExecStart={ path=/bin/a }\nSomethingNew=1\n",
			want:   snapshot.Data{"unit_id": snapshot.String("a.service")},
		},
		{
			name:   "value keeps '=' and spaces",
			output: "Id=a.service\nWorkingDirectory= /srv/a=b \n",
			want:   snapshot.Data{"unit_id": snapshot.String("a.service"), "working_directory": snapshot.String(" /srv/a=b ")},
		},
		{
			name:   "empty integer and boolean are null",
			output: "Id=a.service\nMainPID=\nNRestarts=\nDynamicUser=\n",
			want: snapshot.Data{
				"unit_id":       snapshot.String("a.service"),
				"main_pid":      snapshot.Null(),
				"restart_count": snapshot.Null(),
				"dynamic_user":  snapshot.Null(),
			},
		},
		{
			name:   "negative exit status",
			output: "Id=a.service\nExecMainStatus=-1\nDynamicUser=yes\n",
			want: snapshot.Data{
				"unit_id":          snapshot.String("a.service"),
				"exec_main_status": snapshot.Int(-1),
				"dynamic_user":     snapshot.Bool(true),
			},
		},
		{name: "line without '='", output: "Id=a.service\nOPENAI_API_KEY sk-secret\n", wantErr: "malformed systemctl show output: line 2 has no '='"},
		{name: "missing Id", output: "MainPID=1\n", wantErr: "malformed systemctl show output: no Id"},
		{name: "empty Id", output: "Id=\n", wantErr: "no Id"},
		{name: "empty output", output: "", wantErr: "no Id"},
		{name: "non-numeric integer", output: "Id=a.service\nMainPID=abc\n", wantErr: `line 2: MainPID="abc" is not an integer`},
		{name: "integer beyond 2^53", output: "Id=a.service\nExecMainStartTimestampMonotonic=18446744073709551615\n", wantErr: "is not an integer within"},
		{name: "bad boolean", output: "Id=a.service\nDynamicUser=true\n", wantErr: `DynamicUser="true" is not yes or no`},
		{name: "repeated property", output: "Id=a.service\nId=b.service\n", wantErr: "line 2 repeats Id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := systemd.Parse([]byte(tc.output))
			if tc.wantErr != "" {
				require.ErrorIs(t, err, systemd.ErrMalformedOutput)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.NotContains(t, err.Error(), "secret", "errors never quote unknown lines")
				assert.Nil(t, data)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, data)
		})
	}
}

func TestValidateUnit(t *testing.T) {
	tests := []struct {
		unit  string
		valid bool
	}{
		{unit: "", valid: false},
		{unit: "-not-a-unit", valid: false},
		{unit: "agent service", valid: false},
		{unit: "../../agent.service", valid: false},
		{unit: "agent.service;reboot", valid: false},
		{unit: "agent.service\n", valid: false},
		{unit: "agent.service", valid: true},
		{unit: "getty@tty1.service", valid: true},
		{unit: "dev-disk-by\\x2duuid.device", valid: false},
		{unit: "sys-devices-platform-serial8250-tty-ttyS0.device", valid: true},
		{unit: "user@1000.service", valid: true},
		{unit: "agent", valid: true},
	}
	for _, tc := range tests {
		t.Run(tc.unit, func(t *testing.T) {
			err := systemd.ValidateUnit(tc.unit)
			if tc.valid {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, systemd.ErrInvalidUnit)
		})
	}
}

func TestPropertiesNeverIncludeSecrets(t *testing.T) {
	props := systemd.Properties()
	assert.Equal(t, []string{
		"Id", "LoadState", "ActiveState", "SubState", "UnitFileState", "FragmentPath",
		"DropInPaths", "MainPID", "ExecMainPID", "ExecMainCode", "ExecMainStatus",
		"ExecMainStartTimestampMonotonic", "NRestarts", "User", "Group", "DynamicUser",
		"WorkingDirectory", "ControlGroup",
	}, props)
	for _, arg := range systemd.Args("agent.service") {
		assert.NotContains(t, arg, "Environment")
		assert.NotContains(t, arg, "ExecStart")
	}
}

// fakeSystemctl writes an executable that records its arguments, one per
// line, to the returned file, prints stdout, and exits with code.
func fakeSystemctl(t *testing.T, stdout, stderr string, code int) (bin, argv string) {
	t.Helper()
	dir := t.TempDir()
	argv = filepath.Join(dir, "argv")
	out := filepath.Join(dir, "stdout")
	errOut := filepath.Join(dir, "stderr")
	require.NoError(t, os.WriteFile(out, []byte(stdout), 0o644))
	require.NoError(t, os.WriteFile(errOut, []byte(stderr), 0o644))
	bin = filepath.Join(dir, "systemctl")
	script := "#!/bin/sh\n" +
		"for a in \"$@\"; do printf '%s\\n' \"$a\" >> '" + argv + "'; done\n" +
		"cat '" + out + "'\ncat '" + errOut + "' >&2\nexit " + strconv.Itoa(code) + "\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, argv
}

func TestCollectWithFakeSystemctl(t *testing.T) {
	bin, argv := fakeSystemctl(t, string(readTestdata(t, "agent-worker.show")), "", 0)
	c := systemd.Collector{Systemctl: bin, RunDir: t.TempDir()}

	record, err := c.Collect(context.Background(), "agent-worker.service")
	require.NoError(t, err)
	assert.Equal(t, snapshot.Live, record.Plane)
	assert.Equal(t, "systemd.unit", record.Kind)
	assert.Equal(t, snapshot.Source{Collector: "systemd", Method: "systemctl show"}, record.Source)
	assert.Equal(t, snapshot.Int(3036), record.Data["main_pid"])

	got, err := os.ReadFile(argv)
	require.NoError(t, err)
	args := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	assert.Equal(t, []string{
		"show", "--no-pager",
		"--property=Id,LoadState,ActiveState,SubState,UnitFileState,FragmentPath,DropInPaths,MainPID,ExecMainPID,ExecMainCode,ExecMainStatus,ExecMainStartTimestampMonotonic,NRestarts,User,Group,DynamicUser,WorkingDirectory,ControlGroup",
		"agent-worker.service",
	}, args)
	for _, a := range args {
		assert.NotContains(t, a, "Environment")
		assert.NotContains(t, a, "ExecStart")
	}
}

func TestCollectErrors(t *testing.T) {
	running := t.TempDir()
	failing, _ := fakeSystemctl(t, "", "Failed to get properties: Unit agent.service not loaded.\n", 4)
	garbage, _ := fakeSystemctl(t, "Id=agent.service\nnot a property\n", "", 0)
	slow := filepath.Join(t.TempDir(), "systemctl")
	require.NoError(t, os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755))

	tests := []struct {
		name      string
		collector systemd.Collector
		unit      string
		wantErr   error
		wantMsg   string
	}{
		{
			name:      "nonzero exit",
			collector: systemd.Collector{Systemctl: failing, RunDir: running},
			unit:      "agent.service",
			wantMsg:   "collect systemd unit agent.service: systemctl show: exit status 4: Failed to get properties: Unit agent.service not loaded.",
		},
		{
			name:      "malformed output",
			collector: systemd.Collector{Systemctl: garbage, RunDir: running},
			unit:      "agent.service",
			wantErr:   systemd.ErrMalformedOutput,
			wantMsg:   "collect systemd unit agent.service: malformed systemctl show output: line 2 has no '='",
		},
		{
			name:      "timeout",
			collector: systemd.Collector{Systemctl: slow, RunDir: running, Timeout: 100 * time.Millisecond},
			unit:      "agent.service",
			wantMsg:   "collect systemd unit agent.service: systemctl show: timed out after 100ms",
		},
		{
			name:      "systemctl missing",
			collector: systemd.Collector{Systemctl: "/nonexistent/systemctl", RunDir: running},
			unit:      "agent.service",
			wantErr:   systemd.ErrSystemctlNotFound,
		},
		{
			name:      "systemd not running",
			collector: systemd.Collector{Systemctl: failing, RunDir: filepath.Join(running, "missing")},
			unit:      "agent.service",
			wantErr:   systemd.ErrSystemdUnavailable,
			wantMsg:   "systemd is not running on this host (no " + filepath.Join(running, "missing") + "); cannot inspect unit agent.service",
		},
		{
			name:      "invalid unit before anything runs",
			collector: systemd.Collector{Systemctl: failing, RunDir: running},
			unit:      "../../agent.service",
			wantErr:   systemd.ErrInvalidUnit,
			wantMsg:   `invalid unit name "../../agent.service"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.collector.Collect(context.Background(), tc.unit)
			require.Error(t, err)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			if tc.wantMsg != "" {
				assert.True(t, strings.HasPrefix(err.Error(), tc.wantMsg), "error %q does not start with %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCollectOnThisHostWithoutSystemd(t *testing.T) {
	if _, err := os.Stat(systemd.DefaultRunDir); err == nil {
		t.Skip("systemd is running on this host")
	}
	_, err := systemd.Collect(context.Background(), "agent.service")
	require.ErrorIs(t, err, systemd.ErrSystemdUnavailable)
	assert.EqualError(t, err, "systemd is not running on this host (no /run/systemd/system); cannot inspect unit agent.service")
}
