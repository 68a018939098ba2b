package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
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

// cacheEntry is an entry added, changed or removed in memory since the
// cache's view was read or written.
type cacheEntry struct {
	key    statKey
	digest Digest
	gen    uint64 // check generation that last saw the entry (atomic)
	gone   bool   // removed: the file is missing or no longer regular
}

// cachedList is a parsed baseline (a RECORD's hashed rows) stored by
// PutList, kept while its source file's status is unchanged.
type cachedList struct {
	key    statKey
	gen    uint64
	extra  int
	paths  []string // files' paths as hashed (Dir "" + Rel)
	wants  []Digest
	sizes  []int64 // File.wantSize
	labels []string
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
// The cache reads the file through a view (see view): the file is mapped,
// checked and indexed, never decoded as a whole, and a check reads the
// entries and lists it uses from it. What a check changes (Update,
// PutList) is kept beside the view until Commit writes a new file, which
// becomes the view the next check is handed.
type Cache struct {
	path      string                 // cache file
	countPath string                 // checks-since-full file
	view      *view                  // the cache file as last read or written; nil for none
	seen      []uint32               // bit per view entry: seen by a check since the view was read (atomic)
	entries   map[string]*cacheEntry // entries added, changed or removed since (by Update)
	mu        sync.Mutex             // guards lists and listGen
	lists     map[string]*cachedList // lists stored since (by PutList)
	listGen   []uint64               // per view list: the generation that last used it, 0 for its own
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

// setView makes v (nil for none) the cache's view, with nothing changed
// beside it.
func (c *Cache) setView(v *view) {
	c.view, c.entries, c.lists = v, nil, nil
	c.seen, c.listGen = nil, nil
	if v != nil {
		c.seen = make([]uint32, (len(v.ents)+31)/32)
		c.listGen = make([]uint64, len(v.lists))
	}
}

// Full reports whether this check ignores cached digests (a forced or
// periodic full re-hash).
func (c *Cache) Full() bool { return c == nil || c.full }

// Len returns the number of cached entries.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	n := c.view.len()
	for k, e := range c.entries {
		switch inView := c.view.find(stringBytes(k)) >= 0; {
		case e.gone && inView:
			n--
		case !e.gone && !inView:
			n++
		}
	}
	return n
}

// entryRef locates a file's cache entry: one in memory, or the view's
// entry idx; neither (mem nil, idx -1) when there is none.
type entryRef struct {
	mem *cacheEntry
	idx int
}

var noEntry = entryRef{idx: -1}

// lookup finds the entry for path. Safe for concurrent use during a run.
func (c *Cache) lookup(path []byte) entryRef {
	if len(c.entries) > 0 {
		if e := c.entries[string(path)]; e != nil {
			if e.gone {
				return noEntry
			}
			return entryRef{mem: e, idx: -1}
		}
	}
	return entryRef{idx: c.view.find(path)}
}

// hit reports whether the entry ref holds a digest of algorithm algo for
// status key; if so it copies the digest to out and marks the entry seen
// by this check. Safe for concurrent use during a run.
func (c *Cache) hit(ref entryRef, key *statKey, algo Algorithm, out *Digest) bool {
	if e := ref.mem; e != nil {
		if e.key != *key || e.digest.Algo != algo {
			return false
		}
		*out = e.digest
		atomic.StoreUint64(&e.gen, c.gen)
		return true
	}
	if ref.idx < 0 || !c.view.entryHit(ref.idx, key, algo, out) {
		return false
	}
	c.markSeen(ref.idx)
	return true
}

// markSeen records that the view's entry i was seen by this check.
func (c *Cache) markSeen(i int) {
	if w := &c.seen[i>>5]; atomic.LoadUint32(w)&(1<<(i&31)) == 0 {
		atomic.OrUint32(w, 1<<(i&31))
	}
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
// A list read from the cache file is checked in place: its files are
// read from the file as the hasher reaches them, and only those that are
// not taken from the cache unchanged are kept (see List). A list stored
// by PutList in this check comes as a fresh copy of its Files. List is
// safe for concurrent use.
func (c *Cache) List(path string, src SourceStat, dir string) (*List, bool) {
	if c == nil || c.full || !src.ok {
		return nil, false
	}
	dir = strings.TrimSuffix(dir, "/")
	l, li := c.findList(path, src)
	if l == nil {
		if li < 0 || c.view.lists[li].key != src.key {
			return nil, false
		}
		vl := &c.view.lists[li]
		return &List{Extra: vl.extra, cached: &listRun{cache: c, view: c.view, list: vl, dir: dir, state: make([]uint8, vl.n)}}, true
	}
	if l.key != src.key {
		return nil, false
	}
	out := &List{Files: make([]File, len(l.paths)), Labels: l.labels, Extra: l.extra}
	for i := range out.Files {
		f := &out.Files[i]
		f.Rel, f.Want, f.wantSize = l.paths[i], l.wants[i], l.sizes[i]
		f.Dir, f.Rel = splitDir(dir, f.Rel)
	}
	return out, true
}

// findList returns the list stored for path in this check, else the
// index of the view's list for path (-1 for none), marking either as used
// when its source is src's. It reads the mapped view under c.mu, so it
// unlocks by defer: a fault reading the mapping (ErrCacheFault) must not
// leave c.mu held for the other workers.
func (c *Cache) findList(path string, src SourceStat) (l *cachedList, li int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, li = c.lists[path], -1
	switch {
	case l != nil:
		if l.key == src.key {
			l.gen = c.gen
		}
	case c.view != nil:
		if li = c.view.list(path); li >= 0 && c.view.lists[li].key == src.key {
			c.listGen[li] = c.gen
		}
	}
	return l, li
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
	cl := &cachedList{key: src.key, gen: c.gen, extra: l.Extra, paths: make([]string, len(l.Files)),
		wants: make([]Digest, len(l.Files)), sizes: make([]int64, len(l.Files)), labels: l.Labels}
	for i := range l.Files {
		f := &l.Files[i]
		cl.paths[i], cl.wants[i], cl.sizes[i] = f.Path(), f.Want, f.wantSize
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
		if i := c.view.find(p.Bytes()); i >= 0 {
			var d Digest
			if c.view.entryDigest(i, &d); c.view.entryKey(i) == f.key && d.Equal(got) {
				c.markSeen(i)
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
		if c.view.find(p.Bytes()) >= 0 {
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

// merged returns the view's entries and lists with this check's changes
// applied: what save writes. Entries and lists seen by a check since the
// view was read take this check's generation. Their paths are read from
// the view's bytes: they must not be used once the view is gone.
func (c *Cache) merged() (map[string]*cacheEntry, map[string]*cachedList) {
	v := c.view
	ents := make(map[string]*cacheEntry, v.len()+len(c.entries))
	if v != nil {
		slab := make([]cacheEntry, len(v.ents))
		for i := range v.ents {
			p := bytesString(v.entryPath(i))
			if _, ok := c.entries[p]; ok {
				continue
			}
			e := &slab[i]
			e.key, e.gen = v.entryKey(i), v.entryGen(i)
			v.entryDigest(i, &e.digest)
			if c.seen[i>>5]&(1<<(i&31)) != 0 {
				e.gen = c.gen
			}
			ents[p] = e
		}
	}
	for k, e := range c.entries {
		if !e.gone {
			ents[k] = e
		}
	}
	lists := make(map[string]*cachedList, len(c.lists)+len(c.listGen))
	if v != nil {
		var lf listFile
		for name, li := range v.named {
			if _, ok := c.lists[name]; ok {
				continue
			}
			vl := &v.lists[li]
			l := &cachedList{key: vl.key, gen: vl.gen, extra: vl.extra, paths: make([]string, vl.n),
				wants: make([]Digest, vl.n), sizes: make([]int64, vl.n), labels: make([]string, vl.n)}
			if g := c.listGen[li]; g != 0 {
				l.gen = g
			}
			for j := range vl.n {
				v.file(vl, j, &lf)
				l.paths[j], l.labels[j], l.sizes[j] = bytesString(lf.path), bytesString(lf.label), lf.size
				readDigest(v.data[lf.want:], &l.wants[j])
			}
			lists[name] = l
		}
	}
	for k, l := range c.lists {
		lists[k] = l
	}
	return ents, lists
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
		n += len(l.paths)
	}
	if c.max > 0 && n > c.max {
		clear(lists)
	}
}

// castagnoli is the CRC-32C table of the cache file's checksum, which
// detects a damaged file (it is not a security boundary: whoever can
// write the state directory can rewrite the cache).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	cacheMagic   = "RTIC"
	cacheVersion = 3
	noIndex      = math.MaxUint32
	noOffset     = math.MaxUint16
)

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) key(k statKey) {
	e.u64(k.dev)
	e.u64(k.ino)
	e.u64(uint64(k.size))
	e.u64(uint64(k.mtime))
	e.u64(uint64(k.ctime))
	e.u32(k.mode)
}
func (e *encoder) digest(d *Digest) {
	e.u8(uint8(d.Algo))
	e.u8(d.Len)
	e.b = append(e.b, d.Bytes()...)
}

// u32sum appends the CRC-32C of everything written and returns the file.
func (e *encoder) u32sum() []byte {
	e.u32(crc32.Checksum(e.b, castagnoli))
	return e.b
}

// save writes the cache file: the view with this check's changes, less
// what evict drops. The bytes written become the cache's view.
func (c *Cache) save() error {
	old := c.view
	entries, lists := c.merged()
	c.evict(entries, lists)
	data := encode(entries, lists)
	runtime.KeepAlive(old) // merged's paths are old's bytes
	if err := writeAtomic(c.path, data, true); err != nil {
		return err
	}
	v, err := parseView(data)
	if err != nil {
		return fmt.Errorf("stat cache: %w", err) // not reached: data was just encoded
	}
	c.setView(v)
	st, ok := fileStatus(c.path)
	c.file, c.fileOK = keyOf(&st), ok && st.Size == int64(len(data))
	return nil
}

// encode returns the cache file of entries and lists.
func encode(entries map[string]*cacheEntry, lists map[string]*cachedList) []byte {
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	enc := &encoder{b: make([]byte, 0, len(entries)*200+64)}
	enc.b = append(enc.b, cacheMagic...)
	enc.u32(cacheVersion)
	enc.u64(uint64(len(keys)))
	index := make(map[string]uint32, len(keys))
	for i, k := range keys {
		e := entries[k]
		index[k] = uint32(i)
		enc.str(k)
		enc.key(e.key)
		enc.u64(e.gen)
		enc.digest(&e.digest)
	}
	names := make([]string, 0, len(lists))
	for k := range lists {
		names = append(names, k)
	}
	sort.Strings(names)
	enc.u64(uint64(len(names)))
	for _, name := range names {
		l := lists[name]
		enc.str(name)
		enc.key(l.key)
		enc.u64(l.gen)
		enc.u32(uint32(l.extra))
		enc.u32(uint32(len(l.paths)))
		for i, p := range l.paths {
			if idx, ok := index[p]; ok {
				enc.u32(idx)
			} else {
				enc.u32(noIndex)
				enc.str(p)
			}
			enc.digest(&l.wants[i])
			enc.u64(uint64(l.sizes[i]))
			if lab := l.labels[i]; strings.HasSuffix(p, lab) && len(p)-len(lab) < noOffset {
				enc.u16(uint16(len(p) - len(lab)))
			} else {
				enc.u16(noOffset)
				enc.str(lab)
			}
		}
	}
	return enc.u32sum()
}

// fileStatus returns the status of the regular file at path.
func fileStatus(path string) (sysfile.Stat, bool) {
	var p sysfile.Path
	var st sysfile.Stat
	p.Set("", path)
	err := sysfile.Lstat(&p, &st)
	return st, err == nil && st.Regular()
}

// load reads the cache file into the cache's view; a missing file is an
// empty cache, a damaged one ErrCorruptState. It takes the file's status
// first, so that a file replaced while it is read is not mistaken for the
// one read.
func (c *Cache) load() error {
	st, ok := fileStatus(c.path)
	f, err := os.Open(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read stat cache: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read stat cache: %w", err)
	}
	size := fi.Size()
	if size < 16+4 || int64(int(size)) != size {
		return fmt.Errorf("%w: stat cache: bad header", ErrCorruptState)
	}
	data, mapped, err := mapFile(f, int(size))
	if err != nil {
		return fmt.Errorf("read stat cache: %w", err)
	}
	var v *view
	err = catchFault(func() (err error) {
		v, err = parseView(data)
		return err
	})
	if errors.Is(err, ErrCacheFault) {
		err = fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if err != nil {
		if mapped {
			unmapFile(data)
		}
		return err
	}
	if mapped {
		// Unmapped once nothing uses the view: nothing read from it
		// outlives it (see view).
		runtime.AddCleanup(v, unmapFile, data)
	}
	c.setView(v)
	c.file, c.fileOK = keyOf(&st), ok && st.Size == size
	return nil
}

// readFile reads the first size bytes of f.
func readFile(f *os.File, size int) ([]byte, bool, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, false, err
	}
	return b, false, nil
}

// decoder reads a cache file; reading past its end sets bad.
type decoder struct {
	b   []byte
	r   int
	bad bool
}

func (d *decoder) need(n int) bool {
	if d.bad || n < 0 || n > len(d.b)-d.r {
		d.bad = true
		return false
	}
	return true
}

func (d *decoder) skip(n int) {
	if d.need(n) {
		d.r += n
	}
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	d.r++
	return d.b[d.r-1]
}

func (d *decoder) u16() uint16 {
	if !d.need(2) {
		return 0
	}
	d.r += 2
	return binary.LittleEndian.Uint16(d.b[d.r-2:])
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	d.r += 4
	return binary.LittleEndian.Uint32(d.b[d.r-4:])
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	d.r += 8
	return binary.LittleEndian.Uint64(d.b[d.r-8:])
}

// bytes reads a length-prefixed string, as a slice of the input.
func (d *decoder) bytes() []byte {
	n := int(d.u32())
	if !d.need(n) {
		return nil
	}
	d.r += n
	return d.b[d.r-n : d.r]
}

func (d *decoder) key() statKey {
	if !d.need(keySize) {
		return statKey{}
	}
	d.r += keySize
	return readKey(d.b[d.r-keySize:])
}

// digest skips a digest, checking its algorithm and length.
func (d *decoder) digest() {
	algo, n := Algorithm(d.u8()), int(d.u8())
	if !d.need(n) || !algo.Valid() || n != algo.Size() {
		d.bad = true
		return
	}
	d.r += n
}

// bytesString and stringBytes convert without copying: the result
// aliases the argument, which must not change while it is used.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

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
