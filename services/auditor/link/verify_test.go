package link_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// build seals n fixture events into two interleaved chains.
func build(t testing.TB, h chain.Hasher, n int) []link.Record {
	t.Helper()
	chains := auditortest.NewChains(h, events.Source("auditor", "t"))
	out := make([]link.Record, 0, n)
	for i := range n {
		host := []string{"a", "b"}[i%2]
		m := auditortest.Msg(t, auditortest.Modified(host, i), i)
		out = append(out, chains.Seal(t, auditortest.Message(t, "EVIDENCE", uint64(i+1), m)))
	}
	return out
}

func lines(recs []link.Record) [][]byte {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		out[i] = append([]byte(nil), r.Line...)
	}
	return out
}

func runLines(t *testing.T, h chain.Hasher, cps []chain.Checkpoint, ls [][]byte) chain.Report {
	t.Helper()
	var buf bytes.Buffer
	for _, l := range ls {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	rep, err := chain.Run(context.Background(), h, cps, chain.Lines(bytes.NewReader(buf.Bytes()), "audit.jsonl"))
	require.NoError(t, err)
	// The schema's reading of the file (intact) agrees.
	assert.Equal(t, intact(h, cps, ls), rep.Broken == nil, "the file by its schema")
	return rep
}

// intact is the link format read literally, the reference for the
// verifier: every line a link (chain.ParseLink) whose hash is that of its
// canonical parts, each chain numbered from 1 with prev the hash before
// it, and every checkpoint's link present with its hash.
func intact(h chain.Hasher, cps []chain.Checkpoint, ls [][]byte) bool {
	heads := map[string]chain.Head{}
	hashes := map[string]map[uint64]string{}
	for _, ln := range ls {
		l, err := chain.ParseLink(ln)
		if err != nil || h.Sum(l.Chain, l.Seq, l.Prev, l.Event) != l.Hash {
			return false
		}
		hd := heads[l.Chain]
		if l.Seq != hd.Seq+1 || (hd.Seq == 0 && l.Prev != chain.Genesis) || (hd.Seq > 0 && l.Prev != hd.Hash) {
			return false
		}
		heads[l.Chain] = l.Head()
		if hashes[l.Chain] == nil {
			hashes[l.Chain] = map[uint64]string{}
		}
		hashes[l.Chain][l.Seq] = l.Hash
	}
	for _, cp := range cps {
		if hashes[cp.Chain][cp.Seq] != cp.Head {
			return false
		}
	}
	return true
}

func reseal(t *testing.T, h chain.Hasher, recs []link.Record) [][]byte {
	t.Helper()
	heads := map[string]link.Head{}
	var out [][]byte
	for _, r := range recs {
		n, err := link.Seal(h, r.Chain, heads[r.Chain], auditortest.Tree(t, r))
		require.NoError(t, err)
		heads[r.Chain] = n.Head()
		out = append(out, n.Line)
	}
	return out
}

func TestTamperedLines(t *testing.T) {
	plain := chain.NewHasher(nil)
	keyed := chain.NewHasher(key)
	const n = 40
	for _, tc := range []struct {
		name   string
		hasher chain.Hasher // for verifying; the chain is built with built
		built  chain.Hasher
		cps    func(recs []link.Record) []chain.Checkpoint
		tamper func(t *testing.T, recs []link.Record, ls [][]byte) [][]byte
		reason chain.Reason
		line   int
		seq    uint64
	}{
		{name: "intact"},
		{name: "intact keyed", hasher: keyed, built: keyed},
		{name: "reformatted", tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			ls[7] = bytes.ReplaceAll(ls[7], []byte(`":`), []byte(`": `))
			return ls
		}},
		{name: "changed data", line: 12, seq: 6, reason: chain.Changed, tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			ls[11] = bytes.Replace(ls[11], []byte(`runspec_linux/files.py`), []byte(`runspec_linux/other.py`), 1)
			return ls
		}},
		{name: "deleted", line: 20, seq: 11, reason: chain.Missing, tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			return append(ls[:18], ls[19:]...) // seq 10 of chain a
		}},
		{name: "swapped", line: 19, seq: 11, reason: chain.Reordered, tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			ls[18], ls[20] = ls[20], ls[18] // seq 10 and 11 of chain a
			return ls
		}},
		{name: "duplicated", line: 11, seq: 5, reason: chain.Duplicated, tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			return append(ls[:10], append([][]byte{ls[8]}, ls[10:]...)...)
		}},
		{name: "inserted", line: 12, seq: 6, reason: chain.Changed, tamper: func(t *testing.T, recs []link.Record, ls [][]byte) [][]byte {
			// A forged link at seq 6 of chain a, hashed correctly but not
			// the chain's (it commits to seq 5, then the real seq 6 follows).
			f, err := link.Seal(plain, recs[8].Chain, recs[8].Head(), auditortest.Tree(t, recs[30]))
			require.NoError(t, err)
			return append(ls[:10], append([][]byte{f.Line}, ls[10:]...)...)
		}},
		{name: "malformed", line: 3, reason: chain.Malformed, tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte {
			ls[2] = ls[2][:len(ls[2])-3]
			return ls
		}},
		{name: "truncated after a checkpoint", reason: chain.Truncated, seq: 20,
			cps: func(recs []link.Record) []chain.Checkpoint {
				return []chain.Checkpoint{{Chain: recs[38].Chain, Seq: recs[38].Seq, Head: recs[38].Hash}}
			},
			tamper: func(_ *testing.T, _ []link.Record, ls [][]byte) [][]byte { return ls[:30] }},
		{name: "rewritten without a key", reason: chain.Rewritten, seq: 20,
			cps: func(recs []link.Record) []chain.Checkpoint {
				return []chain.Checkpoint{{Chain: recs[38].Chain, Seq: recs[38].Seq, Head: recs[38].Hash}}
			},
			tamper: func(t *testing.T, recs []link.Record, _ [][]byte) [][]byte {
				ev := auditortest.Tree(t, recs[10])
				ev.Members[0].Value.Members[0].Value.Text = "forged"
				var err error
				recs[10].Event, err = canonjson.Marshal(ev)
				require.NoError(t, err)
				return reseal(t, plain, recs)
			}},
		{name: "keyed chain rewritten without the key", hasher: keyed, built: keyed, line: 1, seq: 1, reason: chain.Changed,
			tamper: func(t *testing.T, recs []link.Record, _ [][]byte) [][]byte { return reseal(t, plain, recs) }},
		{name: "keyed chain rewritten with another key", hasher: keyed, built: keyed, line: 1, seq: 1, reason: chain.Changed,
			tamper: func(t *testing.T, recs []link.Record, _ [][]byte) [][]byte {
				return reseal(t, chain.NewHasher([]byte("another key of 32 bytes........")), recs)
			}},
		{name: "keyed chain without the key", built: keyed, line: 1, seq: 1, reason: chain.KeyRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built := tc.built
			if !built.Keyed() {
				built = plain
			}
			h := tc.hasher
			if !h.Keyed() && !tc.hasher.Keyed() {
				h = plain
			}
			recs := build(t, built, n)
			ls := lines(recs)
			var cps []chain.Checkpoint
			if tc.cps != nil {
				cps = tc.cps(recs)
			}
			if tc.tamper != nil {
				ls = tc.tamper(t, recs, ls)
			}
			rep := runLines(t, h, cps, ls)
			if tc.reason == "" {
				require.Nil(t, rep.Broken)
				assert.Equal(t, len(ls), rep.Links)
				assert.Len(t, rep.Chains, 2)
				return
			}
			require.NotNil(t, rep.Broken)
			assert.Equal(t, tc.reason, rep.Broken.Reason, rep.Broken.Error())
			assert.Equal(t, tc.line, rep.Broken.Line, rep.Broken.Error())
			if tc.seq != 0 {
				assert.Equal(t, tc.seq, rep.Broken.Seq, rep.Broken.Error())
			}
			if tc.line > 0 {
				assert.True(t, strings.HasPrefix(rep.Broken.Error(), "audit.jsonl:"), rep.Broken.Error())
			}
		})
	}
}

