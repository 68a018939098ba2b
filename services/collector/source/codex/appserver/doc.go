// Package appserver is a client for the JSON-RPC protocol that
// `codex app-server` speaks on its standard input and output.
//
// The wire format is one JSON object per line, JSON-RPC 2.0 without the
// "jsonrpc" member: requests {"id","method","params"}, notifications
// {"method","params"} and responses {"id","result"} or {"id","error"}.
// Everything the server writes is untrusted: Decode parses each line
// strictly (see package jsontree), lines are bounded by MaxLine, responses
// are matched by id, notifications are handed to a callback or dropped, and
// server-to-client requests are answered with a JSON-RPC error because the
// client never starts a turn that could legitimately ask for anything.
//
// Start runs the server in its own process group with its stderr kept in a
// bounded buffer, so that a server that exits before answering can be
// reported by its "Error: ..." line. Shutdown stops it the way Codex
// expects (stdin EOF, which makes it stop its MCP servers), and only then
// kills what is left: the process group and every descendant seen before
// shutdown, including MCP servers that run in process groups of their own.
package appserver
