// Package snapshot is the RuntimeTruth schema v1 evidence model.
//
// A Snapshot is what one collection observed of one target: when it was
// captured, which target, and an ordered list of evidence records, each with
// its plane (declared, resolved or live), kind, provenance (collector and
// method) and a flat map of scalar data (string, integer, boolean or null).
//
// Parse reads snapshots strictly (duplicate keys, unknown schema versions,
// unknown planes, non-scalar data and naive timestamps are errors naming the
// place), Marshal writes them byte-for-byte as RuntimeTruth does, and Digest
// is the RFC 8785 SHA-256 identity RuntimeTruth computes for the same
// snapshot.
package snapshot
