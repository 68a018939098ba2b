package ecscheck

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// complianceDoc is a compliance state change: a host's configuration was
// checked against its baseline and its state went from compliant to
// drifted. event.kind "state" (a condition at a point in time), category
// configuration, type change (the state changed; a check that finds no
// change would be "info"). Written with nested objects.
const complianceDoc = `{
  "@timestamp": "2026-03-14T09:26:53.589Z",
  "ecs": {"version": "9.4.0"},
  "message": "web-01 drifted from baseline cis-ubuntu-22.04-l1: 3 checks now fail",
  "event": {
    "kind": "state",
    "category": ["configuration"],
    "type": ["change"],
    "action": "baseline-drift-detected",
    "dataset": "runtimetruth.compliance",
    "module": "runtimetruth",
    "provider": "auditor",
    "id": "01HS8Q6C7W2ZKX4N9V3T5R1M0P",
    "created": "2026-03-14T09:26:54.012Z",
    "sequence": 4211,
    "hash": "5d41402abc4b2a76b9719d911017c592b4f8e1c3a7d2e9f06b5c8a1d3e7f9024"
  },
  "host": {
    "hostname": "web-01",
    "name": "web-01.prod.example.com",
    "id": "4c1d9a0e7b2f4e6a8d3c5b7a9e1f2d4c",
    "ip": ["10.0.4.17", "fd00::17"],
    "mac": ["02-42-AC-11-00-02"],
    "os": {"type": "linux", "name": "Ubuntu", "version": "22.04"}
  },
  "rule": {
    "name": "CIS Ubuntu 22.04 L1 baseline",
    "id": "cis-ubuntu-22.04-l1",
    "ruleset": "cis",
    "version": "1.0.0",
    "category": "hardening",
    "reference": "https://www.cisecurity.org/benchmark/ubuntu_linux",
    "author": ["RuntimeTruth"]
  },
  "observer": {"vendor": "RuntimeTruth", "product": "auditor", "version": "0.9.0"},
  "labels": {"env": "prod", "baseline": "cis-ubuntu-22.04-l1"},
  "tags": ["compliance", "drift"],
  "runtimetruth": {
    "chain": {"seq": 4211, "prev": "9b1c7e04"},
    "compliance": {"from": "compliant", "to": "drifted", "failed_checks": 3}
  }
}`

// alertDoc is an alert for a change to a baselined file. Written with
// dotted keys, as some emitters do.
const alertDoc = `{
  "@timestamp": "2026-03-14T09:31:02Z",
  "ecs.version": "9.4.0",
  "message": "unexpected change to /etc/sudoers on web-01",
  "event.kind": "alert",
  "event.category": ["file"],
  "event.type": ["change"],
  "event.action": "file-modified",
  "event.module": "runtimetruth",
  "event.severity": 73,
  "event.risk_score": 73.0,
  "event.created": 1773480662512,
  "file.path": "/etc/sudoers",
  "file.name": "sudoers",
  "file.directory": "/etc",
  "file.owner": "root",
  "file.mode": "0440",
  "file.size": 1802,
  "file.mtime": "2026-03-14T09:30:58.114Z",
  "file.hash": {"sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b"},
  "host.hostname": "web-01",
  "host.geo.location": {"lat": 50.1109, "lon": 8.6821},
  "rule.name": "Unexpected change to a baselined file",
  "rule.id": "RT-FIM-0007",
  "labels.env": "prod",
  "runtimetruth.chain.seq": 4212
}`

var sampleOpts = []Option{WithCustom("runtimetruth"), WithVersion(Version)}

