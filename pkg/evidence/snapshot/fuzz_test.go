package snapshot_test

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// FuzzParse feeds the snapshot parser arbitrary bytes: it must never panic,
// and whatever it accepts must re-serialize to a snapshot that parses back to
// the same canonical bytes (compact and pretty alike).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"before.json", "after.json", "unicode.json", "before-reordered.json"} {
		f.Add(evidencetest.Read(f, "snapshots/"+name))
	}
	f.Add([]byte(`{"schema_version":1,"captured_at":"2026-01-01T00:00:00Z","target":{"kind":"k","identifier":"i"},"evidence":[]}`))
	f.Add([]byte(`{"schema_version":1,"captured_at":"2026-01-01T00:00:00","target":{},"evidence":[{}]}`))
	f.Add([]byte(` {"evidence":[{"data":{"z":-0,"\u00e9":"a\u0000\"","a":null,"b":true},"source":{"method":"m","collector":"c"},"kind":"k","plane":"live"}],` +
		`"target":{"identifier":"i","kind":"k"},"captured_at":"2026-01-01T00:00:00.5+01:00","schema_version":1} `))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := snapshot.Parse(data)
		// Decode takes what Parse takes, and its canonical JSON, written
		// from the document read, is Canonical's of the snapshot.
		ds, dcanon, derr := snapshot.Decode(data)
		if (derr == nil) != (err == nil) || (err != nil && derr.Error() != err.Error()) {
			t.Fatalf("Parse: %v, Decode: %v", err, derr)
		}
		if err != nil {
			return
		}
		canon, err := s.Canonical()
		if err != nil {
			t.Fatalf("accepted snapshot does not canonicalize: %v", err)
		}
		if !bytes.Equal(dcanon, canon) || !reflect.DeepEqual(ds, s) {
			t.Fatalf("Decode differs from Parse and Canonical:\n%s\n%s", dcanon, canon)
		}
		for _, pretty := range []bool{false, true} {
			out, err := s.Marshal(pretty)
			if err != nil {
				t.Fatalf("accepted snapshot does not marshal: %v", err)
			}
			again, err := snapshot.Parse(out)
			if err != nil {
				t.Fatalf("re-parse of own output failed: %v\n%s", err, out)
			}
			canon2, err := again.Canonical()
			if err != nil || !bytes.Equal(canon, canon2) {
				t.Fatalf("round trip changed the snapshot:\n%s\n%s", canon, canon2)
			}
		}
	})
}

// formatTimeReference is FormatTime as first written (strconv and
// strings.Repeat).
func formatTimeReference(t time.Time) string {
	t = t.Truncate(time.Microsecond)
	b := t.AppendFormat(nil, "2006-01-02T15:04:05")
	if us := t.Nanosecond() / 1000; us != 0 {
		s := strconv.Itoa(us)
		b = append(append(append(b, '.'), strings.Repeat("0", 6-len(s))...), s...)
	}
	if _, off := t.Zone(); off == 0 {
		b = append(b, 'Z')
	} else {
		b = t.AppendFormat(b, "-07:00")
	}
	return string(b)
}

func FuzzFormatTime(f *testing.F) {
	f.Add(int64(1791256180), int64(0), 0)
	f.Add(int64(1791256180), int64(123456789), 7200)
	f.Add(int64(-62135596800), int64(1000), -3600)
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("", offset%(24*3600)))
		want := formatTimeReference(tm)
		if got := snapshot.FormatTime(tm); got != want {
			t.Fatalf("FormatTime(%v) = %q, want %q", tm, got, want)
		}
	})
}
