// Package chain is runtimetruth's tamper-evident audit log: an append-only
// sequence of links, one per event, where each link commits to its chain
// name, its sequence number, the previous link's hash and the canonical
// (RFC 8785) form of the event. Editing, dropping, inserting, duplicating or
// reordering a link breaks every hash after it; with a keyed HMAC, someone
// without the key cannot recompute the chain; checkpoints kept elsewhere
// (syslog) detect truncation and a full rewrite.
//
// A link is one JSON line:
//
//	{"chain":"host-a","event":{...},"hash":"sha256:…","prev":"sha256:…","seq":1}
//
// hash = "sha256:" + hex(SHA-256(C)) or, keyed, "hmac-sha256:" +
// hex(HMAC-SHA-256(key, C)), where C is the RFC 8785 form of
// {"chain","event","prev","seq"}. The first link of a chain has seq 1 and
// prev = Genesis.
package chain
