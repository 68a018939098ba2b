// Package policy loads RuntimeTruth verification policy files.
//
// A policy is a TOML file that persists the selectors which gate
// verification, and nothing else:
//
//	version = 1
//	protect = ["codex.thread.model", "codex.instructions"]
//
// Only the keys version, protect and expected are allowed; version must be
// the integer 1; protect must be a non-empty array of non-blank strings,
// which are trimmed and de-duplicated in order. Files are never discovered
// automatically.
//
// runtimetruth adds expected, the installed-code changes that are accepted
// on purpose; each names a path pattern and a required reason:
//
//	[[expected]]
//	package = "certifi"             # optional
//	path = "certifi/cacert.pem"
//	reason = "corporate CA bundle"
//
// A policy with expected may leave protect out; a policy without it is
// RuntimeTruth's and needs protect.
package policy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// MaxSize is the largest policy file accepted (1 MiB).
const MaxSize = 1 << 20

// ErrPolicy matches (errors.Is) every error this package returns.
var ErrPolicy = errors.New("invalid policy")

// policyError carries RuntimeTruth's message verbatim and matches ErrPolicy.
type policyError struct{ msg string }

func (e *policyError) Error() string        { return e.msg }
func (e *policyError) Is(target error) bool { return target == ErrPolicy }

func errorf(format string, args ...any) error {
	return &policyError{msg: fmt.Sprintf(format, args...)}
}

// Policy is a loaded policy file.
type Policy struct {
	// Protect lists the selectors, trimmed and de-duplicated in order.
	Protect []string
	// Expected lists accepted installed-code changes.
	Expected []Expected
}

// Expected is one accepted installed-code change.
type Expected struct {
	// Package limits the entry to one package; empty means any.
	Package string
	// Path is a glob over the file's path as the package lists it.
	Path string
	// Reason says why the change is accepted; required.
	Reason string
}

// Load reads and validates the policy file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errorf("could not read policy %s: %s", snapshot.Quote(path), strerror(err))
	}
	defer func() { _ = f.Close() }() // opened read-only: closing cannot lose data
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, errorf("could not read policy %s: %s", snapshot.Quote(path), strerror(err))
	}
	if len(data) > MaxSize {
		return nil, errorf("invalid policy %s: larger than %d bytes", snapshot.Quote(path), MaxSize)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("invalid policy %s: %w", snapshot.Quote(path), err)
	}
	return p, nil
}

func strerror(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse validates policy TOML.
func Parse(data []byte) (*Policy, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, errorf("%s", oneLine(err))
	}
	var unknown []string
	for k := range doc {
		if k != "version" && k != "protect" && k != "expected" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, len(unknown))
		for i, k := range unknown {
			quoted[i] = snapshot.Quote(k)
		}
		return nil, errorf("unsupported policy key(s): %s", strings.Join(quoted, ", "))
	}
	if v, ok := doc["version"].(int64); !ok || v != 1 {
		return nil, errorf("policy version must be integer 1")
	}
	p := &Policy{}
	rawExpected, hasExpected := doc["expected"]
	if hasExpected {
		var err error
		if p.Expected, err = parseExpected(rawExpected); err != nil {
			return nil, err
		}
	}
	list, ok := doc["protect"].([]any)
	if _, present := doc["protect"]; hasExpected && !present {
		return p, nil
	}
	if !ok || len(list) == 0 {
		return nil, errorf("policy protect must be a non-empty array of selectors")
	}
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, errorf("policy protect[%d] must be a string selector", i)
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, errorf("policy protect[%d] must not be empty", i)
		}
		p.Protect = append(p.Protect, s)
	}
	p.Protect = Merge(p.Protect)
	return p, nil
}

func parseExpected(raw any) ([]Expected, error) {
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return nil, errorf("policy expected must be a non-empty array of tables")
	}
	out := make([]Expected, 0, len(list))
	for i, item := range list {
		t, ok := item.(map[string]any)
		if !ok {
			return nil, errorf("policy expected[%d] must be a table with path and reason", i)
		}
		var e Expected
		for k, v := range t {
			s, isStr := v.(string)
			switch {
			case k != "package" && k != "path" && k != "reason":
				return nil, errorf("policy expected[%d] has unsupported key %s", i, snapshot.Quote(k))
			case !isStr:
				return nil, errorf("policy expected[%d].%s must be a string", i, k)
			}
			switch k {
			case "package":
				e.Package = strings.TrimSpace(s)
			case "path":
				e.Path = strings.TrimSpace(s)
			case "reason":
				e.Reason = strings.TrimSpace(s)
			}
		}
		if e.Path == "" {
			return nil, errorf("policy expected[%d] must have a non-empty path", i)
		}
		if e.Reason == "" {
			return nil, errorf("policy expected[%d] must have a non-empty reason", i)
		}
		out = append(out, e)
	}
	return out, nil
}

// Merge concatenates selector lists and removes duplicates, keeping the first
// occurrence: policy selectors first, then command-line ones.
func Merge(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

func oneLine(err error) string {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return "line " + strconv.Itoa(row) + " column " + strconv.Itoa(col) + ": " + de.Error()
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}
