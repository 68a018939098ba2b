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
	cps, err := chain.ReadCheckpoints(strings.NewReader(file), "messages.log", key.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.Equal(t, uint64(2), cps[1].Seq)
	_, other, _ := ed25519.GenerateKey(nil)
	_, err = chain.ReadCheckpoints(strings.NewReader(file), "messages.log", other.Public().(ed25519.PublicKey))
	require.ErrorIs(t, err, chain.ErrSignature)
	assert.ErrorContains(t, err, "messages.log:2:")
}

// FuzzParseCheckpoint: a line of a syslog receiver's log is untrusted
// input; a checkpoint found in one renders to a JSON line and an SD
// element that parse back to it.
func FuzzParseCheckpoint(f *testing.F) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	c := chain.Checkpoint{Chain: `VERDICTS/odd "host" ]`, Seq: 7, Head: chain.Genesis, Time: time.Unix(1, 5).UTC(), Auditor: "/auditor/a"}.Sign(key)
	f.Add(c.JSON())
	f.Add([]byte(`<117>1 2026-01-02T03:04:05Z h a 1 checkpoint ` + c.SD("32473") + ` x`))
	f.Add([]byte(`[rtcheckpoint@1 chain="a\"]" seq="1" head="h" time="2026-01-02T03:04:05Z"]`))
	f.Add([]byte(`[rtcheckpoint@1 chain="a`))
	f.Add([]byte(`{"chain":"a","seq":1,"head":"h","time":"2026-01-02T03:04:05Z","auditor":"x","extra":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
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
