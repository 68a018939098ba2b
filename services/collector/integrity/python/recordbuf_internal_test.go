package python

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// TestKeepStrings checks that a list's labels and paths no longer point
// into the RECORD buffer once kept (the buffer is reused for the next
// RECORD), and that a path equal to its label shares its copy.
func TestKeepStrings(t *testing.T) {
	data := []byte("pkg/a.py,sha256=x,1\n/abs/pkg/b.py,sha256=y,2\n")
	text := string(data) // the expected values, copied
	sub := func(s string) string {
		i := strings.Index(text, s)
		require.GreaterOrEqual(t, i, 0)
		return unsafe.String(&data[i], len(s))
	}
	outside := "/elsewhere/c.py"
	l := &integrity.List{
		Files: []integrity.File{
			{Dir: "/site", Rel: sub("pkg/a.py")},     // the label itself
			{Rel: sub("/abs/pkg/b.py")},              // a substring of the label (path.Clean's result)
			{Rel: outside},                           // not in the buffer
			{Rel: sub("pkg/a.py")[:3] + "/other.py"}, // a new string
		},
		Labels: []string{sub("pkg/a.py"), sub("/abs/pkg/b.py"), sub("pkg/a.py"), sub("/abs/pkg/b.py")},
	}
	keepStrings(l, data)
	for i := range data {
		data[i] = 'X' // the buffer reused
	}
	assert.Equal(t, []string{"pkg/a.py", "/abs/pkg/b.py", "pkg/a.py", "/abs/pkg/b.py"}, l.Labels)
	assert.Equal(t, "pkg/a.py", l.Files[0].Rel)
	assert.Equal(t, "/abs/pkg/b.py", l.Files[1].Rel)
	assert.Equal(t, "/elsewhere/c.py", l.Files[2].Rel)
	assert.Equal(t, "pkg/other.py", l.Files[3].Rel)
	assert.Same(t, unsafe.StringData(l.Labels[0]), unsafe.StringData(l.Files[0].Rel), "a path equal to its label shares the copy")
	assert.Same(t, unsafe.StringData(outside), unsafe.StringData(l.Files[2].Rel), "a path outside the buffer is left alone")
}

// TestPlanKeepsOnlyHashedPaths checks that planning a RECORD keeps only
// what the check needs: with a buffer to reuse, far less is allocated
// than the RECORD's size (which reading it afresh would allocate), and
// every path and label survives the buffer's reuse by another RECORD.
func TestPlanKeepsOnlyHashedPaths(t *testing.T) {
	prefix := t.TempDir()
	site := filepath.Join(prefix, "lib", "python3.11", "site-packages")
	dists := make([]*Distribution, 2)
	for k := range dists {
		info := filepath.Join(site, fmt.Sprintf("pkg%d-1.0.dist-info", k))
		require.NoError(t, os.MkdirAll(info, 0o755))
		var record bytes.Buffer
		for i := range 2000 {
			fmt.Fprintf(&record, "pkg%d/sub/module_%04d.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,%d\n", k, i, 100+i)
			fmt.Fprintf(&record, "pkg%d/sub/__pycache__/module_%04d.cpython-311.pyc,,\n", k, i)
		}
		fmt.Fprintf(&record, "../../../bin/tool%d,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,10\n", k)
		fmt.Fprintf(&record, "pkg%d-1.0.dist-info/RECORD,,\n", k)
		require.NoError(t, os.WriteFile(filepath.Join(info, "RECORD"), record.Bytes(), 0o644))
		dists[k] = &Distribution{Name: fmt.Sprintf("pkg%d", k), Version: "1.0", Site: site, InfoDir: info}
	}
	e := &Env{Prefix: prefix}
	st, err := os.Stat(filepath.Join(dists[0].InfoDir, "RECORD"))
	require.NoError(t, err)

	var r integrity.Result
	first := e.plan(Selected{Distribution: dists[0]}, &r, nil)
	require.Equal(t, integrity.StatusOK, r.Status, r.Reason)
	require.Equal(t, 2001, first.Len())
	e.plan(Selected{Distribution: dists[1]}, &r, nil) // reads the next RECORD, into the same buffer when the pool kept it
	for i, f := range first.Files[:2000] {
		want := fmt.Sprintf("pkg0/sub/module_%04d.py", i)
		require.Equal(t, want, f.Rel)
		require.Equal(t, want, first.Labels[i])
	}
	assert.Equal(t, "../../../bin/tool0", first.Labels[2000])
	assert.Equal(t, filepath.ToSlash(filepath.Join(prefix, "bin", "tool0")), first.Files[2000].Rel)

	// The fewest bytes of a few plans (the race detector's pool drops
	// some buffers): with the buffer reused, the Files (192 bytes each),
	// the labels and one copy of the hashed paths.
	least := uint64(1 << 62)
	for range 8 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e.plan(Selected{Distribution: dists[0]}, &r, nil)
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	files := uint64(2001 * unsafe.Sizeof(integrity.File{}))
	t.Logf("RECORD %d bytes; plan allocated %d bytes, of which Files %d", st.Size(), least, files)
	assert.Less(t, least-files, uint64(st.Size())/3, "a plan allocates a fraction of the RECORD beyond its Files")
}

