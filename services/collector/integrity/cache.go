package integrity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// statKey is the file status a cached digest is valid for.
type statKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	mode         uint32
}

func keyOf(st *sysfile.Stat) statKey {
	return statKey{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtime, ctime: st.Ctime, mode: st.Mode}
}

// Cache is the stat cache of one scope (one Python environment, one Node
// project). Open it with Store.Cache, pass it to Hasher.Run, then Update it
// with the checked files and Commit it; Commit hands it back to its Store
// for the next check, so the cache must not be used after Commit.
//
// Besides file digests it keeps parsed baselines (List, PutList), so an
// unchanged RECORD is not parsed again and its files link straight to
// their cache entries.
//
// The cache file is read and decoded whole (decodeCacheFile) into saved.
// What a check changes (Update, PutList) is kept beside it until Commit
// writes a new file, whose decoded content becomes saved for the next
// check.
type Cache struct {
	path      string                 // cache file
	countPath string                 // checks-since-full file
	saved     *cacheFile             // the cache file as last read or written; nil for none
	entries   map[string]*cacheEntry // entries added, changed or removed since (by Update)
	mu        sync.Mutex             // guards lists and the lists' generations
	lists     map[string]*cachedList // lists stored since (by PutList)
	gen       uint64                 // this check's generation
	sinceFull uint64                 // checks since the last full re-hash, before this one
	full      bool                   // this check re-hashes everything
	dirty     bool
	max       int
	keep      uint64
	fullEvery int

	store  *Store  // the store Commit hands the cache back to
	file   statKey // the cache file's status when last read or written
	fileOK bool    // file is known
	seq    uint64  // when it was handed back (Store.keepWarm)
}

// setSaved makes f (nil for none) the cache's saved content, with nothing
// changed beside it.
func (c *Cache) setSaved(f *cacheFile) {
	c.saved, c.entries, c.lists = f, nil, nil
}

// Full reports whether this check ignores cached digests (a forced or
// periodic full re-hash).
func (c *Cache) Full() bool { return c == nil || c.full }

// Len returns the number of cached entries.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	if c.saved != nil {
		n = len(c.saved.entries)
	}
	for k, e := range c.entries {
		switch saved := c.saved.find(k) >= 0; {
		case e.gone && saved:
			n--
		case !e.gone && !saved:
			n++
		}
	}
	return n
}

// lookup returns the entry for path, nil when there is none. Safe for
// concurrent use during a run.
func (c *Cache) lookup(path []byte) *cacheEntry {
	if len(c.entries) > 0 {
		if e := c.entries[string(path)]; e != nil {
			if e.gone {
				return nil
			}
			return e
		}
	}
	if i := c.saved.find(bytesString(path)); i >= 0 {
		return &c.saved.entries[i]
	}
	return nil
}

// hit reports whether e (nil for none) holds a digest of algorithm algo
// for status key; if so it copies the digest to out and marks the entry
// seen by this check. Safe for concurrent use during a run.
func (c *Cache) hit(e *cacheEntry, key *statKey, algo Algorithm, out *Digest) bool {
	if e == nil || e.key != *key || e.digest.Algo != algo {
		return false
	}
	*out = e.digest
	if atomic.LoadUint64(&e.gen) != c.gen {
		atomic.StoreUint64(&e.gen, c.gen)
	}
	return true
}

// SourceStat is the status of a baseline's source file (a RECORD), taken
// before reading it.
type SourceStat struct {
	key statKey
	ok  bool
}

// Source takes the status of the baseline file at path. Take it before
// reading the file, so that a change made while it is read invalidates
// what PutList stores.
func (c *Cache) Source(path string) SourceStat {
	if c == nil {
		return SourceStat{}
	}
	var p sysfile.Path
	var st sysfile.Stat
	p.Set("", path)
	if err := sysfile.Lstat(&p, &st); err != nil || !st.Regular() {
		return SourceStat{}
	}
	return SourceStat{key: keyOf(&st), ok: true}
}

// List returns the baseline stored for path under the same source
// status, or false (always on a full re-hash, so that the baseline is
// parsed again too). A file whose full path lies under dir is resolved
// from dir (File.Dir set to dir, Rel relative to it); any other has Dir
// empty and Rel the full path.
//
// The list is checked in place: its files are taken from the cache's
// list as the hasher reaches them, and only those that are not taken
// from the cache unchanged are kept (see List). List is safe for
// concurrent use.
func (c *Cache) List(path string, src SourceStat, dir string) (*List, bool) {
	if c == nil || c.full || !src.ok {
		return nil, false
	}
	l, from := c.findList(path, src)
	if l == nil {
		return nil, false
	}
	dir = strings.TrimSuffix(dir, "/")
	return &List{Extra: l.extra, cached: &listRun{cache: c, from: from, list: l, dir: dir, state: make([]uint8, len(l.files))}}, true
}

