package node

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// unitFiles is how many files of one package a hashing unit holds: small
// enough that a large package is shared out among the workers, large
// enough that a unit's set-up (its Hasher opening the package folder)
// is paid for by its files.
const unitFiles = 64

// unitBuffer is the read buffer of a unit's Hasher. Each unit allocates
// its own, and most units are a package of a few small files: with
// integrity.DefaultBufferSize (64 KiB) zeroing the buffers of a check of
// 1,500 packages took a tenth of its time. A 16 KiB buffer costs a
// multi-MiB file a few more reads, a fraction of hashing it.
const unitBuffer = 16 << 10

// cacheScope is the stat-cache scope of the checks of the project at
// abs. It is not abs itself, the scope of the checks before files were
// opened beneath their package folder: a cache those wrote may hold, for
// a path through a link leading out of its package, the digest of the
// file outside, and a cache hit reports that digest without opening the
// file (the hasher takes the status of a file it may take from the cache
// by its path, links on the way followed), so no such cache is read.
func cacheScope(abs string) string { return "node, beneath package folders: " + abs }

// check hashes every target's files (files[t.start():t.end()]) in place,
// each beneath its own package folder, with store's stat cache for scope,
// and updates and commits the cache: integrity.Check, except that the
// hasher's Root is the package folder of the file, not one root for all.
// A file whose path leads out of its package folder through a symbolic
// link on the way (lib -> /etc with lib/shadow listed) is then FileError
// with integrity.ErrOutsideRoot and is never opened; a link from one
// package into another is such an escape too.
//
// Like Check, it opens the cache from store (none for a nil store) and,
// when reading the cache's mapped file faults, discards the cache and
// checks again without it (CheckStats.CacheErr says so).
func check(ctx context.Context, store *integrity.Store, scope string, targets []target, files []integrity.File, opts Options) (integrity.CheckStats, error) {
	var cache *integrity.Cache
	if store != nil {
		c, err := store.Cache(scope, opts.NoCache)
		if err != nil {
			return integrity.CheckStats{}, err
		}
		cache = c
	}
	var st integrity.CheckStats
	fault, err := integrity.WithoutFaultyCache(cache, func(cache *integrity.Cache) error {
		if err := hashBeneath(ctx, cache, targets, files, opts.Workers); err != nil {
			return err
		}
		st = integrity.CheckStats{Full: cache.Full()}
		st.Hashed, st.Cached = integrity.Stats(files)
		if cache != nil {
			cache.Update(files)
			st.CacheErr = cache.Commit()
		}
		return nil
	})
	if fault != nil {
		st.CacheErr = fault
	}
	return st, err
}

// hashUnit is up to unitFiles files of one package, hashed beneath its
// folder.
type hashUnit struct {
	root  string
	files []integrity.File
}

// hashBeneath runs an integrity.Hasher with Root set to the package folder
// over each target's files, split into units so that workers goroutines
// (0: GOMAXPROCS) share out packages large and small alike. It stops at
// the first error (ctx's, or integrity.ErrCacheFault) and returns it.
func hashBeneath(ctx context.Context, cache *integrity.Cache, targets []target, files []integrity.File, workers int) error {
	var units []hashUnit
	for i := range targets {
		t := &targets[i]
		for fs := files[t.start():t.end()]; len(fs) > 0; {
			n := min(len(fs), unitFiles)
			units = append(units, hashUnit{root: t.dir, files: fs[:n]})
			fs = fs[n:]
		}
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(units))
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(units) {
					return
				}
				h := integrity.Hasher{Workers: 1, BufferSize: unitBuffer, Root: units[i].root}
				if err := h.Run(ctx, units[i].files, cache); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					stop()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
