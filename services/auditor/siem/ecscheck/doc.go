// Package ecscheck validates Elastic Common Schema (ECS) 9.4.0 documents
// offline, for tests of code that emits ECS JSON to a SIEM.
//
// # Facts
//
// The validator is built from facts of the standard only: the name, type,
// normalize: array flag, required flag, object_type, pattern, multi-field
// names and allowed values of every field, and the event.type values each
// event.category value expects. They were read from the file
// generated/ecs/ecs_flat.yml of github.com/elastic/ecs at tag v9.4.0 and
// are embedded from facts/ecs-9.4.0.json (2605 fields). No description,
// example or code of ECS is copied. To regenerate, from this directory,
// with a clone or mirror of the ECS repository:
//
//	go run ./internal/genfacts -repo /work/.mirror/elastic+ecs/repo -tag v9.4.0
//
// (another tag writes facts/ecs-<version>.json; point the go:embed
// directive and Version at it). The generator is not run in CI.
//
// # What Validate checks
//
// The document is one JSON object as Elasticsearch ingests it: nested
// objects, dotted keys, or a mix of both; {"event.kind": "x"} and
// {"event": {"kind": "x"}} are the same field. JSON null is no value.
//
//   - Every field is an ECS field or lies at or below a prefix named with
//     WithCustom. A path above ECS fields ("host", "host.os") must hold an
//     object or an array of objects.
//   - Values have the field's type: keyword, constant_keyword, wildcard and
//     match_only_text take a string; ip an IPv4 or IPv6 address string;
//     long and integer a JSON integer in the int64 or int32 range; float,
//     double and scaled_float a JSON number; boolean true or false; date an
//     RFC 3339 string or integer epoch milliseconds; geo_point
//     {"lat":..,"lon":..}, a GeoJSON Point, "lat,lon", "POINT (lon lat)",
//     a geohash or [lon, lat]. No coercion: "42" is not a long.
//   - Any field may hold an array of values of its type; a field ECS
//     normalizes to an array (event.category, event.type, tags, ...) must
//     be one.
//   - object fields: with an object_type (labels, container.labels), a map
//     of one-segment names to values of that type, no nested objects; with
//     ECS fields below them (log.syslog, dns.answers), those fields only;
//     otherwise (entity.raw) any content. flattened fields take objects of
//     any content; nested fields take objects whose members are the ECS
//     fields below them (or any content when ECS defines none).
//   - Multi-fields (host.os.name.text) are refused: Elasticsearch derives
//     them at index time.
//   - Patterns (the *.mac fields, ...) and allowed values (event.kind,
//     event.category, event.type, event.outcome, *.entity.type) are
//     enforced; ECS's expected_values (host.os.type, ...) are suggestions
//     and are not.
//   - Each event.type value must be expected by at least one of the
//     document's event.category values; an event.type without any
//     event.category is refused.
//   - The fields ECS marks required, @timestamp and ecs.version, must have
//     a value. ecs.version may be any string unless WithVersion names the
//     one it must be (WithVersion(Version) for "9.4.0").
//
// # What it does not check
//
// Field levels (core, extended) and beta status, ignore_above lengths,
// expected_values, the agreement of fields with each other beyond event
// categorization (event.kind against event.category, ECS's usage guidance),
// the content of custom fields and of open object, flattened and nested
// fields, duplicate JSON keys (the last one wins) and the range of float
// fields beyond float64.
//
// Problems are reported all at once, in an *Error whose Problems name the
// field and the reason.
package ecscheck
