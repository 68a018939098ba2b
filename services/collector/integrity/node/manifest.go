package node

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Manifest file names, in the order they are looked for.
const (
	// ManifestFile is the manifest WriteManifest writes.
	ManifestFile = "runtimetruth-files.json"
	// RunspecManifestFile is runspec's manifest, read as well.
	RunspecManifestFile = "runspec-files.json"
	// ManifestFormat is the "format" value of ManifestFile.
	ManifestFormat = "runtimetruth-files/1"
)

// isManifestFile reports whether rel (relative to a package directory) is
// one of the manifest files, which no manifest lists.
func isManifestFile(rel string) bool { return rel == ManifestFile || rel == RunspecManifestFile }

// Manifest is a package's list of known-good file hashes.
//
// ManifestFile (runtimetruth-files.json) is written by WriteManifest:
//
//	{
//	  "format": "runtimetruth-files/1",
//	  "name": "mytools",
//	  "version": "1.0.0",
//	  "files": {
//	    "index.js": "sha256:<64 hex digits>",
//	    "lib/util.js": "sha256:<64 hex digits>",
//	    "package.json": "sha256:<64 hex digits>"
//	  },
//	  "links": {
//	    "link.js": "index.js"
//	  }
//	}
//
// files maps every path npm pack would publish (slash-separated, relative
// to the package folder; the manifest itself excluded) to its digest.
//
// links (optional, added to format runtimetruth-files/1 without a format
// change: older readers ignore it) maps each symbolic link the same pack
// rules select (npm pack itself never publishes a link) to its target as
// os.Readlink returns it. WriteManifest always writes it, empty when the
// folder has no links. Its presence decides how Verify treats symbolic
// links in the project folder: with the section, a listed link is checked
// by target and an unlisted one is added; without it (a manifest from an
// older version, or a runspec-files.json without "links"), links there
// are neither checked nor reported. In a dependency under node_modules
// listed links are never missing (npm does not install links from a
// tarball) and any other link is added, with or without the section. A
// path may not be in both files and links.
//
// runspec-files.json, written by runspec's `runspec manifest`, has no
// published format, so ReadManifest accepts the plausible shapes: an
// object with "files" as a map of path to hash or as a list of objects
// with "path" and a hash ("sha256", "sha512", "hash", "digest" or
// "integrity") and optionally "size" (the file's size in bytes), or a
// bare map of path to hash; in the map form a file's value may be such an
// object too. A hash may be
// "sha256:<hex>", "sha256=<urlsafe base64>", SRI "sha256-<base64>" (or
// sha384/sha512), or 64 bare hex digits (SHA-256).
type Manifest struct {
	// File is the manifest's file name.
	File string
	// Name and Version are the package's, when the manifest records them.
	Name, Version string
	// Files maps paths to known-good digests.
	Files map[string]integrity.Digest
	// Sizes maps paths of Files to their size in bytes, for the files
	// whose entry records one (runspec-files.json "size"); nil when none
	// does.
	Sizes map[string]int64
	// Links maps symbolic links to their targets; nil when the manifest
	// has no links section (which is not the same as an empty one).
	Links map[string]string
}

