package integrity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleCache returns the entries and lists of a small cache: entries of
// two algorithms, lists whose files are entries or not, labels that are
// suffixes of their paths or not.
func sampleCache(t testing.TB, n int) (map[string]*cacheEntry, map[string]*cachedList) {
	t.Helper()
	entries := map[string]*cacheEntry{}
	for i := range n {
		e := &cacheEntry{key: statKey{dev: 1, ino: uint64(100 + i), size: int64(i), mtime: int64(i) << 20, ctime: int64(i) << 21, mode: 0o100644}, gen: uint64(i % 3)}
		algo := SHA256
		if i%4 == 3 {
			algo = SHA512
		}
		require.NoError(t, e.digest.SetBytes(algo, bytes.Repeat([]byte{byte(i)}, algo.Size())))
		entries["/site/pkg/f"+strconv.Itoa(i)+".py"] = e
	}
	lists := map[string]*cachedList{}
	for k := range 3 {
		l := &cachedList{key: statKey{dev: 1, ino: uint64(900 + k), size: 10, mode: 0o100644}, gen: uint64(k), extra: k,
			paths: []string{}, wants: []Digest{}, sizes: []int64{}, labels: []string{}}
		for i := k; i < n+2; i += 2 {
			p := "/site/pkg/f" + strconv.Itoa(i) + ".py" // past n: not an entry
			var d Digest
			require.NoError(t, d.SetBytes(SHA256, bytes.Repeat([]byte{byte(i + 1)}, 32)))
			label := p[len("/site/"):]
			if i%5 == 0 {
				label = "../elsewhere/" + strconv.Itoa(i)
			}
			var f File
			if i%3 != 0 { // the others' size is unknown
				f.SetWantSize(int64(i) << 30)
			}
			l.paths, l.wants, l.labels = append(l.paths, p), append(l.wants, d), append(l.labels, label)
			l.sizes = append(l.sizes, f.wantSize)
		}
		lists["/site/pkg-"+strconv.Itoa(k)+".dist-info/RECORD"] = l
	}
	return entries, lists
}

// checkView reads everything v holds through its accessors, as a check
// and save would, and returns it as the maps encode takes.
func checkView(t testing.TB, v *view) (map[string]*cacheEntry, map[string]*cachedList) {
	t.Helper()
	c := &Cache{gen: 1}
	c.setView(v)
	for i := range v.ents {
		p := v.entryPath(i)
		if got := v.find(p); got != i {
			t.Fatalf("entry %d (%q) found at %d", i, p, got)
		}
		var d Digest
		v.entryDigest(i, &d)
		if !d.Algo.Valid() || int(d.Len) != d.Algo.Size() {
			t.Fatalf("entry %d: digest %v", i, d)
		}
		k := v.entryKey(i)
		var got Digest
		if !v.entryHit(i, &k, d.Algo, &got) || got != d {
			t.Fatalf("entry %d: no hit on its own status", i)
		}
	}
	if v.find([]byte("\xff\xff not a path")) >= 0 {
		t.Fatal("found a path that is not there")
	}
	for name, li := range v.named {
		vl := &v.lists[li]
		var lf listFile
		for j := range vl.n {
			v.file(vl, j, &lf)
			if lf.entry >= 0 && !bytes.Equal(lf.path, v.entryPath(lf.entry)) {
				t.Fatalf("list %q file %d: path %q, entry's %q", name, j, lf.path, v.entryPath(lf.entry))
			}
			var d Digest
			readDigest(v.data[lf.want:], &d)
			if !d.Algo.Valid() || int(d.Len) != d.Algo.Size() {
				t.Fatalf("list %q file %d: digest %v", name, j, d)
			}
		}
	}
	return c.merged()
}

// equalCaches compares two caches' entries and lists.
func equalCaches(t testing.TB, we map[string]*cacheEntry, wl map[string]*cachedList, ge map[string]*cacheEntry, gl map[string]*cachedList) {
	t.Helper()
	require.Len(t, ge, len(we))
	for k, e := range we {
		g := ge[k]
		require.NotNil(t, g, k)
		require.Equal(t, *e, *g, k)
	}
	require.Len(t, gl, len(wl))
	for k, l := range wl {
		g := gl[k]
		require.NotNil(t, g, k)
		require.Equal(t, l.key, g.key, k)
		require.Equal(t, l.gen, g.gen, k)
		require.Equal(t, l.extra, g.extra, k)
		require.Equal(t, l.paths, g.paths, k)
		require.Equal(t, l.wants, g.wants, k)
		require.Equal(t, l.sizes, g.sizes, k)
		require.Equal(t, l.labels, g.labels, k)
	}
}

func TestViewRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		entries, lists := sampleCache(t, n)
		data := encode(entries, lists)
		v, err := parseView(data)
		require.NoError(t, err)
		ge, gl := checkView(t, v)
		equalCaches(t, entries, lists, ge, gl)
		assert.Equal(t, data, encode(ge, gl), "encoding is canonical")
	}
}

