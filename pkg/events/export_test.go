package events

import "github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"

// Hooks for the external tests of the typed evidence decoder.

// DecodeEvidenceTyped is the typed decoder ReadEvidence runs;
// DecodeEvidenceTree its path for any document, FastEvidence its path for
// the common ones.
var (
	DecodeEvidenceTyped = decodeEvidence
	DecodeEvidenceTree  = decodeEvidenceTree
	FastEvidence        = fastEvidence
)

// CheckEvidenceSchemaTyped runs the typed mirror of the evidence.collected
// schema; data must parse.
func CheckEvidenceSchemaTyped(data []byte) (parsed bool, err error) {
	tree, err := jsontree.Parse(data)
	if err != nil {
		return false, err
	}
	return true, checkEvidenceSchema(tree)
}

// CheckEvidenceSchemaCompiled runs the JSON Schema itself.
func CheckEvidenceSchemaCompiled(data []byte) error {
	return validateData(byType[TypeEvidenceCollected], data)
}

// DecodeEvidenceSchemaPath decodes as Decode does: the JSON Schema, then
// encoding/json, then Validate.
func DecodeEvidenceSchemaPath(data []byte) (EvidenceCollected, error) {
	var p EvidenceCollected
	err := decodeInto(byType[TypeEvidenceCollected], data, &p)
	return p, err
}