// rows feeds records as database rows, ordered by chain and seq.
func rows(recs []link.Record) chain.Source {
	done := false
	return func(_ context.Context, b *chain.Batch) (bool, error) {
		if done {
			return false, nil
		}
		done = true
		for i, r := range recs {
			b.Cands = append(b.Cands, chain.Candidate{Chain: r.Chain, Seq: r.Seq, Prev: r.Prev, Hash: r.Hash,
				Event: r.Event, Pos: chain.Position{Row: i + 1}})
		}
		return false, nil
	}
}

func TestTamperedRows(t *testing.T) {
	h := chain.NewHasher(key)
	byChain := func() []link.Record {
		recs := build(t, h, 40)
		var a, b []link.Record
		for _, r := range recs {
			if r.Chain == recs[0].Chain {
				a = append(a, r)
			} else {
				b = append(b, r)
			}
		}
		return append(a, b...)
	}
	rep, err := chain.Run(context.Background(), h, nil, rows(byChain()))
	require.NoError(t, err)
	require.Nil(t, rep.Broken)
	assert.Equal(t, 40, rep.Links)

	// Two rows swap their seq (DELETE and INSERT back): read in seq order.
	recs := byChain()
	recs[4].Seq, recs[5].Seq = recs[5].Seq, recs[4].Seq
	recs[4], recs[5] = recs[5], recs[4]
	rep, err = chain.Run(context.Background(), h, nil, rows(recs))
	require.NoError(t, err)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Reordered, rep.Broken.Reason, rep.Broken.Error())
	assert.Equal(t, uint64(5), rep.Broken.Seq)
	assert.Equal(t, 5, rep.Broken.Row)

	// A row inserted twice.
	recs = byChain()
	recs = append(recs[:8], append([]link.Record{recs[7]}, recs[8:]...)...)
	rep, err = chain.Run(context.Background(), h, nil, rows(recs))
	require.NoError(t, err)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Duplicated, rep.Broken.Reason, rep.Broken.Error())
}
