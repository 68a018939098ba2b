package node

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// lockEntry is what a lockfile says about one installed package.
type lockEntry struct {
	Version  string `json:"version"`
	Resolved string `json:"resolved"`
	Link     bool   `json:"link"`
}

// lockInfo maps install paths ("node_modules/a", "node_modules/a/node_modules/b")
// to lock entries, from package-lock.json (v2/v3 "packages", v1 top-level
// "dependencies") and npm's hidden node_modules/.package-lock.json, the
// project's lockfile taking precedence.
type lockInfo map[string]lockEntry

// readLocks reads the lockInfo of the project: node_modules/.package-lock.json,
// then package-lock.json, then npm-shrinkwrap.json, each later one taking
// precedence. Each is read beneath its folder (the project, or its node_modules),
// capped at maxLockfile (readBeneath). One that is not there is left out;
// one that cannot be read (a FIFO, a device, a symbolic link, too large,
// a link on the way leading out) is left out too, and errs names it and
// says why. One that does not parse is left out.
func readLocks(project string) (info lockInfo, errs []string) {
	info = lockInfo{}
	for _, lf := range []struct{ dir, name string }{
		{filepath.Join(project, "node_modules"), ".package-lock.json"},
		{project, "package-lock.json"},
		{project, "npm-shrinkwrap.json"},
	} {
		data, err := readBeneath(lf.dir, lf.name, maxLockfile)
		if sysfile.IsNotExist(err) {
			continue
		}
		if err != nil {
			errs = append(errs, "read lockfile "+err.Error())
			continue
		}
		var doc struct {
			Packages     map[string]lockEntry `json:"packages"`
			Dependencies map[string]lockEntry `json:"dependencies"`
		}
		if json.Unmarshal(data, &doc) != nil {
			continue
		}
		for k, v := range doc.Packages {
			if k != "" {
				info[k] = v
			}
		}
		if doc.Packages == nil {
			for k, v := range doc.Dependencies {
				info["node_modules/"+k] = v
			}
		}
	}
	return info, errs
}

// classifyResolved maps a lockfile "resolved" (or package.json
// "_resolved") value to a source: file: tarballs and folders, git URLs
// and hosted-git shortcuts, and remote tarballs outside a registry's
// "/-/" layout are local builds; registry tarballs, and no information at
// all, are the index.
func classifyResolved(resolved string) integrity.Source {
	r := strings.ToLower(resolved)
	switch {
	case r == "":
		return integrity.SourceIndex
	case strings.HasPrefix(r, "file:"), strings.HasPrefix(r, "/"), strings.HasPrefix(r, "."):
		return integrity.SourceLocalBuild
	case strings.HasPrefix(r, "git"), strings.HasPrefix(r, "github:"), strings.HasPrefix(r, "gitlab:"),
		strings.HasPrefix(r, "bitbucket:"), strings.HasPrefix(r, "gist:"), strings.Contains(r, ".git#"),
		strings.HasPrefix(r, "ssh://"):
		return integrity.SourceLocalBuild
	case strings.HasPrefix(r, "http://"), strings.HasPrefix(r, "https://"):
		if strings.Contains(r, "/-/") {
			return integrity.SourceIndex
		}
		return integrity.SourceLocalBuild
	}
	return integrity.SourceIndex
}
