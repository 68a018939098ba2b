package syslog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ecscheck"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// hostile is the message of a collection failure whose CEF value holds
// what the format escapes, and more.
const hostile = "a=b \\ c|d\nnext é"

// siemRecords are the fixture mix on two hosts, then a drift whose report
// is about 50 KB, then a collection failure with a hostile message.
func siemRecords(t *testing.T) (recs []link.Record, big link.Record) {
	t.Helper()
	chains := auditortest.NewChains(chain.NewHasher(nil), events.Source("auditor", "a-0"))
	seqs := map[string]uint64{}
	seal := func(i int, p events.Payload) link.Record {
		m := auditortest.Msg(t, p, i)
		stream := auditortest.StreamOf(m.Subject)
		seqs[stream]++
		return chains.Seal(t, auditortest.Message(t, stream, seqs[stream], m))
	}
	for i := range 24 {
		recs = append(recs, seal(i, auditortest.Payload(t, []string{"web-01", "web-02"}, i)))
	}
	drift := auditortest.Drift("web-01", auditortest.Target(1), "01920000-0000-7000-8000-000000000100", 100)
	fields := make([]report.Field, 0, 600)
	for i := range cap(fields) {
		fields = append(fields, report.Field{Field: fmt.Sprintf("environment.VARIABLE_%04d", i),
			Before: report.Present(snapshot.String("before-" + strings.Repeat("x", 20))),
			After:  report.Present(snapshot.String("after-" + strings.Repeat("y", 20)))})
	}
	drift.Report.Changes[0].Fields = fields
	big = seal(100, drift)
	require.Greater(t, len(big.Event), 50_000, "a 50 KB report")
	recs = append(recs, big)
	recs = append(recs, seal(101, events.CollectionFailed{Host: "web-02", Collector: "codex", Reason: "timeout", Message: hostile}))
	return recs, big
}

// TestSIEMFormatsThroughRsyslog: links sent as OCSF, ECS and CEF records
// over TCP and TLS reach the real rsyslog, whose mmpstrucdata and
// mmjsonparse (or mmnormalize's CEF parser) yield every record's class,
// severity, finding uid, host and the link (chain, seq, hash: the
// link's), in the structured data and in the record alike; the 50 KB
// drift arrives whole; each record read back validates.
func TestSIEMFormatsThroughRsyslog(t *testing.T) {
	rs := auditortest.RsyslogEnv(t)
	tlsCfg, err := syslog.TLSConfig(rs.TLSCA, "localhost")
	require.NoError(t, err)
	recs, big := siemRecords(t)
	for _, tc := range []struct{ format, network, address string }{
		{"ocsf", "tcp", rs.SIEMTCP}, {"ocsf", "tls", rs.SIEMTLS}, {"ecs", "tcp", rs.SIEMTCP}, {"ecs", "tls", rs.SIEMTLS},
		{"cef", "tcp", rs.SIEMTCP}, {"cef", "tls", rs.SIEMTLS},
	} {
		t.Run(tc.format+"/"+tc.network, func(t *testing.T) {
			got := sendSIEM(t, rs, syslog.Options{Network: tc.network, Address: tc.address, TLS: tlsCfg, Format: tc.format}, recs)
			for _, r := range recs {
				l := got[r.Chain+"#"+strconv.FormatUint(r.Seq, 10)]
				require.NotNil(t, l.Vars, "%s seq %d did not arrive", r.Chain, r.Seq)
				sd := dig(l.Vars, "rfc5424-sd", "rtlink@32473").(map[string]any)
				assert.Equal(t, r.Hash, sd["hash"], "the structured data's hash")
				switch tc.format {
				case "ocsf":
					rec := dig(l.Vars, "rec").(map[string]any)
					checkOCSF(t, r, rec)
					if r.Seq == big.Seq && r.Chain == big.Chain {
						assert.Equal(t, string(dataOf(t, big)), rec["raw_data"], "the 50 KB drift report, whole")
					}
				case "ecs":
					rec := dig(l.Vars, "rec").(map[string]any)
					assert.Equal(t, r.Hash, dig(rec, "event", "hash"))
					assert.Equal(t, r.Chain, dig(rec, "runtimetruth", "chain"))
					assert.NoError(t, ecscheck.Validate(marshal(t, rec), ecscheck.WithCustom("runtimetruth"), ecscheck.WithVersion(ecscheck.Version)))
				case "cef":
					ext := dig(l.Vars, "cef", "cef", "Extensions").(map[string]any)
					assert.Equal(t, r.Hash, ext["cs2"])
					assert.Equal(t, r.Chain, ext["cs1"])
					assert.Equal(t, strconv.FormatUint(r.Seq, 10), ext["cn1"])
					assert.Contains(t, ext, "rt", "the first extension key, whole (liblognorm #363)")
					if r.Meta.Type == events.TypeCollectionFailed && strings.Contains(string(r.Event), "next") {
						assert.Contains(t, ext["msg"], hostile, "= \\ | newline é survive the CEF parser")
					}
				}
			}
		})
	}

	// Over UDP the drift does not fit a datagram: its record comes without
	// the raw report, still a valid record, saying it was cut.
	t.Run("ocsf/udp", func(t *testing.T) {
		const datagram = 8192
		got := sendSIEM(t, rs, syslog.Options{Network: "udp", Address: rs.SIEMUDP, Format: "ocsf", MaxDatagram: datagram}, []link.Record{big})
		rec := dig(got[big.Chain+"#"+strconv.FormatUint(big.Seq, 10)].Vars, "rec").(map[string]any)
		checkOCSF(t, big, rec)
		assert.Equal(t, true, dig(rec, "metadata", "is_truncated"))
		assert.Greater(t, dig(rec, "metadata", "untruncated_size"), float64(datagram))
		assert.NotContains(t, rec, "raw_data")
	})
}

