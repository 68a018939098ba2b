package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ecscheck"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck"
)

// TestAuditExport: audit export writes every link of a JSONL log as a
// SIEM record, one a line, in chain order, each valid in its format and
// carrying its link's hash; ClickHouse gives the same bytes; --since
// selects by the time stored; a tampered log exits 2 after the links
// before the break.
func TestAuditExport(t *testing.T) {
	ctx := context.Background()
	h := chain.NewHasher(nil)
	recs := auditortest.Records(t, h, 120, []string{"web-01", "web-02"})
	path := writeRecords(t, h, recs)
	hashes := map[string]bool{}
	for _, r := range recs {
		hashes[r.Hash] = true
	}
	export := func(args ...string) (int, []string, string) {
		t.Helper()
		code, out, errs := runAudit(ctx, append([]string{"export"}, args...)...)
		return code, strings.Split(strings.TrimSuffix(out, "\n"), "\n"), errs
	}
	for _, format := range []string{"ocsf", "ecs", "cef"} {
		t.Run(format, func(t *testing.T) {
			code, lines, errs := export("--jsonl", path, "--format", format)
			require.Equal(t, ExitPass, code, errs)
			require.Len(t, lines, len(recs))
			seen := map[string]bool{}
			for _, ln := range lines {
				var hash string
				switch format {
				case "ocsf":
					require.NoError(t, ocsfcheck.Validate([]byte(ln)), ln)
					var r struct {
						Unmapped struct {
							Hash string `json:"hash"`
						} `json:"unmapped"`
					}
					require.NoError(t, json.Unmarshal([]byte(ln), &r))
					hash = r.Unmapped.Hash
				case "ecs":
					require.NoError(t, ecscheck.Validate([]byte(ln), ecscheck.WithCustom("runtimetruth")), ln)
					var r struct {
						Event struct {
							Hash string `json:"hash"`
						} `json:"event"`
					}
					require.NoError(t, json.Unmarshal([]byte(ln), &r))
					hash = r.Event.Hash
				case "cef":
					require.True(t, strings.HasPrefix(ln, "CEF:0|runtimetruth|runtimetruth|test|"), ln)
					_, after, ok := strings.Cut(ln, " cs2=")
					require.True(t, ok, ln)
					hash, _, _ = strings.Cut(after, " ")
				}
				assert.True(t, hashes[hash], "a record of a link of the log: %s", ln)
				seen[hash] = true
			}
			assert.Len(t, seen, len(recs), "every link once")
		})
	}

	t.Run("clickhouse", func(t *testing.T) {
		dsn, _ := clickHouseStore(ctx, t, recs)
		_, fromJSONL, _ := export("--jsonl", path, "--format", "ocsf")
		code, fromCH, errs := export("--clickhouse", dsn, "--format", "ocsf")
		require.Equal(t, ExitPass, code, errs)
		slices.Sort(fromJSONL) // each chain in order; the chains interleaved as each sink reads them
		slices.Sort(fromCH)
		assert.Equal(t, fromJSONL, fromCH, "the same records from either sink")
	})

	t.Run("since", func(t *testing.T) {
		cut := recs[60].Meta.Stored
		code, lines, errs := export("--jsonl", path, "--format", "cef", "--since", cut.Format(time.RFC3339Nano))
		require.Equal(t, ExitPass, code, errs)
		want := 0
		for _, r := range recs {
			if !r.Meta.Stored.Before(cut) {
				want++
			}
		}
		assert.Len(t, lines, want)
		assert.Less(t, want, len(recs))
	})

	t.Run("tampered", func(t *testing.T) {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
		n := len(lines) - 1
		for !bytes.Contains(lines[n], []byte(`"web-`)) {
			n--
		}
		lines[n] = bytes.Replace(lines[n], []byte(`"web-`), []byte(`"wEb-`), 1)
		bad := path + ".bad"
		require.NoError(t, os.WriteFile(bad, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600))
		code, out, errs := export("--jsonl", bad, "--format", "ocsf")
		assert.Equal(t, ExitDrift, code)
		assert.Contains(t, errs, "changed")
		assert.Less(t, len(out), len(recs), "the links before the break")
	})

	t.Run("usage", func(t *testing.T) {
		code, _, errs := export("--jsonl", path, "--format", "xml")
		assert.Equal(t, ExitError, code)
		assert.Contains(t, errs, "want ocsf, ecs or cef")
		code, _, errs = export("--jsonl", path, "--format", "ocsf", "--since", "yesterday")
		assert.Equal(t, ExitError, code)
		assert.Contains(t, errs, "--since")
	})
}
