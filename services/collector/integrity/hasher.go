package integrity

import (
	"context"
	"hash"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/internal/sysfile"
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
	}
	return "state(?)"
}

// File is one file to check. The caller sets Dir, Rel and Want; Hasher.Run
// fills in the rest.
type File struct {
	// Dir is the directory Rel is relative to.
	Dir string
	// Rel is the path as the package manager listed it (slash-separated,
	// relative to Dir unless absolute). Rel is used as is: callers reject
	// paths that escape their environment before hashing.
	Rel string
	// Want is the known-good digest. Its algorithm is the one the file is
	// hashed with; a zero Want hashes with SHA-256 (taking a snapshot).
	Want Digest

	// State is what the check found.
	State FileState
	// Got is the observed digest when State is FileHashed.
	Got Digest
	// Size is the observed size in bytes.
	Size int64
	// Cached reports that Got came from the stat cache.
	Cached bool
	// Err is why State is FileError.
	Err error

	key   statKey     // status the digest was computed under
	fresh bool        // Got was computed by this check
	ent   *cacheEntry // the file's cache entry, when a cached List knew it
}

// Path returns Dir and Rel joined the way Run opens them.
func (f *File) Path() string {
	var p sysfile.Path
	p.Set(f.Dir, f.Rel)
	return p.String()
}

// OK reports whether the file was hashed and matches Want.
func (f *File) OK() bool { return f.State == FileHashed && f.Got.Equal(&f.Want) }

// DefaultBufferSize is the per-worker read buffer Hasher uses by default.
const DefaultBufferSize = 256 << 10

// Hasher hashes files in parallel. The zero value uses GOMAXPROCS workers
// and DefaultBufferSize buffers.
type Hasher struct {
	// Workers is the number of concurrent workers; 0 means GOMAXPROCS.
	Workers int
	// BufferSize is each worker's read buffer; 0 means DefaultBufferSize.
	BufferSize int
}

// batch is how many files a worker claims at a time.
const batch = 16

// Run checks every file in files, in place. With a cache that is not
// forcing a full re-hash, a file whose status (device, inode, size, mtime,
// ctime, mode) matches its cache entry for the same algorithm takes the
// cached digest after a single lstat; every other file is opened (never
// through a final symbolic link), its status taken from the open file and
// its content read once, up to the size that status reports. Run returns
// early with ctx's error when ctx ends; files not reached stay FilePending.
// Run does not modify the cache: pass the files to Cache.Update afterwards.
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
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			w := worker{buf: make([]byte, size), cache: c}
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
	wg.Wait()
	return ctx.Err()
}

// GroupSize is how many files callers of RunGroups should send at a time
// for the workers to share the load evenly.
const GroupSize = 256

// RunGroups is Run over groups of files received from groups until it is
// closed, so that a caller can hash the files it has prepared while it
// prepares more. Each group is checked in place by one worker. When ctx
// ends, the remaining groups are received but not checked. The caller
// must not touch a group after sending it until RunGroups returns.
func (h *Hasher) RunGroups(ctx context.Context, groups <-chan []File, c *Cache) error {
	workers := h.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	size := h.BufferSize
	if size <= 0 {
		size = DefaultBufferSize
	}
	if c != nil && c.full {
		c = nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			w := worker{buf: make([]byte, size), cache: c}
			for g := range groups {
				if ctx.Err() != nil {
					continue // drain
				}
				for i := range g {
					w.check(&g[i])
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
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
	path   sysfile.Path
	st     sysfile.Stat
	hashes [numAlgorithms]hash.Hash
	sum    [64]byte
	cache  *Cache
}

func (w *worker) check(f *File) {
	f.Cached, f.fresh, f.Err = false, false, nil
	f.Got = Digest{}
	algo := f.Want.Algo
	if !algo.Valid() {
		algo = SHA256
	}
	w.path.Set(f.Dir, f.Rel)
	if w.cache != nil {
		if err := sysfile.Lstat(&w.path, &w.st); err != nil {
			w.fail(f, err)
			return
		}
		if !w.st.Regular() {
			w.irregular(f)
			return
		}
		e := f.ent
		if e == nil {
			e = w.cache.lookup(w.path.Bytes())
		}
		if e != nil && e.key == keyOf(&w.st) && e.digest.Algo == algo {
			f.State, f.Got, f.Size, f.Cached = FileHashed, e.digest, w.st.Size, true
			atomic.StoreUint64(&e.gen, w.cache.gen)
			return
		}
	}
	fd, err := sysfile.Open(&w.path)
	if err != nil {
		if sysfile.NotRegularStat(err, &w.st) {
			w.irregular(f)
			return
		}
		w.fail(f, err)
		return
	}
	defer func() { _ = fd.Close() }()
	if err := fd.Stat(&w.st); err != nil {
		w.fail(f, err)
		return
	}
	if !w.st.Regular() {
		w.irregular(f)
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
	f.Got.Algo = algo
	f.Got.Len = uint8(copy(f.Got.Sum[:], h.Sum(w.sum[:0])))
	f.State, f.Size = FileHashed, total
	f.key, f.fresh = keyOf(&w.st), true
}

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
	case sysfile.IsNotExist(err):
		f.State = FileMissing
	case sysfile.IsLoop(err):
		f.State = FileSymlink
	default:
		// A socket or device node may refuse to open: classify by type.
		if sysfile.Lstat(&w.path, &w.st) == nil && !w.st.Regular() {
			w.irregular(f)
			return
		}
		f.State, f.Err = FileError, err
	}
}