// findList returns the list stored for path under src's status, in this
// check or else in the saved file (then from is that file), marking it
// used by this check.
func (c *Cache) findList(path string, src SourceStat) (l *cachedList, from *cacheFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l = c.lists[path]; l == nil {
		l, from = c.saved.list(path), c.saved
	}
	if l == nil || l.key != src.key {
		return nil, nil
	}
	l.gen = c.gen
	return l, from
}

// splitDir returns ("", p), or (dir, p relative to dir) when p lies
// under dir.
func splitDir(dir, p string) (string, string) {
	if dir != "" && len(p) > len(dir)+1 && p[len(dir)] == '/' && p[:len(dir)] == dir {
		return dir, p[len(dir)+1:]
	}
	return "", p
}

// PutList stores the baseline parsed from path (read after Source
// returned src). Files keep their paths as Dir joined with Rel; the
// labels must be parallel to the files. It is safe for concurrent use.
func (c *Cache) PutList(path string, src SourceStat, l *List) {
	if c == nil || !src.ok || l.cached != nil || len(l.Labels) != len(l.Files) {
		return
	}
	cl := &cachedList{name: path, key: src.key, gen: c.gen, extra: l.Extra, files: make([]listedFile, len(l.Files))}
	for i := range l.Files {
		f := &l.Files[i]
		cl.files[i] = listedFile{path: f.Path(), entry: -1, want: f.Want, size: f.wantSize, label: l.Labels[i]}
	}
	c.mu.Lock()
	if c.lists == nil {
		c.lists = map[string]*cachedList{}
	}
	c.lists[path] = cl
	c.dirty = true
	c.mu.Unlock()
}

// Update records the digests Run computed for files (and drops entries for
// files found missing or no longer regular).
func (c *Cache) Update(files []File) {
	if c == nil {
		return
	}
	var p sysfile.Path
	for i := range files {
		c.update(&files[i], &p)
	}
}

// UpdateList is Update for the files of l as RunPlanned checked them.
func (c *Cache) UpdateList(l *List) {
	if l == nil {
		return
	}
	if r := l.cached; r != nil {
		c.Update(r.kept)
		return
	}
	c.Update(l.Files)
}

func (c *Cache) update(f *File, p *sysfile.Path) {
	switch {
	case f.fresh && f.State == FileHashed:
		got := f.gotDigest()
		p.Set(f.Dir, f.Rel)
		if e := c.entries[string(p.Bytes())]; e != nil {
			if !e.gone && e.key == f.key && e.digest.Equal(got) {
				e.gen = c.gen
				return
			}
			e.key, e.digest, e.gen, e.gone = f.key, *got, c.gen, false
			c.dirty = true
			return
		}
		if i := c.saved.find(bytesString(p.Bytes())); i >= 0 {
			if e := &c.saved.entries[i]; e.key == f.key && e.digest.Equal(got) {
				e.gen = c.gen
				return
			}
		}
		if c.entries == nil {
			c.entries = map[string]*cacheEntry{}
		}
		c.entries[p.String()] = &cacheEntry{key: f.key, digest: *got, gen: c.gen}
		c.dirty = true
	case f.State == FileMissing || f.State == FileSymlink || f.State == FileNotRegular:
		p.Set(f.Dir, f.Rel)
		if e := c.entries[string(p.Bytes())]; e != nil {
			if !e.gone {
				e.gone = true
				c.dirty = true
			}
			return
		}
		if c.saved.find(bytesString(p.Bytes())) >= 0 {
			if c.entries == nil {
				c.entries = map[string]*cacheEntry{}
			}
			c.entries[p.String()] = &cacheEntry{gone: true}
			c.dirty = true
		}
	}
}

// Commit persists the cache when it changed or this check was a full
// re-hash, and always advances the check counter. Entries and lists not
// seen for 2×FullEvery checks are dropped, then the oldest entries beyond
// the entry bound. Once both files are written, the cache goes back to its
// Store, which hands it to the next check of the scope instead of reading
// the file again (see Store.Cache).
func (c *Cache) Commit() error {
	if c == nil {
		return nil
	}
	since := c.sinceFull + 1
	if c.full {
		since = 0
	}
	if c.dirty || c.full {
		if err := c.save(); err != nil {
			return err
		}
		c.dirty = false
	}
	// The count is not fsynced: losing it only brings a full re-hash
	// forward, and an unreadable count forces one.
	line := strconv.FormatUint(c.gen, 10) + " " + strconv.FormatUint(since, 10) + "\n"
	if err := writeAtomic(c.countPath, []byte(line), false); err != nil {
		return err
	}
	if c.store != nil {
		c.store.keepWarm(c)
	}
	return nil
}

