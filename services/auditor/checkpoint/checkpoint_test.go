package checkpoint_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/auditor/checkpoint"
)

func TestSignParseVerify(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	other := ed25519.NewKeyFromSeed([]byte("fedcba9876543210fedcba9876543210"))
	pub := key.Public().(ed25519.PublicKey)
	c := checkpoint.Sign(checkpoint.Checkpoint{Chain: `VERDICTS/odd "host" ]`, Seq: 42,
		Head: "sha256:" + string(make([]byte, 0)) + "00", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Auditor: "/auditor/a"}, key)
	require.NoError(t, c.Verify(pub))
	require.ErrorIs(t, c.Verify(other.Public().(ed25519.PublicKey)), checkpoint.ErrSignature)

	for _, line := range []string{
		string(c.JSON()),
		`<117>1 2026-01-02T03:04:05.000000Z h runtimetruth-auditor 1 checkpoint ` + c.SD("32473") + ` checkpoint x`,
	} {
		got, ok, err := checkpoint.Parse([]byte(line))
		require.NoError(t, err, line)
		require.True(t, ok)
		assert.Equal(t, c, got)
		require.NoError(t, got.Verify(pub))
	}
	forged := c
	forged.Seq = 41
	require.ErrorIs(t, forged.Verify(pub), checkpoint.ErrSignature)
	unsigned := checkpoint.Sign(c, nil)
	require.ErrorIs(t, unsigned.Verify(pub), checkpoint.ErrSignature)

	_, ok, err := checkpoint.Parse([]byte(`<13>1 - h app - - [other@1 a="b"] hello`))
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestKeysAndReadFile(t *testing.T) {
	dir := t.TempDir()
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	priv := filepath.Join(dir, "key.pem")
	pubf := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(priv, checkpoint.MarshalPrivateKey(key), 0o600))
	require.NoError(t, os.WriteFile(pubf, checkpoint.MarshalPublicKey(key.Public().(ed25519.PublicKey)), 0o600))
	k, err := checkpoint.LoadPrivateKey(priv)
	require.NoError(t, err)
	assert.Equal(t, key, k)
	for _, f := range []string{priv, pubf} {
		p, err := checkpoint.LoadPublicKey(f)
		require.NoError(t, err)
		assert.Equal(t, key.Public(), p)
	}
	_, err = checkpoint.LoadPrivateKey(pubf)
	require.ErrorIs(t, err, checkpoint.ErrKey)

	c1 := checkpoint.Sign(checkpoint.Checkpoint{Chain: "a", Seq: 1, Head: "h1", Time: time.Now(), Auditor: "x"}, key)
	c2 := checkpoint.Sign(checkpoint.Checkpoint{Chain: "a", Seq: 2, Head: "h2", Time: time.Now(), Auditor: "x"}, key)
	file := filepath.Join(dir, "messages.log")
	require.NoError(t, os.WriteFile(file, []byte("noise\n"+string(c1.JSON())+"\n<13>1 - h a 1 checkpoint "+c2.SD("1")+" x\n"), 0o600))
	cps, err := checkpoint.ReadFile(file, key.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.Equal(t, uint64(2), checkpoint.ForChain(cps)[1].Seq)
	_, other, _ := ed25519.GenerateKey(nil)
	_, err = checkpoint.ReadFile(file, other.Public().(ed25519.PublicKey))
	require.ErrorIs(t, err, checkpoint.ErrSignature)
}
