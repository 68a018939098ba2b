package integrity_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func digestOf(t testing.TB, data []byte) integrity.Digest {
	t.Helper()
	sum := sha256.Sum256(data)
	var d integrity.Digest
	require.NoError(t, d.SetBytes(integrity.SHA256, sum[:]))
	return d
}

func TestParseRecordHash(t *testing.T) {
	d, err := integrity.ParseRecordHash("sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU")
	require.NoError(t, err)
	assert.Equal(t, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", d.String())
	d2, err := integrity.ParseHex(d.String())
	require.NoError(t, err)
	assert.True(t, d.Equal(&d2))
	for in, want := range map[string]error{
		"md5=1B2M2Y8AsgTpgAmY7PhCfg":                         integrity.ErrWeakAlgorithm,
		"SHA1=2jmj7l5rSw0yVb_vlWAYkK_YBwk":                   integrity.ErrWeakAlgorithm,
		"shake_128=AAAA":                                     integrity.ErrUnsupportedAlgorithm,
		"sha256=AAAA":                                        integrity.ErrBadDigest,
		"sha256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU": integrity.ErrBadDigest,
		"nohash": integrity.ErrBadDigest,
	} {
		_, err := integrity.ParseRecordHash(in)
		assert.ErrorIs(t, err, want, in)
	}
	for _, a := range []string{"sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384", "sha3_512", "blake2b", "blake2s"} {
		algo, err := integrity.ParseAlgorithm(a)
		require.NoError(t, err, a)
		h := algo.New()
		assert.Equal(t, algo.Size(), h.Size(), a)
	}
}

func writeFiles(t testing.TB, dir string, n int) []integrity.File {
	t.Helper()
	files := make([]integrity.File, n)
	for i := range files {
		rel := filepath.Join("d"+strconv.Itoa(i%7), "f"+strconv.Itoa(i)+".py")
		data := []byte("content " + strconv.Itoa(i) + "\n")
		if i%50 == 0 {
			data = make([]byte, integrity.DefaultBufferSize*2+i) // several reads
			data[7] = byte(i)
		}
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
		files[i] = integrity.File{Dir: dir, Rel: filepath.ToSlash(rel), Want: digestOf(t, data)}
	}
	return files
}

func TestHasherStates(t *testing.T) {
	dir := t.TempDir()
	files := writeFiles(t, dir, 200)
	require.NoError(t, os.Symlink("d0/f0.py", filepath.Join(dir, "link.py")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "adir"), 0o755))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	files = append(files,
		integrity.File{Dir: dir, Rel: "missing.py", Want: files[0].Want},
		integrity.File{Dir: dir, Rel: "nodir/missing.py", Want: files[0].Want},
		integrity.File{Dir: dir, Rel: "link.py", Want: files[0].Want},
		integrity.File{Dir: dir, Rel: "adir", Want: files[0].Want},
		integrity.File{Dir: dir, Rel: "fifo", Want: files[0].Want},
		integrity.File{Dir: "", Rel: filepath.Join(dir, "d1", "f1.py"), Want: files[1].Want},
	)
	var h integrity.Hasher
	require.NoError(t, h.Run(context.Background(), files, nil))
	for i := 0; i < 200; i++ {
		assert.True(t, files[i].OK(), files[i].Rel)
	}
	n := len(files)
	assert.Equal(t, integrity.FileMissing, files[n-6].State)
	assert.Equal(t, integrity.FileMissing, files[n-5].State)
	assert.Equal(t, integrity.FileSymlink, files[n-4].State, "a final symlink is never followed")
	assert.Equal(t, integrity.FileNotRegular, files[n-3].State)
	assert.Equal(t, integrity.FileNotRegular, files[n-2].State, "a FIFO does not block the hasher")
	assert.True(t, files[n-1].OK(), "absolute Rel with empty Dir")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.Run(ctx, writeFiles(t, t.TempDir(), 10), nil), context.Canceled)
}