// merged returns the saved entries and lists with this check's changes
// applied: what save writes, less what evict drops.
func (c *Cache) merged() (map[string]*cacheEntry, map[string]*cachedList) {
	var saved cacheFile
	if c.saved != nil {
		saved = *c.saved
	}
	entries := make(map[string]*cacheEntry, len(saved.entries)+len(c.entries))
	for i := range saved.entries {
		if e := &saved.entries[i]; c.entries[e.path] == nil {
			entries[e.path] = e
		}
	}
	for k, e := range c.entries {
		if !e.gone {
			entries[k] = e
		}
	}
	lists := make(map[string]*cachedList, len(saved.lists)+len(c.lists))
	for i := range saved.lists {
		if l := &saved.lists[i]; c.lists[l.name] == nil {
			lists[l.name] = l
		}
	}
	for k, l := range c.lists {
		lists[k] = l
	}
	return entries, lists
}

// evict drops entries and lists not seen for 2×FullEvery checks, then the
// oldest entries beyond the entry bound.
func (c *Cache) evict(entries map[string]*cacheEntry, lists map[string]*cachedList) {
	if c.gen > c.keep {
		floor := c.gen - c.keep
		for k, e := range entries {
			if e.gen < floor {
				delete(entries, k)
			}
		}
		for k, l := range lists {
			if l.gen < floor {
				delete(lists, k)
			}
		}
	}
	if c.max > 0 && len(entries) > c.max {
		type kv struct {
			k   string
			gen uint64
		}
		all := make([]kv, 0, len(entries))
		for k, e := range entries {
			all = append(all, kv{k, e.gen})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].gen < all[j].gen })
		for _, x := range all[:len(all)-c.max] {
			delete(entries, x.k)
		}
	}
	// Lists cost about as much as their entries: keep them within the
	// same bound.
	n := 0
	for _, l := range lists {
		n += len(l.files)
	}
	if c.max > 0 && n > c.max {
		clear(lists)
	}
}

// save writes the cache file: the saved content with this check's
// changes, less what evict drops. What is written, decoded again, becomes
// the saved content.
func (c *Cache) save() error {
	entries, lists := c.merged()
	c.evict(entries, lists)
	data := newCacheFile(entries, lists).encode()
	if len(data) > maxCacheFile {
		return fmt.Errorf("write stat cache: %d bytes, over %d", len(data), maxCacheFile)
	}
	if err := writeAtomic(c.path, data, true); err != nil {
		return err
	}
	f, err := decodeCacheFile(data)
	if err != nil {
		return fmt.Errorf("stat cache: %w", err) // not reached: data was just encoded
	}
	c.setSaved(f)
	st, ok := fileStatus(c.path)
	c.file, c.fileOK = keyOf(&st), ok && st.Size == int64(len(data))
	return nil
}

// fileStatus returns the status of the regular file at path.
func fileStatus(path string) (sysfile.Stat, bool) {
	var p sysfile.Path
	var st sysfile.Stat
	p.Set("", path)
	err := sysfile.Lstat(&p, &st)
	return st, err == nil && st.Regular()
}

// load reads the cache file whole (at most maxCacheFile bytes, a regular
// file, not through a symbolic link) and decodes it; a missing file is an
// empty cache, a damaged one ErrCorruptState. It takes the file's status
// first, so that a file replaced while it is read is not mistaken for the
// one read.
func (c *Cache) load() error {
	st, ok := fileStatus(c.path)
	data, err := sysfile.ReadFile(c.path, maxCacheFile)
	switch {
	case sysfile.IsNotExist(err):
		return nil
	case errors.Is(err, sysfile.ErrTooLarge) || errors.Is(err, sysfile.ErrNotRegular) || sysfile.IsLoop(err):
		return fmt.Errorf("%w: stat cache: %w", ErrCorruptState, err)
	case err != nil:
		return fmt.Errorf("read stat cache: %w", err)
	}
	f, err := decodeCacheFile(data)
	if err != nil {
		return err
	}
	c.setSaved(f)
	c.file, c.fileOK = keyOf(&st), ok && st.Size == int64(len(data))
	return nil
}

// bytesString converts without copying: the result aliases b, which must
// not change while the string is in use.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// readCount reads "<generation> <checks since full>"; ok is false when the
// file is missing or damaged.
func readCount(path string) (gen, since uint64, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, 0, false
	}
	g, err1 := strconv.ParseUint(fields[0], 10, 64)
	s, err2 := strconv.ParseUint(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return g, s, true
}

// writeAtomic writes data to a temporary file beside path and renames it
// over path; with sync it fsyncs the file before and the directory after
// the rename.
func writeAtomic(path string, data []byte, sync bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if sync {
		if d, derr := os.Open(dir); derr == nil {
			_ = d.Sync()
			_ = d.Close()
		}
	}
	return nil
}
