package codex

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Provenance of the records, exactly as RuntimeTruth writes it.
var (
	sourceVersion      = snapshot.Source{Collector: "codex", Method: "codex --version"}
	sourceConfig       = snapshot.Source{Collector: "codex", Method: "app-server config/read"}
	sourceThread       = snapshot.Source{Collector: "codex", Method: "app-server thread/start"}
	sourceInstructions = snapshot.Source{Collector: "filesystem", Method: "sha256 Codex thread instructionSources"}
	sourceMCP          = snapshot.Source{Collector: "codex", Method: "app-server mcpServerStatus/list"}
)

// configFields is the allowlist of config/read keys kept in codex.config.
// Everything else (instructions, provider settings and tokens, MCP server
// commands, args and env, ...) is never read.
var configFields = []string{
	"model",
	"model_provider",
	"model_reasoning_effort",
	"approval_policy",
	"sandbox_mode",
	"web_search",
}

// Bounds on the tool names codex.mcp lists per server. Larger catalogs keep
// their count, status and fingerprint, with tools null and
// tool_names_included false; codex.mcp_tools still fingerprints every tool.
const (
	MaxToolNames      = 64
	MaxToolNamesBytes = 4096
)

// hashChunk is the read size for instruction files, as RuntimeTruth's.
const hashChunk = 64 << 10

func responseErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrResponse, fmt.Sprintf(format, args...))
}

// scalar converts a JSON scalar to an evidence value: null, string,
// boolean, or an integer within ±(2^53-1).
func scalar(v jsontree.Value) (snapshot.Value, bool) {
	switch v.Kind {
	case jsontree.Null:
		return snapshot.Null(), true
	case jsontree.String:
		return snapshot.String(v.Text), true
	case jsontree.Bool:
		return snapshot.Bool(v.Bool), true
	case jsontree.Number:
		n, err := v.Int64()
		if err != nil || n > canonjson.MaxSafeInteger || n < -canonjson.MaxSafeInteger {
			return snapshot.Value{}, false
		}
		return snapshot.Int(n), true
	}
	return snapshot.Value{}, false
}

// pyDumps is json.dumps(v, separators=(",", ":"), sort_keys=sortKeys).
func pyDumps(v jsontree.Value, sortKeys bool) (string, error) {
	b, err := pyjson.Marshal(v, pyjson.Options{SortKeys: sortKeys})
	if err != nil {
		return "", responseErr("%v", err)
	}
	return string(b), nil
}

// configRecord builds codex.config from config/read's result.
func configRecord(cwd string, result jsontree.Value) (snapshot.Record, error) {
	config, ok := result.Get("config")
	if !ok || config.Kind != jsontree.Object {
		return snapshot.Record{}, responseErr("config/read returned no config object")
	}
	data := snapshot.Data{"cwd": snapshot.String(cwd)}
	for _, field := range configFields {
		v, ok := config.Get(field)
		if !ok {
			continue
		}
		if s, ok := scalar(v); ok {
			data[field] = s
			continue
		}
		if field == "approval_policy" && v.Kind == jsontree.Object {
			s, err := pyDumps(v, true)
			if err != nil {
				return snapshot.Record{}, err
			}
			data[field] = snapshot.String(s)
			continue
		}
		return snapshot.Record{}, responseErr("config/read returned unsupported value type for %q", field)
	}
	return snapshot.Record{Plane: snapshot.Resolved, Kind: "codex.config", Source: sourceConfig, Data: data}, nil
}

// thread is what the probe needs from thread/start besides the record.
type thread struct {
	id      string
	sources []string
}

