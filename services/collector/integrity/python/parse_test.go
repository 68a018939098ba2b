package python_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

const emptySHA = "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU" // sha256 of ""

var recordCases = []struct {
	name    string
	in      string
	paths   []string
	hashed  []bool
	sizes   []int64
	wantErr string
}{
	{name: "pip style", in: "a/__init__.py,sha256=" + emptySHA + ",0\r\na-1.0.dist-info/RECORD,,\r\na/__pycache__/x.pyc,,\r\n",
		paths: []string{"a/__init__.py", "a-1.0.dist-info/RECORD", "a/__pycache__/x.pyc"}, hashed: []bool{true, false, false}, sizes: []int64{0, -1, -1}},
	{name: "quoted with comma, quote and newline", in: "\"a,b.py\",sha256=" + emptySHA + ",0\n\"say \"\"hi\"\".txt\",,\n\"two\nlines\",,\n",
		paths: []string{"a,b.py", `say "hi".txt`, "two\nlines"}, hashed: []bool{true, false, false}, sizes: []int64{0, -1, -1}},
	{name: "scripts outside site-packages", in: "../../../bin/tool,sha256=" + emptySHA + ",0\n",
		paths: []string{"../../../bin/tool"}, hashed: []bool{true}, sizes: []int64{0}},
	{name: "padding accepted", in: "x,sha256=" + emptySHA + "=,0\n", paths: []string{"x"}, hashed: []bool{true}, sizes: []int64{0}},
	{name: "sha512", in: "x,sha512=z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg_SpIdNs6c5H0NE8XYXysP-DGNKHfuwvY7kxvUdBeoGlODJ6-SfaPg,0\n",
		paths: []string{"x"}, hashed: []bool{true}, sizes: []int64{0}},
	{name: "blank lines and one column", in: "\n\nonly-path\n\n", paths: []string{"only-path"}, hashed: []bool{false}, sizes: []int64{-1}},
	{name: "no final newline", in: "x,,", paths: []string{"x"}, hashed: []bool{false}, sizes: []int64{-1}},
	{name: "md5 rejected", in: "x,md5=1B2M2Y8AsgTpgAmY7PhCfg,0\n", wantErr: "weak hash"},
	{name: "sha1 rejected", in: "x,sha1=2jmj7l5rSw0yVb_vlWAYkK_YBwk,0\n", wantErr: "weak hash"},
	{name: "unknown algorithm", in: "x,crc32=AAAA,0\n", wantErr: "unsupported"},
	{name: "wrong digest length", in: "x,sha256=AAAA,0\n", wantErr: "malformed hash"},
	{name: "not base64", in: "x,sha256=" + strings.Repeat("!", 43) + ",0\n", wantErr: "malformed hash"},
	{name: "no algorithm", in: "x,abc,0\n", wantErr: "no algorithm"},
	{name: "four columns", in: "x,,,extra\n", wantErr: "4 columns"},
	{name: "empty path", in: ",,\n", wantErr: "empty path"},
	{name: "NUL in path", in: "a\x00b,,\n", wantErr: "NUL"},
	{name: "bad size", in: "x,,-1\n", wantErr: "bad size"},
	{name: "unterminated quote", in: "\"x,,\n", wantErr: "unterminated"},
	{name: "junk after quote", in: "\"x\"y,,\n", wantErr: "after quoted field"},
}

func TestParseRecord(t *testing.T) {
	for _, tc := range recordCases {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := python.ParseRecord([]byte(tc.in))
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, python.ErrBadRecord)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			var paths []string
			var hashed []bool
			var sizes []int64
			for _, e := range entries {
				paths = append(paths, e.Path)
				hashed = append(hashed, !e.Hash.IsZero())
				sizes = append(sizes, e.Size)
			}
			assert.Equal(t, tc.paths, paths)
			assert.Equal(t, tc.hashed, hashed)
			assert.Equal(t, tc.sizes, sizes)
		})
	}
	entries, err := python.ParseRecord([]byte("a,,\n\"b\nc\",,\nd,,\n"))
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 4}, []int{entries[0].Line, entries[1].Line, entries[2].Line})
}

