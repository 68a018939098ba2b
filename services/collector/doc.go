// Package collector is the runtimetruth collector daemon as a library: it
// collects evidence snapshots of configured targets (git work trees,
// processes, systemd units, Codex workspaces, Python environments, Node
// projects) on an interval and publishes them as CloudEvents onto NATS
// JetStream. cmd/runtimetruth-collector runs it as a service;
// `runtimetruth up` embeds it with its own connection (Settings.Conn).
//
// Every collection produces one event on the target's subject:
// evidence.collected with the snapshot (rt.evidence.<host>.<kind>), or
// collection.failed when the source failed (rt.collect.failed.<host>).
// A python or node target also produces one runnable.modified event
// (rt.integrity.<host>) per distinct change of installed code, once: the
// last change reported per package is kept in the target's integrity
// state directory (a change differing from it is a new event, a clean
// check forgets it), and the event id is derived from the change so that
// JetStream drops a re-publication.
//
// Events are written to the spool (package spool) before anything is
// sent; one sender goroutine delivers them in order with
// jetstream.PublishMsg, the CloudEvent id as Nats-Msg-Id, and removes each
// only after its publish acknowledgement. While NATS is unreachable events
// accumulate on disk, bounded by spool.max_bytes and spool.max_events;
// after a crash the undelivered ones are sent again and JetStream's
// de-duplication window absorbs the copies.
//
// A request to CollectNowSubject(host), the one control subject the
// collector subscribes to (a JSON CollectNowRequest with the requester's
// nonce, or a target name as plain text; empty for all), collects at once
// and replies with a CollectNowReply (host, the request's target and
// nonce, the time, the results) signed with the collector's key: a DSSE
// envelope of payload type ReplyPayloadType (events.SignEnvelope). A
// requester accepts it with VerifyCollectNowReply, given the host's
// enrolled key.
package collector
