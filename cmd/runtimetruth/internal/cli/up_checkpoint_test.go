package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// upAudit is an up data directory's audit files.
type upAudit struct{ log, cps, key string }

func newUpAudit(t *testing.T) upAudit {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auditor")
	return upAudit{log: filepath.Join(dir, "audit.jsonl"), cps: filepath.Join(dir, "checkpoints.jsonl"), key: filepath.Join(dir, upCheckpointKey)}
}

// write replaces the log with recs and the checkpoints with one of each
// chain's head, signed with key (unsigned when nil).
func (u upAudit) write(t *testing.T, recs []link.Record, key ed25519.PrivateKey) {
	t.Helper()
	for _, f := range []string{u.log, u.log + ".lock", u.cps} {
		_ = os.Remove(f)
	}
	s, err := jsonl.Open(context.Background(), jsonl.Options{Path: u.log, Hasher: chain.NewHasher(nil)})
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), recs))
	heads, err := s.Heads(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	var b strings.Builder
	for c, h := range heads {
		cp := chain.Checkpoint{Chain: c, Seq: h.Seq, Head: h.Hash, Time: time.Now(), Auditor: "/auditor/up"}.Sign(key)
		b.Write(cp.JSON())
		b.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(u.cps, []byte(b.String()), 0o600))
}

// rewrite is recs with one link left out and every link after it in its
// chain recomputed, as someone without the HMAC key (up has none) can.
func rewrite(t *testing.T, recs []link.Record, drop int) []link.Record {
	t.Helper()
	h := chain.NewHasher(nil)
	heads := map[string]link.Head{}
	var out []link.Record
	for i, r := range recs {
		if i == drop {
			continue
		}
		n, err := link.Seal(h, r.Chain, heads[r.Chain], auditortest.Tree(t, r))
		require.NoError(t, err)
		heads[r.Chain] = n.Head()
		out = append(out, n)
	}
	return out
}

// TestUpRefusesAChangedLog: up makes its checkpoint key (0600) on the first
// start and resumes over its own log and checkpoints; a rewritten log
// (every link recomputed) is refused at resume whatever was done to the
// checkpoints (kept, rewritten unsigned, signed by another key), and so
// is a cut log and a missing key, by up and by `audit verify`.
func TestUpRefusesAChangedLog(t *testing.T) {
	ctx := context.Background()
	u := newUpAudit(t)
	keyFile, err := prepareUpAudit(ctx, u.log, u.cps)
	require.NoError(t, err)
	assert.Equal(t, u.key, keyFile)
	st, err := os.Stat(keyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	key, err := auditor.LoadCheckpointKey(keyFile)
	require.NoError(t, err)

	recs := auditRecords(t, chain.NewHasher(nil), 0, 30, map[string]link.Head{})
	u.write(t, recs, key)
	_, err = prepareUpAudit(ctx, u.log, u.cps)
	require.NoError(t, err, "up resumes over its own log")
	again, err := auditor.LoadCheckpointKey(keyFile)
	require.NoError(t, err)
	assert.True(t, key.Equal(again), "the same key")
	code, _, errs := runAudit(ctx, "verify", "--jsonl", u.log, "--checkpoints", u.cps, "--checkpoint-key", u.key)
	require.Equal(t, ExitPass, code, errs)

	_, other, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	rewritten := rewrite(t, recs, 7)
	for _, tc := range []struct {
		name  string
		apply func()
		want  string
	}{
		{"rewritten, checkpoints kept", func() {
			old, err := os.ReadFile(u.cps)
			require.NoError(t, err)
			u.write(t, rewritten, key)
			require.NoError(t, os.WriteFile(u.cps, old, 0o600))
		}, "a checkpoint records seq"},
		{"rewritten, checkpoints rewritten unsigned", func() { u.write(t, rewritten, nil) }, "unsigned"},
		{"rewritten, checkpoints signed by another key", func() { u.write(t, rewritten, other) }, "signed by key"},
		{"cut", func() {
			u.write(t, recs, key)
			data, err := os.ReadFile(u.log)
			require.NoError(t, err)
			lines := strings.SplitAfter(string(data), "\n")
			require.NoError(t, os.WriteFile(u.log, []byte(strings.Join(lines[:len(lines)-4], "")), 0o600))
		}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.apply()
			_, err := prepareUpAudit(ctx, u.log, u.cps)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUpLogChanged), err.Error())
			for _, s := range []string{u.log, u.cps, "--data-dir", tc.want} {
				assert.Contains(t, err.Error(), s)
			}
			code, out, errs := runAudit(ctx, "verify", "--jsonl", u.log, "--checkpoints", u.cps, "--checkpoint-key", u.key)
			assert.NotEqual(t, ExitPass, code, "audit verify refuses it too: %s%s", out, errs)
		})
	}

	t.Run("key missing", func(t *testing.T) {
		u.write(t, recs, key)
		require.NoError(t, os.Remove(u.key))
		_, err := prepareUpAudit(ctx, u.log, u.cps)
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrUpLogChanged), err.Error())
		assert.Contains(t, err.Error(), "checkpoint key "+u.key+" is missing")
	})
}

// TestUpSignsUnsignedCheckpointsFromNowOn: a data directory from before up
// signed its checkpoints keeps its log; the unsigned checkpoints move aside
// and still bind it.
func TestUpSignsUnsignedCheckpointsFromNowOn(t *testing.T) {
	ctx := context.Background()
	u := newUpAudit(t)
	recs := auditRecords(t, chain.NewHasher(nil), 0, 10, map[string]link.Head{})
	u.write(t, recs, nil)
	_, err := prepareUpAudit(ctx, u.log, u.cps)
	require.NoError(t, err)
	_, err = os.Stat(u.cps + ".unsigned")
	require.NoError(t, err)
	_, err = os.Stat(u.key)
	require.NoError(t, err)

	// The old checkpoints still bind the log.
	data, err := os.ReadFile(u.log)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(data), "\n")
	require.NoError(t, os.WriteFile(u.log, []byte(strings.Join(lines[:len(lines)-3], "")), 0o600))
	_, err = prepareUpAudit(ctx, u.log, u.cps)
	require.ErrorIs(t, err, ErrUpLogChanged)
}
