package statement

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// The fixed values of a RuntimeTruth baseline statement.
const (
	// Type is the statement's _type: in-toto Statement v1.
	Type = "https://in-toto.io/Statement/v1"
	// PredicateType is RuntimeTruth's attestation predicate.
	PredicateType = "https://sidelobe.dev/runtimetruth/attestation/v1"
	// SubjectName names the one subject, the baseline.
	SubjectName = "runtimetruth-baseline"
	// PayloadType is the DSSE payload type of a statement.
	PayloadType = "application/vnd.in-toto+json"
	// AttestationSchemaVersion is the predicate's attestation_schema_version.
	AttestationSchemaVersion = 1
	// Canonicalization is the predicate's canonicalization: how the
	// baseline bytes behind the digest are made.
	Canonicalization = "RFC8785"
)

// MaxSize bounds a statement file; a valid one is about 300 bytes.
const MaxSize = 64 << 10

// Errors of Parse, Validate and WriteFile. Each is wrapped with the detail.
var (
	// ErrNotCanonical: the statement bytes are valid JSON but not RFC 8785
	// canonical.
	ErrNotCanonical = errors.New("statement is not RFC 8785 canonical JSON")
	// ErrInvalid: the statement is not JSON, holds duplicate keys, or
	// deviates from the exact shape (a schema or trust mutation).
	ErrInvalid = errors.New("invalid statement")
	// ErrDigestMismatch: the statement is well formed but attests another
	// baseline.
	ErrDigestMismatch = errors.New("statement does not match the baseline")
	// ErrExists: WriteFile refuses to overwrite an existing file.
	ErrExists = errors.New("refusing to overwrite existing file")
)

// Build returns the statement of a baseline: RFC 8785 bytes, no trailing
// newline.
func Build(baseline *snapshot.Snapshot) ([]byte, error) {
	canon, err := baseline.Canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	return BuildDigest(hex.EncodeToString(sum[:]), baseline.SchemaVersion)
}

// BuildDigest returns the statement of the baseline whose digest is
// sha256Hex (64 lower-case hex digits, or "sha256:" and those) and whose
// snapshot schema version is schemaVersion.
func BuildDigest(sha256Hex string, schemaVersion int) ([]byte, error) {
	sha256Hex = strings.TrimPrefix(sha256Hex, "sha256:")
	if !isHex64(sha256Hex) {
		return nil, fmt.Errorf("%w: baseline digest %q is not 64 lower-case hex digits", ErrInvalid, sha256Hex)
	}
	return canonjson.Marshal(tree(sha256Hex, schemaVersion))
}

func tree(sha256Hex string, schemaVersion int) jsontree.Value {
	str := func(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }
	num := func(n int) jsontree.Value { return jsontree.Value{Kind: jsontree.Number, Text: strconv.Itoa(n)} }
	obj := func(m ...jsontree.Member) jsontree.Value { return jsontree.Value{Kind: jsontree.Object, Members: m} }
	member := func(k string, v jsontree.Value) jsontree.Member { return jsontree.Member{Key: k, Value: v} }
	return obj(
		member("_type", str(Type)),
		member("predicate", obj(
			member("attestation_schema_version", num(AttestationSchemaVersion)),
			member("canonicalization", str(Canonicalization)),
			member("snapshot_schema_version", num(schemaVersion)),
		)),
		member("predicateType", str(PredicateType)),
		member("subject", jsontree.Value{Kind: jsontree.Array, Items: []jsontree.Value{obj(
			member("digest", obj(member("sha256", str(sha256Hex)))),
			member("name", str(SubjectName)),
		)}}),
	)
}