func FuzzParseRecord(f *testing.F) {
	for _, tc := range recordCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := python.ParseRecord(data)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Path == "" || strings.IndexByte(e.Path, 0) >= 0 {
				t.Fatalf("accepted bad path %q", e.Path)
			}
			if !e.Hash.IsZero() && (!e.Hash.Algo.Valid() || int(e.Hash.Len) != e.Hash.Algo.Size()) {
				t.Fatalf("accepted bad digest %+v", e.Hash)
			}
			if e.Size < -1 || e.Line < 1 {
				t.Fatalf("bad size or line %+v", e)
			}
		}
	})
}

var metadataCases = []struct {
	name    string
	in      string
	want    *python.Metadata
	wantErr bool
}{
	{name: "typical", in: "Metadata-Version: 2.1\r\nName: Foo.Bar\r\nVersion: 1.0\r\nRequires-Dist: a>=1\r\nRequires-Dist: b ; extra == 'x'\r\n\r\nRequires-Dist: body-not-header\r\n",
		want: &python.Metadata{Name: "Foo.Bar", Version: "1.0", RequiresDist: []string{"a>=1", "b ; extra == 'x'"}}},
	{name: "folded and case-insensitive", in: "name: x\nVERSION: 2\nSummary: a\n  long summary\nrequires-dist: y\n",
		want: &python.Metadata{Name: "x", Version: "2", RequiresDist: []string{"y"}}},
	{name: "no name", in: "Version: 1\n", wantErr: true},
	{name: "no version", in: "Name: x\n", wantErr: true},
	{name: "continuation first", in: " x\nName: a\n", wantErr: true},
	{name: "garbage line", in: "Name: a\nnot a header\n", wantErr: true},
}

func TestParseMetadata(t *testing.T) {
	for _, tc := range metadataCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := python.ParseMetadata([]byte(tc.in))
			if tc.wantErr {
				assert.ErrorIs(t, err, python.ErrBadMetadata)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m)
		})
	}
}

func FuzzParseMetadata(f *testing.F) {
	for _, tc := range metadataCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := python.ParseMetadata(data)
		if err != nil {
			return
		}
		if m.Name == "" || m.Version == "" {
			t.Fatalf("accepted metadata without name or version: %+v", m)
		}
		for _, r := range m.RequiresDist {
			_, _ = python.ParseRequirement(r) // must not panic
		}
	})
}

