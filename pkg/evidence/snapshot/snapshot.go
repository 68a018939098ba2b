package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
)

// SchemaVersion is the only snapshot schema version this package reads.
const SchemaVersion = 1

// MaxSize is the largest snapshot document Parse accepts (32 MiB); a real
// snapshot is a few kilobytes, and a 10,000-field one about 600 KiB.
const MaxSize = 32 << 20

// Plane classifies how directly a record was observed.
type Plane string

// The evidence planes.
const (
	Declared Plane = "declared"
	Resolved Plane = "resolved"
	Live     Plane = "live"
)

// Valid reports whether p is one of the three planes.
func (p Plane) Valid() bool { return p == Declared || p == Resolved || p == Live }

// Target names what a snapshot describes.
type Target struct {
	Kind       string
	Identifier string
}

// String renders the target as kind:'identifier'.
func (t Target) String() string { return t.Kind + ":" + Quote(t.Identifier) }

// Source is a record's provenance.
type Source struct {
	Collector string
	Method    string
}

// Record is one evidence record.
type Record struct {
	Plane  Plane
	Kind   string
	Source Source
	Data   Data
}

// Snapshot is one RuntimeTruth schema v1 snapshot.
type Snapshot struct {
	SchemaVersion int
	// CapturedAt is the capture time as written, an RFC 3339 date-time
	// (CheckTime); it is serialized and digested verbatim, as RuntimeTruth
	// does, never re-formatted.
	CapturedAt string
	Target     Target
	Evidence   []Record
}

// New returns a snapshot of target captured now.
func New(target Target, records ...Record) *Snapshot {
	return &Snapshot{
		SchemaVersion: SchemaVersion,
		CapturedAt:    FormatTime(time.Now().UTC()),
		Target:        target,
		Evidence:      records,
	}
}

// Record returns the record of the given kind.
func (s *Snapshot) Record(kind string) (*Record, bool) {
	for i := range s.Evidence {
		if s.Evidence[i].Kind == kind {
			return &s.Evidence[i], true
		}
	}
	return nil, false
}

// Errors returned by Parse and Validate; each is wrapped with the place.
var (
	ErrFormat             = errors.New("invalid snapshot")
	ErrTooLarge           = fmt.Errorf("%w: larger than %d bytes", ErrFormat, MaxSize)
	ErrUnsupportedVersion = fmt.Errorf("%w: unsupported schema_version", ErrFormat)
	// ErrDuplicateKind is matched (errors.Is) by the error of two
	// records of one kind, a rule a snapshot's JSON Schema cannot state.
	ErrDuplicateKind = errors.New("duplicate evidence kind")
)

// duplicateKind is the error of a record of a kind given before.
type duplicateKind struct{ err error }

func (e duplicateKind) Error() string        { return e.err.Error() }
func (e duplicateKind) Unwrap() error        { return e.err }
func (e duplicateKind) Is(target error) bool { return target == ErrDuplicateKind }

func formatErr(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrFormat, path, fmt.Sprintf(format, args...))
}

// Parse reads a snapshot strictly.
func Parse(data []byte) (*Snapshot, error) {
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	return FromTree(root)
}

// Decode reads a snapshot strictly, as Parse does, and returns with it its
// canonical JSON (what Canonical returns), written from the document read.
func Decode(data []byte) (*Snapshot, []byte, error) {
	root, err := parseTree(data)
	if err != nil {
		return nil, nil, err
	}
	s, err := FromTree(root)
	if err != nil {
		return nil, nil, err
	}
	// FromTree takes only what Tree writes back: the same members, each
	// value of the same type and, for a number, the same integer.
	canon, err := canonjson.Marshal(root)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return s, canon, nil
}

