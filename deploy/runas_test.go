package deploy_test

import (
	"strings"
	"testing"
)

// The collector pod runs as runAsUser with every capability dropped, so
// the Codex probe runs as that user: a codex target's options.run_as is
// accepted only when it names that very uid, and reaches the collector's
// config; any other is refused when the chart renders, naming the value
// to set instead.
func TestChartCodexRunAs(t *testing.T) {
	codex := []string{"collector.targets[0].name=agent", "collector.targets[0].kind=codex", "collector.targets[0].cwd=/srv/agent"}
	objs := render(t, nil, append(codex, "collector.targets[0].options.run_as=65532", "collector.targets[0].options.codex_home=/srv/agent-home")...)
	cm := find(t, objs, "ConfigMap", "rt-runtimetruth-collector")
	var text string
	for _, v := range mapOf(cm["data"]) {
		text += str(v)
	}
	for _, want := range []string{"run_as: 65532", "codex_home: /srv/agent-home"} {
		if !strings.Contains(text, want) {
			t.Errorf("the collector config lacks %q:\n%s", want, text)
		}
	}
	render(t, nil, append(codex, "collector.targets[0].options.run_as=1000", "collector.podSecurityContext.runAsUser=1000")...)

	for name, sets := range map[string][]string{
		"another uid":   {"collector.targets[0].options.run_as=1000"},
		"a name":        {"collector.targets[0].options.run_as=agent"},
		"container uid": {"collector.targets[0].options.run_as=65532", "collector.securityContext.runAsUser=1000"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderErr(t, nil, append(codex, sets...)...)
			if err == nil || !strings.Contains(err.Error(), "cannot switch users; set collector.podSecurityContext.runAsUser") {
				t.Fatalf("helm template: %v", err)
			}
		})
	}
	if _, err := renderErr(t, nil, append(codex, "collector.targets[0].options.codex_home=rel")...); err == nil || !strings.Contains(err.Error(), "codex_home") {
		t.Fatalf("a relative codex_home: %v", err)
	}
}
