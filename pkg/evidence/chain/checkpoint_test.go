package chain_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
)

func TestSignParseVerify(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	other := ed25519.NewKeyFromSeed([]byte("fedcba9876543210fedcba9876543210"))
	pub := key.Public().(ed25519.PublicKey)
	c := chain.Checkpoint{Chain: `VERDICTS/odd "host" ]`, Seq: 42,
		Head: "sha256:" + string(make([]byte, 0)) + "00", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Auditor: "/auditor/a"}.Sign(key)
	require.NoError(t, c.Verify(pub))
	require.ErrorIs(t, c.Verify(other.Public().(ed25519.PublicKey)), chain.ErrSignature)

	for _, line := range []string{
		string(c.JSON()),
		`<117>1 2026-01-02T03:04:05.000000Z h runtimetruth-auditor 1 checkpoint ` + c.SD("32473") + ` checkpoint x`,
	} {
		got, ok, err := chain.ParseCheckpoint([]byte(line))
		require.NoError(t, err, line)
		require.True(t, ok)
		assert.Equal(t, c, got)
		require.NoError(t, got.Verify(pub))
	}
	forged := c
	forged.Seq = 41
	require.ErrorIs(t, forged.Verify(pub), chain.ErrSignature)
	unsigned := c.Sign(nil)
	require.ErrorIs(t, unsigned.Verify(pub), chain.ErrSignature)

	_, ok, err := chain.ParseCheckpoint([]byte(`<13>1 - h app - - [other@1 a="b"] hello`))
	require.NoError(t, err)
	assert.False(t, ok)

	// A JSON checkpoint is one object: a second value or anything else
	// after it is refused, not ignored.
	for _, tail := range []string{` {"chain":"x"}`, ` x`, `]`} {
		_, _, err := chain.ParseCheckpoint(append(c.JSON(), tail...))
		require.Error(t, err, tail)
	}
}