// ReadManifest reads the manifest of the package in dir: ManifestFile,
// else RunspecManifestFile. It returns nil and no error when there is
// neither. Paths that are absolute or leave the package are errors. The
// file is read beneath dir, up to maxManifest bytes, only when it is a
// regular file and not a symbolic link: anything else is an error naming
// it.
func ReadManifest(dir string) (*Manifest, error) {
	for _, name := range []string{ManifestFile, RunspecManifestFile} {
		data, err := readBeneath(dir, name, maxManifest)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		m, err := ParseManifest(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m.File = name
		return m, nil
	}
	return nil, nil
}

// ParseManifest parses either manifest format (see Manifest).
func ParseManifest(data []byte) (*Manifest, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	m := &Manifest{Files: map[string]integrity.Digest{}}
	_ = json.Unmarshal(top["name"], &m.Name)
	_ = json.Unmarshal(top["version"], &m.Version)
	if pkg, ok := top["package"]; ok {
		var p struct{ Name, Version string }
		if json.Unmarshal(pkg, &p) == nil {
			m.Name, m.Version = p.Name, p.Version
		}
	}
	raw, ok := top["files"]
	if !ok {
		// A bare map of path to hash.
		for k, v := range top {
			var h string
			if json.Unmarshal(v, &h) != nil {
				return nil, fmt.Errorf("%w: no files", ErrBadManifest)
			}
			if err := m.add(k, h); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	if err := m.parseFiles(raw); err != nil {
		return nil, err
	}
	if raw, ok := top["links"]; ok && string(raw) != "null" {
		if err := m.parseLinks(raw); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseFiles parses "files", a map of path to hash or a list of objects.
func (m *Manifest) parseFiles(raw json.RawMessage) error {
	var asMap map[string]json.RawMessage
	if json.Unmarshal(raw, &asMap) == nil {
		for p, v := range asMap {
			if err := m.addEntry(p, v); err != nil {
				return err
			}
		}
		return nil
	}
	var asList []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &asList); err != nil {
		return fmt.Errorf("%w: files is neither a map nor a list", ErrBadManifest)
	}
	for i, item := range asList {
		var p string
		if json.Unmarshal(item["path"], &p) != nil || p == "" {
			return fmt.Errorf("%w: files[%d] has no path", ErrBadManifest, i)
		}
		delete(item, "path")
		obj, _ := json.Marshal(item)
		if err := m.addEntry(p, obj); err != nil {
			return err
		}
	}
	return nil
}

// addEntry records file p of "files" from its entry v, a hash string or
// an object with a hash and perhaps a size.
func (m *Manifest) addEntry(p string, v json.RawMessage) error {
	h, err := hashOf(v)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadManifest, p, err)
	}
	if err := m.add(p, h); err != nil {
		return err
	}
	return m.addSize(p, v)
}

// addSize records the "size" of file p's entry v, when v is an object
// that has one; it must be a whole number of bytes, not negative.
func (m *Manifest) addSize(p string, v json.RawMessage) error {
	var obj struct {
		Size json.RawMessage `json:"size"`
	}
	if json.Unmarshal(v, &obj) != nil || obj.Size == nil || string(obj.Size) == "null" {
		return nil
	}
	var n int64
	if err := json.Unmarshal(obj.Size, &n); err != nil || n < 0 {
		return fmt.Errorf("%w: %s: size %s is not a number of bytes", ErrBadManifest, p, obj.Size)
	}
	if m.Sizes == nil {
		m.Sizes = map[string]int64{}
	}
	m.Sizes[p] = n
	return nil
}

// parseLinks parses "links", a map of path to link target.
func (m *Manifest) parseLinks(raw json.RawMessage) error {
	var links map[string]string
	if err := json.Unmarshal(raw, &links); err != nil {
		return fmt.Errorf("%w: links is not a map of path to target", ErrBadManifest)
	}
	m.Links = make(map[string]string, len(links))
	for p, target := range links {
		if err := checkPath(p); err != nil {
			return err
		}
		if target == "" || strings.ContainsRune(target, 0) {
			return fmt.Errorf("%w: link %q has no target", ErrBadManifest, p)
		}
		if _, ok := m.Files[p]; ok {
			return fmt.Errorf("%w: %q is both a file and a link", ErrBadManifest, p)
		}
		m.Links[p] = target
	}
	return nil
}

// checkPath rejects a manifest path that is empty, absolute, not clean or
// leaves the package.
func checkPath(p string) error {
	clean := path.Clean(p)
	if p == "" || strings.HasPrefix(p, "/") || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(p, 0) || clean != p {
		return fmt.Errorf("%w: path %q leaves the package or is not clean", ErrBadManifest, p)
	}
	return nil
}

// hashOf extracts a hash string from a string or an object with one of
// the known hash keys.
func hashOf(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var obj map[string]any
	if json.Unmarshal(v, &obj) != nil {
		return "", errors.New("hash is neither a string nor an object")
	}
	for _, k := range []string{"sha256", "sha384", "sha512"} {
		if h, ok := obj[k].(string); ok {
			if strings.ContainsAny(h, ":=-") {
				return h, nil
			}
			return k + ":" + h, nil
		}
	}
	for _, k := range []string{"hash", "digest", "integrity"} {
		if h, ok := obj[k].(string); ok {
			return h, nil
		}
	}
	return "", errors.New("no hash")
}

func (m *Manifest) add(p, h string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	d, err := ParseHash(h)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadManifest, p, err)
	}
	m.Files[p] = d
	return nil
}

