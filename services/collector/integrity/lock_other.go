//go:build !unix

package integrity

// lock is a no-op where flock(2) is unavailable: concurrent writers may
// lose an update to reported.json, never corrupt it (writes are atomic).
func (s *Store) lock() (func(), error) { return func() {}, nil }
