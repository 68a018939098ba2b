package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
)

// TestUpPrintsAnUnchangedTargetOnce runs up (not --once) until its audit
// log holds three PASS verdicts of the repository, collected a second
// apart: it printed one PASS line.
func TestUpPrintsAnUnchangedTargetOnce(t *testing.T) {
	repo := upWorkdir(t)
	data := t.TempDir()
	auditLog := filepath.Join(data, "auditor", "audit.jsonl")
	const passType = `"type":"dev.runtimetruth.verdict.pass.v2"`

	limit := time.Minute
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-10*time.Second)
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if b, err := os.ReadFile(auditLog); err == nil && bytes.Count(b, []byte(passType)) >= 3 {
				cancel()
				return
			}
		}
	}()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test",
		[]string{"up", "--data-dir", data, "--interval", "1s", "--no-codex", "--approve"})
	require.ErrorIs(t, ctx.Err(), context.Canceled, "up ran into the test's limit:\n%s%s", out.String(), errb.String())
	assert.Equal(t, 0, code, out.String()+errb.String())

	b, err := os.ReadFile(auditLog)
	require.NoError(t, err)
	require.GreaterOrEqual(t, bytes.Count(b, []byte(passType)), 3, "three PASS verdicts")
	assert.Equal(t, 1, strings.Count(out.String(), "APPROVED  git.repository:"+repo), out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "PASS   git.repository:"+repo), out.String())
}
