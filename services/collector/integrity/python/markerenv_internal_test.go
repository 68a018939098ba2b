package python

import (
	"maps"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePyvenvCfg(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
		err  bool
	}{
		{name: "venv", in: "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.4\nexecutable = /usr/bin/python3.11\ncommand = /usr/bin/python3 -m venv /srv/app/.venv\n",
			want: map[string]string{"home": "/usr/bin", "include-system-site-packages": "false", "version": "3.11.4",
				"executable": "/usr/bin/python3.11", "command": "/usr/bin/python3 -m venv /srv/app/.venv"}},
		{name: "virtualenv", in: "home = /usr/bin\r\nimplementation = CPython\r\nversion_info = 3.11.4.final.0\r\nvirtualenv = 20.24.1\r\n",
			want: map[string]string{"home": "/usr/bin", "implementation": "CPython", "version_info": "3.11.4.final.0", "virtualenv": "20.24.1"}},
		{name: "keys lower-cased and trimmed, value split at the first =", in: "  Version=3.12.1 \n\tPROMPT = a=b\n",
			want: map[string]string{"version": "3.12.1", "prompt": "a=b"}},
		{name: "lines without = ignored, a later key wins, \\r ends a line", in: "# comment\nversion = 3.10.0\rversion = 3.11.0\n\n",
			want: map[string]string{"version": "3.11.0"}},
		{name: "empty", in: "", want: map[string]string{}},
		{name: "NUL byte", in: "version = 3.11\x00.4\n", err: true},
		{name: "not UTF-8", in: "version = 3.11.4\xff\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePyvenvCfg([]byte(tc.in))
			if tc.err {
				assert.ErrorIs(t, err, ErrBadPyvenvCfg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzParsePyvenvCfg checks that any input parses without panicking to
// keys that are lower-case, trimmed and without "=" or a line break, and
// that writing what was parsed back as "key = value" lines parses to the
// same.
func FuzzParsePyvenvCfg(f *testing.F) {
	for _, s := range []string{
		"home = /usr/bin\nversion = 3.11.4\n",
		"implementation = PyPy\r\nversion_info = 3.10.14.final.0\r\n",
		"a=b=c\rversion=3\n=x\n \n",
		"version = 3.11\x00\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parsePyvenvCfg(data)
		if err != nil {
			if utf8.Valid(data) && !strings.Contains(string(data), "\x00") {
				t.Fatalf("valid text refused: %v", err)
			}
			return
		}
		var b strings.Builder
		for k, v := range cfg {
			if k != strings.TrimSpace(k) || strings.ContainsAny(k, "=\r\n") || k != strings.ToLower(k) {
				t.Fatalf("key %q", k)
			}
			if v != strings.TrimSpace(v) || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("value %q", v)
			}
			b.WriteString(k + " = " + v + "\n")
		}
		again, err := parsePyvenvCfg([]byte(b.String()))
		require.NoError(t, err)
		if !maps.Equal(cfg, again) {
			t.Fatalf("%q parses to %q, written back to %q", data, cfg, again)
		}
		// Whatever it holds, the marker environment derives from it.
		env, unknown := deriveMarkers(cfg, []string{"python3.11"})
		for v := range unknown {
			if _, ok := env[v]; ok {
				t.Fatalf("%s is both known and unknown", v)
			}
		}
	})
}

func TestParsePyVersion(t *testing.T) {
	for _, tc := range []struct {
		in, mm, full, impl string
		micro              bool
		ok                 bool
	}{
		{in: "3.11.4", mm: "3.11", full: "3.11.4", impl: "3.11.4", micro: true, ok: true},
		{in: "3.11.4.final.0", mm: "3.11", full: "3.11.4", impl: "3.11.4", micro: true, ok: true},
		{in: "3.13.0.candidate.1", mm: "3.13", full: "3.13.0rc1", impl: "3.13.0c1", micro: true, ok: true},
		{in: "3.14.0.alpha.3", mm: "3.14", full: "3.14.0a3", impl: "3.14.0a3", micro: true, ok: true},
		{in: "3.12.0b2", mm: "3.12", full: "3.12.0b2", impl: "3.12.0b2", micro: true, ok: true},
		{in: "3.11", mm: "3.11", ok: true},
		{in: "3", ok: false},
		{in: "3.11.4.final", ok: false},
		{in: "3.11.4+local", ok: false},
		{in: " 3.11.4", ok: false},
		{in: "", ok: false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			v, ok := parsePyVersion(tc.in)
			require.Equal(t, tc.ok, ok)
			if !ok {
				return
			}
			assert.Equal(t, tc.mm, v.majorMinor())
			assert.Equal(t, tc.micro, v.micro0)
			if tc.micro {
				assert.Equal(t, tc.full, v.full())
				assert.Equal(t, tc.impl, v.implementation())
			}
		})
	}
}

// TestDeriveMarkers checks where each marker variable comes from, and
// that a variable the files do not give is unknown, with a reason, rather
// than guessed.
func TestDeriveMarkers(t *testing.T) {
	host, hostUnknown := Environment{}, map[string]string{}
	hostMarkers(host, func(why string, vars ...string) {
		for _, v := range vars {
			hostUnknown[v] = why
		}
	})
	if runtime.GOOS == "linux" {
		require.Empty(t, hostUnknown)
		assert.Equal(t, "posix", host["os_name"])
		assert.Equal(t, "linux", host["sys_platform"])
		assert.Equal(t, "Linux", host["platform_system"])
		u, ok := hostUname()
		require.True(t, ok)
		assert.Equal(t, u.machine, host["platform_machine"])
		assert.NotEmpty(t, host["platform_release"])
		assert.NotEmpty(t, host["platform_version"])
	}
	version := []string{"python_version", "python_full_version", "implementation_version"}
	for _, tc := range []struct {
		name    string
		cfg     map[string]string
		dirs    []string
		want    map[string]string // besides the host's variables and extra
		unknown []string
		why     string // in every unknown variable's reason
	}{
		{name: "venv", cfg: map[string]string{"version": "3.11.4"}, dirs: []string{"python3.11"},
			want: map[string]string{"python_version": "3.11", "python_full_version": "3.11.4", "implementation_version": "3.11.4",
				"implementation_name": "cpython", "platform_python_implementation": "CPython"}},
		{name: "virtualenv pre-release", cfg: map[string]string{"implementation": "CPython", "version_info": "3.13.0.candidate.1"}, dirs: []string{"python3.13"},
			want: map[string]string{"python_version": "3.13", "python_full_version": "3.13.0rc1", "implementation_version": "3.13.0c1",
				"implementation_name": "cpython", "platform_python_implementation": "CPython"}},
		{name: "free-threaded lib folder", cfg: map[string]string{"version": "3.13.1"}, dirs: []string{"python3.13t"},
			want: map[string]string{"python_version": "3.13", "python_full_version": "3.13.1", "implementation_version": "3.13.1",
				"implementation_name": "cpython", "platform_python_implementation": "CPython"}},
		{name: "pypy by its folder", cfg: map[string]string{"version": "3.10.14"}, dirs: []string{"pypy3.10"},
			want: map[string]string{"python_version": "3.10", "python_full_version": "3.10.14",
				"implementation_name": "pypy", "platform_python_implementation": "PyPy"},
			unknown: []string{"implementation_version"}, why: "PyPy's own version"},
		{name: "pypy by pyvenv.cfg", cfg: map[string]string{"implementation": "PyPy", "version_info": "3.10.14.final.0"}, dirs: []string{"pypy3.10"},
			want: map[string]string{"python_version": "3.10", "python_full_version": "3.10.14",
				"implementation_name": "pypy", "platform_python_implementation": "PyPy"},
			unknown: []string{"implementation_version"}, why: "PyPy's own version"},
		{name: "an implementation of no known name", cfg: map[string]string{"implementation": "Jython", "version": "2.7.3"},
			want:    map[string]string{"python_version": "2.7", "python_full_version": "2.7.3", "platform_python_implementation": "Jython"},
			unknown: []string{"implementation_name", "implementation_version"}, why: `"Jython"`},
		{name: "pyvenv.cfg and folder disagree on the implementation", cfg: map[string]string{"implementation": "CPython", "version": "3.10.14"}, dirs: []string{"pypy3.10"},
			want:    map[string]string{"python_version": "3.10", "python_full_version": "3.10.14"},
			unknown: []string{"implementation_name", "platform_python_implementation", "implementation_version"}, why: "lib/ folder PyPy"},
		{name: "folder only: no micro version", dirs: []string{"python3.12"},
			want:    map[string]string{"python_version": "3.12", "implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version[1:], why: "lib/python3.12"},
		{name: "pyvenv.cfg without micro version", cfg: map[string]string{"version": "3.12"}, dirs: []string{"python3.12"},
			want:    map[string]string{"python_version": "3.12", "implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version[1:], why: "no micro version"},
		{name: "no version anywhere", cfg: map[string]string{"home": "/usr/bin"},
			want:    map[string]string{"implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version, why: "no version in pyvenv.cfg"},
		{name: "python3 folder names no minor version", dirs: []string{"python3"},
			want:    map[string]string{"implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version, why: "no lib/pythonX.Y"},
		{name: "pyvenv.cfg disagrees with the folder", cfg: map[string]string{"version": "3.9.18"}, dirs: []string{"python3.11"},
			want:    map[string]string{"implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version, why: "disagrees with lib/, which holds Python 3.11"},
		{name: "pyvenv.cfg picks one of two folders", cfg: map[string]string{"version": "3.12.1"}, dirs: []string{"python3.11", "python3.12"},
			want: map[string]string{"python_version": "3.12", "python_full_version": "3.12.1", "implementation_version": "3.12.1",
				"implementation_name": "cpython", "platform_python_implementation": "CPython"}},
		{name: "two folders, no pyvenv.cfg version", dirs: []string{"python3.11", "python3.12"},
			want:    map[string]string{"implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version, why: "several: Python 3.11, 3.12"},
		{name: "version that is not one", cfg: map[string]string{"version": "latest"}, dirs: []string{"python3.11"},
			want:    map[string]string{"implementation_name": "cpython", "platform_python_implementation": "CPython"},
			unknown: version, why: `"latest" is not a Python version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, unknown := deriveMarkers(tc.cfg, tc.dirs)
			want := Environment{"extra": ""}
			maps.Copy(want, host)
			maps.Copy(want, tc.want)
			assert.Equal(t, want, env)
			var got []string
			for v, why := range unknown {
				if hostUnknown[v] != "" {
					continue
				}
				got = append(got, v)
				assert.Contains(t, why, tc.why, v)
				assert.NotContains(t, env, v)
			}
			assert.ElementsMatch(t, tc.unknown, got)
		})
	}
}