// Parse loads statement bytes strictly: at most MaxSize bytes, valid JSON
// without duplicate keys, and already in RFC 8785 canonical form (the bytes
// that were signed are the bytes that are checked; nothing is normalized).
func Parse(data []byte) (jsontree.Value, error) {
	if len(data) > MaxSize {
		return jsontree.Value{}, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, MaxSize)
	}
	v, err := jsontree.Parse(data)
	if err != nil {
		return jsontree.Value{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	canon, err := canonjson.Marshal(v)
	if err != nil {
		return jsontree.Value{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if !bytes.Equal(canon, data) {
		return jsontree.Value{}, ErrNotCanonical
	}
	return v, nil
}

// Validate checks a parsed statement against the baseline it must attest:
// the baseline's digest (sha256:<hex> or <hex>) and snapshot schema version.
// A digest that differs is ErrDigestMismatch; any other deviation from the
// exact shape is ErrInvalid naming the place.
func Validate(v jsontree.Value, baselineDigest string, schemaVersion int) error {
	want := strings.TrimPrefix(baselineDigest, "sha256:")
	root, err := exact(v, "statement", "_type", "subject", "predicateType", "predicate")
	if err != nil {
		return err
	}
	if err := constString(root["_type"], "_type", Type); err != nil {
		return err
	}
	if err := constString(root["predicateType"], "predicateType", PredicateType); err != nil {
		return err
	}
	subjects := root["subject"]
	if subjects.Kind != jsontree.Array || len(subjects.Items) != 1 {
		return invalid("subject", "must be an array of exactly one subject")
	}
	subject, err := exact(subjects.Items[0], "subject[0]", "name", "digest")
	if err != nil {
		return err
	}
	if err := constString(subject["name"], "subject[0].name", SubjectName); err != nil {
		return err
	}
	digest, err := exact(subject["digest"], "subject[0].digest", "sha256")
	if err != nil {
		return err
	}
	got := digest["sha256"]
	if got.Kind != jsontree.String || !isHex64(got.Text) {
		return invalid("subject[0].digest.sha256", "must be 64 lower-case hex digits")
	}
	pred, err := exact(root["predicate"], "predicate", "attestation_schema_version", "snapshot_schema_version", "canonicalization")
	if err != nil {
		return err
	}
	if err := constInt(pred["attestation_schema_version"], "predicate.attestation_schema_version", AttestationSchemaVersion); err != nil {
		return err
	}
	if err := constInt(pred["snapshot_schema_version"], "predicate.snapshot_schema_version", schemaVersion); err != nil {
		return err
	}
	if err := constString(pred["canonicalization"], "predicate.canonicalization", Canonicalization); err != nil {
		return err
	}
	if got.Text != want {
		return fmt.Errorf("%w: it attests sha256:%s, the baseline is sha256:%s", ErrDigestMismatch, got.Text, want)
	}
	return nil
}

// ValidateSnapshot is Validate against a parsed baseline.
func ValidateSnapshot(v jsontree.Value, baseline *snapshot.Snapshot) error {
	digest, err := baseline.Digest()
	if err != nil {
		return err
	}
	return Validate(v, digest, baseline.SchemaVersion)
}

// Verify parses statement bytes and validates them against a baseline
// digest and schema version: Parse, then Validate.
func Verify(data []byte, baselineDigest string, schemaVersion int) error {
	v, err := Parse(data)
	if err != nil {
		return err
	}
	return Validate(v, baselineDigest, schemaVersion)
}

// Digest returns "sha256:<hex>" over statement bytes as they are (the
// statement digest of an attestation.created event).
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// exact checks that v is an object with exactly the given keys.
func exact(v jsontree.Value, path string, keys ...string) (map[string]jsontree.Value, error) {
	if v.Kind != jsontree.Object {
		return nil, invalid(path, "must be an object, got %s", v.Kind)
	}
	out := make(map[string]jsontree.Value, len(v.Members))
	var extra []string
	for _, m := range v.Members {
		if !slices.Contains(keys, m.Key) {
			extra = append(extra, strconv.Quote(m.Key))
			continue
		}
		out[m.Key] = m.Value
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, invalid(path, "unexpected key(s) %s", strings.Join(extra, ", "))
	}
	var missing []string
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			missing = append(missing, strconv.Quote(k))
		}
	}
	if len(missing) > 0 {
		return nil, invalid(path, "missing key(s) %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func constString(v jsontree.Value, path, want string) error {
	if v.Kind != jsontree.String || v.Text != want {
		return invalid(path, "must be %q", want)
	}
	return nil
}

func constInt(v jsontree.Value, path string, want int) error {
	if !v.IsInteger() || v.Text != strconv.Itoa(want) {
		return invalid(path, "must be the integer %d", want)
	}
	return nil
}

func invalid(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, path, fmt.Sprintf(format, args...))
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// WriteFile writes data to path with exclusive create: an existing file
// (or symbolic link) is ErrExists and is left alone. A failed write removes
// the partial file. The file is synced before WriteFile returns.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, snapshot.Quote(path))
		}
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	// Make the new name durable too (best effort: not every file system
	// lets a directory be synced).
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
