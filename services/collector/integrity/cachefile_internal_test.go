package integrity

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleCache returns a small cache file: entries of two algorithms, lists
// whose files are entries or not, labels that are suffixes of their paths
// or not, known-good sizes known or not.
func sampleCache(t testing.TB, n int) *cacheFile {
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
		l := &cachedList{key: statKey{dev: 1, ino: uint64(900 + k), size: 10, mode: 0o100644}, gen: uint64(k), extra: k}
		for i := k; i < n+2; i += 2 {
			p := "/site/pkg/f" + strconv.Itoa(i) + ".py" // past n: not an entry
			lf := listedFile{path: p, label: p[len("/site/"):]}
			require.NoError(t, lf.want.SetBytes(SHA256, bytes.Repeat([]byte{byte(i + 1)}, 32)))
			if i%5 == 0 {
				lf.label = "../elsewhere/" + strconv.Itoa(i)
			}
			var f File
			if i%3 != 0 { // the others' size is unknown
				f.SetWantSize(int64(i) << 30)
			}
			lf.size = f.wantSize
			l.files = append(l.files, lf)
		}
		lists["/site/pkg-"+strconv.Itoa(k)+".dist-info/RECORD"] = l
	}
	return newCacheFile(entries, lists)
}

// checkCacheFile checks what decodeCacheFile guarantees of a file it
// accepts: entries and lists in strictly increasing order, each entry
// found by its path, digests of a known algorithm and length, list files
// linked to an entry of their own path, labels as encoded.
func checkCacheFile(t testing.TB, f *cacheFile) {
	t.Helper()
	for i := range f.entries {
		e := &f.entries[i]
		if i > 0 && f.entries[i-1].path >= e.path {
			t.Fatalf("entry %d (%q) out of order", i, e.path)
		}
		if got := f.find(e.path); got != i {
			t.Fatalf("entry %d (%q) found at %d", i, e.path, got)
		}
		if !e.digest.Algo.Valid() || int(e.digest.Len) != e.digest.Algo.Size() {
			t.Fatalf("entry %d: digest %v", i, e.digest)
		}
	}
	if f.find("\xff\xff not a path") >= 0 {
		t.Fatal("found a path that is not there")
	}
	for i := range f.lists {
		l := &f.lists[i]
		if i > 0 && f.lists[i-1].name >= l.name {
			t.Fatalf("list %d (%q) out of order", i, l.name)
		}
		if f.list(l.name) != l {
			t.Fatalf("list %q not found by its name", l.name)
		}
		for j, lf := range l.files {
			if lf.entry >= 0 && lf.path != f.entries[lf.entry].path {
				t.Fatalf("list %q file %d: path %q, entry's %q", l.name, j, lf.path, f.entries[lf.entry].path)
			}
			if !lf.want.Algo.Valid() || int(lf.want.Len) != lf.want.Algo.Size() || lf.size < 0 {
				t.Fatalf("list %q file %d: digest %v, size %d", l.name, j, lf.want, lf.size)
			}
		}
	}
}

func TestCacheFileRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 7, 100} {
		f := sampleCache(t, n)
		data := f.encode()
		g, err := decodeCacheFile(data)
		require.NoError(t, err)
		checkCacheFile(t, g)
		require.Equal(t, f, g)
		assert.Equal(t, data, g.encode(), "encoding is canonical")
	}
}