// parseTree parses a snapshot's JSON document.
func parseTree(data []byte) (jsontree.Value, error) {
	if len(data) > MaxSize {
		return jsontree.Value{}, ErrTooLarge
	}
	root, err := jsontree.Parse(data)
	if err != nil {
		return jsontree.Value{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return root, nil
}

// FromTree builds a snapshot from a parsed JSON document.
func FromTree(root jsontree.Value) (*Snapshot, error) {
	top, err := fields(root, "snapshot", "schema_version", "captured_at", "target", "evidence")
	if err != nil {
		return nil, err
	}
	s := &Snapshot{}
	v := top.get("schema_version")
	if !v.IsInteger() {
		return nil, formatErr("schema_version", "must be an integer, got %s", describe(v))
	}
	if n, err := v.Int64(); err != nil || n != SchemaVersion {
		return nil, fmt.Errorf("%w %s (this runtimetruth reads %d)", ErrUnsupportedVersion, v.Text, SchemaVersion)
	}
	s.SchemaVersion = SchemaVersion
	ts := top.get("captured_at")
	if ts.Kind != jsontree.String {
		return nil, formatErr("captured_at", "must be a string, got %s", describe(ts))
	}
	if err := CheckTime(ts.Text); err != nil {
		return nil, fmt.Errorf("%w: captured_at: %w", ErrFormat, err)
	}
	s.CapturedAt = ts.Text
	tf, err := fields(top.get("target"), "target", "kind", "identifier")
	if err != nil {
		return nil, err
	}
	if s.Target.Kind, err = nonEmpty(tf.get("kind"), "target.kind"); err != nil {
		return nil, err
	}
	if s.Target.Identifier, err = nonEmpty(tf.get("identifier"), "target.identifier"); err != nil {
		return nil, err
	}
	ev := top.get("evidence")
	if ev.Kind != jsontree.Array {
		return nil, formatErr("evidence", "must be an array, got %s", describe(ev))
	}
	s.Evidence = make([]Record, 0, len(ev.Items))
	seen := make(map[string]int, len(ev.Items))
	for i, item := range ev.Items {
		path := "evidence[" + strconv.Itoa(i) + "]"
		r, err := parseRecord(item, path)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[r.Kind]; dup {
			return nil, duplicateKind{formatErr(path+".kind", "duplicate evidence kind %q (also evidence[%d])", r.Kind, j)}
		}
		seen[r.Kind] = i
		s.Evidence = append(s.Evidence, r)
	}
	return s, nil
}

func parseRecord(item jsontree.Value, path string) (Record, error) {
	rf, err := fields(item, path, "plane", "kind", "source", "data")
	if err != nil {
		return Record{}, err
	}
	var r Record
	plane, err := nonEmpty(rf.get("plane"), path+".plane")
	if err != nil {
		return Record{}, err
	}
	if r.Plane = Plane(plane); !r.Plane.Valid() {
		return Record{}, formatErr(path+".plane", "unknown plane %q (want declared, resolved or live)", plane)
	}
	if r.Kind, err = nonEmpty(rf.get("kind"), path+".kind"); err != nil {
		return Record{}, err
	}
	sf, err := fields(rf.get("source"), path+".source", "collector", "method")
	if err != nil {
		return Record{}, err
	}
	if r.Source.Collector, err = nonEmpty(sf.get("collector"), path+".source.collector"); err != nil {
		return Record{}, err
	}
	if r.Source.Method, err = nonEmpty(sf.get("method"), path+".source.method"); err != nil {
		return Record{}, err
	}
	data := rf.get("data")
	if data.Kind != jsontree.Object {
		return Record{}, formatErr(path+".data", "must be an object, got %s", describe(data))
	}
	r.Data = make(Data, len(data.Members))
	for _, m := range data.Members {
		val, err := scalar(m.Value, path+".data."+m.Key)
		if err != nil {
			return Record{}, err
		}
		r.Data[m.Key] = val
	}
	return r, nil
}

func scalar(v jsontree.Value, path string) (Value, error) {
	switch v.Kind {
	case jsontree.Null:
		return Null(), nil
	case jsontree.String:
		return String(v.Text), nil
	case jsontree.Bool:
		return Bool(v.Bool), nil
	case jsontree.Number:
		if !v.IsInteger() {
			return Value{}, formatErr(path, "non-integer number %s (schema v1 data is string, integer, boolean or null)", v.Text)
		}
		n, err := v.Int64()
		if err != nil || n > canonjson.MaxSafeInteger || n < -canonjson.MaxSafeInteger {
			return Value{}, formatErr(path, "integer %s outside ±(2^53-1)", v.Text)
		}
		return Int(n), nil
	}
	return Value{}, formatErr(path, "non-scalar value (%s); schema v1 data is string, integer, boolean or null", v.Kind)
}

// fields checks that v is an object with exactly the given keys, and
// returns its members.
func fields(v jsontree.Value, path string, keys ...string) (object, error) {
	if v.Kind != jsontree.Object {
		return nil, formatErr(path, "must be an object, got %s", describe(v))
	}
	for _, m := range v.Members {
		if !slices.Contains(keys, m.Key) {
			return nil, formatErr(path, "unknown key %q", m.Key)
		}
	}
	o := object(v.Members)
	for _, k := range keys {
		if _, ok := o.lookup(k); !ok {
			return nil, formatErr(path, "missing key %q", k)
		}
	}
	return o, nil
}

// object is the members of a JSON object, looked up by key.
type object []jsontree.Member

func (o object) lookup(key string) (jsontree.Value, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
		}
	}
	return jsontree.Value{}, false
}

// get is the value of a key fields found.
func (o object) get(key string) jsontree.Value {
	v, _ := o.lookup(key)
	return v
}

