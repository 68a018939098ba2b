package integrity

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strings"
)

// cacheFile is the content of a stat cache file, decoded whole: its
// entries in strictly increasing path order and its parsed baselines in
// strictly increasing name order. encode writes it and decodeCacheFile
// reads it back; the package documentation gives the format.
type cacheFile struct {
	entries []cacheEntry
	lists   []cachedList
}

// cacheEntry is a file's digest under the status it was hashed under.
type cacheEntry struct {
	path   string
	key    statKey
	digest Digest
	gen    uint64 // the check that last saw it (atomic while a check runs)
	gone   bool   // an in-memory change: the file is missing or no longer regular
}

// cachedList is a parsed baseline (a RECORD's hashed rows), kept while its
// source file's status is unchanged.
type cachedList struct {
	name  string // the source file
	key   statKey
	gen   uint64
	extra int
	files []listedFile
}

// listedFile is one file of a cachedList.
type listedFile struct {
	path  string // as hashed (Dir "" + Rel)
	entry int    // index of the file's entry in the same cacheFile, -1 for none
	want  Digest
	size  int64 // File.wantSize
	label string
}

// castagnoli is the CRC-32C table of the cache file's checksum, which
// detects a damaged file (it is not a security boundary: whoever can
// write the state directory can rewrite the cache).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const (
	cacheMagic   = "RTIC"
	cacheVersion = 3
	// maxCacheFile bounds a cache file: a larger one is not read (and not
	// written). DefaultMaxEntries entries with 100-byte paths and their
	// lists take about 250 MB.
	maxCacheFile = 256 << 20
	noIndex      = math.MaxUint32
	noOffset     = math.MaxUint16
	keySize      = 5*8 + 4 // dev, ino, size, mtime, ctime, mode
	// The smallest records, which bound the counts a file can claim.
	minEntry    = 4 + keySize + 8 + 2 + 28 // empty path, the shortest digest (SHA-224)
	minList     = 4 + keySize + 8 + 4 + 4
	minListFile = 4 + 2 + 28 + 8 + 2
)

// newCacheFile returns the cache file of entries and lists (by path and by
// name), its list files linked to the entries of their paths.
func newCacheFile(entries map[string]*cacheEntry, lists map[string]*cachedList) *cacheFile {
	f := &cacheFile{entries: make([]cacheEntry, 0, len(entries)), lists: make([]cachedList, 0, len(lists))}
	for p, e := range entries {
		f.entries = append(f.entries, cacheEntry{path: p, key: e.key, digest: e.digest, gen: e.gen})
	}
	sort.Slice(f.entries, func(i, j int) bool { return f.entries[i].path < f.entries[j].path })
	for name, l := range lists {
		files := make([]listedFile, len(l.files))
		for i, lf := range l.files {
			lf.entry = f.find(lf.path)
			files[i] = lf
		}
		f.lists = append(f.lists, cachedList{name: name, key: l.key, gen: l.gen, extra: l.extra, files: files})
	}
	sort.Slice(f.lists, func(i, j int) bool { return f.lists[i].name < f.lists[j].name })
	return f
}

// find returns the index of the entry for path, or -1.
func (f *cacheFile) find(path string) int {
	if f == nil {
		return -1
	}
	i := sort.Search(len(f.entries), func(i int) bool { return f.entries[i].path >= path })
	if i < len(f.entries) && f.entries[i].path == path {
		return i
	}
	return -1
}

// list returns the list named name, or nil.
func (f *cacheFile) list(name string) *cachedList {
	if f == nil {
		return nil
	}
	i := sort.Search(len(f.lists), func(i int) bool { return f.lists[i].name >= name })
	if i < len(f.lists) && f.lists[i].name == name {
		return &f.lists[i]
	}
	return nil
}

// encode returns the file's bytes: the header, the entries, the lists and
// the checksum.
func (f *cacheFile) encode() []byte {
	enc := &encoder{b: make([]byte, 0, len(f.entries)*200+64)}
	enc.b = append(enc.b, cacheMagic...)
	enc.u32(cacheVersion)
	enc.u64(uint64(len(f.entries)))
	for i := range f.entries {
		e := &f.entries[i]
		enc.str(e.path)
		enc.key(e.key)
		enc.u64(e.gen)
		enc.digest(&e.digest)
	}
	enc.u64(uint64(len(f.lists)))
	for i := range f.lists {
		l := &f.lists[i]
		enc.str(l.name)
		enc.key(l.key)
		enc.u64(l.gen)
		enc.u32(uint32(l.extra))
		enc.u32(uint32(len(l.files)))
		for j := range l.files {
			lf := &l.files[j]
			if lf.entry >= 0 {
				enc.u32(uint32(lf.entry))
			} else {
				enc.u32(noIndex)
				enc.str(lf.path)
			}
			enc.digest(&lf.want)
			enc.u64(uint64(lf.size))
			if strings.HasSuffix(lf.path, lf.label) && len(lf.path)-len(lf.label) < noOffset {
				enc.u16(uint16(len(lf.path) - len(lf.label)))
			} else {
				enc.u16(noOffset)
				enc.str(lf.label)
			}
		}
	}
	enc.u32(crc32.Checksum(enc.b, castagnoli))
	return enc.b
}

