package ocsfcheck

import (
	"bytes"
	_ "embed" // the facts file
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck/internal/facts"
)

// Version is the OCSF schema version the embedded facts describe, and the
// metadata.version a record must declare.
const Version = "1.8.0"

//go:embed testdata/ocsf-1.8.0.json
var factsJSON []byte

// compiled is the validator, built once from the embedded facts.
var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	f, err := parseFacts(factsJSON)
	if err != nil {
		return nil, err
	}
	doc, err := buildSchema(f)
	if err != nil {
		return nil, fmt.Errorf("ocsfcheck: build the JSON Schema: %w", err)
	}
	return compile(doc)
})

// Validate checks that record is one JSON object, a valid OCSF 1.8.0
// record of one of the classes of the facts (Compliance Finding 2003,
// Detection Finding 2004, Application Error 6008, Event Log Activity 1008,
// Entity Management 3004, and the Base Event 0 of events no class fits).
// A refusal says, for each fault, the JSON Pointer of the value at fault
// and why; it wraps the validator's *jsonschema.ValidationError.
func Validate(record []byte) error {
	sch, err := compiled()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(record))
	if err != nil {
		return fmt.Errorf("ocsfcheck: record is not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return refusal(err)
	}
	return nil
}

// parseFacts decodes the facts file.
func parseFacts(data []byte) (*facts.File, error) {
	var f facts.File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("ocsfcheck: parse the embedded facts: %w", err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("ocsfcheck: the embedded facts are of OCSF %q, want %q", f.Version, Version)
	}
	if len(f.ClassUIDs) == 0 {
		return nil, errors.New("ocsfcheck: the embedded facts name no class")
	}
	return &f, nil
}

// compile compiles the JSON Schema document.
func compile(doc jsonSchema) (*jsonschema.Schema, error) {
	// The compiler takes the document as the JSON decoder would give it.
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("ocsfcheck: encode the JSON Schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("ocsfcheck: decode the JSON Schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(recordURL, v); err != nil {
		return nil, fmt.Errorf("ocsfcheck: add the JSON Schema: %w", err)
	}
	sch, err := c.Compile(recordURL)
	if err != nil {
		return nil, fmt.Errorf("ocsfcheck: compile the JSON Schema: %w", err)
	}
	return sch, nil
}
