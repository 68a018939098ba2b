package ocsfcheck

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The records a product would plausibly emit, one per class.
var records = []struct {
	file     string
	classUID int
}{
	{"compliance_finding.json", 2003},
	{"detection_finding.json", 2004},
	{"application_error.json", 6008},
	{"event_log_activity.json", 1008},
	{"entity_management.json", 3004},
}

func readRecord(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "records", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

func encodeRecord(t *testing.T, m map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// at returns the object at a path of dotted member names, creating none.
func at(m map[string]any, path string) map[string]any {
	for name := range strings.SplitSeq(path, ".") {
		m = m[name].(map[string]any)
	}
	return m
}

func setProfiles(m map[string]any, profiles ...any) {
	at(m, "metadata")["profiles"] = profiles
}

func TestValidRecords(t *testing.T) {
	for _, r := range records {
		t.Run(r.file, func(t *testing.T) {
			m := readRecord(t, r.file)
			if got := m["class_uid"]; got != float64(r.classUID) {
				t.Fatalf("class_uid = %v, want %d", got, r.classUID)
			}
			if err := Validate(encodeRecord(t, m)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// mutant is a change to a valid record and what Validate must say of it:
// nothing when the change keeps it valid, else a fault at path.
type mutant struct {
	name   string
	file   string
	mutate func(m map[string]any)
	path   string // the JSON Pointer the refusal must give; "" to accept
	reason string // a part of the reason
}

func TestMutantsRefused(t *testing.T) {
	const cf = "compliance_finding.json"
	runMutants(t, []mutant{
		{"no finding_info.uid", cf, func(m map[string]any) { delete(at(m, "finding_info"), "uid") },
			"/finding_info", "missing property 'uid'"},
		{"type_uid not class_uid*100+activity_id", cf, func(m map[string]any) { m["type_uid"] = 200302 },
			"/type_uid", "must be 200301"},
		{"type_uid of another class", cf, func(m map[string]any) { m["type_uid"] = 200401 },
			"/type_uid", "must be one of 200300, 200301, 200302, 200303, 200399"},
		{"severity_id 7", cf, func(m map[string]any) { m["severity_id"] = 7 },
			"/severity_id", "must be one of 0, 1, 2, 3, 4, 5, 6, 99"},
		{"time as a string", cf, func(m map[string]any) { m["time"] = "2025-12-08T00:00:00Z" },
			"/time", "want integer"},
		{"unknown top-level key", cf, func(m map[string]any) { m["risk_verdict"] = "bad" },
			"/risk_verdict", "unknown attribute"},
		{"unknown member of finding_info", cf, func(m map[string]any) { at(m, "finding_info")["severity"] = "High" },
			"/finding_info/severity", "unknown attribute"},
		{"compliance.status_id not in its enum", cf, func(m map[string]any) { at(m, "compliance")["status_id"] = 4 },
			"/compliance/status_id", "must be one of 0, 1, 2, 3, 99"},
		{"profile attribute without its profile", cf, func(m map[string]any) { m["is_alert"] = true },
			"/is_alert", "unknown attribute"},
		{"object profile attribute without its profile", cf, func(m map[string]any) {
			at(m, "device")["container"] = map[string]any{"name": "build-7"}
		}, "/device/container", "unknown attribute"},
		{"datetime sibling without the datetime profile", cf, func(m map[string]any) { m["time_dt"] = "2025-12-08T00:00:00Z" },
			"/time_dt", "unknown attribute"},
		{"profile named, its required attribute missing", cf, func(m map[string]any) { setProfiles(m, "cloud") },
			"", "missing property 'cloud'"},
		{"profile OCSF does not define", cf, func(m map[string]any) { setProfiles(m, "runtimetruth") },
			"/metadata/profiles/0", "must be one of"},
		{"metadata.version not 1.8.0", cf, func(m map[string]any) { at(m, "metadata")["version"] = "1.7.0" },
			"/metadata/version", "must be '1.8.0'"},
		{"category_uid of another category", cf, func(m map[string]any) { m["category_uid"] = 3 },
			"/category_uid", "must be 2"},
		{"class_uid of no class checked", cf, func(m map[string]any) { m["class_uid"] = 2002 },
			"/class_uid", "must be one of 0, 1008, 2003, 2004, 3004, 6008"},
		{"no compliance", cf, func(m map[string]any) { delete(m, "compliance") },
			"", "missing property 'compliance'"},
		{"product without name or uid", cf, func(m map[string]any) {
			delete(at(m, "metadata.product"), "name")
			delete(at(m, "metadata.product"), "uid")
		}, "/metadata/product", "at least one of 'name', 'uid'"},
		{"device without type_id", cf, func(m map[string]any) { delete(at(m, "device"), "type_id") },
			"/device", "missing property 'type_id'"},
		{"ip_t not an address", cf, func(m map[string]any) { at(m, "device")["ip"] = "10.20.0.300" },
			"/device/ip", "regex of ip_t"},
		{"resources not an array", cf, func(m map[string]any) { m["resources"] = map[string]any{"uid": "node-7"} },
			"/resources", "want array"},
		{"evidence without artifact", "detection_finding.json", func(m map[string]any) {
			m["evidences"] = []any{map[string]any{"verdict_id": 4}}
		}, "/evidences/0", "at least one of 'actor', 'api'"},
		{"hash without algorithm_id", "detection_finding.json", func(m map[string]any) {
			hash := at(m["evidences"].([]any)[0].(map[string]any), "file")["hashes"].([]any)[0]
			delete(hash.(map[string]any), "algorithm_id")
		}, "/evidences/0/file/hashes/0", "missing property 'algorithm_id'"},
		{"detection finding activity of no finding", "detection_finding.json", func(m map[string]any) {
			m["activity_id"], m["type_uid"] = 4, 200404
		}, "/activity_id", "must be one of 0, 1, 2, 3, 99"},
		{"application error activity_id 3", "application_error.json", func(m map[string]any) {
			m["activity_id"], m["type_uid"] = 3, 600803
		}, "/activity_id", "must be one of 0, 1, 2, 99"},
		{"event log activity without log", "event_log_activity.json", func(m map[string]any) {
			for _, k := range []string{"log_name", "log_provider", "log_type", "log_type_id"} {
				delete(m, k)
			}
		}, "", "at least one of 'log_file', 'log_name'"},
		{"entity management without entity", "entity_management.json", func(m map[string]any) { delete(m, "entity") },
			"", "missing property 'entity'"},
		{"application error device without host profile", "application_error.json", func(m map[string]any) {
			m["device"] = map[string]any{"hostname": "node-7", "type_id": 1}
		}, "/device", "unknown attribute"},
	})
}

func TestMutantsAccepted(t *testing.T) {
	const cf = "compliance_finding.json"
	runMutants(t, []mutant{
		{"profile attribute with its profile", cf, func(m map[string]any) {
			m["is_alert"] = true
			setProfiles(m, "security_control")
		}, "", ""},
		{"object profile attribute with its profile", cf, func(m map[string]any) {
			at(m, "device")["container"] = map[string]any{"name": "build-7"}
			setProfiles(m, "container")
		}, "", ""},
		{"datetime siblings with the datetime profile", cf, func(m map[string]any) {
			m["time_dt"] = "2025-12-08T00:00:00.123Z"
			at(m, "finding_info")["created_time_dt"] = "2025-12-08T00:00:00Z"
			setProfiles(m, "datetime")
		}, "", ""},
		{"unmapped holds anything", cf, func(m map[string]any) {
			m["unmapped"] = map[string]any{"a": []any{1, "b", map[string]any{"c": nil}}}
		}, "", ""},
		{"profile named that the class does not use", cf, func(m map[string]any) { setProfiles(m, "trace") }, "", ""},
	})
}

func runMutants(t *testing.T, mutants []mutant) {
	t.Helper()
	for _, mu := range mutants {
		t.Run(mu.name, func(t *testing.T) {
			m := readRecord(t, mu.file)
			mu.mutate(m)
			err := Validate(encodeRecord(t, m))
			if mu.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			var refused *invalidError
			if !errors.As(err, &refused) {
				t.Fatalf("not a refusal: %v", err)
			}
			prefix := "at '" + mu.path + "': "
			if !slices.ContainsFunc(refused.faults, func(f string) bool {
				return strings.HasPrefix(f, prefix) && strings.Contains(f, mu.reason)
			}) {
				t.Fatalf("no fault at %q saying %q in:\n%v", mu.path, mu.reason, err)
			}
		})
	}
}

func TestRefusalWrapsValidationError(t *testing.T) {
	m := readRecord(t, "compliance_finding.json")
	m["severity_id"] = 7
	err := Validate(encodeRecord(t, m))
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v does not wrap a *jsonschema.ValidationError", err)
	}
}

func TestNotJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"class_uid": 2003} {}`} {
		if err := Validate([]byte(in)); err == nil || !strings.Contains(err.Error(), "not JSON") {
			t.Errorf("Validate(%q) = %v, want a JSON error", in, err)
		}
	}
	if err := Validate([]byte(`[]`)); err == nil || !strings.Contains(err.Error(), "at '': got array, want object") {
		t.Errorf("Validate([]) = %v", err)
	}
}

// TestEmbeddedFacts checks the embedded facts file is the one for OCSF
// 1.8.0, with the six classes, and pins the facts the mapping relies on.
func TestEmbeddedFacts(t *testing.T) {
	f, err := parseFacts(factsJSON)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != "1.8.0" || f.Tag != "1.8.0" {
		t.Fatalf("version %q, tag %q", f.Version, f.Tag)
	}
	if want := []int{0, 1008, 2003, 2004, 3004, 6008}; !slices.Equal(f.ClassUIDs, want) {
		t.Fatalf("class_uids %v, want %v", f.ClassUIDs, want)
	}
	for name, uid := range map[string]int{
		"event_log_actvity":  1008, // sic: the class's name in OCSF 1.8.0
		"compliance_finding": 2003,
		"detection_finding":  2004,
		"entity_management":  3004,
		"application_error":  6008,
	} {
		c, ok := f.Classes[name]
		if !ok || c.ClassUID == nil || *c.ClassUID != uid {
			t.Errorf("class %s: class_uid %v, want %d", name, c.ClassUID, uid)
		}
		if len(f.Source.Classes[name]) == 0 {
			t.Errorf("class %s: no source", name)
		}
	}
	for name := range f.Objects {
		if len(f.Source.Objects[name]) == 0 {
			t.Errorf("object %s: no source", name)
		}
	}
	if got := f.Objects["finding_info"].Attributes["uid"].Requirement; got != "required" {
		t.Errorf("finding_info.uid is %q, want required", got)
	}
	wantStatus := map[string]string{"1": "Pass", "2": "Warning", "3": "Fail"}
	if got := f.Objects["compliance"].Attributes["status_id"].Enum; !maps.Equal(got, wantStatus) {
		t.Errorf("compliance.status_id enum %v, want %v", got, wantStatus)
	}
}
