package verifier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Records written by the verifier before its records had one encoder
// (testdata/records: the hand-written writers' bytes, HTML-escaped
// characters, U+2028, a handled id listed before the marks, a stale
// verdict at its baseline; the host registry's and rejection log's as
// json.Marshal wrote them) read with the one decoder, and the one encoder
// writes them again byte for byte: a record written before an upgrade
// reads after it, and the stored shape is the same.
func TestRecordsOfEarlierVerifiers(t *testing.T) {
	golden := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "records", name))
		require.NoError(t, err)
		return b
	}
	again := func(name string, v any) {
		b, err := encodeRecord(v)
		require.NoError(t, err)
		assert.Equal(t, string(golden(name)), string(b), name)
	}

	o, err := decodeObservation(golden("observation.json"))
	require.NoError(t, err)
	assert.Equal(t, "web<01>&\u2028", o.Host)
	assert.Equal(t, events.Target{Kind: "systemd.unit", Identifier: "agent<1>&.service"}, o.Target)
	assert.Equal(t, ordering{EvidenceID: "01920000-0000-7000-8000-000000000001", EvidenceSequence: 42, SignedBy: "ed25519:AAAA", SignedSeq: 9}, o.ordering())
	assert.Equal(t, time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.UTC), o.Time)
	assert.Contains(t, string(o.Snapshot), `"a\u003cb\u003e\u0026c \u2028 \u2029 é \"q\""`)
	again("observation.json", &o)

	r, err := decodeVerdictRecord(golden("verdict-drift.json"))
	require.NoError(t, err)
	assert.Equal(t, events.StatusDrift, r.Verdict.Status)
	require.NotNil(t, r.Verdict.Report)
	assert.Equal(t, "active_state<&>", r.Verdict.Report.Changes[0].Fields[0].Field)
	require.NoError(t, r.Verdict.Validate())
	assert.Equal(t, int64(60), r.IntervalSeconds)
	ord := r.ordering()
	assert.True(t, ord.handled("01920000-0000-7000-8000-000000000000"), "an id listed before the marks")
	assert.True(t, ord.handled(r.EvidenceID))
	assert.True(t, ord.unconfirmed(r.EvidenceID))
	again("verdict-drift.json", &r)

	s, err := decodeVerdictRecord(golden("verdict-stale.json"))
	require.NoError(t, err)
	assert.Equal(t, events.StatusStale, s.Verdict.Status)
	assert.True(t, s.AtBaseline)
	require.NoError(t, s.Verdict.Validate())
	again("verdict-stale.json", &s)

	h, err := decodeHostRecord(golden("host.json"))
	require.NoError(t, err)
	assert.Equal(t, "web-01", h.Host)
	assert.True(t, h.Rotating)
	assert.Len(t, h.Keys, 2)
	again("host.json", &h)

	j, err := decodeRejections(golden("rejections.json"))
	require.NoError(t, err)
	n, exact := j.Since(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	assert.Equal(t, uint64(1), n)
	assert.True(t, exact)
	again("rejections.json", &j)
}

// A record read back is what was written: every member, the verdict's
// report, characters encoding/json escapes for HTML, times to the
// nanosecond.
func TestVerdictRecordRoundTrip(t *testing.T) {
	id := "01920000-0000-7000-8000-000000000001"
	r := VerdictRecord{
		ID: "verdict-<1>", Time: time.Unix(1700000000, 5).UTC(), EvidenceID: id, EvidenceSequence: 7,
		Verdict: events.Verdict{Status: events.StatusError, Host: "web-<01>", Target: events.Target{Kind: "k", Identifier: "a\u2028b"},
			EvidenceID: id, SnapshotDigest: "sha256:" + strings.Repeat("0", 64), Error: "<&> \"q\" \u2029"},
		SignedBy: "ed25519:x", SignedSeq: 3, Handled: []string{"a", "b<"}, Unconfirmed: []string{"b<"}, IntervalSeconds: 60,
	}
	b, err := encodeRecord(&r)
	require.NoError(t, err)
	got, err := decodeVerdictRecord(b)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	again, err := encodeRecord(&got)
	require.NoError(t, err)
	assert.Equal(t, string(b), string(again))
}

