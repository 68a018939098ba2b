// Package chain is runtimetruth's tamper-evident audit log: an append-only
// sequence of links, one per event, where each link commits to its chain
// name, its sequence number, the previous link's hash and the canonical
// (RFC 8785) form of the event. Editing, dropping, inserting, duplicating or
// reordering a link breaks every hash after it; with a keyed HMAC, someone
// without the key cannot recompute the chain; signed checkpoints kept
// elsewhere (syslog, a file) detect truncation and a full rewrite.
//
// A link is one JSON line, its keys sorted and its event canonical:
//
//	{"chain":"host-a","event":{...},"hash":"sha256:…","prev":"sha256:…","seq":1}
//
// hash = "sha256:" + hex(SHA-256(C)) or, keyed, "hmac-sha256:" +
// hex(HMAC-SHA-256(key, C)), where C is the RFC 8785 form of
// {"chain","event","prev","seq"}: the line without its hash member. The
// first link of a chain has seq 1 and prev = Genesis.
//
// The package owns the link format end to end: Hasher seals links (Seal)
// from the event's canonical bytes, ParseLink reads a line
// strictly, AppendFile appends to a JSONL file under a lock (the
// integrity audit file), and the verifier (Run, RunWith over a Source:
// Lines for JSONL, or rows) recomputes chains and names the first broken
// link and why: changed, missing, reordered, duplicated, malformed, or —
// against checkpoints — truncated or rewritten.
//
// A checkpoint (Checkpoint) is the auditor's signed high-water mark: it
// asserts that a chain's link seq has hash head, signed with the auditor's
// Ed25519 key. Kept outside the chain's store (in a SIEM through syslog,
// or a file), checkpoints make truncation and a full rewrite of a chain
// detectable. The signature covers the RFC 8785 form of
// {"auditor","chain","head","seq","time"}. A checkpoint travels as a JSON
// line,
//
//	{"auditor":"/auditor/a1","chain":"VERDICTS/web-01","head":"sha256:…","key":"<key id>","seq":42,"sig":"<base64>","time":"…"}
//
// or as the RFC 5424 structured-data element of a syslog message whose
// MSGID is "checkpoint",
//
//	<37>1 2026-01-02T03:04:05.000000Z host runtimetruth-auditor 7 checkpoint [rtcheckpoint@32473 chain="…" seq="42" head="sha256:…" time="…" auditor="…" key="…" sig="…"] checkpoint …
//
// ReadCheckpoints reads both from a file, one a line: the auditor's
// checkpoint file, or a syslog receiver's log of RFC 5424 messages. In
// the latter it takes a checkpoint only from the STRUCTURED-DATA element
// rtcheckpoint@<PEN> of a message of MSGID checkpoint, never from other
// text of a line (a link's message carries an event's subject and target,
// which may read like a checkpoint), and it skips and counts every other
// line. The key id is the first 16 hex digits of the SHA-256 of the
// public key's PKIX DER form.
//
// The verifier is built for speed: a link stored canonically (as Seal
// writes it) is checked by hashing its bytes as they are, and hashing
// runs in parallel with reading; only a link whose bytes do not hash to
// its hash is parsed and canonicalized, to tell a reformatted link from a
// changed one. It keeps a small per-chain state (the head, the last few
// hashes, the hashes at checkpointed sequence numbers), not the chain.
//
// With Options.EventIDs it also reports an event id linked twice in a
// chain (Report.Duplicate), reading the id of an event as the auditor
// writes it (EventID): each link that records a message (not an
// auditor-made record) is remembered by a 64-bit keyed hash of its chain
// and CloudEvent id and its sequence number, about 20 bytes a link, so
// memory grows with the links verified; two different ids of a chain
// share a hash with a chance of about n²/2⁶⁵ for n links (1 in 10¹² for a
// million), which would be reported as a duplicate. An Inspector
// (Options.Inspector) checks something of every event beside the hashing:
// the auditor's evidence signatures.
package chain
