package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/internal/sysfile"
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

type cacheEntry struct {
	key    statKey
	digest Digest
	gen    uint64 // check generation that last saw the entry (atomic)
}

// cachedList is a parsed baseline (a RECORD's hashed rows) kept while its
// source file's status is unchanged.
type cachedList struct {
	key    statKey
	gen    uint64
	extra  int
	paths  []string // files' paths as hashed (Dir "" + Rel)
	wants  []Digest
	labels []string
	ents   []*cacheEntry // the paths' cache entries when known
}

// Cache is the stat cache of one scope (one Python environment, one Node
// project). Open it with Store.Cache, pass it to Hasher.Run, then Update it
// with the checked files and Commit it; Commit hands it back to its Store
// for the next check, so the cache must not be used after Commit.
//
// Besides file digests it keeps parsed baselines (List, PutList), so an
// unchanged RECORD is not parsed again and its files link straight to
// their cache entries.
type Cache struct {
	path      string                 // cache file
	countPath string                 // checks-since-full file
	entries   map[string]*cacheEntry // built lazily from slab and keys: see index
	indexOnce sync.Once
	slab      []cacheEntry // decoded entries
	keys      []string     // their paths
	mu        sync.Mutex   // guards lists
	lists     map[string]*cachedList
	gen       uint64 // this check's generation
	sinceFull uint64 // checks since the last full re-hash, before this one
	full      bool   // this check re-hashes everything
	dirty     bool
	max       int
	keep      uint64
	fullEvery int

	store  *Store  // the store Commit hands the cache back to
	file   statKey // the cache file's status when last read or written
	fileOK bool    // file is known
	seq    uint64  // when it was handed back (Store.keepWarm)
}

// Full reports whether this check ignores cached digests (a forced or
// periodic full re-hash).
func (c *Cache) Full() bool { return c == nil || c.full }

// Len returns the number of cached entries.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.index()
	return len(c.entries)
}

// index builds the path → entry map on first use: a check whose files all
// come from cached lists never needs it. Safe for concurrent use.
func (c *Cache) index() {
	c.indexOnce.Do(func() {
		if c.entries == nil {
			c.entries = make(map[string]*cacheEntry, len(c.slab))
		}
		for i := range c.slab {
			c.entries[c.keys[i]] = &c.slab[i]
		}
		c.slab, c.keys = nil, nil
	})
}

