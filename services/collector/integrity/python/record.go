package python

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// RecordEntry is one row of a RECORD file.
type RecordEntry struct {
	// Path is the installed file as listed: relative to site-packages
	// (possibly with "../" for scripts and data) or absolute.
	Path string
	// Hash is the known-good digest; zero for rows without a hash (RECORD
	// itself, byte-code), which are not checked.
	Hash integrity.Digest
	// Size is the listed size in bytes, or -1 when not given.
	Size int64
	// Line is the 1-based line the row starts on.
	Line int
}

// MaxRecordSize bounds the RECORD files read (the largest real ones, for
// packages with tens of thousands of files, are a few MB).
const MaxRecordSize = 64 << 20

// ParseRecord parses a RECORD file: CSV as Python's csv module writes it
// (comma-separated; a field may be double-quoted, with "" for a quote and
// line breaks allowed inside; rows end with \n or \r\n), three columns:
// path, hash ("<algorithm>=<urlsafe base64 without padding>", or empty)
// and size (decimal, or empty). Blank lines are ignored; rows with one or
// two columns are accepted as having no hash or size. It fails, wrapping
// ErrBadRecord, on more than three columns, an empty path or one
// containing NUL, a malformed hash or size, and md5/sha1 or unsupported
// algorithms. Whether a path stays inside the environment is decided by
// the caller, which knows the environment.
//
// Unquoted paths are substrings of a copy of data, so parsing allocates
// little beyond that copy and the returned slice.
func ParseRecord(data []byte) ([]RecordEntry, error) {
	data = append([]byte(nil), data...) // the caller keeps its buffer
	entries := make([]RecordEntry, 0, bytesCount(data, '\n')+1)
	err := eachRecordEntry(data, func(e *RecordEntry) error {
		entries = append(entries, *e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return entries, nil
}

func bytesCount(b []byte, c byte) int { return bytes.Count(b, []byte{c}) }

// eachRecordEntry parses data as ParseRecord does, calling fn for each
// entry (the entry is reused between calls) instead of collecting them.
func eachRecordEntry(data []byte, fn func(*RecordEntry) error) error {
	if len(data) > MaxRecordSize {
		return fmt.Errorf("%w: larger than %d bytes", ErrBadRecord, MaxRecordSize)
	}
	// The entries' paths are substrings of data: callers hand over a
	// buffer they no longer modify (ParseRecord copies it first).
	text := unsafe.String(unsafe.SliceData(data), len(data))
	var fields [4]string
	var e RecordEntry
	line := 1
	for i := 0; i < len(text); {
		start := line
		n, next, nl, err := splitPlainRow(text, i, &fields)
		if n == 0 {
			n, next, nl, err = splitRow(text, i, &fields)
		}
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrBadRecord, start, err)
		}
		i, line = next, line+nl
		if n == 1 && fields[0] == "" {
			continue // blank line
		}
		if n > 3 {
			return fmt.Errorf("%w: line %d: %d columns, want 3", ErrBadRecord, start, n)
		}
		e = RecordEntry{Path: fields[0], Size: -1, Line: start}
		if e.Path == "" {
			return fmt.Errorf("%w: line %d: empty path", ErrBadRecord, start)
		}
		if strings.IndexByte(e.Path, 0) >= 0 {
			return fmt.Errorf("%w: line %d: NUL in path", ErrBadRecord, start)
		}
		if n > 1 {
			if e.Hash, err = integrity.ParseRecordHash(fields[1]); err != nil {
				return fmt.Errorf("%w: line %d: %s: %w", ErrBadRecord, start, quotePath(e.Path), err)
			}
		}
		if n > 2 && fields[2] != "" {
			size, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil || size < 0 {
				return fmt.Errorf("%w: line %d: %s: bad size %q", ErrBadRecord, start, quotePath(e.Path), truncate(fields[2]))
			}
			e.Size = size
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

func quotePath(p string) string { return strconv.Quote(truncate(p)) }

// splitPlainRow is splitRow for the common row without quotes, found with
// byte searches rather than a byte-by-byte scan. It returns n == 0 for a
// row with a quote (or a lone carriage return), which splitRow handles.
func splitPlainRow(text string, i int, fields *[4]string) (n, next, lines int, err error) {
	row := text[i:]
	end := strings.IndexByte(row, '\n')
	next = len(text)
	if end >= 0 {
		next, row = i+end+1, row[:end]
	}
	row = strings.TrimSuffix(row, "\r")
	if strings.IndexByte(row, '"') >= 0 || strings.IndexByte(row, '\r') >= 0 {
		return 0, 0, 0, nil
	}
	for {
		j := strings.IndexByte(row, ',')
		if j < 0 {
			break
		}
		if n < len(fields) {
			fields[n] = row[:j]
		}
		n++
		row = row[j+1:]
	}
	if n < len(fields) {
		fields[n] = row
	}
	n++
	if end >= 0 {
		lines = 1
	}
	return n, next, lines, nil
}

// splitRow splits the CSV row starting at text[i] into fields (at most
// len(fields) kept; n counts them all) and returns the offset after the
// row's line break and how many line breaks it consumed.
func splitRow(text string, i int, fields *[4]string) (n, next, lines int, err error) {
	for {
		var f string
		if i < len(text) && text[i] == '"' {
			var b strings.Builder
			i++
			for {
				j := strings.IndexByte(text[i:], '"')
				if j < 0 {
					return 0, 0, 0, fmt.Errorf("unterminated quoted field")
				}
				chunk := text[i : i+j]
				lines += strings.Count(chunk, "\n")
				b.WriteString(chunk)
				i += j + 1
				if i < len(text) && text[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			f = b.String()
			if i < len(text) && text[i] != ',' && text[i] != '\n' && text[i] != '\r' {
				return 0, 0, 0, fmt.Errorf("unexpected %q after quoted field", text[i])
			}
		} else {
			j := i
			for j < len(text) && text[j] != ',' && text[j] != '\n' && text[j] != '\r' {
				j++
			}
			f = text[i:j]
			i = j
		}
		if n < len(fields) {
			fields[n] = f
		}
		n++
		if i >= len(text) {
			return n, i, lines, nil
		}
		switch text[i] {
		case ',':
			i++
			continue
		case '\r':
			i++
			if i < len(text) && text[i] == '\n' {
				i++
			}
		case '\n':
			i++
		}
		return n, i, lines + 1, nil
	}
}
