// Command mcpserver is a minimal stdio MCP server for the codex source's
// tests. tools/list serves the tools in the JSON file named by -tools or
// $MCPSERVER_TOOLS (a JSON array of MCP Tool objects), read on every call
// so a test can change one tool between probes. Other arguments and the
// environment are ignored: tests plant marker strings there.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

func main() {
	tools := os.Getenv("MCPSERVER_TOOLS")
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "-tools="); ok {
			tools = v
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var m message
		if err := json.Unmarshal(in.Bytes(), &m); err != nil || len(m.ID) == 0 {
			continue // notifications (notifications/initialized) need no answer
		}
		result, rpcErr := handle(m, tools)
		resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		if rpcErr != "" {
			resp["error"] = map[string]any{"code": -32601, "message": rpcErr}
		} else {
			resp["result"] = result
		}
		if err := out.Encode(resp); err != nil {
			os.Exit(1)
		}
	}
}

func handle(m message, toolsFile string) (any, string) {
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-06-18"
		}
		return map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
			"serverInfo":      map[string]any{"name": "runtimetruth-test-mcp", "version": "0.0.1"},
		}, ""
	case "ping":
		return map[string]any{}, ""
	case "tools/list":
		b, err := os.ReadFile(toolsFile)
		if err != nil {
			return nil, fmt.Sprintf("read tools: %v", err)
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(b, &tools); err != nil {
			return nil, fmt.Sprintf("parse tools: %v", err)
		}
		return map[string]any{"tools": tools}, ""
	case "resources/list":
		return map[string]any{"resources": []any{}}, ""
	case "resources/templates/list":
		return map[string]any{"resourceTemplates": []any{}}, ""
	case "prompts/list":
		return map[string]any{"prompts": []any{}}, ""
	}
	return nil, "method not found: " + m.Method
}