func (c *Cache) lookup(path []byte) *cacheEntry {
	c.index()
	return c.entries[string(path)]
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

// List is a parsed baseline: the files to hash (Want set; Dir and Rel as
// List documents), a label per file (the path as the baseline lists it)
// and a count the caller keeps with it (e.g. unhashed rows).
type List struct {
	Files  []File
	Labels []string
	Extra  int
}

// List returns a fresh copy of the baseline stored for path under the
// same source status, or false (always on a full re-hash, so that the
// baseline is parsed again too). A file whose full path lies under dir
// comes with Dir set to dir and Rel relative to it (so that the hasher
// resolves it from there); any other has Dir empty and Rel the full path.
// It is safe for concurrent use.
func (c *Cache) List(path string, src SourceStat, dir string) (*List, bool) {
	if c == nil || c.full || !src.ok {
		return nil, false
	}
	c.mu.Lock()
	l := c.lists[path]
	if l != nil && l.key == src.key {
		l.gen = c.gen
	}
	c.mu.Unlock()
	if l == nil || l.key != src.key {
		return nil, false
	}
	dir = strings.TrimSuffix(dir, "/")
	out := &List{Files: make([]File, len(l.paths)), Labels: l.labels, Extra: l.extra}
	for i := range out.Files {
		f := &out.Files[i]
		f.Rel, f.Want, f.ent = l.paths[i], l.wants[i], l.ents[i]
		if p := f.Rel; dir != "" && len(p) > len(dir)+1 && p[len(dir)] == '/' && p[:len(dir)] == dir {
			f.Dir, f.Rel = dir, p[len(dir)+1:]
		}
	}
	return out, true
}

// PutList stores the baseline parsed from path (read after Source
// returned src). Files keep their paths as Dir joined with Rel; the
// labels must be parallel to the files. It is safe for concurrent use.
func (c *Cache) PutList(path string, src SourceStat, l *List) {
	if c == nil || !src.ok || len(l.Labels) != len(l.Files) {
		return
	}
	cl := &cachedList{key: src.key, gen: c.gen, extra: l.Extra,
		paths: make([]string, len(l.Files)), wants: make([]Digest, len(l.Files)),
		labels: l.Labels, ents: make([]*cacheEntry, len(l.Files))}
	for i := range l.Files {
		f := &l.Files[i]
		cl.paths[i], cl.wants[i] = f.Path(), f.Want
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
		f := &files[i]
		switch {
		case f.fresh && f.State == FileHashed:
			c.index()
			p.Set(f.Dir, f.Rel)
			e := c.entries[string(p.Bytes())]
			if e == nil {
				e = &cacheEntry{}
				c.entries[p.String()] = e
			} else if e.key == f.key && e.digest.Equal(&f.Got) {
				e.gen = c.gen
				continue
			}
			e.key, e.digest, e.gen = f.key, f.Got, c.gen
			c.dirty = true
		case f.State == FileMissing || f.State == FileSymlink || f.State == FileNotRegular:
			c.index()
			p.Set(f.Dir, f.Rel)
			if _, ok := c.entries[string(p.Bytes())]; ok {
				delete(c.entries, string(p.Bytes()))
				c.dirty = true
			}
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
		c.index()
		c.evict()
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

func (c *Cache) evict() {
	if c.gen > c.keep {
		floor := c.gen - c.keep
		for k, e := range c.entries {
			if e.gen < floor {
				delete(c.entries, k)
			}
		}
		for k, l := range c.lists {
			if l.gen < floor {
				delete(c.lists, k)
			}
		}
	}
	if c.max > 0 && len(c.entries) > c.max {
		type kv struct {
			k   string
			gen uint64
		}
		all := make([]kv, 0, len(c.entries))
		for k, e := range c.entries {
			all = append(all, kv{k, e.gen})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].gen < all[j].gen })
		for _, x := range all[:len(all)-c.max] {
			delete(c.entries, x.k)
		}
	}
	// Lists cost about as much as their entries: keep them within the
	// same bound.
	n := 0
	for _, l := range c.lists {
		n += len(l.paths)
	}
	if c.max > 0 && n > c.max {
		c.lists = nil
	}
}

// castagnoli is the CRC-32C table of the cache file's checksum, which
// detects a damaged file (it is not a security boundary: whoever can
// write the state directory can rewrite the cache).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	cacheMagic   = "RTIC"
	cacheVersion = 2
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

func (c *Cache) save() error {
	keys := make([]string, 0, len(c.entries))
	for k := range c.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	enc := &encoder{b: make([]byte, 0, len(c.entries)*200+64)}
	enc.b = append(enc.b, cacheMagic...)
	enc.u32(cacheVersion)
	enc.u64(uint64(len(keys)))
	index := make(map[string]uint32, len(keys))
	ents := make([]*cacheEntry, len(keys))
	for i, k := range keys {
		e := c.entries[k]
		index[k], ents[i] = uint32(i), e
		enc.str(k)
		enc.key(e.key)
		enc.u64(e.gen)
		enc.digest(&e.digest)
	}
	names := make([]string, 0, len(c.lists))
	for k := range c.lists {
		names = append(names, k)
	}
	sort.Strings(names)
	enc.u64(uint64(len(names)))
	for _, name := range names {
		l := c.lists[name]
		enc.str(name)
		enc.key(l.key)
		enc.u64(l.gen)
		enc.u32(uint32(l.extra))
		enc.u32(uint32(len(l.paths)))
		for i, p := range l.paths {
			// Link the list to the entries as decoding the file would,
			// for the checks this cache is handed to in memory.
			if idx, ok := index[p]; ok {
				enc.u32(idx)
				l.ents[i] = ents[idx]
			} else {
				enc.u32(noIndex)
				enc.str(p)
				l.ents[i] = nil
			}
			enc.digest(&l.wants[i])
			if lab := l.labels[i]; strings.HasSuffix(p, lab) && len(p)-len(lab) < noOffset {
				enc.u16(uint16(len(p) - len(lab)))
			} else {
				enc.u16(noOffset)
				enc.str(lab)
			}
		}
	}
	enc.u32(crc32.Checksum(enc.b, castagnoli))
	if err := writeAtomic(c.path, enc.b, true); err != nil {
		return err
	}
	st, ok := fileStatus(c.path)
	c.file, c.fileOK = keyOf(&st), ok && st.Size == int64(len(enc.b))
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

// load reads the cache file; a missing file is an empty cache, a damaged
// one ErrCorruptState. It takes the file's status first, so that a file
// replaced while it is read is not mistaken for the one read.
func (c *Cache) load() error {
	st, ok := fileStatus(c.path)
	data, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read stat cache: %w", err)
	}
	if err := c.decode(data); err != nil {
		return err
	}
	c.file, c.fileOK = keyOf(&st), ok && st.Size == int64(len(data))
	return nil
}

type decoder struct {
	b   []byte
	s   string // b as a string, for zero-copy substrings
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

func (d *decoder) str() string {
	n := int(d.u32())
	if !d.need(n) {
		return ""
	}
	d.r += n
	return d.s[d.r-n : d.r]
}

func (d *decoder) key() statKey {
	return statKey{dev: d.u64(), ino: d.u64(), size: int64(d.u64()), mtime: int64(d.u64()), ctime: int64(d.u64()), mode: d.u32()}
}

func (d *decoder) digest(out *Digest) {
	algo, n := Algorithm(d.u8()), int(d.u8())
	if !d.need(n) || out.SetBytes(algo, d.b[d.r:d.r+n]) != nil {
		d.bad = true
		return
	}
	d.r += n
}

// decode parses a cache file. Paths are substrings of data, which the
// caller hands over and never modifies.
func (c *Cache) decode(data []byte) error {
	corrupt := func(why string) error {
		return fmt.Errorf("%w: stat cache: %s", ErrCorruptState, why)
	}
	if len(data) < 16+4 || string(data[:4]) != cacheMagic {
		return corrupt("bad header")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return corrupt("checksum mismatch")
	}
	d := &decoder{b: body, s: unsafe.String(unsafe.SliceData(body), len(body)), r: 4}
	if d.u32() != cacheVersion {
		return corrupt("unknown version")
	}
	n := d.u64()
	if n > uint64(len(body))/64 {
		return corrupt("bad entry count")
	}
	slab := make([]cacheEntry, n)
	keys := make([]string, n)
	for i := range slab {
		e := &slab[i]
		keys[i] = d.str()
		e.key = d.key()
		e.gen = d.u64()
		d.digest(&e.digest)
		if d.bad {
			return corrupt("truncated entry")
		}
	}
	nl := d.u64()
	if nl > uint64(len(body)) {
		return corrupt("bad list count")
	}
	lists := make(map[string]*cachedList, nl)
	for range nl {
		name := d.str()
		l := &cachedList{key: d.key(), gen: d.u64(), extra: int(d.u32())}
		m := int(d.u32())
		if d.bad || m > len(body) {
			return corrupt("truncated list")
		}
		l.paths, l.wants, l.labels, l.ents = make([]string, m), make([]Digest, m), make([]string, m), make([]*cacheEntry, m)
		for i := range m {
			if idx := d.u32(); idx != noIndex {
				if uint64(idx) >= n {
					return corrupt("bad index")
				}
				l.paths[i], l.ents[i] = keys[idx], &slab[idx]
			} else {
				l.paths[i] = d.str()
			}
			d.digest(&l.wants[i])
			if off := d.u16(); off != noOffset {
				if int(off) > len(l.paths[i]) {
					return corrupt("bad label")
				}
				l.labels[i] = l.paths[i][off:]
			} else {
				l.labels[i] = d.str()
			}
			if d.bad {
				return corrupt("truncated list")
			}
		}
		lists[name] = l
	}
	if d.r != len(body) {
		return corrupt("trailing data")
	}
	c.entries, c.slab, c.keys, c.lists = nil, slab, keys, lists
	return nil
}

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
