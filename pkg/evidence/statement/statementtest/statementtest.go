// Package statementtest edits RuntimeTruth's in-toto statements for the
// tests of what a statement check refuses.
package statementtest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
)

// Mutate returns the statement good decoded, edited by f and written back
// in its canonical (RFC 8785) form, so that only the check of what the
// statement says can object, not the check of its encoding.
func Mutate(tb testing.TB, good []byte, f func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	require.NoError(tb, json.Unmarshal(good, &m))
	f(m)
	raw, err := json.Marshal(m)
	require.NoError(tb, err)
	canon, err := canonjson.Transform(raw)
	require.NoError(tb, err)
	return canon
}
