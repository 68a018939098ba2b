// Package spool is a bounded, crash-safe, on-disk FIFO queue of records:
// the collector writes every event here before it is sent, and removes it
// only after JetStream acknowledged it.
//
// # Format
//
// A spool is a directory of segment files and one cursor file:
//
//	<dir>/00000000000000000001.seg   segment 1 (oldest)
//	<dir>/00000000000000000002.seg   …
//	<dir>/cursor                     the persisted read position
//
// A segment starts with the 8-byte magic "RTSPOOL1" and holds records back
// to back, each framed as
//
//	uint32 length (little-endian) | uint32 CRC-32C | payload (length bytes)
//
// where the CRC (Castagnoli) covers the four length bytes and the payload.
// Records are only ever appended, to the last segment; a new segment
// starts once the last one has reached Options.SegmentBytes. The cursor
// file holds the segment number and byte offset of the first record not
// yet acknowledged (uint64, uint64, little-endian) and a CRC-32C of those
// sixteen bytes.
//
// # Guarantees
//
// Append writes a batch and fsyncs the segment before it returns (and the
// directory when it created a segment), so an appended record survives a
// crash or power loss. Commit writes the cursor to a temporary file,
// fsyncs it, renames it over the old cursor and fsyncs the directory, so
// the cursor is always either the old or the new position; segments
// entirely before the cursor are then deleted. A record is therefore
// delivered at least once: a crash between a successful send and Commit
// sends it again after the restart, which JetStream's de-duplication on
// the message id absorbs.
//
// Open checks every record from the cursor on. A record whose length is
// impossible, that runs past the end of its file or whose CRC does not
// match ends its segment: the file is truncated there (the torn tail of a
// crash during Append, or damage) and the bytes cut are reported in
// Recovery, never silently. The intact records before it are kept.
//
// # Bounds
//
// Options.MaxBytes and Options.MaxEvents bound the undelivered records
// (framing included). When a batch would exceed either, Append refuses the
// whole batch with ErrFull and writes nothing: the oldest undelivered
// records are never dropped to make room, because they are the history the
// consumers have not seen yet. The caller counts and reports the refusal.
// On disk a spool also holds up to one segment of delivered records not
// yet deleted.
//
// One goroutine reads (Next, Commit) while any number append.
package spool
