package integrity

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime"
)

// view is a checked, read-only view of a cache file's bytes, which are
// either mapped from the file (see mapFile) or in memory. Nothing is
// decoded up front beyond small tables of offsets: entries, lists and
// their files are read from the bytes when used, so a check that takes
// its files from cached lists copies neither paths nor digests.
//
// Mapped bytes are not Go memory, and are unmapped by a cleanup once the
// view is unreachable (see Cache.load): nothing read from a view may
// outlive it. Accessors return values, or byte slices for immediate use;
// strings that leave the package are copied (see List.Label and
// List.File). Methods that return values keep the view alive until they
// return; a caller of one that returns a slice (entryPath, file) keeps the
// view alive while it uses the slice (runtime.KeepAlive).
type view struct {
	data  []byte         // the file, CRC excluded
	ents  []uint32       // offset of each entry's record, in path order
	lists []viewList     // parsed baselines, in file order
	named map[string]int // list index by name (names read from data)
	files []uint32       // offsets of the lists' file records
}

// viewList is one parsed baseline of a view: its files' records are
// files[first : first+n].
type viewList struct {
	key      statKey
	gen      uint64
	extra    int
	first, n int
}

// Sizes of the fixed parts of records.
const (
	keySize = 5*8 + 4 // dev, ino, size, mtime, ctime, mode
)

