package auditor_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck"
)

// TestPipelineToSIEM: the pipeline's events through the auditor, its
// syslog sink in format ocsf, over TCP and TLS, to the real rsyslog,
// whose mmpstrucdata and mmjsonparse yield, for every link of the JSONL
// log, a valid OCSF record with its class, severity, finding uid and
// device, and the link's chain, seq and hash, equal to the JSONL link's.
func TestPipelineToSIEM(t *testing.T) {
	rs := auditortest.RsyslogEnv(t)
	for _, tc := range []struct{ network, address string }{{"tcp", rs.SIEMTCP}, {"tls", rs.SIEMTLS}} {
		t.Run(tc.network, func(t *testing.T) {
			e := newEnv(t, 30*time.Second)
			host := auditortest.UniqueHost("siem-pipeline")
			cfg := e.config()
			cfg.Syslog.Address, cfg.Syslog.Network, cfg.Syslog.Hostname, cfg.Syslog.Format = tc.address, tc.network, host, "ocsf"
			cfg.Syslog.CAFile, cfg.Syslog.ServerName = rs.TLSCA, "localhost"
			cfg.Syslog.CursorFile = filepath.Join(e.dir, "syslog.cursor")
			a := start(t, cfg)
			n := e.publish(t, 0, 120)
			waitLinks(t, a, n)
			stop(t, a)

			recs := readRecords(t, cfg.JSONL.Path)
			require.Len(t, recs, n)
			var lines []auditortest.SIEMLine
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				if lines = auditortest.SIEMLines(t, rs.SIEMFile, host); len(lines) < n {
					return fmt.Errorf("%d of %d records in rsyslog", len(lines), n)
				}
				return nil
			})
			byLink := map[linkKey]map[string]any{}
			for _, l := range lines {
				rec, ok := l.Vars["rec"].(map[string]any)
				require.True(t, ok, "no JSON body: %v", l.Vars)
				sd := l.Vars["rfc5424-sd"].(map[string]any)["rtlink@32473"].(map[string]any)
				seq, _ := strconv.ParseUint(fmt.Sprint(sd["seq"]), 10, 64)
				um := rec["unmapped"].(map[string]any)
				assert.Equal(t, sd["hash"], um["hash"], "the structured data and the record name one link")
				byLink[linkKey{fmt.Sprint(sd["chain"]), seq}] = rec
			}
			for _, r := range recs {
				rec := byLink[linkKey{r.Chain, r.Seq}]
				require.NotNil(t, rec, "%s seq %d", r.Chain, r.Seq)
				assert.Equal(t, r.Hash, rec["unmapped"].(map[string]any)["hash"], "the JSONL link's hash")
				assert.Contains(t, rec, "class_uid")
				assert.NotZero(t, rec["severity_id"])
				if c := rec["class_uid"]; c == float64(2003) || c == float64(2004) {
					assert.NotEmpty(t, rec["finding_info"].(map[string]any)["uid"])
				}
				if r.Meta.Host != "" && rec["class_uid"] != float64(1008) {
					assert.Equal(t, r.Meta.Host, rec["device"].(map[string]any)["hostname"])
				}
				b, err := json.Marshal(rec)
				require.NoError(t, err)
				assert.NoError(t, ocsfcheck.Validate(b))
			}
		})
	}
}
