package auditor_test

import (
	"crypto/ed25519"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
	"github.com/runtimetruth/runtimetruth/services/auditor"
)

// TestCheckpointFiles: the checkpoint key files and a checkpoint file are
// read as chain reads their bytes, from regular files only.
func TestCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	priv := filepath.Join(dir, "key.pem")
	pubf := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(priv, chain.MarshalPrivateKey(key), 0o600))
	require.NoError(t, os.WriteFile(pubf, chain.MarshalPublicKey(key.Public().(ed25519.PublicKey)), 0o600))
	k, err := auditor.LoadCheckpointKey(priv)
	require.NoError(t, err)
	assert.Equal(t, key, k)
	for _, f := range []string{priv, pubf} {
		p, err := auditor.LoadCheckpointPublicKey(f)
		require.NoError(t, err)
		assert.Equal(t, key.Public(), p)
	}
	_, err = auditor.LoadCheckpointKey(pubf)
	require.ErrorIs(t, err, chain.ErrKey)

	c1 := chain.Checkpoint{Chain: "a", Seq: 1, Head: "h1", Time: time.Now(), Auditor: "x"}.Sign(key)
	c2 := chain.Checkpoint{Chain: "a", Seq: 2, Head: "h2", Time: time.Now(), Auditor: "x"}.Sign(key)
	file := filepath.Join(dir, "messages.log")
	require.NoError(t, os.WriteFile(file, []byte("noise\n"+string(c1.JSON())+"\n<13>1 - h a 1 checkpoint "+c2.SD("1")+" x\n"), 0o600))
	cps, skipped, err := auditor.ReadCheckpoints(file, key.Public().(ed25519.PublicKey))
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.Equal(t, uint64(2), cps[1].Seq)
	assert.Equal(t, 1, skipped, "noise")
	_, other, _ := ed25519.GenerateKey(nil)
	_, _, err = auditor.ReadCheckpoints(file, other.Public().(ed25519.PublicKey))
	require.ErrorIs(t, err, chain.ErrSignature)

	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, load := range []func(string) error{
		func(p string) error { _, err := auditor.LoadCheckpointKey(p); return err },
		func(p string) error { _, err := auditor.LoadCheckpointPublicKey(p); return err },
		func(p string) error { _, _, err := auditor.ReadCheckpoints(p, nil); return err },
	} {
		require.ErrorIs(t, load(fifo), regfile.ErrNotRegular)
	}
}

// TestCheckpointsThatCannotBeSentFailReadiness: the checkpoint file's
// directory is a regular file, so no round of checkpoints can be written.
// /readyz answers 503 naming the checkpoint duty, and every failed round
// is counted (health.MetricDutyFailures), not only logged; once the file
// can be written, the next round clears it.
func TestCheckpointsThatCannotBeSentFailReadiness(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	blocker := filepath.Join(e.dir, "not-a-directory")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	cfg.Checkpoint.File = filepath.Join(blocker, "checkpoints.jsonl")
	cfg.Checkpoint.Interval = 50 * time.Millisecond
	a := start(t, cfg)
	defer stop(t, a)
	get := readyz(t, a)
	e.publish(t, 0, 3)

	require.Eventually(t, func() bool {
		code, body := get()
		return code == http.StatusServiceUnavailable && strings.Contains(body, auditor.DutyCheckpoint+" failing")
	}, 30*time.Second, 20*time.Millisecond, "/readyz names the checkpoint duty")
	assert.Positive(t, counted(t, a, health.MetricDutyFailures, health.AttrDuty.String(auditor.DutyCheckpoint)))

	require.NoError(t, os.Remove(blocker))
	require.Eventually(t, func() bool {
		code, _ := get()
		return code == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "ready once a round is sent")
	_, err := os.Stat(cfg.Checkpoint.File)
	require.NoError(t, err, "the checkpoints written")
}