// threadRecord builds codex.thread from thread/start's result.
func threadRecord(result jsontree.Value) (snapshot.Record, thread, error) {
	var th thread
	obj, ok := result.Get("thread")
	if !ok || obj.Kind != jsontree.Object {
		return snapshot.Record{}, th, responseErr("thread/start returned no thread object")
	}
	id, ok := obj.Get("id")
	if !ok || id.Kind != jsontree.String || id.Text == "" {
		return snapshot.Record{}, th, responseErr("thread/start returned no thread id")
	}
	th.id = id.Text
	data := snapshot.Data{}
	for _, f := range []struct{ from, to string }{
		{"model", "model"},
		{"modelProvider", "model_provider"},
		{"reasoningEffort", "reasoning_effort"},
		{"cwd", "cwd"},
	} {
		v, _ := result.Get(f.from) // absent is null
		s, ok := scalar(v)
		if !ok {
			return snapshot.Record{}, th, responseErr("thread/start returned invalid %s", f.from)
		}
		data[f.to] = s
	}
	ap, _ := result.Get("approvalPolicy")
	if s, ok := scalar(ap); ok {
		data["approval_policy"] = s
	} else if ap.Kind == jsontree.Object {
		js, err := pyDumps(ap, true)
		if err != nil {
			return snapshot.Record{}, th, err
		}
		data["approval_policy"] = snapshot.String(js)
	} else {
		return snapshot.Record{}, th, responseErr("thread/start returned invalid approvalPolicy")
	}
	if sb, ok := result.Get("sandbox"); ok && sb.Kind != jsontree.Null {
		if sb.Kind != jsontree.Object && sb.Kind != jsontree.Array {
			return snapshot.Record{}, th, responseErr("thread/start returned invalid sandbox")
		}
		js, err := pyDumps(sb, true)
		if err != nil {
			return snapshot.Record{}, th, err
		}
		data["sandbox"] = snapshot.String(js)
	}
	if src, ok := result.Get("instructionSources"); ok {
		list := jsontree.Value{Kind: jsontree.Array}
		switch src.Kind {
		case jsontree.Null:
		case jsontree.Array:
			for _, item := range src.Items {
				if item.Kind != jsontree.String {
					return snapshot.Record{}, th, responseErr("thread/start returned invalid instructionSources")
				}
				th.sources = append(th.sources, item.Text)
			}
			list = src
		default:
			return snapshot.Record{}, th, responseErr("thread/start returned invalid instructionSources")
		}
		js, err := pyDumps(list, false)
		if err != nil {
			return snapshot.Record{}, th, err
		}
		data["instruction_sources"] = snapshot.String(js)
	}
	if cv, ok := obj.Get("cliVersion"); ok && cv.Kind != jsontree.Null {
		if cv.Kind != jsontree.String {
			return snapshot.Record{}, th, responseErr("thread/start returned invalid thread cliVersion")
		}
		data["cli_version"] = snapshot.String(cv.Text)
	}
	return snapshot.Record{Plane: snapshot.Resolved, Kind: "codex.thread", Source: sourceThread, Data: data}, th, nil
}

// instructionsRecord fingerprints each reported instruction source as the
// account Codex ran as (nil: this process) reads it: "~" is that
// account's home, and a file it may not read is "unavailable" even to a
// collector running as root. The text is streamed through SHA-256 and
// never kept.
func instructionsRecord(ctx context.Context, cwd string, sources []string, as *Account) (snapshot.Record, error) {
	data := snapshot.Data{"source_count": snapshot.Int(int64(len(sources)))}
	for _, src := range sources {
		path := expandHome(src)
		if as != nil && (src == "~" || strings.HasPrefix(src, "~/")) {
			path = as.Home + src[1:]
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		sum, err := hashFile(ctx, path, as)
		if ctx.Err() != nil {
			return snapshot.Record{}, ctx.Err()
		}
		v := snapshot.String("unavailable")
		if err == nil {
			v = snapshot.String("sha256:" + sum)
		}
		data["source:"+src] = v
	}
	return snapshot.Record{Plane: snapshot.Live, Kind: "codex.instructions", Source: sourceInstructions, Data: data}, nil
}

// MaxInstructionSize caps an instruction file the probe fingerprints
// (16 MiB; Codex itself reads at most 32 KiB of project docs by default).
// A larger file is "unavailable", as an unreadable one is.
const MaxInstructionSize = 16 << 20

// Why an instruction source has no fingerprint.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = fmt.Errorf("larger than %d bytes", MaxInstructionSize)
)

// hashFile returns the hex SHA-256 of a regular file of at most
// MaxInstructionSize bytes. A symbolic link is followed, as Codex and
// RuntimeTruth follow it, but nothing that is not a regular file is ever
// opened for reading (openRegular): a FIFO planted as AGENTS.md cannot
// hang the probe, a device is neither read (/dev/zero) nor opened (open
// alone has effects on some). It reads in 64 KiB chunks, checking ctx
// between them, and gives up on a file that grows past the cap. It opens
// the file with the permissions of as (openRegularAs).
func hashFile(ctx context.Context, path string, as *Account) (string, error) {
	f, err := openRegularAs(path, as)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errNotRegular
	}
	if st.Size() > MaxInstructionSize {
		return "", errTooLarge
	}
	h := sha256.New()
	buf := make([]byte, hashChunk)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.Read(buf)
		if total += int64(n); total > MaxInstructionSize {
			return "", errTooLarge
		}
		h.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// expandHome expands a leading "~" or "~/" like Python's expanduser.
func expandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return home + p[1:]
}

// mcpRecords accumulates mcpServerStatus/list pages into codex.mcp and
// codex.mcp_tools.
type mcpRecords struct {
	mcp   snapshot.Data
	tools snapshot.Data
	seen  map[string]bool
	count int
}

func newMCPRecords() *mcpRecords {
	return &mcpRecords{mcp: snapshot.Data{}, tools: snapshot.Data{}, seen: map[string]bool{}}
}

// page validates one page and returns its nextCursor ("" for none).
func (r *mcpRecords) page(result jsontree.Value) (string, error) {
	servers, ok := result.Get("data")
	if !ok || servers.Kind != jsontree.Array {
		return "", responseErr("mcpServerStatus/list returned no data array")
	}
	for _, s := range servers.Items {
		if s.Kind != jsontree.Object {
			return "", responseErr("mcpServerStatus/list returned a non-object server")
		}
		if err := r.server(s); err != nil {
			return "", err
		}
	}
	next, ok := result.Get("nextCursor")
	if !ok || next.Kind == jsontree.Null {
		return "", nil
	}
	if next.Kind != jsontree.String || next.Text == "" {
		return "", responseErr("mcpServerStatus/list returned invalid nextCursor")
	}
	return next.Text, nil
}

func optString(obj jsontree.Value, field string) (snapshot.Value, error) {
	v, ok := obj.Get(field)
	if !ok || v.Kind == jsontree.Null {
		return snapshot.Null(), nil
	}
	if v.Kind != jsontree.String {
		return snapshot.Value{}, responseErr("mcpServerStatus/list returned invalid %s", field)
	}
	return snapshot.String(v.Text), nil
}

func (r *mcpRecords) server(s jsontree.Value) error {
	nameV, _ := s.Get("name")
	if nameV.Kind != jsontree.String || nameV.Text == "" {
		return responseErr("mcpServerStatus/list returned invalid server name")
	}
	name := nameV.Text
	if r.seen[name] {
		return responseErr("mcpServerStatus/list returned duplicate server %s", strconv.Quote(name))
	}
	r.seen[name] = true
	runtime, err := optString(s, "runtimeStatus")
	if err != nil {
		return err
	}
	plugin, err := optString(s, "pluginId")
	if err != nil {
		return err
	}
	origin, err := optString(s, "httpOrigin")
	if err != nil {
		return err
	}
	auth, ok := s.Get("authStatus")
	if !ok || auth.Kind != jsontree.String {
		return responseErr("mcpServerStatus/list returned invalid authStatus")
	}
	tools, ok := s.Get("tools")
	if !ok || tools.Kind != jsontree.Object {
		return responseErr("mcpServerStatus/list returned invalid tools catalog")
	}
	toolsErr, _ := s.Get("toolsError")
	if toolsErr.Kind != jsontree.Null && toolsErr.Kind != jsontree.String {
		return responseErr("mcpServerStatus/list returned invalid toolsError")
	}
	catalog, err := pyjson.Marshal(tools, pyjson.Compact)
	if err != nil {
		return responseErr("mcpServerStatus/list tools of %s: %v", strconv.Quote(name), err)
	}
	sum := sha256.Sum256(catalog)
	names := make([]string, len(tools.Members))
	for i, m := range tools.Members {
		names[i] = m.Key
	}
	slices.Sort(names)
	list := jsontree.Value{Kind: jsontree.Array, Items: make([]jsontree.Value, len(names))}
	for i, n := range names {
		list.Items[i] = jsontree.Value{Kind: jsontree.String, Text: n}
	}
	listJSON, err := pyDumps(list, false)
	if err != nil {
		return err
	}
	included := len(names) <= MaxToolNames && len(listJSON) <= MaxToolNamesBytes
	status := "available"
	if toolsErr.Kind != jsontree.Null {
		status = "error"
	}
	p := "server:" + name + ":"
	fields := []struct {
		key string
		v   snapshot.Value
	}{
		{"runtime_status", runtime},
		{"auth_status", snapshot.String(auth.Text)},
		{"plugin_id", plugin},
		{"http_origin", origin},
		{"tool_count", snapshot.Int(int64(len(names)))},
		{"tool_names_included", snapshot.Bool(included)},
		{"tools", snapshot.OptString(listJSON, included)},
		{"tool_catalog_status", snapshot.String(status)},
		{"tool_catalog_sha256", snapshot.String("sha256:" + hex.EncodeToString(sum[:]))},
	}
	for _, f := range fields {
		if _, dup := r.mcp[p+f.key]; dup {
			return responseErr("mcpServerStatus/list server names collide on key %q", p+f.key)
		}
		r.mcp[p+f.key] = f.v
	}
	return r.toolDigests(name, tools)
}

