package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Store defaults.
const (
	// DefaultFullEvery is how often (in checks of one scope) the cache is
	// bypassed and every file re-hashed.
	DefaultFullEvery = 20
	// DefaultMaxEntries bounds the entries of one scope's stat cache.
	DefaultMaxEntries = 1 << 20
	// DefaultMaxCaches bounds the number of scopes with a stat cache; the
	// least recently written are removed.
	DefaultMaxCaches = 32
)

// Store is the integrity state under one directory (see the package
// documentation for the layout). Its methods are safe for concurrent use by
// several processes: read-modify-write sequences hold an exclusive flock.
type Store struct {
	dir string
	// FullEvery forces a full re-hash every FullEvery checks of a scope;
	// values below 1 mean DefaultFullEvery.
	FullEvery int
	// MaxEntries bounds one scope's stat cache; 0 means DefaultMaxEntries.
	MaxEntries int
	// MaxCaches bounds the number of cached scopes; 0 means
	// DefaultMaxCaches.
	MaxCaches int
	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	warm    map[string]*Cache // committed caches kept for the next check, by cache file
	warmSeq uint64            // orders warm caches by when they were committed
}

// OpenStore opens (creating it with mode 0700 when needed) the state
// directory dir.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open integrity state: empty directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open integrity state %s: %w", dir, err)
	}
	for _, d := range []string{abs, filepath.Join(abs, "cache"), filepath.Join(abs, "baseline")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open integrity state %s: %w", dir, err)
		}
	}
	return &Store{dir: abs}, nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.dir }

// WriteFile writes data to the file name in the store's directory
// atomically and durably: a temporary file, fsynced, renamed over the old
// one, the directory fsynced.
func (s *Store) WriteFile(name string, data []byte) error {
	return writeAtomic(filepath.Join(s.dir, name), data, true)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func keyFor(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:16])
}

// Cache opens the stat cache of scope (an environment or project path).
// With force, or when FullEvery checks have passed since the last full
// re-hash, the returned cache is Full: Run ignores its entries and every
// file is hashed again. A damaged cache file is discarded (and so forces a
// full re-hash) rather than failing the check.
//
// The store keeps the cache its last check of scope committed in memory
// (see Cache.Commit), and hands it out again instead of reading the file,
// as long as the file is still the one that check read or wrote (same
// status) and no other check has been committed since (the check counter
// is unchanged). A long-lived process, such as the collector, thus reads
// a scope's cache once rather than on every check.
func (s *Store) Cache(scope string, force bool) (*Cache, error) {
	every := s.FullEvery
	if every < 1 {
		every = DefaultFullEvery
	}
	limit := s.MaxEntries
	if limit <= 0 {
		limit = DefaultMaxEntries
	}
	base := filepath.Join(s.dir, "cache", keyFor(scope))
	gen, since, ok := readCount(base + ".count")
	c := s.takeWarm(base+".bin", gen, ok)
	if c == nil {
		c = &Cache{path: base + ".bin", countPath: base + ".count"}
		if err := c.load(); err != nil {
			if !errors.Is(err, ErrCorruptState) {
				return nil, err
			}
			ok = false
			c.setSaved(nil)
		}
	}
	c.store, c.max, c.keep, c.fullEvery = s, limit, uint64(2*every), every
	c.gen, c.sinceFull, c.dirty = gen+1, since, false
	c.full = force || !ok || since+1 >= uint64(every)
	if !c.full {
		return c, nil
	}
	s.pruneCaches(c.path)
	return c, nil
}

// takeWarm returns the cache kept for the cache file path when the file
// still has the status the cache recorded and the check counter (gen and
// counted, from the .count file) is still at the generation that
// committed it; the caller then owns it. It is removed either way, so
// that a second check of the same scope running at the same time loads
// its own copy.
//
// Holding on to a cache whose file has since changed would not be wrong:
// every entry (a digest under a file status) and list (a RECORD parsed
// under its status) remains true. Only what another process added would
// be missed, and re-hashed.
func (s *Store) takeWarm(path string, gen uint64, counted bool) *Cache {
	s.mu.Lock()
	c := s.warm[path]
	delete(s.warm, path)
	s.mu.Unlock()
	if c == nil || !counted || !c.fileOK || c.gen != gen {
		return nil
	}
	if st, ok := fileStatus(path); !ok || keyOf(&st) != c.file {
		return nil
	}
	return c
}