// decodeCacheFile decodes a whole cache file and checks it: its size, the
// header (magic and version), the checksum, every record within bounds
// and well-formed (digests of a known algorithm and length, sizes not
// negative, entry indexes and label offsets in range), entries and lists
// in strictly increasing order, and nothing left over. Any failure is
// ErrCorruptState. The strings of the result alias data, which must not
// change afterwards.
func decodeCacheFile(data []byte) (*cacheFile, error) {
	corrupt := func(why string) error {
		return fmt.Errorf("%w: stat cache: %s", ErrCorruptState, why)
	}
	switch {
	case len(data) > maxCacheFile:
		return nil, corrupt("too large")
	case len(data) < 4+4+8+8+4 || string(data[:4]) != cacheMagic:
		return nil, corrupt("bad header")
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, corrupt("checksum mismatch")
	}
	d := &decoder{b: body, r: 4}
	if d.u32() != cacheVersion {
		return nil, corrupt("unknown version")
	}
	n := d.u64()
	if n > uint64(d.left()/minEntry) {
		return nil, corrupt("bad entry count")
	}
	f := &cacheFile{entries: make([]cacheEntry, n)}
	// The entries' paths again, compactly, for the list files that link
	// to them: reading them from the entries would take a cache miss per
	// file.
	paths := make([]string, n)
	for i := range f.entries {
		e := &f.entries[i]
		e.path, e.key, e.gen = d.str(), d.key(), d.u64()
		paths[i] = e.path
		d.digest(&e.digest)
		if d.bad {
			return nil, corrupt("truncated entry")
		}
		if i > 0 && f.entries[i-1].path >= e.path {
			return nil, corrupt("entries out of order")
		}
	}
	nl := d.u64()
	if d.bad || nl > uint64(d.left()/minList) {
		return nil, corrupt("bad list count")
	}
	f.lists = make([]cachedList, nl)
	for i := range f.lists {
		l := &f.lists[i]
		l.name, l.key, l.gen, l.extra = d.str(), d.key(), d.u64(), int(d.u32())
		m := d.u32()
		if d.bad || m > uint32(d.left()/minListFile) {
			return nil, corrupt("truncated list")
		}
		if i > 0 && f.lists[i-1].name >= l.name {
			return nil, corrupt("lists out of order")
		}
		l.files = make([]listedFile, m)
		for j := range l.files {
			if why := d.listedFile(paths, &l.files[j]); why != "" {
				return nil, corrupt(why)
			}
		}
	}
	if d.bad || d.r != len(body) {
		return nil, corrupt("trailing data")
	}
	return f, nil
}

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

// decoder reads a cache file; reading past its end sets bad, and every
// read after that returns zero values.
type decoder struct {
	b   []byte
	r   int
	bad bool
}

func (d *decoder) left() int { return len(d.b) - d.r }

// next returns the next n bytes, or nil (setting bad) when fewer are left.
func (d *decoder) next(n int) []byte {
	if d.bad || n > d.left() {
		d.bad = true
		return nil
	}
	d.r += n
	return d.b[d.r-n : d.r]
}

func (d *decoder) u8() uint8 {
	if b := d.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// str reads a length-prefixed string, aliasing the input.
func (d *decoder) str() string {
	n := d.u32()
	if uint64(n) > uint64(d.left()) {
		d.bad = true
		return ""
	}
	return bytesString(d.next(int(n)))
}

func (d *decoder) key() statKey {
	b := d.next(keySize)
	if b == nil {
		return statKey{}
	}
	le := binary.LittleEndian
	return statKey{dev: le.Uint64(b), ino: le.Uint64(b[8:]), size: int64(le.Uint64(b[16:])),
		mtime: int64(le.Uint64(b[24:])), ctime: int64(le.Uint64(b[32:])), mode: le.Uint32(b[40:])}
}

// digest reads a digest into out, checking its algorithm and length.
func (d *decoder) digest(out *Digest) {
	algo, n := Algorithm(d.u8()), int(d.u8())
	if !algo.Valid() || n != algo.Size() {
		d.bad = true
	}
	if b := d.next(n); b != nil {
		*out = Digest{Algo: algo, Len: uint8(n)}
		copy(out.Sum[:], b)
	}
}

// listedFile reads a list's file record into out: its entry index (or its
// own path), its known-good digest and size, and its label (an offset
// into the path, or its own string). It returns why the record is
// damaged, "" when it is not.
func (d *decoder) listedFile(paths []string, out *listedFile) string {
	out.entry = -1
	if idx := d.u32(); idx != noIndex {
		if uint64(idx) >= uint64(len(paths)) {
			return "bad index"
		}
		out.entry, out.path = int(idx), paths[idx]
	} else {
		out.path = d.str()
	}
	d.digest(&out.want)
	if out.size = int64(d.u64()); out.size < 0 {
		return "bad size"
	}
	if off := d.u16(); off != noOffset {
		if int(off) > len(out.path) {
			return "bad label"
		}
		out.label = out.path[off:]
	} else {
		out.label = d.str()
	}
	if d.bad {
		return "truncated list"
	}
	return ""
}