func TestUnreadableFileIsAnError(t *testing.T) {
	if os.Geteuid() == 0 {
		// root reads anything; use a directory entry that fails to open
		// in another way: a path through a regular file.
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
		files := []integrity.File{{Dir: dir, Rel: "f/x"}}
		var h integrity.Hasher
		require.NoError(t, h.Run(context.Background(), files, nil))
		assert.Equal(t, integrity.FileMissing, files[0].State, "ENOTDIR counts as missing")
		return
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o000))
	files := []integrity.File{{Dir: dir, Rel: "f"}}
	var h integrity.Hasher
	require.NoError(t, h.Run(context.Background(), files, nil))
	assert.Equal(t, integrity.FileError, files[0].State)
}

func TestCacheLifecycle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := integrity.OpenStore(filepath.Join(t.TempDir(), "state"))
	require.NoError(t, err)
	store.FullEvery = 4
	files := writeFiles(t, dir, 100)
	st, err := integrity.Check(ctx, store, dir, files, integrity.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, st.Full, "no cache yet")
	assert.Equal(t, 100, st.Hashed)
	require.NoError(t, st.CacheErr)
	var fulls []bool
	for range 8 {
		st, err = integrity.Check(ctx, store, dir, files, integrity.CheckOptions{})
		require.NoError(t, err)
		fulls = append(fulls, st.Full)
		if !st.Full {
			assert.Equal(t, 100, st.Cached)
			assert.Zero(t, st.Hashed)
		}
	}
	assert.Equal(t, []bool{false, false, false, true, false, false, false, true}, fulls, "a full re-hash every FullEvery checks")
	st, err = integrity.Check(ctx, store, dir, files, integrity.CheckOptions{NoCache: true})
	require.NoError(t, err)
	assert.True(t, st.Full)

	// A change with the same size and mtime is caught through ctime.
	p := filepath.Join(dir, files[1].Rel)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	data, _ := os.ReadFile(p)
	data[0] ^= 0x20
	require.NoError(t, os.WriteFile(p, data, 0o644))
	require.NoError(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	st, err = integrity.Check(ctx, store, dir, files, integrity.CheckOptions{})
	require.NoError(t, err)
	assert.False(t, st.Full)
	assert.Equal(t, 1, st.Hashed)
	assert.False(t, files[1].OK())
	assert.True(t, files[2].OK() && files[2].Cached)
}

func TestCacheCorruptionForcesFullRehash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	store, err := integrity.OpenStore(state)
	require.NoError(t, err)
	files := writeFiles(t, dir, 20)
	for range 2 {
		_, err = integrity.Check(ctx, store, dir, files, integrity.CheckOptions{})
		require.NoError(t, err)
	}
	bins, _ := filepath.Glob(filepath.Join(state, "cache", "*.bin"))
	require.Len(t, bins, 1)
	data, err := os.ReadFile(bins[0])
	require.NoError(t, err)
	for _, damage := range [][]byte{data[:len(data)/2], append(append([]byte{}, data[:40]...), 0xff), {}, []byte("RTIC")} {
		require.NoError(t, os.WriteFile(bins[0], damage, 0o600))
		st, err := integrity.Check(ctx, store, dir, files, integrity.CheckOptions{})
		require.NoError(t, err, "a damaged cache is discarded, not an error")
		assert.True(t, st.Full)
		assert.Equal(t, 20, st.Hashed)
	}
	// No temporary files are left behind.
	left, _ := filepath.Glob(filepath.Join(state, "cache", ".*"))
	assert.Empty(t, left)
}

func TestCacheBounds(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	store, err := integrity.OpenStore(state)
	require.NoError(t, err)
	store.MaxEntries, store.MaxCaches = 30, 3
	dirs := make([]string, 5)
	for i := range dirs {
		dirs[i] = t.TempDir()
		files := writeFiles(t, dirs[i], 50)
		_, err := integrity.Check(ctx, store, dirs[i], files, integrity.CheckOptions{})
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond) // distinct mtimes for pruning order
	}
	bins, _ := filepath.Glob(filepath.Join(state, "cache", "*.bin"))
	assert.LessOrEqual(t, len(bins), 3)
	for _, b := range bins {
		fi, err := os.Stat(b)
		require.NoError(t, err)
		assert.Less(t, fi.Size(), int64(30*200), "entries are bounded")
	}
}