// parseView checks a cache file (header, checksum, every record within
// bounds and well-formed, entries in strictly increasing path order) and
// indexes it. data must not change while the view is in use.
func parseView(data []byte) (*view, error) {
	corrupt := func(why string) error {
		return fmt.Errorf("%w: stat cache: %s", ErrCorruptState, why)
	}
	if len(data) < 16+4 || string(data[:4]) != cacheMagic {
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
	if n > uint64(len(body))/64 {
		return nil, corrupt("bad entry count")
	}
	v := &view{data: body, ents: make([]uint32, n)}
	var prev []byte
	for i := range v.ents {
		v.ents[i] = uint32(d.r)
		p := d.bytes()
		d.skip(keySize + 8)
		d.digest()
		if d.bad {
			return nil, corrupt("truncated entry")
		}
		if i > 0 && bytes.Compare(prev, p) >= 0 {
			return nil, corrupt("entries out of order")
		}
		prev = p
	}
	nl := d.u64()
	if nl > uint64(len(body)) {
		return nil, corrupt("bad list count")
	}
	v.lists = make([]viewList, 0, min(nl, 1024))
	v.named = make(map[string]int, min(nl, 1024))
	v.files = make([]uint32, 0, n)
	for range nl {
		name := d.bytes()
		l := viewList{key: d.key(), gen: d.u64(), extra: int(d.u32()), first: len(v.files)}
		m := int(d.u32())
		if d.bad || m > len(body) {
			return nil, corrupt("truncated list")
		}
		var lf listFile
		for range m {
			v.files = append(v.files, uint32(d.r))
			if why := v.readFile(d, &lf); why != "" {
				return nil, corrupt(why)
			}
		}
		l.n = m
		v.named[bytesString(name)] = len(v.lists)
		v.lists = append(v.lists, l)
	}
	if d.r != len(body) {
		return nil, corrupt("trailing data")
	}
	return v, nil
}

// len returns the number of entries.
func (v *view) len() int {
	if v == nil {
		return 0
	}
	return len(v.ents)
}

// entryPath returns entry i's path, valid while v is.
func (v *view) entryPath(i int) []byte {
	off := v.ents[i]
	n := binary.LittleEndian.Uint32(v.data[off:])
	return v.data[off+4 : off+4+n]
}

// entryAt returns the offset of entry i's status (after its path).
func (v *view) entryAt(i int) int {
	off := int(v.ents[i])
	return off + 4 + int(binary.LittleEndian.Uint32(v.data[off:]))
}

// entryKey returns entry i's file status.
func (v *view) entryKey(i int) statKey {
	k := readKey(v.data[v.entryAt(i):])
	runtime.KeepAlive(v)
	return k
}

// entryGen returns the generation entry i was last saved with.
func (v *view) entryGen(i int) uint64 {
	g := binary.LittleEndian.Uint64(v.data[v.entryAt(i)+keySize:])
	runtime.KeepAlive(v)
	return g
}

// entryDigest copies entry i's digest to out.
func (v *view) entryDigest(i int, out *Digest) {
	readDigest(v.data[v.entryAt(i)+keySize+8:], out)
	runtime.KeepAlive(v)
}

// entryHit reports whether entry i holds a digest of algorithm algo for
// status key, and if so copies it to out.
func (v *view) entryHit(i int, key *statKey, algo Algorithm, out *Digest) bool {
	at := v.entryAt(i)
	ok := Algorithm(v.data[at+keySize+8]) == algo && readKey(v.data[at:]) == *key
	if ok {
		readDigest(v.data[at+keySize+8:], out)
	}
	runtime.KeepAlive(v)
	return ok
}

// find returns the index of the entry for path, or -1.
func (v *view) find(path []byte) int {
	if v == nil {
		return -1
	}
	lo, hi := 0, len(v.ents)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(v.entryPath(m), path) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	found := lo < len(v.ents) && bytes.Equal(v.entryPath(lo), path)
	runtime.KeepAlive(v)
	if !found {
		return -1
	}
	return lo
}

// list returns the index of the list named name, or -1.
func (v *view) list(name string) int {
	if v == nil {
		return -1
	}
	i, ok := v.named[name]
	runtime.KeepAlive(v)
	if !ok {
		return -1
	}
	return i
}

// listFile is one file record of a list, as offsets into the view.
type listFile struct {
	entry int // index of the file's entry, or -1
	path  []byte
	want  int   // offset of the known-good digest
	size  int64 // the known-good size as File.wantSize keeps it
	label []byte
}

// file reads file record j of list l (valid while v is), which parseView
// has checked.
func (v *view) file(l *viewList, j int, out *listFile) {
	d := decoder{b: v.data, r: int(v.files[l.first+j])}
	v.readFile(&d, out)
}

// readFile reads the file record at d's position into out: its entry
// index (or its own path), its known-good digest and size, and its label
// (an offset into the path, or its own string). It returns why the record
// is damaged ("" when it is not): an entry index, size or label offset
// out of bounds, or a record cut short.
func (v *view) readFile(d *decoder, out *listFile) string {
	out.entry = -1
	if idx := d.u32(); idx != noIndex {
		if uint64(idx) >= uint64(len(v.ents)) {
			return "bad index"
		}
		out.entry, out.path = int(idx), v.entryPath(int(idx))
	} else {
		out.path = d.bytes()
	}
	out.want = d.r
	d.digest()
	if out.size = int64(d.u64()); out.size < 0 {
		return "bad size"
	}
	if off := d.u16(); off != noOffset {
		if int(off) > len(out.path) {
			return "bad label"
		}
		out.label = out.path[off:]
	} else {
		out.label = d.bytes()
	}
	if d.bad {
		return "truncated list"
	}
	return ""
}

// readKey reads a status as the encoder's key writes it.
func readKey(b []byte) statKey {
	_ = b[keySize-1]
	le := binary.LittleEndian
	return statKey{dev: le.Uint64(b), ino: le.Uint64(b[8:]), size: int64(le.Uint64(b[16:])),
		mtime: int64(le.Uint64(b[24:])), ctime: int64(le.Uint64(b[32:])), mode: le.Uint32(b[40:])}
}

// readDigest reads a digest as the encoder's digest writes it (already
// checked by parseView).
func readDigest(b []byte, out *Digest) {
	*out = Digest{Algo: Algorithm(b[0]), Len: b[1]}
	copy(out.Sum[:], b[2:2+int(b[1])])
}