// resum recomputes a file's checksum, so that what is checked is the
// structure.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func TestCacheFileRejectsDamage(t *testing.T) {
	f := sampleCache(t, 10)
	data := f.encode()
	edit := func(fn func(b []byte) []byte) []byte { return fn(append([]byte(nil), data...)) }
	first := 16 + 4 + len(f.entries[0].path) // the first entry's status
	for name, b := range map[string][]byte{
		"empty":         {},
		"magic":         edit(func(b []byte) []byte { b[0] = 'X'; return resum(b) }),
		"bit flip":      edit(func(b []byte) []byte { b[30] ^= 1; return b }),
		"version":       edit(func(b []byte) []byte { b[4] = 9; return resum(b) }),
		"entry count":   edit(func(b []byte) []byte { b[8] = 0xff; return resum(b) }),
		"huge count":    edit(func(b []byte) []byte { b[15] = 0x7f; return resum(b) }),
		"algorithm":     edit(func(b []byte) []byte { b[first+keySize+8] = 99; return resum(b) }),
		"digest length": edit(func(b []byte) []byte { b[first+keySize+8+1] = 31; return resum(b) }),
		"order":         edit(func(b []byte) []byte { b[16+4+len("/site/pkg/f")] = 'z'; return resum(b) }),
		"trailing":      resum(append(append(append([]byte(nil), data[:len(data)-4]...), 0), 0, 0, 0, 0)),
	} {
		_, err := decodeCacheFile(b)
		assert.ErrorIs(t, err, ErrCorruptState, name)
	}
	// Cut short anywhere, with or without its checksum made good.
	for k := range len(data) {
		_, err := decodeCacheFile(data[:k])
		require.ErrorIs(t, err, ErrCorruptState, "cut at %d", k)
		if k >= 4 {
			_, err = decodeCacheFile(resum(append([]byte(nil), data[:k]...)))
			require.ErrorIs(t, err, ErrCorruptState, "cut at %d, checksum made good", k)
		}
	}
	// A flipped bit anywhere.
	for k := range len(data) * 8 {
		b := append([]byte(nil), data...)
		b[k/8] ^= 1 << (k % 8)
		_, err := decodeCacheFile(b)
		require.ErrorIs(t, err, ErrCorruptState, "bit %d", k)
	}

	for name, damage := range map[string]func(g *cacheFile){
		"size":        func(g *cacheFile) { g.lists[0].files[0].size = -1 }, // a known-good size past MaxInt64
		"index":       func(g *cacheFile) { g.lists[0].files[0].entry = len(g.entries) },
		"list order":  func(g *cacheFile) { g.lists[0], g.lists[1] = g.lists[1], g.lists[0] },
		"entry order": func(g *cacheFile) { g.entries[0], g.entries[1] = g.entries[1], g.entries[0] },
	} {
		g := sampleCache(t, 10)
		damage(g)
		_, err := decodeCacheFile(g.encode())
		assert.ErrorIs(t, err, ErrCorruptState, name)
	}
	// A label offset past its path.
	g := sampleCache(t, 10)
	g.lists[0].files[0].label = ""
	b := g.encode()
	at := bytes.Index(b, []byte(g.lists[0].name)) + len(g.lists[0].name) + keySize + 8 + 4 + 4 + 4 + 2 + 32 + 8
	require.Equal(t, uint16(len(g.lists[0].files[0].path)), binary.LittleEndian.Uint16(b[at:]))
	binary.LittleEndian.PutUint16(b[at:], uint16(len(g.lists[0].files[0].path)+1))
	_, err := decodeCacheFile(resum(b))
	assert.ErrorIs(t, err, ErrCorruptState, "label")

	_, err = decodeCacheFile(make([]byte, maxCacheFile+1))
	assert.ErrorIs(t, err, ErrCorruptState, "oversize")
}

// FuzzDecodeCacheFile checks that decodeCacheFile rejects any input or
// decodes a file that holds what it guarantees (checkCacheFile) and that
// encodes to bytes that decode to the same. The input is a file less its
// checksum, which the fuzzer would hardly ever get right: it is appended,
// so that the structure is what is explored.
func FuzzDecodeCacheFile(f *testing.F) {
	for _, n := range []int{0, 1, 5} {
		data := sampleCache(f, n).encode()
		f.Add(data[:len(data)-4])
		f.Add(data[:len(data)/2])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
		g, err := decodeCacheFile(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptState)
			return
		}
		checkCacheFile(t, g)
		again, err := decodeCacheFile(g.encode())
		if err != nil {
			t.Fatalf("re-encoded cache does not decode: %v", err)
		}
		require.Equal(t, g, again)
	})
}

// TestCacheFileRead checks a check that reads its cache from the file (a
// new store per check, as the check hook runs) against one handed the
// cache in memory: the same files come from the cache, the same change is
// found, and the file is rewritten only when something changed.
func TestCacheFileRead(t *testing.T) {
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
		require.NotNil(t, c.saved, "check %d", i)
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

	// What a list hands out outlives its cache.
	l := func() *List {
		c := open()
		l, ok := c.List(src, c.Source(src), dir)
		require.True(t, ok)
		h := Hasher{Workers: 2}
		require.NoError(t, h.RunPlanned(t.Context(), 1, func(int) *List { return l }, c))
		return l
	}()
	runtime.GC()
	label, file := l.Label(0), l.File(0)
	assert.Equal(t, files[0].Rel, label)
	assert.Equal(t, files[0].Rel, file.Rel)
	assert.True(t, file.OK())
}