// Each decoder is strict: an unknown member, data after the record, a
// member given twice or of another type, or a record that breaks its
// rules is refused
// (and a verdict record that does not read is one latestBucket replaces).
func TestRecordDecodersAreStrict(t *testing.T) {
	id := "01920000-0000-7000-8000-000000000001"
	verdict := `{"status":"pass","host":"h","target":{"kind":"k","identifier":"i"},"evidence_id":"` + id + `","snapshot_digest":"d"}`
	rec := func(members string) []byte {
		return []byte(`{"id":"v","time":"2026-12-07T10:00:00Z","evidence_id":"` + id + `","evidence_sequence":3,"verdict":` + verdict + members + `}`)
	}
	obs := func(members string) []byte {
		return []byte(`{"host":"h","target":{"kind":"k","identifier":"i"},"digest":"d","evidence_id":"` + id +
			`","evidence_sequence":3,"time":"2026-12-07T10:00:00Z","snapshot":{}` + members + `}`)
	}
	marks := func(n int) string { return `["` + strings.Repeat(`m","`, n-1) + `m"]` }
	for _, tc := range []struct {
		name   string
		decode func([]byte) error
		in     []byte
		err    error  // errors.Is
		errStr string // or the error says
	}{
		{"a verdict record", decodeV, rec(""), nil, ""},
		{"with its most marks", decodeV, rec(`,"handled":` + marks(maxHandled)), nil, ""},
		{"an unknown member", decodeV, rec(`,"extra":1`), nil, "unknown object member name"},
		{"an unknown member of the verdict", decodeV, []byte(strings.Replace(string(rec("")), `"snapshot_digest"`, `"x":1,"snapshot_digest"`, 1)), nil, "unknown object member name"},
		{"data after it", decodeV, append(rec(""), " {}"...), nil, "after top-level value"},
		{"a member given twice", decodeV, rec(`,"signed_seq":9,"signed_seq":10`), nil, `duplicate object member name "signed_seq"`},
		{"a member of another type", decodeV, rec(`,"signed_seq":"9"`), nil, "cannot decode"},
		{"no id", decodeV, []byte(strings.Replace(string(rec("")), `"id":"v"`, `"id":""`, 1)), ErrInvalidRecord, ""},
		{"the verdict of other evidence", decodeV, []byte(strings.Replace(string(rec("")), `"evidence_id":"`+id+`","evidence_sequence"`, `"evidence_id":"other","evidence_sequence"`, 1)), ErrInvalidRecord, ""},
		{"too many handled", decodeV, rec(`,"handled":` + marks(maxHandled+1)), ErrInvalidRecord, ""},
		{"too many unconfirmed", decodeV, rec(`,"unconfirmed":` + marks(maxHandled+1)), ErrInvalidRecord, ""},
		{"a negative interval", decodeV, rec(`,"interval_seconds":-1`), ErrInvalidRecord, ""},
		{"a latest snapshot", decodeO, obs(""), nil, ""},
		{"a latest snapshot with a member it lacks", decodeO, obs(`,"report":{}`), nil, "unknown object member name"},
		{"a latest snapshot at its baseline", decodeO, obs(`,"at_baseline":true`), ErrInvalidRecord, ""},
		{"a latest snapshot without its snapshot", decodeO, []byte(strings.Replace(string(obs("")), `"snapshot":{}`, `"snapshot":null`, 1)), ErrInvalidRecord, ""},
		{"a latest snapshot without a host", decodeO, []byte(strings.Replace(string(obs("")), `"host":"h"`, `"host":""`, 1)), ErrInvalidRecord, ""},
		{"a host record with an unknown member", func(b []byte) error { _, err := decodeHostRecord(b); return err },
			[]byte(`{"host":"h","keys":[],"admin":true}`), nil, "unknown object member name"},
		{"a rejection log", decodeR, []byte(`{"host":"h","total":2,"recent":[{"time":"2026-12-07T10:00:00Z","reason":"replayed","seq":2,"evidence_id":"e"}]}`), nil, ""},
		{"a rejection log counting past its total", decodeR, []byte(`{"host":"h","total":1,"recent":[{"time":"2026-12-07T10:00:00Z","reason":"replayed","seq":2,"evidence_id":"e"}]}`), ErrInvalidRecord, ""},
		{"a rejection log of no host", decodeR, []byte(`{"host":"","total":0,"recent":null}`), ErrInvalidRecord, ""},
	} {
		err := tc.decode(tc.in)
		switch {
		case tc.err != nil:
			require.ErrorIs(t, err, tc.err, tc.name)
		case tc.errStr != "":
			require.ErrorContains(t, err, tc.errStr, tc.name)
		default:
			require.NoError(t, err, tc.name)
		}
	}
	// An unreadable verdict record is one anything newer replaces.
	_, err := verdictOrder([]byte(`{"evidence_id":"e","evidence_sequence":3}`))
	require.Error(t, err, "a record of the ordering alone is not a verdict record")
}

func decodeV(b []byte) error { _, err := decodeVerdictRecord(b); return err }
func decodeO(b []byte) error { _, err := decodeObservation(b); return err }
func decodeR(b []byte) error { _, err := decodeRejections(b); return err }
