package node

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/internal/glob"
)

// The rule sets npm-packlist (npm 7 to 11) applies, in order, at each
// directory level.
const (
	setDefaults = "defaults"
	setPackage  = "package.json"
	setNpm      = ".npmignore"
	setGit      = ".gitignore"
	setStrict   = "strict"
)

// packDefaults are npm-packlist's default exclusions, applied at every
// directory level.
var packDefaults = []string{
	".npmignore", ".gitignore",
	"**/.git", "**/.svn", "**/.hg", "**/CVS",
	"**/.git/**", "**/.svn/**", "**/.hg/**", "**/CVS/**",
	"/.lock-wscript", "/.wafpickle-*", "/build/config.gypi", "npm-debug.log",
	"**/.npmrc", ".*.swp", ".DS_Store", "**/.DS_Store/**", "._*", "**/._*/**",
	"*.orig", "/archived-packages/**",
}

// packStrict are the package root's strict rules: always-included and
// always-excluded files, applied after every other rule set.
var packStrict = []string{
	"/.git",
	"!/package.json",
	"!/readme", "!/readme.*[^~$]",
	"!/copying", "!/copying.*[^~$]",
	"!/license", "!/license.*[^~$]",
	"!/licence", "!/licence.*[^~$]",
	"/.git", "/node_modules", ".npmrc",
	"/package-lock.json", "/yarn.lock", "/pnpm-lock.yaml", "/bun.lockb",
}

type packRule struct {
	pats     []*glob.Pattern
	negate   bool
	relative bool
}

func (r *packRule) match(name string, partial bool) bool {
	for _, p := range r.pats {
		if partial {
			if p.MatchPartial(name) {
				return true
			}
		} else if p.Match(name) {
			return true
		}
	}
	return false
}

func compileRules(lines []string) []packRule {
	var rules []packRule
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := packRule{}
		for strings.HasPrefix(line, "!") {
			r.negate = !r.negate
			line = line[1:]
		}
		for strings.Contains(line, "//") {
			line = strings.ReplaceAll(line, "//", "/") // minimatch collapses repeated slashes
		}
		for _, exp := range glob.Expand(line) {
			p, err := glob.Compile(exp, glob.Options{NoCase: true, MatchBase: true})
			if err != nil {
				continue // minimatch treats a bad class literally; such rules are rare
			}
			r.pats = append(r.pats, p)
			if n := p.Segments(); n <= 1 || (n == 2 && p.LastSegmentEmpty()) {
				r.relative = true
			}
		}
		if len(r.pats) > 0 {
			rules = append(rules, r)
		}
	}
	return rules
}

// packLevel is one directory of the walk (ignore-walk's Walker).
type packLevel struct {
	parent *packLevel
	base   string
	exact  bool
	order  []string
	sets   map[string][]packRule
}

func (l *packLevel) filter(entry string, partial bool, entryBase string) bool {
	included := true
	if l.parent != nil {
		pb := entryBase
		if pb == "" {
			pb = entry
		}
		included = l.parent.filter(l.base+"/"+entry, partial, pb)
		if !included && !l.exact {
			return false
		}
	}
	for _, name := range l.order {
		for i := range l.sets[name] {
			r := &l.sets[name][i]
			if r.negate == included {
				continue
			}
			m := r.match("/"+entry, false) || r.match(entry, false)
			if !m && partial {
				m = r.match("/"+entry+"/", false) || r.match(entry+"/", false) ||
					r.negate && (r.match("/"+entry, true) || r.match(entry, true))
				if !m && r.relative && entryBase != "" {
					m = r.match("/"+entryBase+"/", false) || r.match(entryBase+"/", false) ||
						r.negate && (r.match("/"+entryBase, true) || r.match(entryBase, true))
				}
			}
			if m {
				included = r.negate
			}
		}
	}
	return included
}

