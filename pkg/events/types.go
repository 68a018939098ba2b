package events

import (
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
	"reflect"
	"strings"
)

// TypePrefix starts every event type name; the name ends in its version.
const TypePrefix = "dev.runtimetruth."

// The event types of the catalog. A type name never changes meaning: an
// incompatible payload gets a new name ending in .v2, published next to the
// .v1 one until every consumer reads it.
const (
	// TypeEvidenceCollected carries one evidence snapshot of a target
	// (EvidenceCollected), from a collector.
	TypeEvidenceCollected = TypePrefix + "evidence.collected.v1"
	// TypeRunnableModified reports installed Python or Node code that
	// differs from the package (RunnableModified), once per distinct
	// change, from a collector. The name keeps runspec's runnable.modified.
	TypeRunnableModified = TypePrefix + "runnable.modified.v1"
	// TypeVerdictPass says a snapshot matches its baseline (Verdict).
	TypeVerdictPass = TypePrefix + "verdict.pass.v2"
	// TypeVerdictDrift says a snapshot differs from its baseline (Verdict).
	TypeVerdictDrift = TypePrefix + "verdict.drift.v2"
	// TypeVerdictError says a snapshot could not be verified (Verdict).
	TypeVerdictError = TypePrefix + "verdict.error.v2"
	// TypeVerdictStale says no authentic snapshot of a host's target came
	// for its stale_after (Verdict).
	TypeVerdictStale = TypePrefix + "verdict.stale.v2"
	// TypeBaselineChanged reports a baseline created, replaced or removed
	// (BaselineChanged).
	TypeBaselineChanged = TypePrefix + "baseline.changed.v1"
	// TypeAttestationCreated reports a signed baseline attestation
	// (AttestationCreated), from the attestor.
	TypeAttestationCreated = TypePrefix + "attestation.created.v1"
	// TypeHostKeyChanged reports a host's keys enrolled, pending,
	// revoked or rotating in the host registry (HostKeyChanged).
	TypeHostKeyChanged = TypePrefix + "host.key.changed.v1"
	// TypeCollectionFailed reports a collector that could not collect
	// (CollectionFailed).
	TypeCollectionFailed = TypePrefix + "collection.failed.v1"
	// TypeEventRejected is a dead-letter record (EventRejected): a message
	// a consumer could not decode or permanently failed to handle.
	TypeEventRejected = TypePrefix + "event.rejected.v1"
)

// The verdict types verifiers wrote before verdict.*.v2, whose report had
// runtimetruth's earlier shape (see package report). They are read, never
// written: decoding one gives the Verdict its v2 successor carries.
const (
	TypeVerdictPassV1  = TypePrefix + "verdict.pass.v1"
	TypeVerdictDriftV1 = TypePrefix + "verdict.drift.v1"
	TypeVerdictErrorV1 = TypePrefix + "verdict.error.v1"
)

// ContentType is the datacontenttype of every catalog event: its data is one
// UTF-8 JSON object.
const ContentType = "application/json"

// Payload is the data of a catalog event. The payload decides its own type
// (a Verdict's depends on its status), the event's subject attribute and
// the NATS subject, so that none of them can disagree with the data.
type Payload interface {
	// Type is the event type.
	Type() string
	// Subject is the event's subject attribute.
	Subject() string
	// NATSSubject is the subject the event is published to.
	NATSSubject() string
	// Validate checks what the JSON Schema cannot (digests, consistency
	// between fields).
	Validate() error
}

// Spec describes one event type of the catalog.
type Spec struct {
	// Type is the event type name.
	Type string
	// Payload names the Go payload type.
	Payload string
	// NATSSubject is the subject template, e.g. "rt.verdict.<host>.<status>";
	// each <part> is one Token (a <target> is two).
	NATSSubject string
	// Subject describes the convention of the subject attribute.
	Subject string
	// Schema is the file name of the payload's JSON Schema (see SchemaFS).
	Schema string
	// SchemaURI is the schema's $id, the event's dataschema attribute.
	SchemaURI string
	// SupersededBy is, for a type that is read but no longer written, the
	// type that replaced it: its payload decodes as that type's.
	SupersededBy string

	goType reflect.Type
	decode func(s *Spec, data []byte) (Payload, error)
	// dataOptions are what strictjson asks of the data beyond its type
	// (dataOptions).
	dataOptions []strictjson.Option
}

// Golden is the name of the spec's golden example,
// testdata/<type without prefix>.golden.json.
func (s Spec) Golden() string { return strings.TrimPrefix(s.Type, TypePrefix) + ".golden.json" }

