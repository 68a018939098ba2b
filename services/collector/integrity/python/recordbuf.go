package python

import (
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// A full verify reads every RECORD of the environment (5.5 MB for the
// benchmark's 30,000 files, half of it byte-code entries without a hash),
// and a one-process check pays for fresh memory in page faults. So a
// RECORD is read into a reused buffer, parsed there, and only the paths
// the check keeps (the hashed entries') are copied out, together, into
// one allocation: about a sixth of the RECORD's size.

// recordBuffers holds the buffers RECORDs are read into (*[]byte).
var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRecord is the largest buffer put back into recordBuffers; a
// larger one (a rare, huge RECORD) is left to the garbage collector.
const maxPooledRecord = 8 << 20

// readRecord reads the RECORD of the distribution whose .dist-info
// directory is info, in site, into *buf (reusing its capacity), beneath
// site and at most MaxRecordSize bytes (sysfile.ReadFileBeneathInto),
// and returns the bytes read.
func readRecord(site, info string, buf *[]byte) ([]byte, error) {
	return sysfile.ReadFileBeneathInto(site, filepath.Base(info)+"/RECORD", MaxRecordSize, buf)
}

// releaseRecord returns buf to recordBuffers unless it grew too large.
func releaseRecord(buf *[]byte) {
	if cap(*buf) <= maxPooledRecord {
		recordBuffers.Put(buf)
	}
}

// keepStrings copies the labels and paths of l that point into data (the
// RECORD's bytes, about to be reused) into one new allocation. A path the
// same as its label (the usual relative path) shares the copy.
func keepStrings(l *integrity.List, data []byte) {
	if len(data) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	in := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return len(s) > 0 && p >= base && p-base < uintptr(len(data))
	}
	same := func(a, b string) bool {
		return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
	}
	size := 0
	for i := range l.Files {
		if in(l.Labels[i]) {
			size += len(l.Labels[i])
		}
		if rel := l.Files[i].Rel; in(rel) && !same(rel, l.Labels[i]) {
			size += len(rel)
		}
	}
	arena := make([]byte, 0, size)
	keep := func(s string) string {
		start := len(arena)
		arena = append(arena, s...)
		return unsafe.String(&arena[start], len(s))
	}
	for i := range l.Files {
		label, f := l.Labels[i], &l.Files[i]
		wasLabel := same(f.Rel, label)
		if in(label) {
			l.Labels[i] = keep(label)
		}
		switch {
		case wasLabel:
			f.Rel = l.Labels[i]
		case in(f.Rel):
			f.Rel = keep(f.Rel)
		}
	}
}
