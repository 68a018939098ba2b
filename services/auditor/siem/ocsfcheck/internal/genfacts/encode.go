package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// lineWidth is the width under which a JSON value is written on one line.
const lineWidth = 120

// encode writes v as JSON with sorted keys, one line per value that fits
// in lineWidth, so that the file diffs well when regenerated.
func encode(v any) ([]byte, error) {
	compact, err := marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("re-read facts: %w", err)
	}
	var b bytes.Buffer
	if err := write(&b, tree, ""); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// write writes v at the given indentation: on one line if it fits,
// else one member or element per line.
func write(b *bytes.Buffer, v any, indent string) error {
	line, err := marshal(v)
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case map[string]any:
		if len(indent)+len(line) <= lineWidth {
			break
		}
		b.WriteString("{\n")
		for i, k := range slices.Sorted(maps.Keys(v)) {
			key, err := marshal(k)
			if err != nil {
				return err
			}
			b.WriteString(indent + " ")
			b.Write(key)
			b.WriteString(": ")
			if err := write(b, v[k], indent+" "); err != nil {
				return err
			}
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
		return nil
	case []any:
		if len(indent)+len(line) <= lineWidth {
			break
		}
		b.WriteString("[\n")
		for i, e := range v {
			b.WriteString(indent + " ")
			if err := write(b, e, indent+" "); err != nil {
				return err
			}
			if i < len(v)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
		return nil
	}
	b.Write(line)
	return nil
}

// marshal is json.Marshal without HTML escaping (the regexes hold '&').
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode facts: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
