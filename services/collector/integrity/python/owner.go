package python

import (
	"path/filepath"
	"runtime"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// Scripts returns the names of the console and GUI scripts d declares in
// its entry_points.txt, in file order; nil when it declares none or the
// file cannot be read (it is read beneath d's site-packages, as a regular
// file of at most 1 MiB: see sysfile.ReadFileBeneath).
func (d *Distribution) Scripts() []string {
	data, err := sysfile.ReadFileBeneath(d.Site, filepath.Base(d.InfoDir)+"/entry_points.txt", maxEntryPointsSize)
	if err != nil {
		return nil
	}
	var out []string
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			in = line == "[console_scripts]" || line == "[gui_scripts]"
		case in && line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, ";"):
			if name, _, ok := strings.Cut(line, "="); ok && strings.TrimSpace(name) != "" {
				out = append(out, strings.TrimSpace(name))
			}
		}
	}
	return out
}

// scriptPath returns where pip installs the script name in the
// environment.
func (e *Env) scriptPath(name string) string {
	if runtime.GOOS == "windows" {
		return filepath.Join(e.Prefix, "Scripts", name+".exe")
	}
	return filepath.Join(e.Prefix, "bin", name)
}

// ScriptOwner returns the distribution that provides the runnable name (a
// console or GUI script such as pip3): the one whose RECORD lists the
// environment's bin/NAME (Scripts\NAME.exe on Windows), else the one whose
// entry_points.txt declares a script NAME (a legacy .egg-info
// distribution has no RECORD). Distributions declaring the script are
// tried first, so the common case parses one RECORD rather than all of
// them. ok is false when no distribution provides it; a name that is not a
// plain file name never matches.
func (e *Env) ScriptOwner(dists []*Distribution, name string) (d *Distribution, ok bool, err error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return nil, false, nil
	}
	var declared []*Distribution
	for _, d := range dists {
		for _, s := range d.Scripts() {
			if s == name {
				declared = append(declared, d)
				break
			}
		}
	}
	script := e.scriptPath(name)
	if d, ok, err := e.Owner(declared, script); err != nil || ok {
		return d, ok, err
	}
	if d, ok, err := e.Owner(dists, script); err != nil || ok {
		return d, ok, err
	}
	if len(declared) > 0 {
		return declared[0], true, nil
	}
	return nil, false, nil
}
