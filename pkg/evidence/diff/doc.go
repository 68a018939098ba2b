// Package diff compares two snapshots of the same target with RuntimeTruth's
// semantics and narrows the result to protected selectors.
//
// Targets must match; every kind must be a supported kind; a provenance
// (plane or source) change is an error, not drift; only captured_at is
// ignored; a missing field is distinct from null, and values of different
// types (true and 1) are never equal.
package diff
