package collector_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
)

// TestIdentityIsGeneratedOnceAndKept: the first start generates the key
// (0600, in a 0700 directory); every later one reads the same key.
func TestIdentityIsGeneratedOnceAndKept(t *testing.T) {
	cfg := collector.NewDefaultConfig()
	cfg.StateDir = t.TempDir()
	first, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)
	st, err := os.Stat(first.KeyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(first.KeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
	again, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)
	assert.True(t, first.Key.Equal(again.Key))
	assert.True(t, strings.HasPrefix(first.KeyID(), "ed25519:"))
	assert.Equal(t, dsse.KeyID(first.PublicKey()), first.KeyID())

	// A configured key file (a mounted Secret) is used as it is.
	cfg2 := collector.NewDefaultConfig()
	cfg2.StateDir, cfg2.KeyFile = t.TempDir(), first.KeyFile
	named, err := collector.LoadIdentity(cfg2)
	require.NoError(t, err)
	assert.True(t, first.Key.Equal(named.Key))
	assert.NoFileExists(t, filepath.Join(cfg2.StateDir, "identity", "ed25519.key"))
}

// TestIdentityKeyFileMustBeAKey: a configured key file that is a FIFO, a
// device, missing or not an Ed25519 PEM key is an error, at once.
func TestIdentityKeyFileMustBeAKey(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	notKey := filepath.Join(dir, "not-a-key")
	require.NoError(t, os.WriteFile(notKey, []byte("hello\n"), 0o600))
	for path, want := range map[string]string{
		fifo:                         "not a regular file (a FIFO)",
		"/dev/zero":                  "not a regular file (a character device)",
		filepath.Join(dir, "absent"): "no such file",
		notKey:                       "want a PEM PRIVATE KEY block",
	} {
		cfg := collector.NewDefaultConfig()
		cfg.StateDir, cfg.KeyFile = t.TempDir(), path
		_, err := collector.LoadIdentity(cfg)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want, path)
	}
}

// TestSequenceGrowsAcrossRestarts: every event a key signs has a higher
// sequence number than the one before, also after a restart (a crash
// included: the block reserved on disk is skipped).
func TestSequenceGrowsAcrossRestarts(t *testing.T) {
	cfg := collector.NewDefaultConfig()
	cfg.StateDir = t.TempDir()
	var last uint64
	for restart := range 3 {
		id, err := collector.LoadIdentity(cfg)
		require.NoError(t, err)
		s := id.Signer()
		for range 5 {
			seq := signedSeq(t, s, id.PublicKey())
			require.Greater(t, seq, last, "restart %d", restart)
			last = seq
		}
	}
}

// signedSeq signs an event with s and returns its verified sequence.
func signedSeq(t *testing.T, s *dsse.Signer, pub ed25519.PublicKey) uint64 {
	t.Helper()
	p := events.CollectionFailed{Host: testHost, Collector: "git", Reason: "timeout", Message: "m"}
	_, e, err := binding.NewMsg(events.Source("collector", testHost), p, binding.WithSigner(s))
	require.NoError(t, err)
	sig, err := dsse.VerifySignature(e, p, func(string) (ed25519.PublicKey, error) { return pub, nil })
	require.NoError(t, err)
	return sig.Claim.Seq
}

// TestPublishedEventsAreSigned: what the collector publishes, evidence
// and failures alike, verifies against its identity's key, in sequence.
func TestPublishedEventsAreSigned(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	cfg := testConfig(t, b.url, gitTarget("repo", repo, time.Hour), gitTarget("plain", t.TempDir(), time.Hour))
	c, _ := newCollector(t, cfg, collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	msgs := b.waitStored(t, 2)
	id, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)
	key := func(keyID string) (ed25519.PublicKey, error) {
		if keyID != id.KeyID() {
			return nil, errors.New("unknown key")
		}
		return id.PublicKey(), nil
	}
	seen := map[string]uint64{}
	for _, m := range msgs {
		e, p, err := binding.Read[events.Payload](m)
		require.NoError(t, err)
		sig, err := dsse.VerifySignature(e, p, key)
		require.NoError(t, err, e.Type())
		assert.Equal(t, testHost, sig.Claim.Host)
		seen[e.Type()] = sig.Claim.Seq
	}
	assert.Contains(t, seen, events.TypeEvidenceCollected)
	assert.Contains(t, seen, events.TypeCollectionFailed)
	assert.NotEqual(t, seen[events.TypeEvidenceCollected], seen[events.TypeCollectionFailed])
}