// TestVerifyDiscardsDamagedCache checks that a verify whose stat cache
// file is damaged on disk (truncated in place by another process, cut
// short, a flipped byte) does not crash and reports every distribution as
// before: a cache read before the damage is used from memory; the next
// check finds the file damaged, hashes everything and writes a new cache,
// which the check after uses.
func TestVerifyDiscardsDamagedCache(t *testing.T) {
	prefix := t.TempDir()
	site := filepath.Join(prefix, "lib", "python3.11", "site-packages")
	var dists []Selected
	for k := range 3 {
		info := filepath.Join(site, fmt.Sprintf("pkg%d-1.0.dist-info", k))
		require.NoError(t, os.MkdirAll(filepath.Join(site, fmt.Sprintf("pkg%d", k)), 0o755))
		require.NoError(t, os.MkdirAll(info, 0o755))
		var record bytes.Buffer
		for i := range 50 {
			rel := fmt.Sprintf("pkg%d/m%02d.py", k, i)
			data := fmt.Appendf(nil, "x = %d\n", i)
			require.NoError(t, os.WriteFile(filepath.Join(site, rel), data, 0o644))
			sum := sha256.Sum256(data)
			fmt.Fprintf(&record, "%s,sha256=%s,%d\n", rel, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
		}
		fmt.Fprintf(&record, "pkg%d-1.0.dist-info/RECORD,,\n", k)
		require.NoError(t, os.WriteFile(filepath.Join(info, "RECORD"), record.Bytes(), 0o644))
		dists = append(dists, Selected{Distribution: &Distribution{Name: fmt.Sprintf("pkg%d", k), Version: "1.0", Site: site, InfoDir: info}})
	}
	e := &Env{Prefix: prefix}
	ctx := context.Background()
	check := func(t *testing.T, cache *integrity.Cache) *integrity.Report {
		t.Helper()
		rep, err := e.check(ctx, dists, cache, Options{})
		require.NoError(t, err)
		for _, r := range rep.Results {
			require.Equal(t, integrity.StatusOK, r.Status, "%s: %s", r.Name, r.Reason)
			require.Equal(t, 50, r.Files)
		}
		assert.Empty(t, rep.CacheError)
		return rep
	}
	for name, damage := range map[string]func(path string){
		"truncated in place": func(path string) { require.NoError(t, os.Truncate(path, 0)) },
		"cut short": func(path string) {
			st, err := os.Stat(path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, st.Size()/2))
		},
		"flipped byte": func(path string) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data[len(data)/2] ^= 1
			require.NoError(t, os.WriteFile(path, data, 0o600))
		},
	} {
		t.Run(name, func(t *testing.T) {
			state := t.TempDir()
			open := func(t *testing.T) *integrity.Cache {
				t.Helper()
				s, err := integrity.OpenStore(state) // a new store: the cache is read from its file
				require.NoError(t, err)
				c, err := s.Cache(prefix, false)
				require.NoError(t, err)
				return c
			}
			check(t, open(t))
			rep := check(t, open(t))
			require.Equal(t, 150, rep.Cached, "the second check is answered from the cache")

			cacheFiles, err := filepath.Glob(filepath.Join(state, "cache", "*.bin"))
			require.NoError(t, err)
			require.Len(t, cacheFiles, 1)
			c := open(t)
			damage(cacheFiles[0]) // after the cache was read
			rep = check(t, c)
			assert.Equal(t, 150, rep.Cached, "the cache read before the damage is used")
			rep = check(t, open(t))
			assert.Equal(t, 150, rep.Hashed, "the damaged file is discarded")
			assert.Zero(t, rep.Cached)
			rep = check(t, open(t))
			assert.Equal(t, 150, rep.Cached, "and a new cache written")
		})
	}
}
