package events_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

func TestCatalogTypeNames(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range events.Catalog() {
		assert.True(t, strings.HasPrefix(s.Type, events.TypePrefix), s.Type)
		assert.Regexp(t, `\.v[1-9][0-9]*$`, s.Type, "type names end in their version")
		assert.False(t, seen[s.Type], "%s listed twice", s.Type)
		seen[s.Type] = true
		got, ok := events.Lookup(s.Type)
		require.True(t, ok)
		assert.Equal(t, s.Type, got.Type)
		assert.NotEmpty(t, s.Payload)
		assert.True(t, strings.HasPrefix(s.NATSSubject, events.Prefix+"."), s.NATSSubject)
	}
	assert.Contains(t, events.TypeRunnableModified, ".runnable.modified.", "the runnable.modified event keeps its name")
	for _, typ := range []string{
		events.TypeEvidenceCollected, events.TypeRunnableModified, events.TypeVerdictPass, events.TypeVerdictDrift,
		events.TypeVerdictError, events.TypeBaselineChanged, events.TypeAttestationCreated,
		events.TypeHostKeyChanged, events.TypeCollectionFailed, events.TypeEventRejected,
	} {
		assert.True(t, seen[typ], "%s is not in the catalog", typ)
	}
	_, ok := events.Lookup(events.TypePrefix + "evidence.collected.v2")
	assert.False(t, ok)
	for old, cur := range map[string]string{
		events.TypeVerdictPassV1: events.TypeVerdictPass, events.TypeVerdictDriftV1: events.TypeVerdictDrift,
		events.TypeVerdictErrorV1: events.TypeVerdictError,
	} {
		s, ok := events.Lookup(old)
		require.True(t, ok, "%s is still read", old)
		assert.Equal(t, cur, s.SupersededBy)
		assert.Equal(t, cur, s.Current())
		c, _ := events.Lookup(cur)
		assert.Empty(t, c.SupersededBy)
		assert.Equal(t, c.NATSSubject, s.NATSSubject, "%s and %s go to the same subject", old, cur)
	}
}

func TestEverySchemaFileIsUsedAndNamesItsID(t *testing.T) {
	files, err := fs.Glob(events.SchemaFS(), "*.schema.json")
	require.NoError(t, err)
	used := map[string]string{}
	for _, s := range events.Catalog() {
		used[s.Schema] = s.SchemaURI
	}
	require.Len(t, files, len(used))
	for _, f := range files {
		raw, err := fs.ReadFile(events.SchemaFS(), f)
		require.NoError(t, err)
		var doc struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc.Schema, f)
		assert.Equal(t, used[f], doc.ID, "%s: $id is the dataschema of its types", f)
	}
}

// TestGoldenExamples checks each type's golden example: it is what the
// fixture payload encodes to, it is valid against the type's JSON Schema,
// and it decodes strictly and re-encodes to the same bytes.
func TestGoldenExamples(t *testing.T) {
	fx := fixtures(t)
	c, err := events.Compiler()
	require.NoError(t, err)
	for _, s := range events.Catalog() {
		t.Run(s.Type, func(t *testing.T) {
			cur, _ := events.Lookup(s.Current())
			p, ok := fx[cur.Golden()]
			require.True(t, ok, "no fixture for %s", cur.Golden())
			require.Equal(t, s.Current(), p.Type())
			if s.SupersededBy == "" {
				golden(t, s.Golden(), indent(t, p))
			}

			raw, err := os.ReadFile(filepath.Join("testdata", s.Golden()))
			require.NoError(t, err)
			sch, err := c.Compile(s.SchemaURI)
			require.NoError(t, err)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			require.NoError(t, err)
			require.NoError(t, sch.Validate(doc), "golden example against %s", s.Schema)

			e := rawEvent(t, s.Type, p.Subject(), compact(t, raw))
			got, err := binding.Decode[events.Payload](e)
			require.NoError(t, err)
			if s.SupersededBy != "" {
				// A superseded type's example (as it was written) decodes
				// to what its successor's example says.
				assert.Equal(t, p, got, "%s reads as %s", s.Type, s.SupersededBy)
				return
			}
			assert.Equal(t, string(raw), string(indent(t, got)), "decode and re-encode changes the golden example")
		})
	}
}

// TestGoldenWire pins the NATS message of every fixture event: subject,
// headers and data, byte for byte.
func TestGoldenWire(t *testing.T) {
	fx := fixtures(t)
	for _, s := range events.Catalog() {
		if s.SupersededBy != "" {
			continue // read, never written
		}
		t.Run(s.Type, func(t *testing.T) {
			m := tracedMsg(t, fx[s.Golden()])
			var b strings.Builder
			b.WriteString("subject: " + m.Subject + "\n")
			keys := make([]string, 0, len(m.Header))
			for k := range m.Header {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				require.Len(t, m.Header[k], 1)
				b.WriteString(k + ": " + m.Header[k][0] + "\n")
			}
			b.WriteString("\n")
			b.Write(m.Data)
			b.WriteString("\n")
			golden(t, filepath.Join("wire", strings.TrimSuffix(s.Golden(), ".json")+".txt"), []byte(b.String()))
		})
	}
}

// rawEvent builds an event with the attributes New would set, around data.
func rawEvent(tb testing.TB, typ, subject string, data []byte) event.Event {
	tb.Helper()
	s, ok := events.Lookup(typ)
	require.True(tb, ok, typ)
	e := event.New(binding.SpecVersion)
	e.SetID(fixtureID)
	e.SetSource(fixtureSource)
	e.SetType(typ)
	e.SetSubject(subject)
	e.SetTime(fixtureTime)
	e.SetDataContentType(events.ContentType)
	e.SetDataSchema(s.SchemaURI)
	e.DataEncoded = data
	return e
}