func TestViewRejectsDamage(t *testing.T) {
	entries, lists := sampleCache(t, 10)
	data := encode(entries, lists)
	// resum recomputes the checksum, so that what is checked is the
	// structure.
	resum := func(b []byte) []byte {
		body := b[:len(b)-4]
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(body, castagnoli))
		return b
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	for name, b := range map[string][]byte{
		"empty":     {},
		"truncated": data[:len(data)/2],
		"bit flip":  edit(func(b []byte) []byte { b[30] ^= 1; return b }),
		"version":   edit(func(b []byte) []byte { b[4] = 9; return resum(b) }),
		"count":     edit(func(b []byte) []byte { b[8] = 0xff; return resum(b) }),
		"algorithm": edit(func(b []byte) []byte { b[16+4+len("/site/pkg/f0.py")+keySize+8] = 99; return resum(b) }),
		"order":     edit(func(b []byte) []byte { i := 16 + 4 + len("/site/pkg/f"); b[i] = 'z'; return resum(b) }),
		"trailing":  resum(append(append(append([]byte(nil), data[:len(data)-4]...), 0), 0, 0, 0, 0)),
	} {
		_, err := parseView(b)
		assert.ErrorIs(t, err, ErrCorruptState, name)
	}
	for _, l := range lists {
		l.sizes[0] = -1 // a known-good size past MaxInt64
	}
	_, err := parseView(encode(entries, lists))
	assert.ErrorIs(t, err, ErrCorruptState, "size")
}

// FuzzCacheView checks that parseView rejects or fully indexes any input:
// every entry and list file it accepts reads within bounds and holds a
// valid digest, every entry is found by its path, and what it holds
// encodes to a file that reads back the same. The input is a file less
// its checksum, which the fuzzer would hardly ever get right: it is
// appended, so that the structure is what is explored.
func FuzzCacheView(f *testing.F) {
	for _, n := range []int{0, 1, 5} {
		entries, lists := sampleCache(f, n)
		data := encode(entries, lists)
		f.Add(data[:len(data)-4])
		f.Add(data[:len(data)/2])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		v, err := parseView(data)
		if err != nil {
			return
		}
		entries, lists := checkView(t, v)
		again := encode(entries, lists)
		v2, err := parseView(again)
		if err != nil {
			t.Fatalf("re-encoded cache does not parse: %v", err)
		}
		ge, gl := checkView(t, v2)
		equalCaches(t, entries, lists, ge, gl)
	})
}

// TestCacheFileMapped checks a check that reads its cache from the file
// (a new store per check, as the check hook runs) against one handed the
// cache in memory: the same files come from the cache, the same change
// is found, and the file is rewritten only when something changed.
func TestCacheFileMapped(t *testing.T) {
	_, items := plannedTree(t, 3)
	files := items[2]
	dir := files[0].Dir
	src := filepath.Join(dir, "RECORD")
	require.NoError(t, os.WriteFile(src, []byte("listed"), 0o644))
	state := t.TempDir()
	open := func() *Cache {
		t.Helper()
		s, err := OpenStore(state)
		require.NoError(t, err)
		s.FullEvery = 1 << 20
		c, err := s.Cache(dir, false)
		require.NoError(t, err)
		return c
	}
	_, fromCache := checkList(t, open(), src, dir, files)
	assert.False(t, fromCache)
	for i := range 3 {
		c := open()
		require.NotNil(t, c.view, "check %d", i)
		assert.Equal(t, len(files), c.Len())
		bin, err := os.Stat(c.path)
		require.NoError(t, err)
		fs, fromCache := checkList(t, c, src, dir, files)
		assert.True(t, fromCache)
		for j := range fs {
			assert.True(t, fs[j].OK() && fs[j].Cached, "check %d file %d", i, j)
			assert.Equal(t, dir, fs[j].Dir)
		}
		after, err := os.Stat(c.path)
		require.NoError(t, err)
		assert.True(t, os.SameFile(bin, after), "an unchanged cache is not rewritten")
	}

	p := filepath.Join(dir, files[3].Rel)
	require.NoError(t, os.WriteFile(p, []byte("changed"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, files[4].Rel)))
	fs, _ := checkList(t, open(), src, dir, files)
	assert.Equal(t, FileHashed, fs[3].State)
	assert.False(t, fs[3].OK() || fs[3].Cached)
	assert.Equal(t, FileMissing, fs[4].State)
	c := open()
	assert.Equal(t, len(files)-1, c.Len(), "the missing file's entry is dropped")
	fs, _ = checkList(t, c, src, dir, files)
	assert.True(t, fs[3].Cached && !fs[3].OK(), "the change is cached as a change")
	assert.Equal(t, FileMissing, fs[4].State)
	for j := range fs {
		if j != 3 && j != 4 {
			assert.True(t, fs[j].OK() && fs[j].Cached, fmt.Sprint(j))
		}
	}

	// A list keeps its mapping alive after its cache is gone; what it
	// hands out is copied, and outlives the mapping.
	l := func() *List {
		c := open()
		l, ok := c.List(src, c.Source(src), dir)
		require.True(t, ok)
		h := Hasher{Workers: 2}
		require.NoError(t, h.RunPlanned(t.Context(), 1, func(int) *List { return l }, c))
		return l
	}()
	runtime.GC()
	runtime.GC()
	label, file := l.Label(0), l.File(0)
	assert.Equal(t, files[0].Rel, label)
	l = nil
	runtime.GC()
	runtime.GC()
	assert.Equal(t, files[0].Rel, label)
	assert.Equal(t, files[0].Rel, file.Rel)
	assert.True(t, file.OK())
}