func TestParseRequirement(t *testing.T) {
	cases := []struct {
		in, name, spec, url string
		extras              []string
		marker              bool
		bad                 bool
	}{
		{in: "requests", name: "requests"},
		{in: "requests[socks,security] (>=2.8.1,==2.8.*) ; python_version < '2.7'", name: "requests", extras: []string{"socks", "security"}, spec: ">=2.8.1,==2.8.*", marker: true},
		{in: "Foo_Bar.baz>=1.0,!=1.3", name: "Foo_Bar.baz", spec: ">=1.0,!=1.3"},
		{in: "pip @ https://example.com/pip.whl ; os_name == 'posix'", name: "pip", url: "https://example.com/pip.whl", marker: true},
		{in: "name@file:///x/y.whl", name: "name", url: "file:///x/y.whl"},
		{in: "x;python_version>='3'", name: "x", marker: true},
		{in: "", bad: true},
		{in: "-x", bad: true},
		{in: "x ;", bad: true},
		{in: "x >=1 ; nonsense == '1'", bad: true},
		{in: "x (>=1", bad: true},
		{in: "x >= not-a-version", bad: true},
		{in: "x[a ; os_name == 'nt'", bad: true},
	}
	for _, tc := range cases {
		r, err := python.ParseRequirement(tc.in)
		if tc.bad {
			assert.ErrorIs(t, err, python.ErrBadRequirement, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.name, r.Name, tc.in)
		assert.Equal(t, tc.spec, r.Specifier, tc.in)
		assert.Equal(t, tc.url, r.URL, tc.in)
		assert.Equal(t, tc.extras, r.Extras, tc.in)
		assert.Equal(t, tc.marker, r.Marker != nil, tc.in)
	}
	assert.Equal(t, "foo-bar-baz", python.NormalizeName("Foo_Bar..baz"))
}

// markerEnv is a fixed target environment for marker tests.
var markerEnv = python.Environment{
	"implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
	"platform_machine": "x86_64", "platform_release": "6.1.0-18-amd64", "platform_system": "Linux",
	"platform_version": "#1 SMP Debian 6.1.76-1", "python_full_version": "3.11.7",
	"platform_python_implementation": "CPython", "python_version": "3.11", "sys_platform": "linux", "extra": "",
}

var markerCases = []string{
	`python_version < "3"`,
	`python_version >= "3.8"`,
	`python_version == "3.11"`,
	`python_version == "3.11.*"`,
	`python_version != "3.10"`,
	`python_version ~= "3.9"`,
	`python_version > "3.11"`,
	`python_version <= "3.11"`,
	`python_full_version >= "3.11.7"`,
	`python_full_version < "3.11.7"`,
	`python_full_version == "3.11.*"`,
	`python_full_version ~= "3.11.2"`,
	`python_full_version === "3.11.7"`,
	`"3.8" < python_version`,
	`sys_platform == "linux"`,
	`sys_platform == "win32"`,
	`sys_platform != "win32" and os_name == "posix"`,
	`platform_system == "Windows" or platform_machine == "x86_64"`,
	`(os_name == "nt" or os_name == "posix") and python_version >= "3"`,
	`os_name == "nt" or (os_name == "posix" and (python_version < "3" or sys_platform == "linux"))`,
	`"linux" in sys_platform`,
	`"win" not in sys_platform`,
	`sys_platform in "linux darwin"`,
	`platform_machine not in "arm64 aarch64"`,
	`extra == "test"`,
	`extra != "test"`,
	`platform_python_implementation != "PyPy"`,
	`implementation_name == "cpython" and implementation_version >= "3.11"`,
	`platform_release >= "6"`,
	`platform_machine < "z"`,
	`python_version > "3.11.0"`,
	`python_version >= "3.11.0"`,
	`python_full_version > "3.11.7.post1"`,
	`python_full_version < "3.11.8rc1"`,
	`python_full_version >= "3.11.7rc1"`,
	`os.name == "posix"`,
	`sys.platform == "linux"`,
	`platform.machine == "x86_64"`,
}

func TestMarkers(t *testing.T) {
	want := map[string]bool{
		`python_version < "3"`: false, `python_version >= "3.8"`: true, `python_version == "3.11.*"`: true,
		`python_version ~= "3.9"`: true, `python_version > "3.11"`: false, `"3.8" < python_version`: true,
		`sys_platform == "win32"`: false, `extra == "test"`: false, `extra != "test"`: true,
		`python_full_version ~= "3.11.2"`: true, `python_full_version > "3.11.7.post1"`: false,
		`"win" not in sys_platform`: true, `os.name == "posix"`: true,
	}
	for _, m := range markerCases {
		mk, err := python.ParseMarker(m)
		require.NoError(t, err, m)
		got, err := mk.Evaluate(markerEnv)
		require.NoError(t, err, m)
		if w, ok := want[m]; ok {
			assert.Equal(t, w, got, m)
		}
	}
	withExtra := python.Environment{"extra": "Test_Feature"}
	mk, err := python.ParseMarker(`extra == "test-feature"`)
	require.NoError(t, err)
	ok, err := mk.Evaluate(withExtra)
	require.NoError(t, err)
	assert.True(t, ok, "extras compare normalized")
	for _, bad := range []string{``, `python_version`, `python_version <`, `foo == "1"`, `(os_name == "nt"`, `"a" == "b" and`, `os_name = "nt"`, `os_name == 'nt`, strings.Repeat("(", 100) + `os_name == "nt"` + strings.Repeat(")", 100)} {
		_, err := python.ParseMarker(bad)
		assert.ErrorIs(t, err, python.ErrBadMarker, bad)
	}
	mk, err = python.ParseMarker(`os_name ~= "posix"`)
	require.NoError(t, err)
	_, err = mk.Evaluate(markerEnv)
	assert.ErrorIs(t, err, python.ErrUndefinedComparison)
}

// TestMarkersAgainstPackaging evaluates every marker case with the
// packaging library pip vendors and expects the same answers.
func TestMarkersAgainstPackaging(t *testing.T) {
	venv := newVenv(t, t.TempDir())
	env, _ := json.Marshal(markerEnv)
	cases, _ := json.Marshal(markerCases)
	script := `import json, sys
from pip._vendor.packaging.markers import Marker
env = json.loads(sys.argv[1])
print(json.dumps([Marker(m).evaluate(env) for m in json.loads(sys.argv[2])]))`
	out, err := exec.Command(filepath.Join(venv, "bin", "python"), "-c", script, string(env), string(cases)).Output()
	require.NoError(t, err)
	var want []bool
	require.NoError(t, json.Unmarshal(out, &want))
	require.Len(t, want, len(markerCases))
	for i, m := range markerCases {
		mk, err := python.ParseMarker(m)
		require.NoError(t, err, m)
		got, err := mk.Evaluate(markerEnv)
		require.NoError(t, err, m)
		assert.Equal(t, want[i], got, "%s (packaging says %v)", m, want[i])
	}
}

func FuzzMarker(f *testing.F) {
	for _, m := range markerCases {
		f.Add(m)
	}
	f.Add(`python_version ~= "3"`)
	f.Add(`extra == "a" and (os_name in "x" or "y" not in os_name)`)
	f.Fuzz(func(_ *testing.T, s string) {
		mk, err := python.ParseMarker(s)
		if err != nil {
			return
		}
		_, _ = mk.Evaluate(markerEnv)
		_, _ = mk.Evaluate(python.Environment{})
	})
}

func FuzzParseRequirement(f *testing.F) {
	f.Add("requests[socks] (>=2.8.1,==2.8.*) ; python_version < '2.7'")
	f.Add("pip @ https://example.com/pip.whl ; os_name == 'posix'")
	f.Add("x>=1.0.post1.dev2+local.1")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := python.ParseRequirement(s)
		if err != nil {
			return
		}
		if r.Name == "" {
			t.Fatalf("accepted requirement without a name: %q", s)
		}
		_, _ = r.Marker.Evaluate(markerEnv)
	})
}

func TestVersionOrder(t *testing.T) {
	// Ascending, per PEP 440.
	order := []string{"1.0.dev0", "1.0a1", "1.0a2.dev1", "1.0a2", "1.0b1", "1.0rc1", "1.0", "1.0+abc", "1.0+5", "1.0.post1.dev0", "1.0.post1", "1.1", "1!0.1"}
	for i := 0; i+1 < len(order); i++ {
		a, ok := python.ParseVersion(order[i])
		require.True(t, ok, order[i])
		b, ok := python.ParseVersion(order[i+1])
		require.True(t, ok, order[i+1])
		assert.Equal(t, -1, a.Compare(b), "%s < %s", order[i], order[i+1])
		assert.Equal(t, 1, b.Compare(a), "%s > %s", order[i+1], order[i])
	}
	a, _ := python.ParseVersion("1.0.0")
	b, _ := python.ParseVersion("v1.0")
	assert.Zero(t, a.Compare(b))
	_, ok := python.ParseVersion("not.a.version")
	assert.False(t, ok)
}
