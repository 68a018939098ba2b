package dsse_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/eventstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
)

// signedEnvelope is the envelope and claim a Signer writes for an event.
func signedEnvelope(t testing.TB) (string, []byte) {
	t.Helper()
	ev := eventstest.Payloads(t)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	_, e, err := binding.NewMsg(events.Source("collector", ev.Host), ev, binding.WithSigner(signtest.Signer(ev.Host)))
	require.NoError(t, err)
	env := e.Extensions()[dsse.ExtSignature].(string)
	var raw struct {
		Payload []byte `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(env), &raw))
	return env, raw.Payload
}

// checkBothWays fails unless the decoder agrees with encoding/json on
// env and claim: whatever it takes, encoding/json takes too, with the
// same result.
func checkBothWays(t *testing.T, env string, claim []byte) {
	t.Helper()
	got, reference, ok, err := dsse.EnvelopeBothWays(env)
	if ok {
		require.NoError(t, err, "the decoder took an envelope encoding/json refuses: %q", env)
		require.Equal(t, string(reference), string(got), "envelope %q", env)
	}
	fc, gc, ok, err := dsse.ClaimBothWays(claim)
	if ok {
		require.NoError(t, err, "the decoder took a claim encoding/json refuses: %q", claim)
		require.Equal(t, gc, fc, "claim %q", claim)
	}
}

// TestSignatureDecoding: what a Signer writes is decoded; anything the
// decoder takes, encoding/json reads the same. The decoder is stricter
// than encoding/json where JSON is ambiguous or ill-formed (a member
// named in other case or given twice, null, invalid UTF-8): such
// documents are refused (lenient, the reference takes them).
func TestSignatureDecoding(t *testing.T) {
	env, claim := signedEnvelope(t)
	_, _, ok, err := dsse.EnvelopeBothWays(env)
	require.NoError(t, err)
	assert.True(t, ok, "a Signer's envelope is decoded")
	_, _, ok, err = dsse.ClaimBothWays(claim)
	require.NoError(t, err)
	assert.True(t, ok, "a Signer's claim is decoded")

	c := string(claim)
	for _, tc := range []struct {
		name  string
		claim string
		ok    bool // the decoder takes it
	}{
		{"as signed", c, true},
		{"white space", strings.ReplaceAll(c, `":`, `" : `), true},
		{"the largest seq", replaceSeq(t, c, "18446744073709551615"), true},
		{"a seq too large", replaceSeq(t, c, "18446744073709551616"), false},
		{"a seq with a leading zero", replaceSeq(t, c, "012"), false},
		{"a seq with an exponent", replaceSeq(t, c, "1e3"), false},
		{"a negative seq", replaceSeq(t, c, "-1"), false},
		{"a name in other case", strings.Replace(c, `"host"`, `"HOST"`, 1), false},
		{"a member twice", strings.Replace(c, `{`, `{"host":"x",`, 1), false},
		{"an unknown member", strings.Replace(c, `{`, `{"extra":1,`, 1), false},
		{"a \\u escape", strings.Replace(c, `"host":"`, `"host":"\u0041`, 1), true},
		{"a null target", replaceTarget(t, c, "null"), false},
		{"an empty target kind", replaceTarget(t, c, `{"kind":"","identifier":"x"}`), true},
		{"no target", replaceTarget(t, c, ""), true},
		{"data after it", c + "{}", false},
		{"invalid UTF-8", strings.Replace(c, `"host":"`, "\"host\":\"\xff", 1), false},
	} {
		_, _, ok, _ := dsse.ClaimBothWays([]byte(tc.claim))
		assert.Equal(t, tc.ok, ok, tc.name)
		checkBothWays(t, env, []byte(tc.claim))
	}
	sigs := strings.Index(env, `"signatures"`)
	payload := strings.Index(env, `"payload":"`)
	require.Positive(t, sigs)
	require.Positive(t, payload)
	for _, tc := range []struct {
		name string
		env  string
		ok   bool
	}{
		{"as signed", env, true},
		{"a name in other case", strings.Replace(env, `"payloadType"`, `"PayloadType"`, 1), false},
		{"two signatures", strings.Replace(env, `}]}`, `},{"keyid":"k","sig":""}]}`, 1), true},
		{"no signatures", env[:sigs] + `"signatures":[]}`, true},
		{"a null payload", env[:payload] + `"payload":null` + env[sigs-1:], false},
		{"bad base64", strings.Replace(env, `"payload":"`, `"payload":"*`, 1), false},
		{"base64 without padding", strings.Replace(env, `","signatures"`, `=","signatures"`, 1), false},
		{"data after it", env + " x", false},
	} {
		_, _, ok, _ := dsse.EnvelopeBothWays(tc.env)
		assert.Equal(t, tc.ok, ok, tc.name)
		checkBothWays(t, tc.env, claim)
	}
}

func replaceSeq(t *testing.T, claim, seq string) string {
	t.Helper()
	i := strings.Index(claim, `"seq":`) + len(`"seq":`)
	j := i + strings.IndexAny(claim[i:], ",}")
	return claim[:i] + seq + claim[j:]
}

func replaceTarget(t *testing.T, claim, target string) string {
	t.Helper()
	i := strings.Index(claim, `"target":`)
	j := i + strings.Index(claim[i:], "}") + 1
	if target == "" {
		return claim[:i] + claim[j+1:] // and its comma
	}
	return claim[:i] + `"target":` + target + claim[j:]
}

// FuzzSignatureDecoding holds the decoder to encoding/json on any
// envelope and claim.
func FuzzSignatureDecoding(f *testing.F) {
	env, claim := signedEnvelope(f)
	f.Add(env, claim)
	f.Add(strings.ReplaceAll(env, `"`, `" `), []byte(strings.ReplaceAll(string(claim), ",", " ,")))
	f.Add(`{"payloadType":"a","payload":"`+base64.StdEncoding.EncodeToString([]byte("x"))+`","signatures":[{"keyid":"\n","sig":"AA=="}]}`,
		[]byte(`{"seq":0,"target":{"identifier":"i","kind":"k"}}`))
	f.Fuzz(func(t *testing.T, env string, claim []byte) {
		checkBothWays(t, env, claim)
	})
}
