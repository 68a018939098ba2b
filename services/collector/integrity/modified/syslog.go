package modified

import (
	"fmt"
	"log/syslog"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// logSyslog sends the event to the local syslog at warning severity, best
// effort: a host without a syslog socket still has the audit chain.
func logSyslog(ev events.RunnableModified) {
	w, err := syslog.New(syslog.LOG_WARNING|syslog.LOG_AUTH, "runtimetruth")
	if err != nil {
		return
	}
	defer func() { _ = w.Close() }() // best effort, see above
	paths := make([]string, len(ev.ChangedFiles))
	for i, f := range ev.ChangedFiles {
		paths[i] = f.Path
	}
	_ = w.Warning(fmt.Sprintf("runnable.modified outcome=detected host=%s environment=%s runnable=%s package=%s version=%s source=%q change_digest=%s files=%s",
		ev.Host, ev.Environment, ev.Runnable, ev.Package, ev.Version, ev.Source, ev.ChangeDigest, strings.Join(paths, ",")))
}
