package integrity

import "sync"

// List is a parsed baseline: the files to hash (Want set; Dir and Rel as
// Cache.List documents), a label per file (the path as the baseline lists
// it) and a count the caller keeps with it (e.g. unhashed rows).
//
// A List the caller builds has Files and Labels. One that Cache.List
// returned has neither: its files are taken from the cache's list as
// RunPlanned reaches them, and a check keeps only those that are not OK
// (not taken from the cache, or changed). Read either kind through Len,
// OK, File, Label and Stats.
type List struct {
	Files  []File
	Labels []string
	Extra  int

	cached *listRun // a list the cache kept
}

// listRun is a check of a list the cache kept.
type listRun struct {
	cache *Cache
	from  *cacheFile // the file whose entries list's files link to; nil for none
	list  *cachedList
	dir   string
	state []uint8    // per file, as the check left it
	mu    sync.Mutex // guards allocating kept
	kept  []File     // files in state listKept (by index), once there is one
}

// The states of a file of a listRun.
const (
	listPending uint8 = iota // not checked
	listOK                   // taken from the cache, matching its known-good digest
	listKept                 // anything else: kept[i] is the file as checked
)

// Len returns the number of files.
func (l *List) Len() int {
	switch {
	case l == nil:
		return 0
	case l.cached != nil:
		return len(l.cached.state)
	}
	return len(l.Files)
}

// OK reports whether file i was hashed and matches its known-good digest.
func (l *List) OK(i int) bool {
	if r := l.cached; r != nil {
		return r.state[i] == listOK || r.state[i] == listKept && r.kept[i].OK()
	}
	return l.Files[i].OK()
}

// File returns file i as checked. For a list the cache kept, a file that
// is OK is rebuilt on every call: callers look at the files that are not
// OK.
func (l *List) File(i int) *File {
	r := l.cached
	if r == nil {
		return &l.Files[i]
	}
	if r.state[i] == listKept {
		return &r.kept[i]
	}
	f := &File{}
	r.fill(f, i)
	if r.state[i] == listOK {
		f.State, f.gotWant, f.Size, f.Cached = FileHashed, true, r.from.entries[r.list.files[i].entry].key.size, true
	}
	return f
}

// Label returns the label of file i.
func (l *List) Label(i int) string {
	if r := l.cached; r != nil {
		return r.list.files[i].label
	}
	if i >= len(l.Labels) {
		return l.Files[i].Rel
	}
	return l.Labels[i]
}

// Stats counts the files hashed and the files taken from the cache.
func (l *List) Stats() (hashed, cached int) {
	if l == nil {
		return 0, 0
	}
	r := l.cached
	if r == nil {
		return Stats(l.Files)
	}
	for i, s := range r.state {
		switch {
		case s == listOK:
			cached++
		case s == listKept && r.kept[i].Cached:
			cached++
		case s == listKept && r.kept[i].State == FileHashed:
			hashed++
		}
	}
	return hashed, cached
}

// fill sets f's Dir, Rel, Want and known-good size from file i of the
// list.
func (r *listRun) fill(f *File, i int) {
	lf := &r.list.files[i]
	f.Dir, f.Rel = splitDir(r.dir, lf.path)
	f.Want, f.wantSize = lf.want, lf.size
}

// keep records f, checked as file i, as not OK.
func (r *listRun) keep(i int, f *File) {
	r.mu.Lock()
	if r.kept == nil {
		r.kept = make([]File, len(r.state))
	}
	kept := r.kept
	r.mu.Unlock()
	kept[i] = *f
	r.state[i] = listKept
}
