package integrity

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"
)

// ErrCacheFault is returned when reading a stat cache's mapped file
// faulted: the file was truncated in place (or its storage failed) while
// it was mapped. runtimetruth only ever replaces cache files, so this
// takes another process writing into the state directory, or a failing
// disk. Whatever the check had reached is incomplete; Check, and the
// Python and Node verifies, discard the cache and check again in full.
var ErrCacheFault = errors.New("stat cache file faulted while mapped")

// catchFault runs f, turning a memory fault in it reading a mapped cache
// file (one that shrank under the mapping, which would otherwise crash
// the process) into ErrCacheFault. Any other panic, a fault at any other
// address included, goes on. It covers f's own goroutine only: Hasher
// guards its workers itself.
func catchFault(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if fault, ok := r.(interface{ Addr() uintptr }); !ok || !mappedFiles.contains(fault.Addr()) {
				panic(r)
			}
			err = fmt.Errorf("%w: %v", ErrCacheFault, r)
		}
	}()
	return f()
}

// WithoutFaultyCache runs check with cache, guarded by catchFault. When
// reading the cache's mapped file faults, whatever check reached is
// incomplete: the cache is discarded and check runs again, in full,
// without a cache. fault is that ErrCacheFault (nil when there was none);
// err is the error of the last run.
func WithoutFaultyCache(cache *Cache, check func(*Cache) error) (fault, err error) {
	err = catchFault(func() error { return check(cache) })
	if !errors.Is(err, ErrCacheFault) {
		return nil, err
	}
	cache.discard()
	return err, check(nil)
}

// mappedFiles holds the address ranges of the cache files mapped now
// (mapFile adds them, unmapFile removes them).
var mappedFiles mappings

type mappings struct {
	mu     sync.Mutex
	ranges map[uintptr]uintptr // start → end
}

func (m *mappings) add(b []byte) {
	if len(b) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ranges == nil {
		m.ranges = map[uintptr]uintptr{}
	}
	m.ranges[start] = start + uintptr(len(b))
}

func (m *mappings) remove(b []byte) {
	if len(b) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ranges, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

func (m *mappings) contains(addr uintptr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for start, end := range m.ranges {
		// The mapping's last page, beyond its length, faults the same.
		if addr >= start && addr < (end+pageSize-1)&^(pageSize-1) {
			return true
		}
	}
	return false
}

const pageSize = 4096 // the smallest; a larger page only widens the mapping's tail

// discard forgets c: the store no longer keeps it for the scope's next
// check, which reads the cache file again. For a cache that faulted
// (ErrCacheFault): the file it mapped was truncated, so the next read
// finds it damaged (header or checksum) and starts from an empty cache,
// unless another check has replaced it since with a good one, which is
// then kept.
func (c *Cache) discard() {
	if c != nil && c.store != nil && c.path != "" {
		c.store.dropWarm(c.path)
	}
}
