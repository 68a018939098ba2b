//go:build linux

package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// installPackages packs each package (package.json written from its name,
// publishing index.js, lib/ and the manifest WriteManifest adds) with npm
// pack, installs them all into a new project root/deploy/app with a real
// npm install and returns the project folder.
func installPackages(t *testing.T, root string, pkgs map[string]map[string]string) string {
	t.Helper()
	src := filepath.Join(root, "pkgs")
	args := []string{"install", "--ignore-scripts"}
	for name, files := range pkgs {
		dir := filepath.Join(src, name)
		writeTree(t, dir, files)
		writeTree(t, dir, map[string]string{
			"package.json": `{"name":"` + name + `","version":"1.0.0","files":["index.js","lib/","runtimetruth-files.json"]}`,
		})
		_, err := node.WriteManifest(context.Background(), dir)
		require.NoError(t, err)
		npm(t, dir, "pack", "--ignore-scripts", "--pack-destination", src)
		args = append(args, filepath.Join(src, name+"-1.0.0.tgz"))
	}
	proj := filepath.Join(root, "deploy", "app")
	writeTree(t, proj, map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","private":true}`, "index.js": "require('good')\n",
	})
	npm(t, proj, args...)
	return proj
}

// digestForms returns the ways a digest of content could be written in a
// report: SHA-256 in hex, base64 and URL-safe base64.
func digestForms(content string) []string {
	sum := sha256.Sum256([]byte(content))
	return []string{hex.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:])}
}

// TestVerifyManifestPathEscape checks that the files a manifest lists are
// opened beneath their package folder: a package whose lib was replaced
// after install by a symbolic link out of it (to a folder outside the
// project, absolute or relative, or into another package), with the
// manifest listing lib/secret, is an error for that package, its other
// files still checked, and the file the link leads to is never read: its
// digest is nowhere in the report or the evidence. A link that stays in
// the package is followed. It runs with openat2 and with the
// component-wise walk, with and without the stat cache, the cache first
// holding what a check that followed the links would have left there.
func TestVerifyManifestPathEscape(t *testing.T) {
	root := t.TempDir()
	pkg := func(secret string) map[string]string {
		return map[string]string{"index.js": "module.exports = 1\n", "lib/ok.js": "ok\n", "lib/secret": secret}
	}
	proj := installPackages(t, root, map[string]map[string]string{
		"good": pkg("good's own file\n"), "evil": pkg("placeholder\n"), "evilrel": pkg("placeholder\n"),
		"sibling": pkg("placeholder\n"), "inlink": pkg("in the package\n"),
	})
	nm := filepath.Join(proj, "node_modules")
	secret := "made-up secret outside every package " + strconv.Itoa(os.Getpid()) + "\n"
	writeTree(t, filepath.Join(root, "outside"), map[string]string{"secret": secret, "ok.js": "ok\n"})
	relink := func(pkg, target string) {
		require.NoError(t, os.RemoveAll(filepath.Join(nm, pkg, "lib")))
		require.NoError(t, os.Symlink(target, filepath.Join(nm, pkg, "lib")))
	}
	relink("evil", filepath.Join(root, "outside")) // absolute, out of the project
	relink("evilrel", "../../../../outside")       // relative, out of the project
	relink("sibling", "../good/lib")               // into another package
	require.NoError(t, os.Rename(filepath.Join(nm, "inlink", "lib"), filepath.Join(nm, "inlink", "dist")))
	require.NoError(t, os.Symlink("dist", filepath.Join(nm, "inlink", "lib"))) // stays in the package

	store, err := integrity.OpenStore(filepath.Join(root, "state"))
	require.NoError(t, err)
	// What the check before this one left in the stat cache: the escaping
	// files hashed through their links (integrity.Check with the project
	// as scope and no root). A cache hit would take the secret's digest
	// from there without opening the file.
	var unconfined []integrity.File
	for _, name := range []string{"evil", "evilrel", "sibling"} {
		m, err := node.ReadManifest(filepath.Join(nm, name))
		require.NoError(t, err)
		for _, p := range m.Paths() {
			unconfined = append(unconfined, integrity.File{Dir: filepath.Join(nm, name), Rel: p, Want: m.Files[p]})
		}
	}
	_, err = integrity.Check(context.Background(), store, proj, unconfined, integrity.CheckOptions{})
	require.NoError(t, err)
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				defer sysfile.ForceWalk()()
			}
			for i, opts := range []node.Options{{}, {Store: store}, {Store: store}, {Store: store, NoCache: true}} {
				opts.All = true
				rep, err := node.Verify(context.Background(), proj, opts)
				require.NoError(t, err)
				res := byName(rep)
				require.Len(t, res, 6, "run %d", i)
				for _, name := range []string{"evil", "evilrel", "sibling"} {
					r := res[name]
					assert.Equal(t, integrity.StatusError, r.Status, "%s, run %d: %v", name, i, r.Changes)
					assert.Contains(t, r.Reason, `path escapes the package folder: "lib/secret"`, name)
					assert.NotContains(t, changes(r), "lib/secret", name)
					assert.Equal(t, integrity.ChangeAdded, changes(r)["lib"], "%s: the link itself is a change", name)
				}
				assert.Equal(t, integrity.StatusOK, res["good"].Status, "%v", res["good"].Changes)
				in := res["inlink"]
				assert.Equal(t, integrity.StatusModified, in.Status, "a link in the package is followed: %s", in.Reason)
				assert.Empty(t, in.Reason)
				assert.Equal(t, map[string]integrity.ChangeKind{
					"lib": integrity.ChangeAdded, "dist/ok.js": integrity.ChangeAdded, "dist/secret": integrity.ChangeAdded,
				}, changes(in), "lib/ok.js and lib/secret match through lib -> dist")

				out, err := json.Marshal(rep)
				require.NoError(t, err)
				ev, err := json.Marshal(node.Evidence(rep))
				require.NoError(t, err)
				for _, d := range append(digestForms(secret), digestForms("good's own file\n")...) {
					assert.False(t, strings.Contains(string(out), d), "run %d: the digest %s of a file outside the package is in the report", i, d)
					assert.False(t, strings.Contains(string(ev), d), "run %d: the digest %s of a file outside the package is in the evidence", i, d)
				}
			}
		})
	}
}