// toolFacets are the parts of an MCP tool definition that get a digest of
// their own in codex.mcp_tools, so a diff names which part changed.
var toolFacets = []struct{ field, key string }{
	{"description", "description_sha256"},
	{"inputSchema", "input_schema_sha256"},
	{"outputSchema", "output_schema_sha256"},
	{"annotations", "annotations_sha256"},
}

func (r *mcpRecords) toolDigests(server string, tools jsontree.Value) error {
	for _, m := range tools.Members {
		p := "tool:" + escapeKey(server) + ":" + escapeKey(m.Key) + ":"
		d, err := digest(m.Value)
		if err != nil {
			return responseErr("mcpServerStatus/list tool %s of %s: %v", strconv.Quote(m.Key), strconv.Quote(server), err)
		}
		r.tools[p+"sha256"] = snapshot.String(d)
		for _, f := range toolFacets {
			v, ok := m.Value.Get(f.field)
			if m.Value.Kind != jsontree.Object || !ok || v.Kind == jsontree.Null {
				r.tools[p+f.key] = snapshot.Null()
				continue
			}
			d, err := digest(v)
			if err != nil {
				return responseErr("mcpServerStatus/list tool %s of %s: %v", strconv.Quote(m.Key), strconv.Quote(server), err)
			}
			r.tools[p+f.key] = snapshot.String(d)
		}
		r.count++
	}
	return nil
}

// escapeKey percent-encodes '%' and ':' so that server and tool names
// cannot make two codex.mcp_tools keys collide.
func escapeKey(s string) string {
	if !strings.ContainsAny(s, "%:") {
		return s
	}
	return strings.NewReplacer("%", "%25", ":", "%3A").Replace(s)
}

// digest is "sha256:" over the RFC 8785 form of v. RFC 8785 numbers are
// IEEE 754 doubles, so integers beyond ±(2^53-1), which JSON Schemas use
// for int64 bounds, are canonicalized as doubles instead of refused.
func digest(v jsontree.Value) (string, error) {
	return canonjson.Digest(asDoubles(v))
}

func asDoubles(v jsontree.Value) jsontree.Value {
	switch v.Kind {
	case jsontree.Number:
		if n, err := v.Int64(); v.IsInteger() && (err != nil || n > canonjson.MaxSafeInteger || n < -canonjson.MaxSafeInteger) {
			v.Text += ".0"
		}
	case jsontree.Array:
		items := make([]jsontree.Value, len(v.Items))
		for i, it := range v.Items {
			items[i] = asDoubles(it)
		}
		v.Items = items
	case jsontree.Object:
		members := make([]jsontree.Member, len(v.Members))
		for i, m := range v.Members {
			members[i] = jsontree.Member{Key: m.Key, Value: asDoubles(m.Value)}
		}
		v.Members = members
	}
	return v
}

// records returns codex.mcp and, unless seedOnly, codex.mcp_tools.
func (r *mcpRecords) records(seedOnly bool) []snapshot.Record {
	r.mcp["server_count"] = snapshot.Int(int64(len(r.seen)))
	out := []snapshot.Record{{Plane: snapshot.Live, Kind: "codex.mcp", Source: sourceMCP, Data: r.mcp}}
	if !seedOnly {
		r.tools["tool_count"] = snapshot.Int(int64(r.count))
		out = append(out, snapshot.Record{Plane: snapshot.Live, Kind: "codex.mcp_tools", Source: sourceMCP, Data: r.tools})
	}
	return out
}