// checkOCSF checks an OCSF record rsyslog parsed against its link.
func checkOCSF(t *testing.T, r link.Record, rec map[string]any) {
	t.Helper()
	assert.Contains(t, rec, "class_uid") // 0 for a base event
	assert.NotZero(t, rec["severity_id"])
	for _, k := range []string{"chain", "hash", "prev"} {
		assert.Equal(t, map[string]any{"chain": r.Chain, "hash": r.Hash, "prev": r.Prev}[k], dig(rec, "unmapped", k), k)
	}
	assert.Equal(t, float64(r.Seq), dig(rec, "unmapped", "seq"))
	switch rec["class_uid"] {
	case float64(2003), float64(2004):
		assert.NotEmpty(t, dig(rec, "finding_info", "uid"))
	}
	if r.Meta.Host != "" && rec["class_uid"] != float64(1008) {
		assert.Equal(t, r.Meta.Host, dig(rec, "device", "hostname"))
	}
	assert.NoError(t, ocsfcheck.Validate(marshal(t, rec)))
}

// sendSIEM sends recs through a sink of opts (its HOSTNAME unique) and
// returns the parsed messages by chain#seq.
func sendSIEM(t *testing.T, rs auditortest.Rsyslog, opts syslog.Options, recs []link.Record) map[string]auditortest.SIEMLine {
	t.Helper()
	opts.Hostname = auditortest.UniqueHost("siem-" + opts.Format + "-" + opts.Network)
	opts.Product.Version = "test"
	s, err := syslog.New(opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	for i := 0; i < len(recs); i += 10 {
		require.NoError(t, s.Write(context.Background(), recs[i:min(i+10, len(recs))]))
	}
	var lines []auditortest.SIEMLine
	natstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if lines = auditortest.SIEMLines(t, rs.SIEMFile, opts.Hostname); len(lines) < len(recs) {
			return fmt.Errorf("%d of %d messages", len(lines), len(recs))
		}
		return nil
	})
	out := map[string]auditortest.SIEMLine{}
	for _, l := range lines {
		sd, ok := dig(l.Vars, "rfc5424-sd", "rtlink@32473").(map[string]any)
		require.True(t, ok, "no structured data: %v", l.Vars)
		out[fmt.Sprint(sd["chain"])+"#"+fmt.Sprint(sd["seq"])] = l
	}
	return out
}

