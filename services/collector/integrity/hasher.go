package integrity

import (
	"context"
	"errors"
	"hash"
	"math"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// FileState is what checking one file found.
type FileState uint8

// The file states Hasher.Run leaves in File.State.
const (
	// FilePending means the file was not checked.
	FilePending FileState = iota
	// FileHashed means the file is a regular file and Got is its digest.
	FileHashed
	// FileMissing means the path, or a directory on it, does not exist.
	FileMissing
	// FileSymlink means the last path component is a symbolic link; it is
	// not followed.
	FileSymlink
	// FileNotRegular means the path is a directory, FIFO, socket or device.
	FileNotRegular
	// FileError means the file could not be read; Err says why.
	FileError
	// FileWrongSize means the file is a regular file whose size is not
	// its known-good size (File.SetWantSize): it was not read, and Size
	// is the size found.
	FileWrongSize
)

func (s FileState) String() string {
	switch s {
	case FilePending:
		return "pending"
	case FileHashed:
		return "hashed"
	case FileMissing:
		return "missing"
	case FileSymlink:
		return "symlink"
	case FileNotRegular:
		return "not a regular file"
	case FileError:
		return "error"
	case FileWrongSize:
		return "wrong size"
	}
	return "state(?)"
}

// File is one file to check. The caller sets Dir, Rel and Want, and the
// known-good size with SetWantSize when the baseline gives it; Hasher.Run
// fills in the rest.
type File struct {
	// Dir is the directory Rel is relative to.
	Dir string
	// Rel is the path as the package manager listed it (slash-separated,
	// relative to Dir unless absolute). Rel is used as is: callers reject
	// paths that escape their environment textually before hashing, and
	// set Hasher.Root to keep symbolic links from leading out of it.
	Rel string
	// Want is the known-good digest. Its algorithm is the one the file is
	// hashed with; a zero Want hashes with SHA-256 (taking a snapshot).
	Want Digest

	// State is what the check found.
	State FileState
	// Cached reports that the observed digest (Got) came from the stat
	// cache.
	Cached  bool
	fresh   bool // the observed digest was computed by this check
	gotWant bool // the observed digest is Want (got is nil)

	// wantSize is the known-good size plus one; 0 when it is unknown.
	wantSize int64

	// Size is the observed size in bytes.
	Size int64
	// Err is why State is FileError.
	Err error

	// got is the observed digest when it differs from Want: a File is
	// kept for every file a full verify checks (30,000 in the
	// benchmark's), almost all of them matching, so the digest is not
	// held twice.
	got *Digest
	key statKey // status the digest was computed under
}

// Got returns the observed digest when State is FileHashed (else the
// zero Digest).
func (f *File) Got() Digest {
	if d := f.gotDigest(); d != nil {
		return *d
	}
	return Digest{}
}

// gotDigest returns the observed digest, nil when there is none.
func (f *File) gotDigest() *Digest {
	if f.gotWant {
		return &f.Want
	}
	return f.got
}

// setGot records d as the observed digest; only one that differs from
// Want is copied.
func (f *File) setGot(d *Digest) {
	if d.Equal(&f.Want) {
		f.gotWant, f.got = true, nil
		return
	}
	c := *d
	f.gotWant, f.got = false, &c
}

// SetWantSize records n, the file's known-good size in bytes (the size
// column of a RECORD row). Run then reports a regular file of any other
// size as FileWrongSize without reading it: content of another size
// cannot have the known-good digest, so a huge file put in place of a
// small one costs a stat, not a read. A negative n (or math.MaxInt64)
// leaves the size unknown: every regular file is read.
func (f *File) SetWantSize(n int64) {
	f.wantSize = 0
	if n >= 0 && n < math.MaxInt64 {
		f.wantSize = n + 1
	}
}

// WantSize returns the known-good size SetWantSize recorded; ok is false
// when it is unknown.
func (f *File) WantSize() (n int64, ok bool) { return f.wantSize - 1, f.wantSize > 0 }

// sizeMismatch reports whether the known-good size is known and not size.
func (f *File) sizeMismatch(size int64) bool { return f.wantSize > 0 && size != f.wantSize-1 }

// Path returns Dir and Rel joined the way Run opens them.
func (f *File) Path() string {
	var p sysfile.Path
	p.Set(f.Dir, f.Rel)
	return p.String()
}

// OK reports whether the file was hashed and matches Want.
func (f *File) OK() bool { return f.State == FileHashed && f.gotWant }

// DefaultBufferSize is the per-worker read buffer Hasher uses by default.
const DefaultBufferSize = 64 << 10

// Hasher hashes files in parallel. The zero value uses GOMAXPROCS workers
// and DefaultBufferSize buffers.
type Hasher struct {
	// Workers is the number of concurrent workers; 0 means GOMAXPROCS.
	Workers int
	// BufferSize is each worker's read buffer; 0 means DefaultBufferSize.
	BufferSize int
	// Root, when set, confines every file to the directory tree at Root
	// (an absolute, clean path): each File's Dir, or its absolute Rel,
	// must lie under Root, and the path is resolved beneath Root (openat2
	// RESOLVE_BENEATH on Linux), so that no symbolic link on the way, such
	// as a package directory replaced by a link to /etc, leads out of it.
	// A file that would is FileError with Err ErrOutsideRoot. Links that
	// stay under Root are followed on the way; a link in the last
	// component is FileSymlink as always.
	Root string
	// BeneathDir, with no Root, confines each file to its own Dir
	// instead: Dir itself is opened as any path is (a link to it is
	// followed), then Rel is resolved beneath it as beneath Root. A file
	// with an absolute Rel or no Dir is FileError with ErrOutsideRoot.
	// Node packages are confined so, each to its package folder.
	BeneathDir bool
}

// ErrOutsideRoot is File.Err when the file's path resolves outside
// Hasher.Root.
var ErrOutsideRoot = sysfile.ErrEscape

// batch is how many files a worker claims at a time.
const batch = 16

// Run checks every file in files, in place. A regular file whose size is
// not its known-good size (SetWantSize) is FileWrongSize, found by its
// lstat (with a cache) or the status of the open file, and never read.
// With a cache that is not forcing a full re-hash, a file whose status
// (device, inode, size, mtime, ctime, mode) matches its cache entry for
// the same algorithm takes the cached digest after a single lstat; every
// other file is opened (never through a final symbolic link), its status
// taken from the open file and its content read once, up to the size that
// status reports. Run returns
// early with ctx's error when ctx ends; files not reached stay FilePending.
// Run adds nothing to the cache: pass the files to Cache.Update
// afterwards.
func (h *Hasher) Run(ctx context.Context, files []File, c *Cache) error {
	workers := h.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if most := (len(files) + batch - 1) / batch; workers > most {
		workers = most
	}
	size := h.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	if c != nil && c.full {
		c = nil
	}
	var next atomic.Int64
	return runWorkers(ctx, workers, func(ctx context.Context) {
		w := worker{buf: make([]byte, size), cache: c, root: h.Root, eachDir: h.BeneathDir && h.Root == ""}
		defer w.close()
		for ctx.Err() == nil {
			start := int(next.Add(batch)) - batch
			if start >= len(files) {
				return
			}
			end := min(start+batch, len(files))
			for i := start; i < end; i++ {
				w.check(&files[i])
			}
		}
	})
}

// runWorkers runs body on n goroutines, waits for them and returns ctx's
// error.
func runWorkers(ctx context.Context, n int, body func(ctx context.Context)) error {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { body(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// RunPlanned is Run over lists of files the workers discover as they go:
// plan(i) is called once for each i in [0, n), by whichever worker gets
// to it first, and returns the list to check for item i (nil for none);
// the workers then share out its files, batch by batch, with the files of
// the items planned before. A worker plans the next item only when no
// planned file is left to check, so every worker keeps busy, whether an
// item has many files or few, without goroutines or channels between
// planning and hashing. plan must be safe for concurrent use; the lists
// it returns are checked in place and must not be touched until
// RunPlanned returns. A list read from the cache (Cache.List) is checked
// against the cache it came from, which should be c. When ctx ends, the
// remaining items are neither planned nor checked.
func (h *Hasher) RunPlanned(ctx context.Context, n int, plan func(i int) *List, c *Cache) error {
	workers := h.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	size := h.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	if c != nil && c.full {
		c = nil
	}
	items := make([]plannedItem, n)
	var next atomic.Int64    // next item to plan
	var planned atomic.Int64 // items whose files are published
	return runWorkers(ctx, workers, func(ctx context.Context) {
		w := worker{buf: make([]byte, size), cache: c, root: h.Root, eachDir: h.BeneathDir && h.Root == ""}
		defer w.close()
		low := 0 // items below low have no file left to claim
		for ctx.Err() == nil {
			if w.claim(items, &low) {
				continue
			}
			if i := int(next.Add(1)) - 1; i < n {
				it := &items[i]
				it.list = plan(i)
				it.ready.Store(true)
				planned.Add(1)
				continue
			}
			if int(planned.Load()) == n && !w.claim(items, &low) {
				return
			}
			runtime.Gosched() // another worker is planning the last items
		}
	})
}

// plannedItem is one item of RunPlanned: its list once planned, and the
// next of its files to claim.
type plannedItem struct {
	ready  atomic.Bool
	cursor atomic.Int64
	list   *List
}

// claim checks the next batch of planned files, if any is left, scanning
// the items from low (which it advances past items fully claimed).
func (w *worker) claim(items []plannedItem, low *int) bool {
	for i := *low; i < len(items); i++ {
		it := &items[i]
		if !it.ready.Load() {
			continue
		}
		m := int64(it.list.Len())
		if it.cursor.Load() >= m {
			if i == *low {
				*low = i + 1
			}
			continue
		}
		start := it.cursor.Add(batch) - batch
		if start >= m {
			continue
		}
		if r := it.list.cached; r != nil {
			for j := start; j < min(start+batch, m); j++ {
				w.checkListed(r, int(j))
			}
			return true
		}
		for j := start; j < min(start+batch, m); j++ {
			w.check(&it.list.Files[j])
		}
		return true
	}
	return false
}

// Stats counts files hashed and files taken from the cache.
func Stats(files []File) (hashed, cached int) {
	for i := range files {
		if files[i].Cached {
			cached++
		} else if files[i].State == FileHashed {
			hashed++
		}
	}
	return hashed, cached
}

// worker is one goroutine's reusable state.
type worker struct {
	buf    []byte
	tmp    File         // a file of a list read from the cache, while it is checked
	path   sysfile.Path // the path opened, relative to at
	full   sysfile.Path // the full path, for cache lookups
	at     sysfile.Dir  // where path is resolved from
	st     sysfile.Stat
	hashes [numAlgorithms]hash.Hash
	got    Digest // the digest just computed or taken from the cache
	cache  *Cache
	dirs   [maxDirs]openDir // directories opened, most recent first
	ndirs  int

	// With Hasher.Root: files are resolved beneath root; with eachDir
	// (Hasher.BeneathDir), each beneath its Dir.
	eachDir  bool
	root     string
	rootDir  sysfile.Dir // root, opened on first use
	rootErr  error       // why root could not be opened
	rootOpen bool
	dirRel   string       // the file's Dir relative to root, when w.at is that Dir
	rpath    sysfile.Path // the file's path relative to root
	walk     sysfile.Walk
}

// maxDirs is how many directories a worker keeps open: files arrive
// grouped by package, so a few suffice.
const maxDirs = 8

// openDir is a File.Dir the worker opened; err is why it could not be
// (paths under it are then resolved from the root).
type openDir struct {
	name string
	dir  sysfile.Dir
	err  error
}

// dir returns the opened directory name, opening it on first use.
// Resolving each file from its package's directory instead of from the
// root saves the kernel walking the same leading components each time.
func (w *worker) dir(name string) (sysfile.Dir, error) {
	for i := 0; i < w.ndirs; i++ {
		if w.dirs[i].name == name {
			d := w.dirs[i]
			copy(w.dirs[1:i+1], w.dirs[:i])
			w.dirs[0] = d
			return d.dir, d.err
		}
	}
	if w.ndirs == maxDirs {
		_ = w.dirs[maxDirs-1].dir.Close()
		w.ndirs--
	}
	copy(w.dirs[1:w.ndirs+1], w.dirs[:w.ndirs])
	var d sysfile.Dir
	var err error
	if w.root != "" {
		// Beneath root: a directory reached through a link leading out
		// is not opened, and its files are resolved from root instead.
		// (With eachDir, the Dir is the root: it is opened as any path.)
		rel, _ := under(w.root, name)
		w.rpath.Set("", rel)
		d, err = sysfile.OpenDirBeneath(w.rootDir, &w.rpath, &w.walk)
	} else {
		d, err = sysfile.OpenDir(name)
	}
	w.dirs[0] = openDir{name: name, dir: d, err: err}
	w.ndirs++
	return d, err
}

// close releases the directories the worker opened.
func (w *worker) close() {
	for i := 0; i < w.ndirs; i++ {
		_ = w.dirs[i].dir.Close()
	}
	w.ndirs = 0
	if w.rootOpen {
		_ = w.rootDir.Close()
		w.rootDir, w.rootErr, w.rootOpen = sysfile.Dir{}, nil, false
	}
}

// under returns p relative to root ("." for root itself) when p is root
// or lies under it, without allocating. Either separator counts where
// the platform's is not '/'.
func under(root, p string) (string, bool) {
	for len(root) > 0 && isSep(root[len(root)-1]) {
		root = root[:len(root)-1]
	}
	if len(p) < len(root) {
		return "", false
	}
	for i := 0; i < len(root); i++ {
		if p[i] != root[i] && (!isSep(p[i]) || !isSep(root[i])) {
			return "", false
		}
	}
	rest := p[len(root):]
	switch {
	case rest == "" || len(rest) == 1 && isSep(rest[0]):
		return ".", true
	case isSep(rest[0]):
		return rest[1:], true
	}
	return "", false
}

func isSep(c byte) bool { return c == '/' || c == filepath.Separator }

// setPathBeneath is setPath with Hasher.Root: path and at point to the
// file relative to its Dir opened beneath root, else relative to root.
// It returns ErrOutsideRoot when the file does not lie under root even
// by name, and root's open error when root cannot be opened.
func (w *worker) setPathBeneath(f *File) error {
	if w.eachDir {
		if f.Dir == "" || f.Rel == "" || f.Rel[0] == '/' {
			return ErrOutsideRoot
		}
		d, err := w.dir(f.Dir)
		if err != nil {
			return err
		}
		w.at, w.dirRel = d, ""
		w.path.Set("", f.Rel)
		return nil
	}
	if !w.rootOpen {
		w.rootDir, w.rootErr = sysfile.OpenDir(w.root)
		w.rootOpen = true
	}
	if w.rootErr != nil {
		return w.rootErr
	}
	w.dirRel = ""
	if f.Dir != "" && f.Rel != "" && f.Rel[0] != '/' {
		rel, ok := under(w.root, f.Dir)
		if !ok {
			return ErrOutsideRoot
		}
		if d, err := w.dir(f.Dir); err == nil {
			w.at, w.dirRel = d, rel
			w.path.Set("", f.Rel)
			return nil
		}
		w.at = w.rootDir
		w.path.Set(rel, f.Rel)
		return nil
	}
	rel, ok := under(w.root, f.Rel)
	if !ok {
		return ErrOutsideRoot
	}
	w.at = w.rootDir
	w.path.Set("", rel)
	return nil
}

// open opens the file setPath or setPathBeneath pointed to. Beneath root,
// a path that leaves the file's Dir is resolved again from root, which
// decides whether it stays inside.
func (w *worker) open(f *File) (sysfile.File, error) {
	if w.root == "" && !w.eachDir {
		return sysfile.OpenAt(w.at, &w.path)
	}
	fd, err := sysfile.OpenBeneath(w.at, &w.path, &w.walk)
	if errors.Is(err, sysfile.ErrEscape) && w.dirRel != "" {
		w.at = w.rootDir
		w.path.Set(w.dirRel, f.Rel)
		w.dirRel = ""
		fd, err = sysfile.OpenBeneath(w.at, &w.path, &w.walk)
	}
	return fd, err
}

// setPath points path and at to the file: relative to its Dir when that
// can be opened, else the full path.
func (w *worker) setPath(f *File) {
	if f.Dir != "" && f.Rel != "" && f.Rel[0] != '/' {
		if d, err := w.dir(f.Dir); err == nil {
			w.at = d
			w.path.Set("", f.Rel)
			return
		}
	}
	w.at = sysfile.Dir{}
	w.path.Set(f.Dir, f.Rel)
}

func (w *worker) check(f *File) { w.checkEntry(f, nil, false) }

// checkListed checks file i of a list read from the cache. The file's
// record links it to its entry, which saves a lookup when the list is
// checked against the cache it came from, as nothing has changed the
// cache since. A file taken from the cache and matching its known-good
// digest leaves only its state behind; any other is kept.
func (w *worker) checkListed(r *listRun, i int) {
	f := &w.tmp
	*f = File{}
	r.fill(f, i)
	var e *cacheEntry
	linked := w.cache != nil && w.cache == r.cache && r.from != nil && w.cache.saved == r.from && len(w.cache.entries) == 0
	if idx := r.list.files[i].entry; linked && idx >= 0 {
		e = &r.from.entries[idx]
	}
	w.checkEntry(f, e, linked)
	if linked && f.Cached && f.gotWant {
		r.state[i] = listOK
	} else {
		r.keep(i, f)
	}
}

// checkEntry checks f; with linked, ref is f's cache entry, nil for none
// (else it is looked up by path).
func (w *worker) checkEntry(f *File, ref *cacheEntry, linked bool) {
	f.Cached, f.fresh, f.Err = false, false, nil
	f.gotWant, f.got = false, nil
	algo := f.Want.Algo
	if !algo.Valid() {
		algo = SHA256
	}
	if w.root == "" && !w.eachDir {
		w.setPath(f)
	} else if err := w.setPathBeneath(f); err != nil {
		f.State, f.Err = FileError, err
		return
	}
	if w.cache != nil {
		if err := sysfile.LstatAt(w.at, &w.path, &w.st); err != nil {
			w.fail(f, err)
			return
		}
		if !w.admit(f) {
			return
		}
		if !linked {
			w.full.Set(f.Dir, f.Rel)
			ref = w.cache.lookup(w.full.Bytes())
		}
		if key := keyOf(&w.st); w.cache.hit(ref, &key, algo, &w.got) {
			f.setGot(&w.got)
			f.State, f.Size, f.Cached = FileHashed, w.st.Size, true
			return
		}
	}
	fd, err := w.open(f)
	if err != nil {
		if sysfile.NotRegularStat(err, &w.st) {
			w.irregular(f)
			return
		}
		w.fail(f, err)
		return
	}
	w.read(f, fd, algo)
	_ = fd.Close()
}

// admit checks w.st, the stat of f's file: a regular file of the size its
// RECORD gives; else it reports f (irregular, or of the wrong size) and
// returns false.
func (w *worker) admit(f *File) bool {
	if !w.st.Regular() {
		w.irregular(f)
		return false
	}
	if f.sizeMismatch(w.st.Size) {
		w.wrongSize(f)
		return false
	}
	return true
}

// read hashes the open file fd for f.
func (w *worker) read(f *File, fd sysfile.File, algo Algorithm) {
	if err := fd.Stat(&w.st); err != nil {
		w.fail(f, err)
		return
	}
	if !w.admit(f) {
		return
	}
	h := w.hashes[algo]
	if h == nil {
		h = algo.New()
		w.hashes[algo] = h
	}
	h.Reset()
	var total int64
	for total < w.st.Size {
		n, err := fd.Read(w.buf)
		if n > 0 {
			h.Write(w.buf[:n])
			total += int64(n)
		}
		if err != nil {
			w.fail(f, err)
			return
		}
		if n == 0 {
			break // truncated while being read: hash what is there
		}
	}
	w.got = Digest{Algo: algo} // Equal compares all of Sum: no bytes of a longer digest before
	w.got.Len = uint8(len(h.Sum(w.got.Sum[:0])))
	f.setGot(&w.got)
	f.State, f.Size = FileHashed, total
	f.key, f.fresh = keyOf(&w.st), true
}

// wrongSize records that f, a regular file of w.st's size, is not of its
// known-good size.
func (w *worker) wrongSize(f *File) { f.State, f.Size = FileWrongSize, w.st.Size }

func (w *worker) irregular(f *File) {
	f.Size = w.st.Size
	if w.st.Symlink() {
		f.State = FileSymlink
	} else {
		f.State = FileNotRegular
	}
}

func (w *worker) fail(f *File, err error) {
	switch {
	case errors.Is(err, sysfile.ErrEscape):
		f.State, f.Err = FileError, ErrOutsideRoot
	case sysfile.IsNotExist(err):
		f.State = FileMissing
	case sysfile.IsLoop(err):
		f.State = FileSymlink
	default:
		// A socket or device node may refuse to open: classify by type.
		if sysfile.LstatAt(w.at, &w.path, &w.st) == nil && !w.st.Regular() {
			w.irregular(f)
			return
		}
		f.State, f.Err = FileError, err
	}
}