func TestFacts(t *testing.T) {
	s, err := loadSchema()
	if err != nil {
		t.Fatalf("load facts: %v", err)
	}
	if s.version != "9.4.0" || len(s.fields) != 2605 {
		t.Errorf("facts: version %q, %d fields; want 9.4.0, 2605", s.version, len(s.fields))
	}
	if want := []string{"@timestamp", "ecs.version"}; !slices.Equal(s.required, want) {
		t.Errorf("required = %v, want %v", s.required, want)
	}
	for _, name := range []string{"event.category", "event.type", "tags"} {
		if !s.fields[name].array {
			t.Errorf("%s is not normalized to an array", name)
		}
	}
	for _, c := range s.fields["event.category"].allowed {
		if len(s.expected[c]) == 0 {
			t.Errorf("event.category %q has no expected event types", c)
		}
		for _, typ := range s.expected[c] {
			if !slices.Contains(s.fields["event.type"].allowed, typ) {
				t.Errorf("event.category %q expects %q, not an allowed event.type", c, typ)
			}
		}
	}
	if l := s.fields["labels"]; l.kind != kindObject || l.objectKind != kindString {
		t.Errorf("labels: kind %v, object kind %v; want an object of keywords", l.kind, l.objectKind)
	}
}

func TestSamplesValidate(t *testing.T) {
	for name, doc := range map[string]string{"compliance": complianceDoc, "alert": alertDoc} {
		t.Run(name, func(t *testing.T) {
			if err := Validate([]byte(doc), sampleOpts...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDottedAndNestedAreTheSame validates the compliance sample rewritten
// with dotted keys only and the alert sample rewritten with nested
// objects only.
func TestDottedAndNestedAreTheSame(t *testing.T) {
	dotted := make(map[string]any)
	flattenKeys("", decodeMap(t, complianceDoc), dotted)
	nested := make(map[string]any)
	for k, v := range decodeMap(t, alertDoc) {
		setPath(nested, k, v)
	}
	for name, doc := range map[string]map[string]any{"dotted compliance": dotted, "nested alert": nested} {
		t.Run(name, func(t *testing.T) {
			if err := Validate(encode(t, doc), sampleOpts...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMutantsRefused(t *testing.T) {
	tests := []struct {
		name   string
		doc    string
		mutate func(map[string]any)
		field  string // every problem must name this field
		reason string // and one must say this
	}{
		{"unknown field", complianceDoc, set("host.colour", "blue"), "host.colour", "not an ECS 9.4.0 field"},
		{"string in a long field", alertDoc, set("event.severity", "high"), "event.severity", "JSON integer (ECS long)"},
		{"numeric string in a long field", complianceDoc, set("event.sequence", "4211"), "event.sequence", "JSON integer"},
		{"fraction in a long field", complianceDoc, set("event.sequence", json.Number("4211.5")), "event.sequence", "not an integer"},
		{"event.kind not allowed", complianceDoc, set("event.kind", "bogus"), "event.kind", `"bogus" is not an allowed value`},
		{"event.outcome not allowed", alertDoc, set("event.outcome", "ok"), "event.outcome", "not an allowed value"},
		{"event.type not expected for the category", complianceDoc, set("event.type", []any{"installation"}), "event.type", "not expected for event.category configuration"},
		{"event.type not expected for the alert's category", alertDoc, set("event.type", []any{"start"}), "event.type", "not expected for event.category file"},
		{"event.type without event.category", complianceDoc, del("event.category"), "event.type", "without an event.category"},
		{"event.category a string", complianceDoc, set("event.category", "configuration"), "event.category", "must be an array"},
		{"event.type a string", alertDoc, set("event.type", "change"), "event.type", "must be an array"},
		{"no @timestamp", complianceDoc, del("@timestamp"), "@timestamp", "required"},
		{"null @timestamp", alertDoc, set("@timestamp", nil), "@timestamp", "required"},
		{"empty @timestamp array", alertDoc, set("@timestamp", []any{}), "@timestamp", "required"},
		{"no ecs.version", alertDoc, del("ecs.version"), "ecs.version", "required"},
		{"ecs.version not 9.4.0", complianceDoc, set("ecs.version", "8.11.0"), "ecs.version", `want "9.4.0"`},
		{"custom field outside the prefixes", complianceDoc, set("acme.chain.seq", json.Number("1")), "acme.chain.seq", "not under a custom prefix (runtimetruth)"},
		{"@timestamp not RFC 3339", alertDoc, set("@timestamp", "14/03/2026 09:31"), "@timestamp", "RFC 3339"},
		{"bad IP", complianceDoc, set("host.ip", []any{"10.0.4.300"}), "host.ip", "not an IPv4 or IPv6 address"},
		{"MAC against the pattern", complianceDoc, set("host.mac", []any{"02:42:ac:11:00:02"}), "host.mac", "does not match the ECS pattern"},
		{"float given a string", alertDoc, set("event.risk_score", "high"), "event.risk_score", "JSON number"},
		{"label not a keyword", complianceDoc, set("labels.priority", json.Number("3")), "labels.priority", "expected a string"},
		{"label a nested object", complianceDoc, set("labels.team", map[string]any{"name": "sre"}), "labels.team", "not nested objects"},
		{"multi-field sent", complianceDoc, set("host.os.name.text", "Ubuntu"), "host.os.name.text", "multi-field"},
		{"member below a keyword", alertDoc, set("file.path.parent", "/etc"), "file.path.parent", "has no members"},
		{"field set given a string", complianceDoc, set("observer", "auditor"), "observer", "expected an object"},
		{"geo point out of range", alertDoc, set("host.geo.location", map[string]any{"lat": json.Number("95"), "lon": json.Number("8")}), "host.geo.location", "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := decodeMap(t, tc.doc)
			tc.mutate(doc)
			err := Validate(encode(t, doc), sampleOpts...)
			var verr *Error
			if !errors.As(err, &verr) {
				t.Fatalf("Validate = %v, want an *Error", err)
			}
			t.Log(err)
			found := false
			for _, p := range verr.Problems {
				if p.Field != tc.field {
					t.Errorf("unexpected problem %s", p)
				}
				found = found || strings.Contains(p.Reason, tc.reason)
			}
			if !found {
				t.Errorf("no problem of %s says %q: %v", tc.field, tc.reason, verr)
			}
			if !strings.Contains(err.Error(), tc.field+": ") {
				t.Errorf("message does not name %s: %v", tc.field, err)
			}
		})
	}
}

func TestWithoutCustomPrefixCustomFieldsAreRefused(t *testing.T) {
	err := Validate([]byte(complianceDoc), WithVersion(Version))
	var verr *Error
	if !errors.As(err, &verr) {
		t.Fatalf("Validate = %v, want an *Error", err)
	}
	got := make([]string, 0, len(verr.Problems))
	for _, p := range verr.Problems {
		got = append(got, p.Field)
	}
	want := []string{"runtimetruth.chain.prev", "runtimetruth.chain.seq", "runtimetruth.compliance.failed_checks", "runtimetruth.compliance.from", "runtimetruth.compliance.to"}
	if !slices.Equal(got, want) {
		t.Errorf("problems on %v, want %v", got, want)
	}
}

func TestDottedCustomPrefix(t *testing.T) {
	doc := `{"@timestamp": "2026-03-14T09:26:53Z", "ecs": {"version": "9.4.0"},
	  "acme": {"audit": {"seq": 1}, "other": 2}}`
	err := Validate([]byte(doc), WithCustom("acme.audit"))
	var verr *Error
	if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Field != "acme.other" {
		t.Fatalf("Validate = %v, want one problem on acme.other", err)
	}
}

func TestBadOptions(t *testing.T) {
	for name, opt := range map[string]Option{
		"custom prefix is an ECS field set": WithCustom("host"),
		"custom prefix under ECS":           WithCustom("event.runtimetruth"),
		"custom prefix is an ECS field":     WithCustom("labels"),
		"empty custom prefix":               WithCustom(""),
		"custom prefix with empty segment":  WithCustom("acme..x"),
		"empty version":                     WithVersion(""),
	} {
		t.Run(name, func(t *testing.T) {
			err := Validate([]byte(complianceDoc), opt)
			var verr *Error
			if err == nil || errors.As(err, &verr) {
				t.Fatalf("Validate = %v, want an option error", err)
			}
		})
	}
}

func TestNotADocument(t *testing.T) {
	for _, doc := range []string{``, `{`, `[]`, `"x"`, `{} {}`} {
		err := Validate([]byte(doc))
		var verr *Error
		if err == nil || errors.As(err, &verr) {
			t.Errorf("Validate(%q) = %v, want a decoding error", doc, err)
		}
	}
}

func TestValueForms(t *testing.T) {
	tests := []struct {
		field string
		value any
		ok    bool
	}{
		{"source.geo.location", "50.11,8.68", true},
		{"source.geo.location", "POINT (8.68 50.11)", true},
		{"source.geo.location", "u0yjjd6", true},
		{"source.geo.location", []any{json.Number("8.68"), json.Number("50.11")}, true},
		{"source.geo.location", map[string]any{"type": "Point", "coordinates": []any{json.Number("8.68"), json.Number("50.11")}}, true},
		{"source.geo.location", "Frankfurt", false},
		{"event.created", json.Number("1773480662512"), true},
		{"event.created", "2026-03-14", false},
		{"event.duration", json.Number("9223372036854775808"), false},
		{"gen_ai.usage.input_tokens", json.Number("2147483648"), false},
		{"tags", []any{"a", []any{"b"}}, true},
		{"tags", []any{"a", json.Number("1")}, false},
		{"dns.answers", []any{map[string]any{"data": "10.0.0.1", "ttl": json.Number("60")}}, true},
		{"dns.answers", []any{map[string]any{"data": "10.0.0.1", "weight": json.Number("1")}}, false},
		{"entity.raw", map[string]any{"anything": map[string]any{"goes": []any{json.Number("1")}}}, true},
		{"file.elf.sections", []any{map[string]any{"name": ".text", "entropy": json.Number("6")}}, true},
		{"file.elf.sections", []any{map[string]any{"name": ".text", "colour": "red"}}, false},
		{"event.outcome", nil, true},
	}
	for _, tc := range tests {
		doc := decodeMap(t, alertDoc)
		setPath(doc, tc.field, tc.value)
		err := Validate(encode(t, doc), sampleOpts...)
		if (err == nil) != tc.ok {
			t.Errorf("%s = %v: Validate = %v, want ok %t", tc.field, tc.value, err, tc.ok)
		}
	}
}

func set(path string, v any) func(map[string]any) {
	return func(doc map[string]any) { setPath(doc, path, v) }
}

func del(path string) func(map[string]any) {
	return func(doc map[string]any) {
		// The samples hold a field either under its dotted name or nested.
		delete(doc, path)
		parts := strings.Split(path, ".")
		m := doc
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				return
			}
			m = next
		}
		delete(m, parts[len(parts)-1])
	}
}

// setPath sets a dotted path in doc as nested objects, replacing a dotted
// key of the same name.
func setPath(doc map[string]any, path string, v any) {
	delete(doc, path)
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = make(map[string]any)
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// flattenKeys writes the leaves of m into out under dotted names.
func flattenKeys(prefix string, m map[string]any, out map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if sub, ok := m[k].(map[string]any); ok {
			flattenKeys(join(prefix, k), sub, out)
			continue
		}
		out[join(prefix, k)] = m[k]
	}
}

func decodeMap(t *testing.T, doc string) map[string]any {
	t.Helper()
	m, err := decode([]byte(doc))
	if err != nil {
		t.Fatalf("decode sample: %v", err)
	}
	return m
}

func encode(t *testing.T, doc map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return data
}

// TestUnmappedTypeFailsLoading shows that facts with a type the validator
// does not map (regenerated from a newer ECS) fail to load instead of
// going unchecked.
func TestUnmappedTypeFailsLoading(t *testing.T) {
	facts := `{"version":"9.4.0","tag":"v9.4.0","source":"generated/ecs/ecs_flat.yml",
	  "expected_event_types":{},
	  "fields":{"x.count":{"type":"unsigned_long"}}}`
	if _, err := parseSchema([]byte(facts)); err == nil || !strings.Contains(err.Error(), `unsupported ECS type "unsigned_long"`) {
		t.Fatalf("parseSchema = %v, want an unsupported type error", err)
	}
}