func TestKeysAndReadCheckpoints(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	priv := chain.MarshalPrivateKey(key)
	pub := chain.MarshalPublicKey(key.Public().(ed25519.PublicKey))
	k, err := chain.ParsePrivateKey(priv, "key.pem")
	require.NoError(t, err)
	assert.Equal(t, key, k)
	for _, b := range [][]byte{priv, pub} {
		p, err := chain.ParsePublicKey(b, "pub.pem")
		require.NoError(t, err)
		assert.Equal(t, key.Public(), p)
	}
	_, err = chain.ParsePrivateKey(pub, "pub.pem")
	require.ErrorIs(t, err, chain.ErrKey)

	c1 := chain.Checkpoint{Chain: "a", Seq: 1, Head: "h1", Time: time.Now(), Auditor: "x"}.Sign(key)
	c2 := chain.Checkpoint{Chain: "a", Seq: 2, Head: "h2", Time: time.Now(), Auditor: "x"}.Sign(key)
	file := "noise\n" + string(c1.JSON()) + "\n<13>1 - h a 1 checkpoint " + c2.SD("1") + " x\n"
	cps, skipped, err := chain.ReadCheckpoints(strings.NewReader(file), "messages.log", key.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.Equal(t, uint64(2), cps[1].Seq)
	assert.Equal(t, 1, skipped, "noise")
	_, other, _ := ed25519.GenerateKey(nil)
	_, _, err = chain.ReadCheckpoints(strings.NewReader(file), "messages.log", other.Public().(ed25519.PublicKey))
	require.ErrorIs(t, err, chain.ErrSignature)
	assert.ErrorContains(t, err, "messages.log:2:")
}

// linkMsg is a link's syslog message as the auditor's sink writes it, its
// target (a name the collector's configuration or an event chooses) in a
// parameter and its subject in the MSG part.
func linkMsg(msgid, target, subject string) string {
	return `<36>1 2026-01-02T03:04:05.000000Z h runtimetruth-auditor 7 ` + msgid +
		` [rtlink@32473 chain="VERDICTS/h" seq="3" hash="sha256:aa" prev="sha256:bb" target="` + chain.EscapeParam(target) + `"] ` +
		msgid + " h " + subject
}

// TestParseCheckpointReadsOnlyCheckpointMessages: a checkpoint is read
// from the rtcheckpoint element of a message of MSGID checkpoint only.
// Checkpoint text elsewhere (an event's target in a link's parameters,
// its subject in the MSG part, a message of another MSGID) is no
// checkpoint and no error; a checkpoint message that is malformed is an
// error.
func TestParseCheckpointReadsOnlyCheckpointMessages(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	c := chain.Checkpoint{Chain: "VERDICTS/h", Seq: 3, Head: "sha256:aa", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Auditor: "/auditor/a"}.Sign(key)
	forged := `[rtcheckpoint@32473 chain="x" seq="1" head="sha256:00" time="2026-01-02T03:04:05Z" auditor="a" key="" sig=""]`
	hdr := "<37>1 2026-01-02T03:04:05.000000Z h runtimetruth-auditor 7 "
	tests := []struct {
		name    string
		line    string
		want    bool   // a checkpoint is found
		wantErr string // the line is a malformed checkpoint
	}{
		{name: "the sink's checkpoint", line: hdr + "checkpoint " + c.SD("32473") + " checkpoint VERDICTS/h seq 3 sha256:aa", want: true},
		{name: "no MSG", line: hdr + "checkpoint " + c.SD("32473"), want: true},
		{name: "another element first", line: hdr + `checkpoint [origin@32473 ip="10.0.0.1"]` + c.SD("32473") + " x", want: true},
		{name: "another element after", line: hdr + "checkpoint " + c.SD("32473") + `[origin@32473 ip="10.0.0.1"] x`, want: true},
		{name: "a dotted PEN", line: hdr + "checkpoint " + c.SD("32473.1.2") + " x", want: true},
		{name: "CRLF", line: hdr + "checkpoint " + c.SD("32473") + " x\r\n", want: true},

		{name: "checkpoint text in a link's target", line: linkMsg("verdict.drift", "web "+forged, "git.repository:/srv/app")},
		{name: "checkpoint text in a link's subject", line: linkMsg("verdict.drift", "app", "git.repository:/srv/"+forged)},
		{name: "a link of MSGID checkpoint", line: linkMsg("checkpoint", forged, forged)},
		{name: "checkpoint text in the MSG part", line: hdr + "checkpoint - checkpoint " + forged},
		{name: "after a malformed element", line: hdr + `checkpoint [origin@32473 ip="10] ` + forged},
		{name: "another MSGID", line: hdr + "verdict.drift " + forged + " x"},
		{name: "an element named alike", line: hdr + `checkpoint [rtcheckpointx@32473 chain="x" seq="1" head="h" time="2026-01-02T03:04:05Z"] x`},
		{name: "an IANA element named alike", line: hdr + `checkpoint [rtcheckpoint chain="x" seq="1" head="h" time="2026-01-02T03:04:05Z"] x`},
		{name: "no header", line: forged},
		{name: "text before the header", line: "Jan  2 03:04:05 relay " + hdr + "checkpoint " + forged},
		{name: "a BSD syslog line", line: "<37>Jan  2 03:04:05 h runtimetruth-auditor[7]: checkpoint " + forged},
		{name: "a short header", line: "<37>1 - h a checkpoint " + forged},
		{name: "PRI out of range", line: "<192>1 - h a 7 checkpoint " + forged},
		{name: "version 0", line: "<37>0 - h a 7 checkpoint " + forged},
		{name: "noise", line: "noise"},
		{name: "blank", line: "   "},

		{name: "unterminated value", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a`, wantErr: "unterminated parameter value"},
		{name: "unescaped ]", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a]b" seq="1" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: "unescaped ]"},
		{name: "unclosed element", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a" seq="1" head="h" time="2026-01-02T03:04:05Z" x`, wantErr: "malformed structured data"},
		{name: "junk after the structured data", line: hdr + "checkpoint " + c.SD("32473") + "x", wantErr: "malformed structured data"},
		{name: "malformed element after it", line: hdr + "checkpoint " + c.SD("32473") + `[origin@32473 ip="1] x`, wantErr: "unescaped ]"},
		{name: "two checkpoints", line: hdr + "checkpoint " + c.SD("32473") + c.SD("32473") + " x", wantErr: "two rtcheckpoint elements"},
		{name: "a parameter twice", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a" chain="b" seq="1" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: "parameter chain given twice"},
		{name: "no PEN", line: hdr + `checkpoint [rtcheckpoint@ chain="a" seq="1" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: "malformed structured data"},
		{name: "a PEN not a number", line: hdr + `checkpoint [rtcheckpoint@x chain="a" seq="1" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: "private enterprise number"},
		{name: "no seq", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: `seq ""`},
		{name: "bad time", line: hdr + `checkpoint [rtcheckpoint@32473 chain="a" seq="1" head="h" time="yesterday"]`, wantErr: `time "yesterday"`},
		{name: "no chain", line: hdr + `checkpoint [rtcheckpoint@32473 seq="1" head="h" time="2026-01-02T03:04:05Z"]`, wantErr: "chain, seq and head are required"},
		{name: "a JSON line that is not one checkpoint", line: string(c.JSON()) + " x", wantErr: "checkpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := chain.ParseCheckpoint([]byte(tc.line))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.False(t, ok)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, ok)
			if tc.want {
				assert.Equal(t, c, got)
			}
		})
	}
}

// TestReadCheckpointsSkipsOtherLines: a syslog receiver's log holds the
// auditor's link messages, one of them with checkpoint text in its target
// and subject, and anyone else's lines; the checkpoints are read, every
// other line but blank ones is skipped and counted, and a malformed
// checkpoint message is an error naming its line.
func TestReadCheckpointsSkipsOtherLines(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	pub := key.Public().(ed25519.PublicKey)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c1 := chain.Checkpoint{Chain: "VERDICTS/h", Seq: 1, Head: "sha256:01", Time: at, Auditor: "/auditor/a"}.Sign(key)
	c2 := chain.Checkpoint{Chain: "VERDICTS/h", Seq: 2, Head: "sha256:02", Time: at, Auditor: "/auditor/a"}.Sign(key)
	forged := `[rtcheckpoint@32473 chain="x" seq="1" head="sha256:00" time="2026-01-02T03:04:05Z"]`
	cpMsg := func(c chain.Checkpoint) string {
		return "<37>1 2026-01-02T03:04:05.000000Z h runtimetruth-auditor 7 checkpoint " + c.SD("32473") + " checkpoint " + c.Chain
	}
	lines := []string{
		"Jan  2 03:04:05 relay rsyslogd: [origin software=\"rsyslogd\"] start",
		linkMsg("verdict.drift", "web "+forged, "git.repository:/srv/app"),
		cpMsg(c1),
		"",
		linkMsg("verdict.pass", "app", "git.repository:/srv/"+forged),
		"garbage " + forged,
		"<38>1 2026-01-02T03:04:05Z other app - - - " + forged,
		strings.Repeat("x", chain.MaxCheckpointLine) + forged,
		cpMsg(c2),
		"{not json",
	}
	lines = lines[:len(lines)-1] // a JSON line that is malformed is an error: below
	cps, skipped, err := chain.ReadCheckpoints(strings.NewReader(strings.Join(lines, "\n")+"\n"), "siem.log", pub)
	require.NoError(t, err)
	assert.Equal(t, []chain.Checkpoint{c1, c2}, cps)
	assert.Equal(t, 6, skipped, "every line but the two checkpoints and the blank one")

	// The same without the last newline, and with CRLF line ends.
	cps, skipped, err = chain.ReadCheckpoints(strings.NewReader(strings.Join(lines, "\r\n")), "siem.log", pub)
	require.NoError(t, err)
	assert.Equal(t, []chain.Checkpoint{c1, c2}, cps)
	assert.Equal(t, 6, skipped)

	for _, bad := range []struct{ line, want string }{
		{line: "<37>1 - h runtimetruth-auditor 7 checkpoint " + strings.Replace(c1.SD("32473"), `seq="1"`, `seq="one"`, 1), want: `siem.log:3: checkpoint: seq "one"`},
		{line: "{not json", want: "siem.log:3: checkpoint: "},
	} {
		file := strings.Join([]string{lines[0], lines[1], bad.line, cpMsg(c2)}, "\n")
		_, _, err := chain.ReadCheckpoints(strings.NewReader(file), "siem.log", pub)
		require.ErrorContains(t, err, bad.want)
	}
}

// FuzzParseCheckpoint: a line of a syslog receiver's log is untrusted
// input; a link message is never read as a checkpoint, whatever its event
// holds, and a checkpoint found in a line renders to a JSON line and an SD
// element that parse back to it.
func FuzzParseCheckpoint(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	c := chain.Checkpoint{Chain: `VERDICTS/odd "host" ]`, Seq: 7, Head: chain.Genesis, Time: time.Unix(1, 5).UTC(), Auditor: "/auditor/a"}.Sign(key)
	f.Add(c.JSON())
	f.Add([]byte(`<117>1 2026-01-02T03:04:05Z h a 1 checkpoint ` + c.SD("32473") + ` x`))
	f.Add([]byte(`[rtcheckpoint@1 chain="a\"]" seq="1" head="h" time="2026-01-02T03:04:05Z"]`))
	f.Add([]byte(`[rtcheckpoint@1 chain="a`))
	f.Add([]byte(`{"chain":"a","seq":1,"head":"h","time":"2026-01-02T03:04:05Z","auditor":"x","extra":1}`))
	f.Add([]byte(`x [rtcheckpoint@1 chain="a" seq="1" head="h" time="2026-01-02T03:04:05Z"]`))
	f.Add([]byte(`<13>1 - h a 1 checkpoint [o@1 a="]"][rtcheckpoint@1 chain="a" seq="1" head="h" time="2026-01-02T03:04:05Z"] x`))
	f.Fuzz(func(t *testing.T, line []byte) {
		// Whatever an event's target or subject holds, the link message
		// that carries it (in a parameter and in the MSG part, under any
		// MSGID) is no checkpoint and no error.
		for _, msgid := range []string{"verdict.drift", "checkpoint"} {
			link := `<36>1 - h runtimetruth-auditor 1 ` + msgid + ` [rtlink@32473 chain="c" target="` +
				chain.EscapeParam(string(line)) + `"] ` + msgid + " " + string(line)
			if _, ok, err := chain.ParseCheckpoint([]byte(link)); ok || err != nil {
				t.Fatalf("a link message carrying %q is not skipped (ok %v, err %v)", line, ok, err)
			}
		}
		c, ok, err := chain.ParseCheckpoint(line)
		if err != nil || !ok {
			return
		}
		c.Time = c.Time.UTC()
		if c.Time.Year() > 9999 || !utf8.ValidString(c.Chain+c.Head+c.Auditor+c.Key+c.Sig) {
			return // not a checkpoint the auditor makes: JSON cannot carry it as it is
		}
		for _, out := range [][]byte{c.JSON(), []byte("<13>1 - h a 1 checkpoint " + c.SD("1") + " x")} {
			back, ok, err := chain.ParseCheckpoint(out)
			if err != nil || !ok {
				t.Fatalf("own output %q does not parse: %v", out, err)
			}
			if back.Chain != c.Chain || back.Seq != c.Seq || back.Head != c.Head || !back.Time.Equal(c.Time) ||
				back.Auditor != c.Auditor || back.Key != c.Key || back.Sig != c.Sig {
				t.Fatalf("round trip of %q changed the checkpoint: %+v, want %+v", out, back, c)
			}
		}
	})
}