// TestVerifyDependencyNameOutsideNodeModules checks that a dependency
// name in package.json that would name a folder outside node_modules
// ("../../elsewhere") is an error for that name, and the folder it names
// is not checked (here a package with a manifest elsewhere on the host,
// which the check would otherwise vouch for); asking for such a name is
// an error of Verify.
func TestVerifyDependencyNameOutsideNodeModules(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	proj := filepath.Join(root, "app")
	writeTree(t, proj, map[string]string{
		"package.json":                    `{"name":"app","version":"1.0.0","dependencies":{"../../elsewhere":"1.0.0","ok":"1.0.0"}}`,
		"node_modules/ok/package.json":    `{"name":"ok","version":"1.0.0"}`,
		"node_modules/ok/index.js":        "1\n",
		"node_modules/.package-lock.json": `{"lockfileVersion":3,"packages":{"node_modules/ok":{"version":"1.0.0"}}}`,
	})
	elsewhere := filepath.Join(root, "elsewhere")
	writeTree(t, elsewhere, map[string]string{"package.json": `{"name":"elsewhere","version":"1.0.0"}`, "a.js": "not a dependency\n"})
	_, err := node.WriteManifest(ctx, elsewhere)
	require.NoError(t, err)

	rep, err := node.Verify(ctx, proj, node.Options{})
	require.NoError(t, err)
	res := byName(rep)
	assert.NotContains(t, res, "elsewhere", "the folder outside node_modules is not checked")
	r := res["../../elsewhere"]
	assert.Equal(t, integrity.StatusError, r.Status)
	assert.Equal(t, `invalid package name "../../elsewhere"`, r.Reason)
	assert.Zero(t, r.Files)
	assert.Equal(t, integrity.StatusSkipped, res["ok"].Status, res["ok"].Reason)

	_, err = node.Verify(ctx, proj, node.Options{Packages: []string{"../../elsewhere"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid package name: "../../elsewhere"`)
}

// TestVerifyManifestSizeFirst checks that a file whose manifest entry
// records its size is compared by size first: one of another size (here
// a 1 GiB sparse file in place of a small one) is modified, observed by
// its size and never read; one of the right size but other content is
// hashed as before. With and without the stat cache.
func TestVerifyManifestSizeFirst(t *testing.T) {
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	files := map[string]string{"package.json": `{"name":"proj","version":"1.0.0"}`, "a.js": "a = 1\n", "b.js": "b = 2\n", "c.js": "c\n"}
	writeTree(t, proj, files)
	var list []map[string]any
	for _, p := range []string{"a.js", "b.js", "c.js", "package.json"} {
		sum := sha256.Sum256([]byte(files[p]))
		list = append(list, map[string]any{"path": p, "sha256": hex.EncodeToString(sum[:]), "size": len(files[p])})
	}
	data, err := json.Marshal(map[string]any{"files": list})
	require.NoError(t, err)
	writeTree(t, proj, map[string]string{node.RunspecManifestFile: string(data)})
	store, err := integrity.OpenStore(filepath.Join(root, "state"))
	require.NoError(t, err)
	rep, err := node.Verify(context.Background(), proj, node.Options{Store: store})
	require.NoError(t, err)
	require.Equal(t, integrity.StatusOK, rep.Results[0].Status, rep.Results[0].Reason)

	f, err := os.Create(filepath.Join(proj, "a.js"))
	require.NoError(t, err)
	require.NoError(t, errors.Join(f.Truncate(1<<30), f.Close()))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "b.js"), []byte("b = 3\n"), 0o644))
	sum := sha256.Sum256([]byte("b = 3\n"))
	for _, opts := range []node.Options{{}, {Store: store}, {Store: store}} {
		rep, err := node.Verify(context.Background(), proj, opts)
		require.NoError(t, err)
		r := rep.Results[0]
		assert.Equal(t, integrity.StatusModified, r.Status, r.Reason)
		obs := map[string]string{}
		for _, c := range r.Changes {
			obs[c.Path] = c.Observed
		}
		assert.Equal(t, map[string]string{"a.js": "size:1073741824", "b.js": "sha256:" + hex.EncodeToString(sum[:])}, obs)
		assert.Equal(t, 3, rep.Hashed+rep.Cached, "b.js, c.js and package.json; a.js is not read")
	}
}

// TestPackListIgnoreFileFIFO checks that PackList refuses an .npmignore
// that is a FIFO, naming it, instead of waiting for a writer.
func TestPackListIgnoreFileFIFO(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"package.json": `{"name":"a","version":"1.0.0"}`, "index.js": "1\n", "sub/a.js": "a\n"})
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "sub", ".npmignore"), 0o644))
	done := make(chan error, 1)
	go func() {
		_, err := node.PackList(dir)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join("sub", ".npmignore")+": not a regular file (a FIFO)")
	case <-time.After(30 * time.Second):
		t.Fatal("PackList hung on a FIFO .npmignore")
	}
}

// Hostile files are checked in a child process (the test binary run
// again with hostileCaseEnv naming the case) whose address space is
// capped (RLIMIT_AS) and which the parent kills after hostileDeadline: a
// reader that reads /dev/zero or a 2 GiB lockfile whole makes the child
// die out of memory, one that blocks on a FIFO makes it miss the
// deadline; either fails the test instead of taking the machine or
// hanging the run.
const (
	hostileCaseEnv  = "NODE_TEST_HOSTILE_CASE"
	hostileDirEnv   = "NODE_TEST_HOSTILE_DIR"
	hostileDeadline = 60 * time.Second
	// hostileBudget is the address space the child may add to what it
	// has when the cap is set: far more than checking a small project
	// takes, far less than the 2 GiB file.
	hostileBudget = 768 << 20
)

type hostileCase struct {
	name   string
	tamper func(t *testing.T, proj string)
	// check judges Verify's outcome (res by package name; nil with err).
	check func(t *testing.T, res map[string]integrity.Result, err error)
}

func hostileCases() []hostileCase {
	nm := func(proj string, p ...string) string {
		return filepath.Join(append([]string{proj, "node_modules"}, p...)...)
	}
	replace := func(t *testing.T, name string, create func(string) error) {
		t.Helper()
		require.NoError(t, os.RemoveAll(name))
		require.NoError(t, create(name))
	}
	link := func(target string) func(string) error {
		return func(name string) error { return os.Symlink(target, name) }
	}
	fifo := func(name string) error { return syscall.Mkfifo(name, 0o644) }
	sparse := func(name string) error { // 2 GiB, no block of it written
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		return errors.Join(f.Truncate(2<<30), f.Close())
	}
	// victimError: the victim package is an error naming its file and
	// why; good and the project are unaffected.
	victimError := func(file string, why ...string) func(t *testing.T, res map[string]integrity.Result, err error) {
		return func(t *testing.T, res map[string]integrity.Result, err error) {
			require.NoError(t, err)
			r := res["victim"]
			assert.Equal(t, integrity.StatusError, r.Status)
			assert.Contains(t, r.Reason, filepath.Join("node_modules", "victim", file))
			for _, w := range why {
				assert.Contains(t, r.Reason, w)
			}
			assert.Equal(t, integrity.StatusOK, res["good"].Status, res["good"].Reason)
			assert.Equal(t, integrity.StatusSkipped, res["app"].Status, res["app"].Reason)
		}
	}
	// projectError: the project folder is an error naming the lockfile
	// and why; the dependencies are still checked.
	projectError := func(file string, why ...string) func(t *testing.T, res map[string]integrity.Result, err error) {
		return func(t *testing.T, res map[string]integrity.Result, err error) {
			require.NoError(t, err)
			r := res["app"]
			assert.Equal(t, integrity.StatusError, r.Status)
			assert.Contains(t, r.Reason, "read lockfile ")
			assert.Contains(t, r.Reason, file)
			for _, w := range why {
				assert.Contains(t, r.Reason, w)
			}
			assert.Equal(t, integrity.StatusOK, res["good"].Status, res["good"].Reason)
			assert.Equal(t, integrity.StatusOK, res["victim"].Status, res["victim"].Reason)
		}
	}
	return []hostileCase{
		{
			name:   "dependency package.json links to /dev/zero",
			tamper: func(t *testing.T, p string) { replace(t, nm(p, "victim", "package.json"), link("/dev/zero")) },
			check:  victimError("package.json", "read package.json", "symbolic link"),
		},
		{
			name:   "dependency package.json is a FIFO",
			tamper: func(t *testing.T, p string) { replace(t, nm(p, "victim", "package.json"), fifo) },
			check:  victimError("package.json", "read package.json", "not a regular file (a FIFO)"),
		},
		{
			name:   "dependency manifest is a FIFO",
			tamper: func(t *testing.T, p string) { replace(t, nm(p, "victim", node.ManifestFile), fifo) },
			check:  victimError(node.ManifestFile, "read manifest", "not a regular file (a FIFO)"),
		},
		{
			name:   "dependency manifest links to /dev/zero",
			tamper: func(t *testing.T, p string) { replace(t, nm(p, "victim", node.ManifestFile), link("/dev/zero")) },
			check:  victimError(node.ManifestFile, "read manifest", "symbolic link"),
		},
		{
			name: "dependency runspec-files.json is 2 GiB",
			tamper: func(t *testing.T, p string) {
				require.NoError(t, os.Remove(nm(p, "victim", node.ManifestFile)))
				require.NoError(t, sparse(nm(p, "victim", node.RunspecManifestFile)))
			},
			check: victimError(node.RunspecManifestFile, "read manifest", "larger than the size cap"),
		},
		{
			name:   "package-lock.json is a 2 GiB sparse file",
			tamper: func(t *testing.T, p string) { replace(t, filepath.Join(p, "package-lock.json"), sparse) },
			check:  projectError("package-lock.json", "larger than the size cap", "2147483648 bytes"),
		},
		{
			name:   "hidden lockfile (node_modules/.package-lock.json) is a 2 GiB sparse file",
			tamper: func(t *testing.T, p string) { replace(t, nm(p, ".package-lock.json"), sparse) },
			check:  projectError(filepath.Join("node_modules", ".package-lock.json"), "larger than the size cap"),
		},
		{
			name:   "npm-shrinkwrap.json is a FIFO",
			tamper: func(t *testing.T, p string) { require.NoError(t, fifo(filepath.Join(p, "npm-shrinkwrap.json"))) },
			check:  projectError("npm-shrinkwrap.json", "not a regular file (a FIFO)"),
		},
		{
			name:   "package-lock.json links to /dev/zero",
			tamper: func(t *testing.T, p string) { replace(t, filepath.Join(p, "package-lock.json"), link("/dev/zero")) },
			check:  projectError("package-lock.json", "symbolic link"),
		},
		{
			name:   "project package.json links to /dev/zero",
			tamper: func(t *testing.T, p string) { replace(t, filepath.Join(p, "package.json"), link("/dev/zero")) },
			check: func(t *testing.T, _ map[string]integrity.Result, err error) {
				require.Error(t, err)
				assert.Contains(t, err.Error(), filepath.Join("app", "package.json")+": is a symbolic link")
			},
		},
		{
			name:   "project package.json is a FIFO",
			tamper: func(t *testing.T, p string) { replace(t, filepath.Join(p, "package.json"), fifo) },
			check: func(t *testing.T, _ map[string]integrity.Result, err error) {
				require.Error(t, err)
				assert.Contains(t, err.Error(), filepath.Join("app", "package.json")+": not a regular file (a FIFO)")
			},
		},
	}
}

// TestVerifyHostileFiles checks that package.json, the lockfiles and the
// manifests are read as an inspector must: a FIFO is refused without
// waiting for a writer, a link to /dev/zero is not followed, a 2 GiB
// file is refused by its size; each is an error for its package naming
// the file, not a crash or a hang.
func TestVerifyHostileFiles(t *testing.T) {
	cases := hostileCases()
	if name := os.Getenv(hostileCaseEnv); name != "" {
		for _, tc := range cases {
			if tc.name == name {
				hostileChild(t, tc, os.Getenv(hostileDirEnv))
				return
			}
		}
		t.Fatalf("no case %q", name)
	}
	base := installPackages(t, t.TempDir(), map[string]map[string]string{
		"good":   {"index.js": "module.exports = 1\n", "lib/a.js": "a\n"},
		"victim": {"index.js": "module.exports = 2\n", "lib/b.js": "b\n"},
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proj := filepath.Join(t.TempDir(), "app")
			out, err := exec.Command("cp", "-a", base, proj).CombinedOutput()
			require.NoError(t, err, "%s", out)
			tc.tamper(t, proj)
			runHostileChild(t, tc.name, proj)
		})
	}
}

// runHostileChild runs the case in a child process and fails the test if
// the child fails, dies or misses the deadline.
func runHostileChild(t *testing.T, name, proj string) {
	t.Helper()
	proctest.RunChild(t, "TestVerifyHostileFiles", []string{hostileCaseEnv + "=" + name, hostileDirEnv + "=" + proj}, hostileDeadline)
}

// hostileChild runs one case under the address-space cap.
func hostileChild(t *testing.T, tc hostileCase, proj string) {
	proctest.LimitAddressSpace(t, hostileBudget)
	ctx := context.Background()
	rep, err := node.Verify(ctx, proj, node.Options{})
	var res map[string]integrity.Result
	if err == nil {
		res = byName(rep)
	}
	tc.check(t, res, err)
	if err == nil {
		// With All the same packages, found by listing node_modules.
		rep, err = node.Verify(ctx, proj, node.Options{All: true})
		require.NoError(t, err)
		tc.check(t, byName(rep), nil)
	}
}
