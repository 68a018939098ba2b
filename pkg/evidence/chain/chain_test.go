package chain_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

func event(t testing.TB, s string) jsontree.Value {
	t.Helper()
	v, err := jsontree.Parse([]byte(s))
	require.NoError(t, err)
	return v
}

// build writes n links of chain "a" (and every third one of chain "b").
func build(t *testing.T, h chain.Hasher, n int) []string {
	t.Helper()
	var lines []string
	heads := map[string]chain.Head{}
	for i := 1; i <= n; i++ {
		name := "a"
		if i%3 == 0 {
			name = "b"
		}
		l := h.Seal(name, heads[name], canonical(t, `{"id":"e`+strings.Repeat("x", i)+`","type":"t","data":{"n":`+itoa(i)+`,"s":"é"}}`))
		heads[name] = l.Head()
		lines = append(lines, string(l.Line))
	}
	return lines
}

// canonical is the RFC 8785 form of the JSON s.
func canonical(t testing.TB, s string) []byte {
	t.Helper()
	b, err := canonjson.Marshal(event(t, s))
	require.NoError(t, err)
	return b
}

func itoa(i int) string { return fmt.Sprintf(`"%02d"`, i) }

func verify(t *testing.T, h chain.Hasher, lines []string, cps ...chain.Checkpoint) chain.Report {
	t.Helper()
	rep, err := chain.Run(context.Background(), h, cps, chain.Lines(strings.NewReader(strings.Join(lines, "\n")+"\n"), ""))
	require.NoError(t, err)
	return rep
}

func TestIntactChainVerifies(t *testing.T) {
	for _, h := range []chain.Hasher{chain.NewHasher(nil), chain.NewHasher([]byte("k"))} {
		lines := build(t, h, 12)
		rep := verify(t, h, lines)
		require.Nil(t, rep.Broken)
		assert.Equal(t, 12, rep.Links)
		assert.Equal(t, uint64(8), rep.Chains["a"].Seq)
		assert.Equal(t, uint64(4), rep.Chains["b"].Seq)
	}
}

func TestTamperingIsNamed(t *testing.T) {
	h := chain.NewHasher(nil)
	lines := build(t, h, 12)
	swap := func(l []string, i, j int) []string {
		l = append([]string(nil), l...)
		l[i], l[j] = l[j], l[i]
		return l
	}
	tests := []struct {
		name   string
		lines  []string
		reason chain.Reason
		line   int
	}{
		{"edited data", replace(lines, 4, `"n":"05"`, `"n":"55"`), chain.Changed, 5},
		{"deleted link", append(append([]string(nil), lines[:4]...), lines[5:]...), chain.Missing, 6},
		{"duplicated link", append(append(append([]string(nil), lines[:5]...), lines[4]), lines[5:]...), chain.Duplicated, 6},
		{"reordered links", swap(lines, 3, 4), chain.Reordered, 4},
		{"garbage line", append(append([]string(nil), lines[:2]...), "{not json"), chain.Malformed, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := verify(t, h, tc.lines)
			require.NotNil(t, rep.Broken)
			assert.Equal(t, tc.reason, rep.Broken.Reason, rep.Broken.Error())
			assert.Equal(t, tc.line, rep.Broken.Line, rep.Broken.Error())
		})
	}
}

func TestRecomputedChainNeedsTheKey(t *testing.T) {
	keyed := chain.NewHasher([]byte("secret"))
	lines := build(t, keyed, 6)
	// Someone without the key rebuilds the chain with plain hashes.
	forged := build(t, chain.NewHasher(nil), 6)
	rep := verify(t, keyed, forged)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Changed, rep.Broken.Reason)
	require.Nil(t, verify(t, keyed, lines).Broken)
}