// ParseHash parses a manifest hash: "sha256:<hex>", "sha256=<urlsafe
// base64>", SRI "sha256-<base64>" (any supported algorithm), or 64 bare
// hex digits.
func ParseHash(h string) (integrity.Digest, error) {
	if i := strings.IndexAny(h, ":=-"); i > 0 {
		name, value := h[:i], h[i+1:]
		switch h[i] {
		case ':':
			return integrity.ParseHex(h)
		case '=':
			return integrity.ParseRecordHash(h)
		case '-':
			a, err := integrity.ParseAlgorithm(name)
			if err != nil {
				return integrity.Digest{}, err
			}
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				return integrity.Digest{}, fmt.Errorf("%w: %s", integrity.ErrBadDigest, h)
			}
			var d integrity.Digest
			return d, d.SetBytes(a, b)
		}
	}
	if len(h) == 64 {
		if _, err := hex.DecodeString(h); err == nil {
			return integrity.ParseHex(h)
		}
	}
	return integrity.Digest{}, fmt.Errorf("%w: %q", integrity.ErrBadDigest, h)
}

// WriteManifest hashes every file PackList(dir) returns (except the
// manifests themselves), records the symbolic links the same rules select
// by target (links, always present), and writes ManifestFile into dir,
// atomically. It
// returns the manifest written. Run it as the last step of prepack, after
// the build, and add runtimetruth-files.json to package.json "files" when
// the package has such a list.
func WriteManifest(ctx context.Context, dir string) (*Manifest, error) {
	pkg, err := readPackageJSON(dir)
	if err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	list, linkList, err := packEntries(dir, true)
	if err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	links := make(map[string]string, len(linkList))
	for _, p := range linkList {
		if isManifestFile(p) {
			continue
		}
		target, err := readlink(dir, p)
		if err != nil {
			return nil, fmt.Errorf("write manifest: %w", err)
		}
		links[p] = target
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	files := make([]integrity.File, 0, len(list))
	for _, p := range list {
		if !isManifestFile(p) {
			files = append(files, integrity.File{Dir: abs, Rel: p})
		}
	}
	h := integrity.Hasher{Root: abs}
	if err := h.Run(ctx, files, nil); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	m := &Manifest{File: ManifestFile, Name: pkg.Name, Version: pkg.Version, Files: map[string]integrity.Digest{}, Links: links}
	doc := struct {
		Format  string            `json:"format"`
		Name    string            `json:"name"`
		Version string            `json:"version"`
		Files   map[string]string `json:"files"`
		Links   map[string]string `json:"links"`
	}{ManifestFormat, pkg.Name, pkg.Version, map[string]string{}, links}
	for i := range files {
		f := &files[i]
		if f.State != integrity.FileHashed {
			if f.Err != nil {
				return nil, fmt.Errorf("write manifest: %s: %w", f.Rel, f.Err)
			}
			return nil, fmt.Errorf("write manifest: %s: %s", f.Rel, f.State)
		}
		m.Files[f.Rel] = f.Got()
		doc.Files[f.Rel] = f.Got().String()
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	if err := regfile.WriteAtomic(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	return m, nil
}

// Paths returns the manifest's paths, sorted.
func (m *Manifest) Paths() []string {
	out := make([]string, 0, len(m.Files))
	for p := range m.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