// TestLiblognormCEFFirstKey shows why CEF records have a space after the
// header's last pipe: without it, Debian's liblognorm 2.0.6 (behind
// rsyslog's mmnormalize) loses the first extension key's first character
// (liblognorm issue #363). If this starts failing, the bug is fixed and
// the space can go.
func TestLiblognormCEFFirstKey(t *testing.T) {
	rs := auditortest.RsyslogEnv(t)
	host := auditortest.UniqueHost("cef363")
	for i, sep := range []string{"|", "| "} {
		m := fmt.Sprintf(`<110>1 2026-12-07T00:00:00.000000Z %s t - x [rtlink@32473 chain="c" seq="%d" hash="h"] CEF:0|v|p|1|s|n|5%srt=123 msg=hello`, host, i, sep)
		c, err := net.Dial("tcp", rs.SIEMTCP)
		require.NoError(t, err)
		_, err = fmt.Fprintf(c, "%d %s", len(m), m)
		require.NoError(t, err)
		require.NoError(t, c.Close())
	}
	var lines []auditortest.SIEMLine
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if lines = auditortest.SIEMLines(t, rs.SIEMFile, host); len(lines) < 2 {
			return fmt.Errorf("%d of 2 messages", len(lines))
		}
		return nil
	})
	for _, l := range lines {
		ext := dig(l.Vars, "cef", "cef", "Extensions").(map[string]any)
		switch dig(l.Vars, "rfc5424-sd", "rtlink@32473", "seq") {
		case "0":
			assert.Equal(t, map[string]any{"t": "123", "msg": "hello"}, ext, "the bug: the first key loses its first character")
		case "1":
			assert.Equal(t, map[string]any{"rt": "123", "msg": "hello"}, ext, "with the space, whole")
		}
	}
}

// dig follows keys through nested maps; nil where one is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// dataOf is the data of a link's event, as linked.
func dataOf(t *testing.T, r link.Record) json.RawMessage {
	t.Helper()
	var ev struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Event, &ev))
	return ev.Data
}

// A compliance finding keeps its uid across a restart of the sink: the
// open episodes are kept beside the cursor, so the drift after the
// restart updates the finding the drift before it created.
func TestSIEMEpisodesSurviveARestart(t *testing.T) {
	rcv := serve(listenTCP(t))
	defer rcv.stop()
	cursor := filepath.Join(t.TempDir(), "syslog.cursor")
	chains := auditortest.NewChains(chain.NewHasher(nil), events.Source("auditor", "a-0"))
	var recs []link.Record
	for i := range 3 {
		v := auditortest.Drift("web-01", auditortest.Target(1), fmt.Sprintf("01920000-0000-7000-8000-%012d", i), i)
		if i == 2 {
			v.Status, v.Report.Status, v.Report.Changes = events.StatusPass, report.Pass, []report.Change{}
		}
		recs = append(recs, chains.Seal(t, auditortest.Message(t, "VERDICTS", uint64(i+1), auditortest.Msg(t, v, i))))
	}
	for _, r := range recs { // a restart before each link
		s, err := syslog.New(syslog.Options{Network: "tcp", Address: rcv.ln.Addr().String(), Format: "ocsf", CursorFile: cursor})
		require.NoError(t, err)
		require.NoError(t, s.Write(context.Background(), []link.Record{r}))
		require.NoError(t, s.Close())
	}
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := rcv.count(); n < len(recs) {
			return fmt.Errorf("%d of %d messages", n, len(recs))
		}
		return nil
	})
	// Each restart is a connection of its own: the receiver may read them
	// in another order; the link's seq puts them back.
	uids, activities := make([]string, len(recs)), make([]float64, len(recs))
	for _, msg := range rcv.messages() {
		m, err := auditortest.ParseSyslog(msg)
		require.NoError(t, err)
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(m.Msg), &rec), m.Msg)
		seq, err := strconv.Atoi(m.SD["rtlink@32473"]["seq"])
		require.NoError(t, err)
		uids[seq-1] = dig(rec, "finding_info", "uid").(string)
		activities[seq-1] = rec["activity_id"].(float64)
	}
	assert.Equal(t, []float64{1, 2, 3}, activities, "created, updated, closed")
	assert.Equal(t, []string{uids[0], uids[0], uids[0]}, uids, "one finding across the restarts")
}
