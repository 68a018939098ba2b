package integrity

import "context"

// CheckOptions tune Check.
type CheckOptions struct {
	// Workers is the hasher's worker count; 0 means GOMAXPROCS.
	Workers int
	// NoCache re-hashes every file (the cache is still refreshed).
	NoCache bool
	// BeneathDir confines each file to its own Dir (Hasher.BeneathDir).
	BeneathDir bool
}

// CheckStats describes how a Check ran.
type CheckStats struct {
	// Full reports that every file was hashed (no cache, forced, or the
	// periodic full re-hash).
	Full bool
	// Hashed and Cached count files read and hashed versus taken from the
	// stat cache.
	Hashed, Cached int
	// CacheErr is why the stat cache could not be saved, if it could not;
	// the check itself stands.
	CacheErr error
}

// Check hashes files in place using store's stat cache for scope: it opens
// the cache (bypassing it with NoCache or when the periodic full re-hash is
// due), runs a Hasher, then updates and commits the cache. A nil store
// hashes everything without a cache. A cache that cannot be committed is
// not an error for the check: the next check simply hashes more.
func Check(ctx context.Context, store *Store, scope string, files []File, opts CheckOptions) (CheckStats, error) {
	var cache *Cache
	if store != nil {
		c, err := store.Cache(scope, opts.NoCache)
		if err != nil {
			return CheckStats{}, err
		}
		cache = c
	}
	return CheckWith(ctx, cache, files, opts)
}

// CheckWith is Check with a cache the caller opened (Store.Cache), which
// lets it load the cache while it prepares files; nil hashes everything.
// opts.NoCache only matters when opening the cache.
func CheckWith(ctx context.Context, cache *Cache, files []File, opts CheckOptions) (CheckStats, error) {
	h := Hasher{Workers: opts.Workers, BeneathDir: opts.BeneathDir}
	if err := h.Run(ctx, files, cache); err != nil {
		return CheckStats{}, err
	}
	st := CheckStats{Full: cache.Full()}
	st.Hashed, st.Cached = Stats(files)
	if cache != nil {
		cache.Update(files)
		st.CacheErr = cache.Commit()
	}
	return st, nil
}