const schemaBase = "https://runtimetruth.dev/schemas/events/"

// spec describes the type typ, whose name ends in its version (.vN): its
// schema is <schemaName>.vN.schema.json, of $id <schemaBase><schemaName>/vN.json.
func spec[T Payload](typ, subjectTemplate, subjectAttr, schemaName string) Spec {
	version := typ[strings.LastIndexByte(typ, '.')+1:]
	schema := schemaName + "." + version + ".schema.json"
	shape := report.AnyShape
	if reflect.TypeFor[T]() == reflect.TypeFor[Verdict]() {
		shape = report.CurrentShape
	}
	return Spec{
		Type:        typ,
		Payload:     reflect.TypeFor[T]().Name(),
		NATSSubject: subjectTemplate,
		Subject:     subjectAttr,
		Schema:      schema,
		SchemaURI:   schemaBase + schemaName + "/" + version + ".json",
		goType:      reflect.TypeFor[T](),
		dataOptions: dataOptions(requiredMembers(schema), shape),
		decode: func(s *Spec, data []byte) (Payload, error) {
			var p T
			if err := decodeInto(s, data, &p); err != nil {
				return nil, err
			}
			return p, nil
		},
	}
}

var catalog = []Spec{
	spec[EvidenceCollected](TypeEvidenceCollected, "rt.evidence.<host>.<target-kind>",
		"the snapshot's target, <kind>:<identifier>", "evidence.collected"),
	spec[RunnableModified](TypeRunnableModified, "rt.integrity.<host>",
		"the package as a purl, pkg:pypi/<name>@<version> or pkg:npm/<name>@<version>", "runnable.modified"),
	spec[Verdict](TypeVerdictPass, "rt.verdict.<host>.pass", "the target, <kind>:<identifier>", "verdict"),
	spec[Verdict](TypeVerdictDrift, "rt.verdict.<host>.drift", "the target, <kind>:<identifier>", "verdict"),
	spec[Verdict](TypeVerdictError, "rt.verdict.<host>.error", "the target, <kind>:<identifier>", "verdict"),
	spec[Verdict](TypeVerdictStale, "rt.verdict.<host>.stale", "the target, <kind>:<identifier>", "verdict"),
	spec[BaselineChanged](TypeBaselineChanged, "rt.baseline.<target>",
		"the target, <kind>:<identifier>", "baseline.changed"),
	spec[AttestationCreated](TypeAttestationCreated, "rt.attestation.<target>",
		"the target, <kind>:<identifier>", "attestation.created"),
	spec[HostKeyChanged](TypeHostKeyChanged, "rt.hostkey.<host>",
		"the host", "host.key.changed"),
	spec[CollectionFailed](TypeCollectionFailed, "rt.collect.failed.<host>",
		"the collector that failed, e.g. codex", "collection.failed"),
	spec[EventRejected](TypeEventRejected, "rt.dlq.<stream>.<host>",
		"the rejected message, <stream>:<stream-sequence>", "event.rejected"),
	verdictV1(TypeVerdictPassV1, TypeVerdictPass, "rt.verdict.<host>.pass"),
	verdictV1(TypeVerdictDriftV1, TypeVerdictDrift, "rt.verdict.<host>.drift"),
	verdictV1(TypeVerdictErrorV1, TypeVerdictError, "rt.verdict.<host>.error"),
}

// verdictV1 is the spec of a verdict.*.v1 type: read, never written (by
// replaced it), its report in the earlier shape.
func verdictV1(typ, by, subjectTemplate string) Spec {
	s := spec[Verdict](typ, subjectTemplate, "the target, <kind>:<identifier>", "verdict")
	s.SupersededBy = by
	s.dataOptions = dataOptions(requiredMembers(s.Schema), report.LegacyShape)
	return s
}

// GoType is the Go type of the payload (Payload names it).
func (s Spec) GoType() reflect.Type { return s.goType }

// Current is the type a payload of this type decodes as: SupersededBy, or
// the type itself.
func (s Spec) Current() string {
	if s.SupersededBy != "" {
		return s.SupersededBy
	}
	return s.Type
}

var byType = func() map[string]*Spec {
	m := make(map[string]*Spec, len(catalog))
	for i := range catalog {
		m[catalog[i].Type] = &catalog[i]
	}
	return m
}()

// Catalog returns every event type, in a fixed order.
func Catalog() []Spec { return append([]Spec(nil), catalog...) }

// Lookup returns the spec of an event type.
func Lookup(typ string) (Spec, bool) {
	s, ok := byType[typ]
	if !ok {
		return Spec{}, false
	}
	return *s, true
}
