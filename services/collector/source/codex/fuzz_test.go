package codex

import (
	"reflect"
	"testing"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex/appserver"
)

// FuzzResponses feeds arbitrary app-server output through everything that
// interprets it: the JSON-RPC decoder, then the config/read, thread/start
// and mcpServerStatus/list record builders. None may panic; whatever they
// accept must form a valid snapshot, deterministically.
func FuzzResponses(f *testing.F) {
	for _, s := range []string{
		`{"id":2,"result":{"config":{"model":"gpt-5.4","approval_policy":{"granular":{"b":true,"a":"ü"}},"sandbox_mode":null,"web_search":"live","instructions":"secret"}}}`,
		`{"id":3,"result":{"thread":{"id":"t","cliVersion":"0.171.0"},"model":"m","modelProvider":"openai","cwd":"/w","approvalPolicy":"never","sandbox":{"type":"readOnly","networkAccess":false},"instructionSources":["/a/AGENTS.md","b"]}}`,
		`{"id":4,"result":{"data":[{"name":"mini","runtimeStatus":"connected","authStatus":"unsupported","pluginId":null,"httpOrigin":null,"tools":{"echo":{"name":"echo","description":"d","inputSchema":{"type":"object","properties":{"n":{"maximum":18446744073709551615}}},"annotations":{"readOnlyHint":true}}},"toolsError":null},{"name":"broken","authStatus":"unsupported","tools":{},"toolsError":"x"}],"nextCursor":"c1"}}`,
		`{"id":4,"result":{"data":[{"name":"a:b%","authStatus":"oAuth","tools":{"x:y":{"outputSchema":[1.5e300,-0.0]}}}],"nextCursor":null}}`,
		`{"id":4,"result":{"data":[],"nextCursor":""}}`,
		`{"method":"mcpServer/startupStatus/updated","params":{"threadId":"t","name":"mini","status":"ready"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := appserver.Decode(line)
		if err != nil || m.Kind != appserver.Response || m.Err != nil || m.Result.Kind != jsontree.Object {
			return
		}
		build := func() []snapshot.Record {
			var recs []snapshot.Record
			if r, err := configRecord("/w", m.Result); err == nil {
				recs = append(recs, r)
			}
			if r, th, err := threadRecord(m.Result); err == nil {
				if th.id == "" {
					t.Fatal("thread accepted without id")
				}
				recs = append(recs, r)
			}
			mr := newMCPRecords()
			if _, err := mr.page(m.Result); err == nil {
				recs = append(recs, mr.records(false)...)
			}
			return recs
		}
		recs := build()
		if len(recs) == 0 {
			return
		}
		s := snapshot.New(snapshot.Target{Kind: TargetKind, Identifier: "/w"}, recs...)
		if _, err := s.Marshal(false); err != nil {
			t.Fatalf("accepted records do not marshal: %v", err)
		}
		if !reflect.DeepEqual(recs, build()) {
			t.Fatal("record building is not deterministic")
		}
	})
}