// cacheFixture is a directory of files, checked once so that the state
// directory holds their stat cache.
type cacheFixture struct {
	dir, state string
	files      []File
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	fx := &cacheFixture{dir: t.TempDir(), state: t.TempDir()}
	_, items := plannedTree(t, 12) // item 11: 8 files
	fx.dir, fx.files = items[11][0].Dir, items[11]
	st, err := Check(context.Background(), fx.store(t), fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.NoError(t, st.CacheErr)
	return fx
}

// store opens a new store on the state directory, so that its first
// cache is read from the file.
func (fx *cacheFixture) store(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(fx.state)
	require.NoError(t, err)
	return s
}

// bin returns the cache file's path.
func (fx *cacheFixture) bin(t *testing.T) string {
	t.Helper()
	bins, err := filepath.Glob(filepath.Join(fx.state, "cache", "*.bin"))
	require.NoError(t, err)
	require.Len(t, bins, 1)
	return bins[0]
}

// TestCheckWithDamagedCacheFile checks that a cache file truncated in
// place after a check read it (as another process might) does not disturb
// that check, which holds what it read; that the next check finds the
// file damaged, hashes every file again and writes a new cache; and that
// the check after uses it.
func TestCheckWithDamagedCacheFile(t *testing.T) {
	fx := newCacheFixture(t)
	c, err := fx.store(t).Cache(fx.dir, false)
	require.NoError(t, err)
	require.False(t, c.Full())
	require.NoError(t, os.Truncate(c.path, 0))
	st, err := CheckWith(context.Background(), c, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.NoError(t, st.CacheErr)
	assert.Equal(t, len(fx.files), st.Cached, "what was read is used")
	for i := range fx.files {
		require.True(t, fx.files[i].OK(), fx.files[i].Rel)
	}

	st, err = Check(context.Background(), fx.store(t), fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.NoError(t, st.CacheErr)
	assert.True(t, st.Full)
	assert.Equal(t, len(fx.files), st.Hashed, "the truncated file is discarded as damaged: every file hashed")
	st, err = Check(context.Background(), fx.store(t), fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, len(fx.files), st.Cached, "the new cache is used")
}

// TestCacheFileNotRead checks that a cache file that is not a regular
// file of at most maxCacheFile bytes is not read: one over the size
// (sparse here, so nothing is written), a symbolic link to a good cache
// file, a directory. Each counts as damaged: no error, every file hashed.
func TestCacheFileNotRead(t *testing.T) {
	for name, replace := range map[string]func(t *testing.T, bin string){
		"oversize": func(t *testing.T, bin string) { require.NoError(t, os.Truncate(bin, maxCacheFile+1)) },
		"symlink": func(t *testing.T, bin string) {
			require.NoError(t, os.Rename(bin, bin+".elsewhere"))
			require.NoError(t, os.Symlink(filepath.Base(bin)+".elsewhere", bin))
		},
		"directory": func(t *testing.T, bin string) {
			require.NoError(t, os.Remove(bin))
			require.NoError(t, os.Mkdir(bin, 0o700))
		},
	} {
		t.Run(name, func(t *testing.T) {
			fx := newCacheFixture(t)
			replace(t, fx.bin(t))
			c, err := fx.store(t).Cache(fx.dir, false)
			require.NoError(t, err, "not read, not an error")
			assert.True(t, c.Full())
			assert.Zero(t, c.Len())
		})
	}
}

// TestCacheFileConcurrentWriters checks checks reading a scope's cache
// file while other checks of the scope write and rename new ones: every
// read finds a whole file (the old or a new one), never a torn one, and
// every check verifies.
func TestCacheFileConcurrentWriters(t *testing.T) {
	fx := newCacheFixture(t)
	const writers, readers, rounds = 2, 2, 25
	var wg sync.WaitGroup
	for w := range writers + readers {
		wg.Go(func() {
			for range rounds {
				s, err := OpenStore(fx.state)
				if !assert.NoError(t, err) {
					return
				}
				// A writer forces a full re-hash, which always writes
				// the cache file; a reader checks from it.
				c, err := s.Cache(fx.dir, w < writers)
				if !assert.NoError(t, err) {
					return
				}
				if w >= writers && !assert.NotNil(t, c.saved, "a whole file is read") {
					return
				}
				files := append([]File(nil), fx.files...)
				st, err := CheckWith(context.Background(), c, files, CheckOptions{Workers: 2})
				if !assert.NoError(t, err) || !assert.NoError(t, st.CacheErr) {
					return
				}
				for i := range files {
					assert.True(t, files[i].OK(), files[i].Rel)
				}
			}
		})
	}
	wg.Wait()
	left, err := filepath.Glob(filepath.Join(fx.state, "cache", ".*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left behind")
	bin, err := os.ReadFile(fx.bin(t))
	require.NoError(t, err)
	f, err := decodeCacheFile(bin)
	require.NoError(t, err)
	assert.Len(t, f.entries, len(fx.files))
	for i := range f.entries {
		assert.True(t, strings.HasPrefix(f.entries[i].path, fx.dir+"/"))
	}
}
