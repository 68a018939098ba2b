package diff_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// The human diff escapes what is not graphic in field names and values
// (a path reported by Codex is a field name), so a snapshot cannot clear
// the screen or forge a "PASS" line; what is graphic prints verbatim.
func TestRenderEscapesControlCharacters(t *testing.T) {
	target := snapshot.Target{Kind: "codex.workspace", Identifier: "/srv/agent"}
	rec := func(data snapshot.Data) snapshot.Record {
		return snapshot.Record{Plane: snapshot.Live, Kind: "codex.instructions",
			Source: snapshot.Source{Collector: "filesystem", Method: "sha256 Codex thread instructionSources"}, Data: data}
	}
	before := snapshot.New(target, rec(snapshot.Data{
		"source:/srv/agent/AGENTS.md\x1b[2J": snapshot.String("sha256:aa"),
		"model":                              snapshot.String(`C:\models\o3 "x"`),
	}))
	after := snapshot.New(target, rec(snapshot.Data{
		"source:/srv/agent/AGENTS.md\x1b[2J": snapshot.String("sha256:bb\nPASS: runtime matches baseline.\u202e"),
		"model":                              snapshot.String(`C:\models\o4 "x"`),
	}))
	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, "CODEX INSTRUCTIONS\n"+
		`  model: C:\models\o3 "x" -> C:\models\o4 "x"`+"\n"+
		`  source:/srv/agent/AGENTS.md\x1b[2J: sha256:aa -> sha256:bb\nPASS: runtime matches baseline.\u202e`,
		res.Render())
}
