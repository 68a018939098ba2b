// Package codex collects RuntimeTruth evidence about the OpenAI Codex CLI
// runtime of one workspace, from the real CLI.
//
// Collect runs `codex --version`, then one `codex app-server` in the
// workspace directory and asks it, over JSON-RPC on stdio (package
// appserver), for what Codex would actually run with:
//
//	initialize → initialized → config/read {includeLayers:false, cwd}
//	  → thread/start {ephemeral:true}                     (ResolveThread)
//	  → mcpServerStatus/list {limit:100, detail:"toolsAndAuthOnly",
//	                          threadId[, cursor]}…        (ResolveMCP)
//
// The records, kinds, planes, provenance and data keys are RuntimeTruth's,
// so a RuntimeTruth baseline of the same workspace verifies against them:
//
//	codex.runtime       live      codex / codex --version
//	codex.config        resolved  codex / app-server config/read
//	codex.thread        resolved  codex / app-server thread/start
//	codex.instructions  live      filesystem / sha256 Codex thread instructionSources
//	codex.mcp           live      codex / app-server mcpServerStatus/list
//	codex.mcp_tools     live      codex / app-server mcpServerStatus/list  (extension)
//
// codex.mcp_tools holds, for every tool of every server, the RFC 8785
// digest of its whole definition and of its description, inputSchema,
// outputSchema and annotations (null when absent), under
// tool:<server>:<tool>:sha256 and tool:<server>:<tool>:<facet>_sha256
// (':' and '%' in names are percent-encoded), plus tool_count. A changed
// description or schema (a "rug pull") thus shows up as exactly that
// tool's facet, without storing the text.
//
// Data handling is by allowlist: config/read keeps only model,
// model_provider, model_reasoning_effort, approval_policy, sandbox_mode
// and web_search; instruction files, MCP commands, args, env, tokens, tool
// descriptions and schemas are never serialized, only fingerprinted.
//
// codex.mcp lists a server's tool names only up to MaxToolNames names and
// MaxToolNamesBytes of JSON (server:<name>:tool_names_included says
// which); beyond that tools is null and the count, status and catalog
// fingerprint remain.
//
// Bounds: one deadline for the whole collection (DefaultTimeout, 15 s);
// app-server lines up to appserver.MaxLine (16 MiB); instruction files
// hashed in 64 KiB chunks, regular files of at most MaxInstructionSize
// (16 MiB) only, their type checked before they are opened for reading
// (anything else is "unavailable"). Errors name the step that failed or
// timed out, and quote the server's "Error:" stderr line when it exits
// before answering.
//
// Options.RunAs runs Codex, and so the MCP servers it starts, as another
// account with a fresh environment (the collector service never runs it
// as root); by default it runs as the calling process. The instruction
// files are then opened with that account's file-system permissions and
// "~" is its home, so the fingerprints are of what Codex itself can read.
//
// Side effects are designed out: thread/start gets no cwd (with one,
// Codex marks the project trusted in the user's config.toml), the thread
// is ephemeral and no turn starts, and the app-server runs with
// `--disable plugins --disable shell_snapshot` so it neither syncs the
// plugin marketplace over the network nor runs the user's login shell.
package codex