func nonEmpty(v jsontree.Value, path string) (string, error) {
	if v.Kind != jsontree.String {
		return "", formatErr(path, "must be a string, got %s", describe(v))
	}
	if v.Text == "" {
		return "", formatErr(path, "must not be empty")
	}
	return v.Text, nil
}

func describe(v jsontree.Value) string {
	if v.Kind == jsontree.Number && !v.IsInteger() {
		return "non-integer number"
	}
	return v.Kind.String()
}

// CheckTime checks a captured_at timestamp: an RFC 3339 date-time,
// YYYY-MM-DD, T or t, hh:mm:ss, an optional fraction of one or more
// digits, and Z, z or an offset ±hh:mm, with the date, the clock (no leap
// second) and the offset in range. A snapshot keeps the timestamp as
// written.
func CheckTime(ts string) error {
	const clock = len("2006-01-02T15:04:05")
	if len(ts) < clock || !digits(ts[0:4]) || ts[4] != '-' || !digits(ts[5:7]) || ts[7] != '-' || !digits(ts[8:10]) ||
		(ts[10] != 'T' && ts[10] != 't') || !digits(ts[11:13]) || ts[13] != ':' || !digits(ts[14:16]) || ts[16] != ':' || !digits(ts[17:19]) {
		return notTimestamp(ts, "")
	}
	zone := ts[clock:]
	if len(zone) > 0 && zone[0] == '.' {
		n := 1
		for n < len(zone) && '0' <= zone[n] && zone[n] <= '9' {
			n++
		}
		if n == 1 {
			return notTimestamp(ts, "")
		}
		zone = zone[n:]
	}
	// The ranges, by time.Parse: the layouts take the two-digit fields
	// checked above.
	if _, err := time.Parse("2006-01-02", ts[:10]); err != nil {
		return notTimestamp(ts, rangeOf(err))
	}
	if _, err := time.Parse("15:04:05", ts[11:clock]); err != nil {
		return notTimestamp(ts, rangeOf(err))
	}
	switch {
	case zone == "Z" || zone == "z":
		return nil
	case zone == "":
		return fmt.Errorf("%q must be timezone-aware (end in Z or an offset)", ts)
	case len(zone) != len("+07:00") || (zone[0] != '+' && zone[0] != '-') || !digits(zone[1:3]) || zone[3] != ':' || !digits(zone[4:6]):
		return notTimestamp(ts, "")
	case zone[1:3] > "23":
		return notTimestamp(ts, "offset hour out of range")
	case zone[4:6] > "59":
		return notTimestamp(ts, "offset minute out of range")
	}
	return nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || '9' < s[i] {
			return false
		}
	}
	return true
}

func notTimestamp(ts, detail string) error {
	if detail != "" {
		return fmt.Errorf("%q is not an RFC 3339 timestamp (%s)", ts, detail)
	}
	return fmt.Errorf("%q is not an RFC 3339 timestamp", ts)
}

// rangeOf is the range time.Parse found out of it ("month out of range").
func rangeOf(err error) string {
	if pe, ok := errors.AsType[*time.ParseError](err); ok {
		return strings.TrimPrefix(pe.Message, ": ")
	}
	return ""
}

// FormatTime renders t as RuntimeTruth's collectors write captured_at:
// Python's datetime.isoformat() with "+00:00" replaced by "Z", microseconds
// only when non-zero.
func FormatTime(t time.Time) string {
	var buf [40]byte
	t = t.Truncate(time.Microsecond)
	dst := t.AppendFormat(buf[:0], "2006-01-02T15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		dst = append(dst, '.')
		for div := 100000; div > 0; div /= 10 {
			dst = append(dst, byte('0'+us/div%10))
		}
	}
	if _, off := t.Zone(); off == 0 {
		return string(append(dst, 'Z'))
	}
	return string(t.AppendFormat(dst, "-07:00"))
}

