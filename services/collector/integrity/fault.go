package integrity

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
)

// ErrCacheFault is returned when reading a stat cache's mapped file
// faulted: the file was truncated in place (or its storage failed) while
// it was mapped. runtimetruth only ever replaces cache files, so this
// takes another process writing into the state directory, or a failing
// disk. Whatever the check had reached is incomplete; Check, and the
// Python and Node verifies, discard the cache and check again in full.
var ErrCacheFault = errors.New("stat cache file faulted while mapped")

// CatchFault runs f, turning a memory fault in it (reading a mapping
// whose file shrank, which would otherwise crash the process) into
// ErrCacheFault. Other panics go on. It covers f's own goroutine only:
// Hasher guards its workers itself.
func CatchFault(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: %v", ErrCacheFault, r)
		}
	}()
	return f()
}

// Discard forgets c: the store keeps no copy of it, and its file is
// removed, so the scope's next check starts from an empty cache (and
// writes a new one). For a cache that faulted (ErrCacheFault).
func (c *Cache) Discard() error {
	if c == nil || c.path == "" {
		return nil
	}
	if c.store != nil {
		c.store.dropWarm(c.path)
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("discard stat cache: %w", err)
	}
	return nil
}
