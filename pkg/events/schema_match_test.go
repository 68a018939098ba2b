package events_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// checkAgainstSchema holds the decoder of type typ to its compiled JSON
// Schema on one document, as checkEquivalent does for evidence.
func checkAgainstSchema(t testing.TB, typ string, doc []byte) (accepted bool) {
	schemaErr := events.CheckSchema(typ, doc)
	p, err := events.DecodeData(typ, doc)
	if schemaErr != nil {
		require.Error(t, err, "%s: the decoder took what the schema refuses (%v): %s", typ, schemaErr, doc)
		require.Equal(t, events.ReasonOf(schemaErr), events.ReasonOf(err), "%s: reasons: schema %v, decoder %v, on %s", typ, schemaErr, err, doc)
		return false
	}
	if err != nil {
		if events.ReasonOf(err) == events.ReasonSchema {
			// Numbers the schema takes as integers that the decoder does
			// not: a whole number not written as one (6e1, 1.0), one
			// beyond ±(2^53-1) in a report. And a verdict v1 report's
			// modified kind without fields, which the v1 schema took and
			// no writer wrote: it is read as the current rules have it.
			allowed := "JSON number|non-integer number|not an integer|outside ±"
			if spec, _ := events.Lookup(typ); spec.SupersededBy != "" {
				allowed += "|a changed kind without fields"
			}
			require.Regexp(t, allowed, err.Error(), "%s: the schema takes what the decoder refuses (%v): %s", typ, err, doc)
		} else {
			require.Equal(t, events.ReasonInvalidPayload, events.ReasonOf(err), "%s: the schema takes what the decoder refuses (%v): %s", typ, err, doc)
		}
		return false
	}
	data, err := events.EncodeData(p)
	require.NoError(t, err)
	spec, _ := events.Lookup(typ)
	require.NoError(t, events.CheckSchema(spec.Current(), data), "%s: re-encoded: %s", typ, data)
	again, err := events.DecodeData(spec.Current(), data)
	require.NoError(t, err)
	reencoded, err := events.EncodeData(again)
	require.NoError(t, err)
	require.Equal(t, string(data), string(reencoded), "%s: decodes to itself", typ)
	return true
}

// Every type's decoder is held to its schema over mutations of its
// golden example (evidence.collected's, with its digests recomputed, by
// TestEvidenceDecoderMatchesTheSchema).
func TestDecoderMatchesTheSchema(t *testing.T) {
	for _, s := range events.Catalog() {
		if s.Type == events.TypeEvidenceCollected {
			continue
		}
		t.Run(s.Type, func(t *testing.T) {
			_, docs := mutations(t, s.Golden(), func(any) (any, bool) { return nil, false })
			accepted := 0
			for _, doc := range docs {
				if checkAgainstSchema(t, s.Type, doc) {
					accepted++
				}
			}
			t.Logf("%d documents, %d accepted", len(docs), accepted)
			assert.Positive(t, accepted, "the mutations reach accepted documents")
			assert.Greater(t, len(docs)-accepted, 20, "and rejected ones")
		})
	}
}

// FuzzDecoder holds every type's decoder to its schema on fuzzed data.
func FuzzDecoder(f *testing.F) {
	catalog := events.Catalog()
	for i, s := range catalog {
		if s.Type == events.TypeEvidenceCollected {
			continue
		}
		_, docs := mutations(f, s.Golden(), func(any) (any, bool) { return nil, false })
		for j, doc := range docs {
			if j%11 == 0 {
				f.Add(uint8(i), doc)
			}
		}
	}
	f.Fuzz(func(t *testing.T, i uint8, doc []byte) {
		checkAgainstSchema(t, catalog[int(i)%len(catalog)].Type, doc)
	})
}
