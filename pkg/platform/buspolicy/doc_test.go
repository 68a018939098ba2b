package buspolicy_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
)

var update = flag.Bool("update", false, "rewrite the generated sections of docs/security.md")

const securityDoc = "../../../docs/security.md"

// generated is each marked section of docs/security.md and its content.
func generated(t *testing.T) map[string]string {
	t.Helper()
	conf, err := buspolicy.ServerConfig(map[string]string{buspolicy.Collector: "collector-web"},
		buspolicy.Host{Name: "web-01.example.com", NKey: "UCMKRHNHUJE6MSEYVCPGIQFWOJ2ENYF3HKJBMVD4NEDJZU3LXTRH3B2T"},
		buspolicy.Host{Name: "db-02", User: "collector-db-02"})
	require.NoError(t, err)
	return map[string]string{
		"permissions":      buspolicy.Markdown(),
		"collector-config": "```\n" + conf + "```\n",
	}
}

// TestSecurityDocIsGenerated checks that docs/security.md shows the
// policy as the Go value states it; go test -update rewrites it.
func TestSecurityDocIsGenerated(t *testing.T) {
	raw, err := os.ReadFile(securityDoc)
	require.NoError(t, err)
	doc := string(raw)
	for name, want := range generated(t) {
		begin, end := "<!-- BEGIN GENERATED "+name+" -->\n", "<!-- END GENERATED "+name+" -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		require.True(t, i >= 0 && j > i, "docs/security.md lacks the %s markers", name)
		got := doc[i+len(begin) : j]
		if *update {
			doc = doc[:i+len(begin)] + want + doc[j:]
			continue
		}
		require.Equal(t, want, got, "docs/security.md section %s is stale: run go test ./pkg/platform/buspolicy -update", name)
	}
	if *update {
		require.NoError(t, os.WriteFile(securityDoc, []byte(doc), 0o644))
	}
}