// packageJSON is the part of package.json the pack list and the check use.
type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Files                []string          `json:"files"`
	Main                 string            `json:"main"`
	Browser              json.RawMessage   `json:"browser"`
	Bin                  json.RawMessage   `json:"bin"`
	Dependencies         map[string]string `json:"dependencies"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	DevDependencies      map[string]string `json:"devDependencies"`
	Resolved             string            `json:"_resolved"`
}

// readPackageJSON reads dir/package.json, beneath dir and capped at
// maxPackageJSON (readBeneath); errors name the file.
func readPackageJSON(dir string) (*packageJSON, error) {
	data, err := readBeneath(dir, "package.json", maxPackageJSON)
	if err != nil {
		return nil, err
	}
	var p packageJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "package.json"), err)
	}
	return &p, nil
}

// bins returns the package's bin file paths.
func (p *packageJSON) bins() []string {
	if len(p.Bin) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(p.Bin, &one) == nil {
		return []string{one}
	}
	var many map[string]string
	if json.Unmarshal(p.Bin, &many) != nil {
		return nil
	}
	var out []string
	for _, v := range many {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// PackList returns the files `npm pack` would publish from the package in
// dir, as sorted slash-separated paths relative to dir. It implements the
// rules of npm-packlist as shipped with npm 7 to 11:
//
//   - the default exclusions at every level (.git, .svn, .hg, CVS, .npmrc,
//     .DS_Store, ._*, .*.swp, *.orig, npm-debug.log, .npmignore and
//     .gitignore themselves, /.lock-wscript, /.wafpickle-*,
//     /build/config.gypi, /archived-packages/);
//   - package.json "files": everything else is excluded, each entry (a
//     file, a directory with its contents, or a glob; "!" negates)
//     included; listed regular files are required even where a nested
//     .npmignore would exclude them;
//   - without "files", .npmignore in each directory, or .gitignore where
//     a directory has no .npmignore; nested .npmignore/.gitignore files
//     apply below their directory even with "files";
//   - always included: package.json, README*, LICENSE*/LICENCE*,
//     COPYING* at the root (case-insensitive, not ending in ~ or $), and
//     the "main", "browser" (string form) and "bin" files;
//   - always excluded: /node_modules, /.git, .npmrc, /package-lock.json,
//     /yarn.lock, /pnpm-lock.yaml, /bun.lockb;
//   - symbolic links, other non-regular files, names containing "*" and
//     empty directories are never published (WriteManifest records the
//     links these rules would otherwise publish in the manifest's links).
//
// Ignore rules are gitignore-style globs matched case-insensitively with
// dot-files included; a rule without a slash matches a name at any depth.
// Not implemented: bundleDependencies (bundled node_modules are not
// listed) and workspaces.
func PackList(dir string) ([]string, error) {
	files, _, err := packEntries(dir, false)
	return files, err
}

// packEntries returns PackList(dir) and, with withLinks, the symbolic
// links the same rules would publish were they regular files (the
// manifest's "links"; npm itself publishes none), both sorted.
func packEntries(dir string, withLinks bool) (files, links []string, err error) {
	pkg, err := readPackageJSON(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("pack list %s: %w", dir, err)
	}
	root := &packLevel{order: []string{setDefaults, setPackage, setNpm, setGit, setStrict}, sets: map[string][]packRule{}}
	root.sets[setDefaults] = compileRules(packDefaults)
	strict := append([]string(nil), packStrict...)
	var required, namedLinks []string
	if pkg.Files != nil {
		include := []string{"*"}
		for _, f := range pkg.Files {
			if strings.HasPrefix(f, "./") {
				f = f[1:] // "./lib" → "/lib", anchored at the root
			}
			if strings.HasSuffix(f, "/*") {
				f += "*"
			}
			inverse := "!" + f
			bare := strings.TrimLeft(f, "!")
			fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(bare)))
			switch {
			case err != nil:
				include = append(include, inverse)
			case fi.Mode()&fs.ModeSymlink != 0:
				// npm ignores an entry naming a link (it publishes no
				// links); the manifest's links list it as a required file.
				if l := path.Clean(strings.TrimPrefix(f, "/")); !strings.HasPrefix(f, "!") && l != "." && l != ".." && !strings.HasPrefix(l, "../") {
					namedLinks = append(namedLinks, l)
				}
			case fi.Mode().IsRegular():
				strict = append([]string{inverse}, strict...)
				required = append(required, strings.TrimPrefix(f, "/"))
			case fi.IsDir():
				include = append(include, inverse, inverse+"/**")
			}
		}
		root.sets[setPackage] = compileRules(include)
	}
	var browser string
	_ = json.Unmarshal(pkg.Browser, &browser)
	for _, f := range append([]string{browser, pkg.Main}, pkg.bins()...) {
		if f = strings.TrimPrefix(f, "./"); f != "" {
			strict = append(strict, "!/"+f)
		}
	}
	root.sets[setStrict] = compileRules(strict)
	w := packWalk{dir: dir, withLinks: withLinks}
	if err := w.walk("", root, required); err != nil {
		return nil, nil, fmt.Errorf("pack list %s: %w", dir, err)
	}
	if withLinks {
		for _, l := range namedLinks {
			if !slices.Contains(w.links, l) {
				w.links = append(w.links, l)
			}
		}
	}
	sort.Strings(w.files)
	sort.Strings(w.links)
	return w.files, w.links, nil
}

// packWalk collects what walk finds: the regular files npm pack publishes
// and, with withLinks, the symbolic links that pass the same rules.
type packWalk struct {
	dir          string
	withLinks    bool
	files, links []string
}

func (w *packWalk) walk(rel string, l *packLevel, required []string) error {
	dir := w.dir
	abs := filepath.Join(dir, filepath.FromSlash(rel))
	ents, err := os.ReadDir(abs)
	if err != nil {
		return err
	}
	names := make(map[string]bool, len(ents))
	for _, e := range ents {
		names[e.Name()] = true
	}
	if l.parent != nil {
		l.sets[setDefaults] = compileRules(packDefaults)
		strict := []string{"/.git"}
		for _, r := range required {
			strict = append(strict, "!"+r)
		}
		l.sets[setStrict] = compileRules(strict)
	}
	for _, name := range []string{setNpm, setGit} {
		if names[name] {
			data, err := readBeneath(dir, path.Join(rel, name), maxIgnoreFile)
			if err != nil {
				return err
			}
			l.sets[name] = compileRules(strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n"))
		}
	}
	switch {
	case l.sets[setPackage] != nil:
		delete(l.sets, setNpm)
		delete(l.sets, setGit)
	case l.sets[setNpm] != nil:
		delete(l.sets, setGit)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.Contains(name, "*") {
			continue
		}
		passFile := l.filter(name, false, "")
		passDir := l.filter(name, true, "")
		if !passFile && !passDir {
			continue
		}
		child := name
		if rel != "" {
			child = rel + "/" + name
		}
		switch t := e.Type(); {
		case t.IsDir():
			if !passDir {
				continue
			}
			var sub []string
			for _, r := range required {
				if after, ok := strings.CutPrefix(r, name+"/"); ok {
					sub = append(sub, after)
				}
			}
			cl := &packLevel{
				parent: l, base: name,
				exact: passFile || l.filter(name+"/", false, ""),
				order: []string{setDefaults, setNpm, setGit, setStrict},
				sets:  map[string][]packRule{},
			}
			if err := w.walk(child, cl, sub); err != nil {
				return err
			}
		case t.IsRegular():
			if passFile {
				w.files = append(w.files, child)
			}
		case t&fs.ModeSymlink != 0:
			if passFile && w.withLinks {
				w.links = append(w.links, child)
			}
		}
	}
	return nil
}
