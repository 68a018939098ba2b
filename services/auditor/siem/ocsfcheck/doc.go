// Package ocsfcheck validates OCSF 1.8.0 records offline, for tests of
// code that emits OCSF JSON to SIEMs. Validate accepts records of six
// classes: Base Event (0), Event Log Activity (1008), Compliance Finding
// (2003), Detection Finding (2004), Entity Management (3004) and
// Application Error (6008).
//
// # Facts
//
// The validator is built from facts of the standard only: names, types,
// requirement levels, enum values, constraints and inheritance. They were
// read from github.com/ocsf/ocsf-schema at tag 1.8.0 (commit 6fa6499a) and
// are embedded from testdata/ocsf-1.8.0.json: the six classes and the
// classes they extend (base_event, finding, system, iam, application),
// the 134 objects their attributes reach, the 8 profiles they use, the 653
// dictionary attributes and 22 data types of these. The files read are
// version.json, categories.json, dictionary.json, the class files
// (events/base_event.json, events/findings/finding.json,
// events/findings/compliance_finding.json,
// events/findings/detection_finding.json, events/system/system.json,
// events/system/event_log_activity.json, events/iam/iam.json,
// events/iam/entity_management.json, events/application/application.json,
// events/application/application_error.json), the objects/*.json of the
// objects and the profiles/*.json they include; the facts file's "source"
// lists them per class, object and profile. No description or code of OCSF
// is copied; enum values keep their captions. The platform extensions
// (extensions/linux, macos, windows) are not applied.
//
// To regenerate, from this directory, with a mirror of the schema
// repository:
//
//	go run ./internal/genfacts -repo /work/.mirror/ocsf+ocsf-schema/repo -tag 1.8.0 -o testdata/ocsf-1.8.0.json
//
// (-classes takes other class_uid values). The output is deterministic.
// The generator is not run by the tests or in CI. It resolves "$include";
// the validator merges "extends" and the dictionary as the OCSF schema
// compiler does (an attribute's facts over its parent's, enums merged value
// by value, "profile": null freeing an attribute of its profile, a child's
// constraints replacing its parent's), then derives what the compiler
// derives: class_uid = category uid * 1000 + class uid, type_uid = class_uid
// * 100 + activity_id, the observable type_id values, and a datetime_t
// sibling x_dt of each timestamp_t attribute x under the datetime profile.
//
// # What Validate checks
//
// It builds a JSON Schema (draft 2020-12) from the facts once, compiles it
// with github.com/santhosh-tekuri/jsonschema/v6, and validates the record,
// which must be one JSON object:
//
//   - class_uid picks the class; category_uid and class_uid must be the
//     class's; activity_id one of the class's activities; type_uid equal to
//     class_uid * 100 + activity_id.
//   - Members: a record or object may hold only the attributes its class or
//     object defines, inheritance resolved. An attribute that belongs to a
//     profile is allowed only when metadata.profiles names that profile,
//     at the top level as inside objects (device.container needs
//     "container"), and the profile's required attributes are then
//     required (cloud, osint). Only the generic object of unmapped (and
//     xattributes), and json_t values, are open.
//   - Attributes whose requirement is "required" must be present;
//     recommended and optional ones need not be.
//   - Types: string_t and its subtypes are strings, with the regex and
//     max_len the dictionary gives (ip_t, mac_t, email_t, uuid_t,
//     datetime_t, ...); integer_t and long_t integers, port_t within
//     0-65535; float_t numbers; boolean_t booleans; timestamp_t integers
//     (epoch milliseconds); json_t anything; an object type the object's
//     schema; is_array an array of these.
//   - Enums: a value must be one of the enum's values, integer enums
//     (severity_id, status_id, compliance.status_id, ...) and string ones
//     (http_method, tlp) alike.
//   - Constraints: at_least_one, at least one of the attributes present;
//     just_one, exactly one.
//   - metadata.version must be "1.8.0", and metadata.profiles may name
//     only profiles OCSF 1.8.0 defines.
//
// A refusal lists every fault with the JSON Pointer of the value at fault
// and the reason, and wraps the *jsonschema.ValidationError.
//
// # What it does not check
//
// Recommended attributes, deprecation, the sibling strings of enum
// attributes (severity, activity_name, class_name, type_name, status,
// ...) against their enum's caption, "Other" (99) values without their
// sibling, observables' names against the record's attributes, profiles
// applied to a class that does not use them (accepted, as OCSF does),
// duplicate JSON keys, the range limits of integer_t and long_t, and the
// integral floats JSON Schema takes for integers (1.0). The regexes of
// the dictionary are applied as JSON Schema patterns, as OCSF writes them
// (unanchored for uuid_t; datetime_t's leaves the offset optional, so a
// datetime without one passes), where the OCSF server only warns.
package ocsfcheck