func TestCheckpointsDetectTruncationAndRewrite(t *testing.T) {
	h := chain.NewHasher(nil)
	lines := build(t, h, 12)
	full := verify(t, h, lines)
	cp := chain.Checkpoint{Chain: "a", Seq: full.Chains["a"].Seq, Head: full.Chains["a"].Hash}
	require.Nil(t, verify(t, h, lines, cp).Broken)

	rep := verify(t, h, lines[:9], cp)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Truncated, rep.Broken.Reason)

	// A full rewrite with different events verifies on its own but not
	// against the checkpoint.
	rewritten := build(t, h, 12)
	rewritten = replace(rewritten, 0, `"s":"é"`, `"s":"e"`)
	rebuilt := rebuild(t, h, rewritten)
	require.Nil(t, verify(t, h, rebuilt).Broken)
	rep = verify(t, h, rebuilt, cp)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Rewritten, rep.Broken.Reason)
}

func replace(lines []string, i int, from, to string) []string {
	out := append([]string(nil), lines...)
	out[i] = strings.Replace(out[i], from, to, 1)
	return out
}

// rebuild recomputes every hash of the given (edited) links.
func rebuild(t *testing.T, h chain.Hasher, lines []string) []string {
	heads := map[string]chain.Head{}
	var out []string
	for _, s := range lines {
		l, err := chain.ParseLink([]byte(s))
		require.NoError(t, err)
		n := h.Seal(l.Chain, heads[l.Chain], l.Event)
		heads[l.Chain] = n.Head()
		out = append(out, string(n.Line))
	}
	return out
}

func TestAppendFileIsSerializedAndRefusesBrokenChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	h := chain.NewHasher(nil)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := chain.AppendFile(path, h, "host", event(t, `{"n":`+itoa(i)+`}`))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	rep, err := chain.Run(context.Background(), h, nil, chain.Lines(bytes.NewReader(data), ""))
	require.NoError(t, err)
	require.Nil(t, rep.Broken)
	assert.Equal(t, uint64(20), rep.Chains["host"].Seq)

	require.NoError(t, os.WriteFile(path, bytes.Replace(data, []byte(`"n":"07"`), []byte(`"n":"77"`), 1), 0o600))
	_, err = chain.AppendFile(path, h, "host", event(t, `{"n":1}`))
	require.ErrorIs(t, err, chain.ErrBroken)
}

// FuzzParseLink: a link line is untrusted input; a line that parses is
// in canonical form once parsed, which parses back to the same link, and
// the verifier reads it as ParseLink does.
func FuzzParseLink(f *testing.F) {
	h := chain.NewHasher(nil)
	l := h.Seal("a", chain.Head{}, []byte(`{"id":"x"}`))
	f.Add(l.Line)
	f.Add([]byte(`{"chain":"a","seq":0,"prev":"","hash":"","event":{}}`))
	f.Add([]byte(`{"seq":1,"prev":"` + chain.Genesis + `","hash":"` + l.Hash + `","event":{"b":1, "a":[1.0]},"chain":"a\u0041"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := chain.ParseLink(data)
		rep, rerr := chain.Run(context.Background(), h, nil, chain.Lines(bytes.NewReader(bytes.ReplaceAll(data, []byte("\n"), nil)), ""))
		if rerr != nil {
			t.Fatalf("verifier: %v", rerr)
		}
		if err != nil {
			return
		}
		if rep.Broken != nil && rep.Broken.Reason == chain.Malformed && !bytes.Contains(data, []byte("\n")) {
			t.Fatalf("ParseLink reads %q, the verifier calls it malformed: %v", data, rep.Broken)
		}
		again, err := chain.ParseLink(l.Line)
		if err != nil {
			t.Fatalf("own output does not parse: %v", err)
		}
		if again.Hash != l.Hash || again.Seq != l.Seq || again.Chain != l.Chain || again.Prev != l.Prev ||
			!bytes.Equal(again.Line, l.Line) || !bytes.Equal(again.Event, l.Event) {
			t.Fatalf("round trip changed the link")
		}
	})
}
