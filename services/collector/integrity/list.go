package integrity

import (
	"runtime"
	"strings"
	"sync"
)

// List is a parsed baseline: the files to hash (Want set; Dir and Rel as
// Cache.List documents), a label per file (the path as the baseline lists
// it) and a count the caller keeps with it (e.g. unhashed rows).
//
// A List the caller builds has Files and Labels. One that Cache.List
// read from the cache file has neither: its files are read from the file
// as RunPlanned reaches them, and a check keeps only those that are not
// OK (not taken from the cache, or changed). Read either kind through
// Len, OK, File, Label and Stats.
type List struct {
	Files  []File
	Labels []string
	Extra  int

	cached *listRun // a list read from the cache file
}

// listRun is a check of a list read from a cache view.
type listRun struct {
	cache *Cache
	view  *view
	list  *viewList
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

// File returns file i as checked. For a list read from the cache file, a
// file that is OK is rebuilt, with its own copy of the path, on every
// call: callers look at the files that are not OK.
func (l *List) File(i int) *File {
	r := l.cached
	if r == nil {
		return &l.Files[i]
	}
	if r.state[i] == listKept {
		return &r.kept[i]
	}
	f := &File{}
	var lf listFile
	r.view.file(r.list, i, &lf)
	r.fill(f, &lf)
	f.Rel = strings.Clone(f.Rel)
	if r.state[i] == listOK {
		f.State, f.gotWant, f.Size, f.Cached = FileHashed, true, r.view.entryKey(lf.entry).size, true
	}
	runtime.KeepAlive(r.view) // until Rel is copied
	return f
}

// Label returns the label of file i (a copy, for a list read from the
// cache file).
func (l *List) Label(i int) string {
	r := l.cached
	if r == nil {
		if i >= len(l.Labels) {
			return l.Files[i].Rel
		}
		return l.Labels[i]
	}
	var lf listFile
	r.view.file(r.list, i, &lf)
	label := string(lf.label)
	runtime.KeepAlive(r.view)
	return label
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

// fill sets f's Dir, Rel, Want and known-good size from the file record
// lf. Rel is read from the view: copy it before it outlives the check.
func (r *listRun) fill(f *File, lf *listFile) {
	f.Dir, f.Rel = splitDir(r.dir, bytesString(lf.path))
	readDigest(r.view.data[lf.want:], &f.Want)
	f.wantSize = lf.size
}

// keep records f, checked as file i, as not OK.
func (r *listRun) keep(i int, f *File) {
	r.mu.Lock()
	if r.kept == nil {
		r.kept = make([]File, len(r.state))
	}
	kept := r.kept
	r.mu.Unlock()
	g := &kept[i]
	*g = *f
	g.Rel = strings.Clone(f.Rel)
	r.state[i] = listKept
}