// keepWarm keeps c, just committed, for the next check of its scope,
// dropping the least recently committed caches beyond MaxCaches.
func (s *Store) keepWarm(c *Cache) {
	limit := s.MaxCaches
	if limit <= 0 {
		limit = DefaultMaxCaches
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warm == nil {
		s.warm = map[string]*Cache{}
	}
	s.warmSeq++
	c.seq = s.warmSeq
	s.warm[c.path] = c
	for len(s.warm) > limit {
		var oldest *Cache
		for _, w := range s.warm {
			if oldest == nil || w.seq < oldest.seq {
				oldest = w
			}
		}
		delete(s.warm, oldest.path)
	}
}

// dropWarm forgets the cache kept for the cache file path, if any.
func (s *Store) dropWarm(path string) {
	s.mu.Lock()
	delete(s.warm, path)
	s.mu.Unlock()
}

// pruneCaches removes the least recently written cache files beyond
// MaxCaches, keeping current.
func (s *Store) pruneCaches(current string) {
	limit := s.MaxCaches
	if limit <= 0 {
		limit = DefaultMaxCaches
	}
	dir := filepath.Join(s.dir, "cache")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type f struct {
		name string
		mod  time.Time
	}
	var bins []f
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".bin" || filepath.Join(dir, e.Name()) == current {
			continue
		}
		if info, err := e.Info(); err == nil {
			bins = append(bins, f{e.Name(), info.ModTime()})
		}
	}
	if len(bins) < limit {
		return
	}
	sort.Slice(bins, func(i, j int) bool { return bins[i].mod.After(bins[j].mod) })
	for _, b := range bins[limit-1:] {
		base := filepath.Join(dir, b.name[:len(b.name)-len(".bin")])
		_ = os.Remove(base + ".bin")
		_ = os.Remove(base + ".count")
		s.dropWarm(base + ".bin")
	}
}

// Snapshot is a first-run record of a package directory's files.
type Snapshot struct {
	// Dir is the package directory the snapshot was taken of.
	Dir string `json:"dir"`
	// Name and Version identify the package at the time.
	Name    string `json:"name"`
	Version string `json:"version"`
	// TakenAt is when the snapshot was taken (RFC 3339, UTC).
	TakenAt string `json:"taken_at"`
	// Files maps slash-separated paths relative to Dir to "sha256:<hex>".
	Files map[string]string `json:"files"`
}

// Snapshot returns the snapshot taken of dir, or nil when there is none
// (a damaged snapshot file counts as none).
func (s *Store) Snapshot(dir string) (*Snapshot, error) {
	path := filepath.Join(s.dir, "baseline", keyFor(dir)+".json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read snapshot of %s: %w", dir, err)
	}
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil || snap.Dir != dir || snap.Files == nil {
		return nil, nil
	}
	return &snap, nil
}

// SaveSnapshot stores snap (replacing any earlier snapshot of snap.Dir),
// stamping TakenAt when empty.
func (s *Store) SaveSnapshot(snap *Snapshot) error {
	if snap.TakenAt == "" {
		snap.TakenAt = s.now().UTC().Format(time.RFC3339)
	}
	data, err := json.MarshalIndent(snap, "", " ")
	if err != nil {
		return fmt.Errorf("save snapshot of %s: %w", snap.Dir, err)
	}
	return writeAtomic(filepath.Join(s.dir, "baseline", keyFor(snap.Dir)+".json"), append(data, '\n'), true)
}

// DeleteSnapshot removes the snapshot of dir, if any.
func (s *Store) DeleteSnapshot(dir string) error {
	err := os.Remove(filepath.Join(s.dir, "baseline", keyFor(dir)+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