func TestChangeDigestAndAllowlist(t *testing.T) {
	base := integrity.Result{Name: "pkg", Version: "1.0", Changes: []integrity.Change{
		{Path: "b.py", Kind: integrity.ChangeMissing},
		{Path: "a.py", Kind: integrity.ChangeModified, Observed: "sha256:01"},
		{Path: "a.py", Kind: integrity.ChangeModified, Observed: "sha256:01"},
	}}
	r1 := base
	r1.Changes = append([]integrity.Change(nil), base.Changes...)
	r1.Finish(nil)
	assert.Equal(t, integrity.StatusModified, r1.Status)
	assert.Len(t, r1.Changes, 2, "duplicates are dropped")
	assert.Equal(t, "a.py", r1.Changes[0].Path)

	r2 := integrity.Result{Name: "pkg", Version: "1.0", Changes: []integrity.Change{base.Changes[1], base.Changes[0]}}
	r2.Finish(nil)
	assert.Equal(t, r1.ChangeDigest, r2.ChangeDigest, "order does not matter")

	r3 := integrity.Result{Name: "pkg", Version: "1.0", Changes: []integrity.Change{{Path: "a.py", Kind: integrity.ChangeModified, Observed: "sha256:02"}, base.Changes[0]}}
	r3.Finish(nil)
	assert.NotEqual(t, r1.ChangeDigest, r3.ChangeDigest, "a further edit is a new change")

	allow, err := integrity.NewAllowlist([]integrity.Expectation{{Path: "a.py", Reason: "known"}, {Path: "**/c/*.pem", Reason: "ca"}})
	require.NoError(t, err)
	r4 := integrity.Result{Name: "pkg", Version: "1.0", Changes: []integrity.Change{base.Changes[1], base.Changes[0]}}
	r4.Finish(allow)
	assert.Equal(t, integrity.StatusModified, r4.Status)
	assert.NotEqual(t, r1.ChangeDigest, r4.ChangeDigest)
	r5 := integrity.Result{Name: "pkg", Version: "1.0", Changes: []integrity.Change{base.Changes[1]}}
	r5.Finish(allow)
	assert.Equal(t, integrity.StatusOK, r5.Status)
	assert.Empty(t, r5.ChangeDigest)
	assert.Equal(t, "modified (expected: known)", r5.Changes[0].Label())

	for path, ok := range map[string]bool{"x/a.py": true, "a.py": true, "x/c/k.pem": true, "c/k.pem": true, "x/c/d/k.pem": false} {
		_, got := allow.Match("any", path)
		assert.Equal(t, ok, got, path)
	}
	_, err = integrity.NewAllowlist([]integrity.Expectation{{Path: "[", Reason: "r"}})
	assert.ErrorIs(t, err, integrity.ErrBadPattern)
	_, err = integrity.NewAllowlist([]integrity.Expectation{{Path: "a", Reason: "  "}})
	assert.ErrorIs(t, err, integrity.ErrNoReason)
}

func TestSnapshotStore(t *testing.T) {
	store, err := integrity.OpenStore(t.TempDir())
	require.NoError(t, err)
	snap, err := store.Snapshot("/p")
	require.NoError(t, err)
	assert.Nil(t, snap)
	require.NoError(t, store.SaveSnapshot(&integrity.Snapshot{Dir: "/p", Name: "x", Files: map[string]string{"a": "sha256:00"}}))
	snap, err = store.Snapshot("/p")
	require.NoError(t, err)
	assert.Equal(t, "x", snap.Name)
	assert.NotEmpty(t, snap.TakenAt)
	require.NoError(t, store.DeleteSnapshot("/p"))
	snap, err = store.Snapshot("/p")
	require.NoError(t, err)
	assert.Nil(t, snap)
}

func TestSocketIsNotRegular(t *testing.T) {
	dir := t.TempDir()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, syscall.Close(fd)) }()
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(dir, "sock")}))
	files := []integrity.File{{Dir: dir, Rel: "sock"}}
	var h integrity.Hasher
	require.NoError(t, h.Run(context.Background(), files, nil))
	assert.Equal(t, integrity.FileNotRegular, files[0].State)
}