// Validate checks what Parse checks, for snapshots built in code.
func (s *Snapshot) Validate() error {
	if s.SchemaVersion != SchemaVersion {
		return fmt.Errorf("%w %d", ErrUnsupportedVersion, s.SchemaVersion)
	}
	if err := CheckTime(s.CapturedAt); err != nil {
		return fmt.Errorf("%w: captured_at: %w", ErrFormat, err)
	}
	if s.Target.Kind == "" || s.Target.Identifier == "" {
		return formatErr("target", "kind and identifier must not be empty")
	}
	// A few records are checked for a repeated kind one against another,
	// many through a map.
	var seen map[string]bool
	if len(s.Evidence) > 16 {
		seen = make(map[string]bool, len(s.Evidence))
	}
	repeated := func(i int) bool {
		kind := s.Evidence[i].Kind
		if seen == nil {
			return slices.ContainsFunc(s.Evidence[:i], func(p Record) bool { return p.Kind == kind })
		}
		if seen[kind] {
			return true
		}
		seen[kind] = true
		return false
	}
	for i, r := range s.Evidence {
		// The path is built for an error only.
		path := func() string { return "evidence[" + strconv.Itoa(i) + "]" }
		switch {
		case !r.Plane.Valid():
			return formatErr(path()+".plane", "unknown plane %q", r.Plane)
		case r.Kind == "":
			return formatErr(path()+".kind", "must not be empty")
		case repeated(i):
			return duplicateKind{formatErr(path()+".kind", "duplicate evidence kind %q", r.Kind)}
		case r.Source.Collector == "" || r.Source.Method == "":
			return formatErr(path()+".source", "collector and method must not be empty")
		}
		for k, v := range r.Data {
			if str, ok := v.Str(); !utf8.ValidString(k) || (ok && !utf8.ValidString(str)) {
				return formatErr(path()+".data", "field %q holds invalid UTF-8", k)
			}
			if n, ok := v.IntValue(); ok && (n > canonjson.MaxSafeInteger || n < -canonjson.MaxSafeInteger) {
				return formatErr(path()+".data."+k, "integer %d outside ±(2^53-1)", n)
			}
		}
	}
	return nil
}

// Tree returns the snapshot as the JSON document RuntimeTruth's to_dict
// produces.
func (s *Snapshot) Tree() jsontree.Value {
	str := func(x string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: x} }
	obj := func(m ...jsontree.Member) jsontree.Value { return jsontree.Value{Kind: jsontree.Object, Members: m} }
	evidence := make([]jsontree.Value, len(s.Evidence))
	for i, r := range s.Evidence {
		// Sorted by code point: the order both encoders want (RFC 8785's
		// UTF-16 order differs only for keys mixing U+E000..U+FFFF with
		// characters above U+FFFF, which canonjson re-sorts).
		keys := make([]string, 0, len(r.Data))
		for k := range r.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		data := make([]jsontree.Member, len(keys))
		for j, k := range keys {
			data[j] = jsontree.Member{Key: k, Value: r.Data[k].Tree()}
		}
		evidence[i] = obj(
			jsontree.Member{Key: "data", Value: jsontree.Value{Kind: jsontree.Object, Members: data}},
			jsontree.Member{Key: "kind", Value: str(r.Kind)},
			jsontree.Member{Key: "plane", Value: str(string(r.Plane))},
			jsontree.Member{Key: "source", Value: obj(
				jsontree.Member{Key: "collector", Value: str(r.Source.Collector)},
				jsontree.Member{Key: "method", Value: str(r.Source.Method)},
			)},
		)
	}
	// The members in key order, the order both encoders write.
	return obj(
		jsontree.Member{Key: "captured_at", Value: str(s.CapturedAt)},
		jsontree.Member{Key: "evidence", Value: jsontree.Value{Kind: jsontree.Array, Items: evidence}},
		jsontree.Member{Key: "schema_version", Value: jsontree.Value{Kind: jsontree.Number, Text: strconv.Itoa(s.SchemaVersion)}},
		jsontree.Member{Key: "target", Value: obj(
			jsontree.Member{Key: "identifier", Value: str(s.Target.Identifier)},
			jsontree.Member{Key: "kind", Value: str(s.Target.Kind)},
		)},
	)
}

// Marshal writes the snapshot as RuntimeTruth does: compact sorted JSON, or
// indented by two spaces when pretty. There is no trailing newline.
func (s *Snapshot) Marshal(pretty bool) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	opts := pyjson.Compact
	if pretty {
		opts = pyjson.Pretty
	}
	return pyjson.Marshal(s.Tree(), opts)
}

// Canonical returns the RFC 8785 canonical bytes of the snapshot.
func (s *Snapshot) Canonical() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return canonjson.Marshal(s.Tree())
}

// Digest returns "sha256:<hex>" over the canonical bytes, RuntimeTruth's
// baseline identity.
func (s *Snapshot) Digest() (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	return canonjson.Digest(s.Tree())
}

// Quote renders s as Python's repr() does, the quoting RuntimeTruth uses
// in its messages: single quotes unless s holds a single quote and no
// double one, backslashes doubled, and characters that are not printable
// escaped (\t, \n, \r, \xNN, \uNNNN, \UNNNNNNNN; an invalid byte as
// \xNN), so a message never carries a control character to a terminal.
func Quote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, q)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = fmt.Appendf(b, `\x%02x`, s[i])
		case r == '\\' || r == rune(q):
			b = append(b, '\\', byte(r))
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == ' ' || unicode.IsPrint(r):
			b = append(b, s[i:i+size]...)
		case r < 0x100:
			b = fmt.Appendf(b, `\x%02x`, r)
		case r < 0x10000:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = fmt.Appendf(b, `\U%08x`, r)
		}
		i += size
	}
	return string(append(b, q))
}
