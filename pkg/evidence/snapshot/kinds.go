package snapshot

// Kind describes one evidence kind runtimetruth knows how to compare.
type Kind struct {
	// Name is the kind as it appears in snapshots and selectors.
	Name string
	// Header is the section title of the human diff.
	Header string
	// Extension marks kinds RuntimeTruth (schema v1's origin) does not emit.
	Extension bool
}

// kinds lists the supported kinds in comparison order. RuntimeTruth's eight
// kinds keep their relative order; extension kinds sit beside the kind they
// extend.
var kinds = []Kind{
	{Name: "systemd.unit", Header: "SERVICE"},
	{Name: "linux.process", Header: "PROCESS"},
	{Name: "linux.process_identity", Header: "PROCESS IDENTITY", Extension: true},
	{Name: "git.repository", Header: "CODE"},
	{Name: "git.remotes", Header: "CODE REMOTES", Extension: true},
	{Name: "codex.runtime", Header: "CODEX RUNTIME"},
	{Name: "codex.config", Header: "CODEX CONFIG"},
	{Name: "codex.thread", Header: "CODEX THREAD"},
	{Name: "codex.instructions", Header: "CODEX INSTRUCTIONS"},
	{Name: "codex.mcp", Header: "CODEX MCP"},
	{Name: "codex.mcp_tools", Header: "CODEX MCP TOOLS", Extension: true},
	{Name: "python.distributions", Header: "PYTHON DISTRIBUTIONS", Extension: true},
	{Name: "node.packages", Header: "NODE PACKAGES", Extension: true},
}

// Kinds returns the supported evidence kinds in comparison order.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// LookupKind returns the supported kind named name.
func LookupKind(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// KindIndex returns name's position in comparison order, or -1.
func KindIndex(name string) int {
	for i, k := range kinds {
		if k.Name == name {
			return i
		}
	}
	return -1
}
