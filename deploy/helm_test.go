package deploy_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// chartDir is the chart, relative to this package.
const chartDir = "helm/runtimetruth"

// kubeVersion is the Kubernetes version the chart is rendered and linted
// for: a helm built with `go install` defaults to v1.20, below the chart's
// kubeVersion.
const kubeVersion = "1.31.0"

// components are the chart's services, with the kind of their workload.
var components = map[string]string{
	"collector": "DaemonSet",
	"verifier":  "Deployment",
	"auditor":   "Deployment",
	"attestor":  "Deployment",
}

// valueSets are the value files in testdata/values (each a scenario of
// deploy/README.md).
var valueSets = []string{"minimal", "all-targets", "nats-external", "keyless", "key-signing", "clickhouse-syslog"}

// helm returns the pinned helm binary (RUNTIMETRUTH_HELM_BIN); without it
// the test fails.
func helm(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("RUNTIMETRUTH_HELM_BIN")
	if bin == "" {
		t.Fatal("RUNTIMETRUTH_HELM_BIN is not set: run scripts/install-helm.sh and export its --print-bin output (make test does)")
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("RUNTIMETRUTH_HELM_BIN=%s is not an executable: %v", bin, err)
	}
	return bin
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Keep helm away from the user's repositories, plugins and caches.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) kind() string { return str(o["kind"]) }
func (o object) name() string { return str(get(o, "metadata", "name")) }

// render runs helm template with the value files (paths) and --set pairs.
func render(t *testing.T, files []string, sets ...string) []object {
	t.Helper()
	out, err := renderErr(t, files, sets...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(t *testing.T, files []string, sets ...string) ([]object, error) {
	t.Helper()
	args := []string{"template", "rt", chartDir, "--namespace", "runtimetruth", "--kube-version", kubeVersion}
	for _, f := range files {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		return nil, err
	}
	var objs []object
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("rendered chart is not YAML: %w\n%s", err, out)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

func valueFile(set string) string { return filepath.Join("testdata", "values", set+".yaml") }

func TestHelmLint(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			out, err := runHelm(t, "lint", "--strict", chartDir, "--namespace", "runtimetruth", "--kube-version", kubeVersion, "--values", valueFile(set))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestChartValueSets renders every value set and checks each rendered
// service config with that service's --check-config, the security
// contexts, the probes, hostPID and that no secret value is inlined.
func TestChartValueSets(t *testing.T) {
	bins := serviceBinaries(t)
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			objs := render(t, []string{valueFile(set)})
			values := readValues(t, valueFile(set))
			checkObjects(t, objs)
			for comp, kind := range components {
				w := find(t, objs, kind, "rt-runtimetruth-"+comp)
				t.Run(comp, func(t *testing.T) {
					checkConfig(t, bins[comp], comp, objs, w)
					checkPod(t, w)
				})
			}
			ds := find(t, objs, "DaemonSet", "rt-runtimetruth-collector")
			wantPID := false
			for _, tg := range list(get(values, "collector", "targets")) {
				if str(get(tg, "kind")) == "process" {
					wantPID = true
				}
			}
			if got := get(ds, "spec", "template", "spec", "hostPID") == true; got != wantPID {
				t.Errorf("collector hostPID = %v, want %v (process targets: %v)", got, wantPID, wantPID)
			}
			checkHostMounts(t, ds, list(get(values, "collector", "targets")))
		})
	}
}

// checkObjects checks what holds for the whole release: no Secret is
// rendered (they are referenced), every component has its ServiceAccount,
// NetworkPolicy, PodDisruptionBudget and Service.
func checkObjects(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		if o.kind() == "Secret" {
			t.Errorf("the chart renders Secret %s: secrets must be referenced, never inlined", o.name())
		}
	}
	for comp := range components {
		for _, kind := range []string{"ServiceAccount", "NetworkPolicy", "PodDisruptionBudget", "Service", "ConfigMap"} {
			find(t, objs, kind, "rt-runtimetruth-"+comp)
		}
	}
}

// podSpec returns a workload's pod spec.
func podSpec(w object) map[string]any { return mapOf(get(w, "spec", "template", "spec")) }

// checkPod checks the security contexts, the probes and the environment
// of every container of a workload.
func checkPod(t *testing.T, w object) {
	t.Helper()
	spec := podSpec(w)
	psc := mapOf(spec["securityContext"])
	if spec["hostNetwork"] == true || spec["hostIPC"] == true {
		t.Errorf("%s: hostNetwork or hostIPC", w.name())
	}
	var containers []any
	containers = append(containers, list(spec["initContainers"])...)
	containers = append(containers, list(spec["containers"])...)
	if len(containers) == 0 {
		t.Fatalf("%s: no containers", w.name())
	}
	for _, c := range containers {
		c := mapOf(c)
		name := w.name() + "/" + str(c["name"])
		sc := mapOf(c["securityContext"])
		nonRoot := sc["runAsNonRoot"] == true || (sc["runAsNonRoot"] == nil && psc["runAsNonRoot"] == true)
		if !nonRoot {
			t.Errorf("%s: not runAsNonRoot", name)
		}
		for _, ctx := range []map[string]any{psc, sc} {
			if uid, ok := ctx["runAsUser"]; ok && fmt.Sprint(uid) == "0" {
				t.Errorf("%s: runAsUser 0", name)
			}
		}
		if sc["readOnlyRootFilesystem"] != true {
			t.Errorf("%s: readOnlyRootFilesystem is not true", name)
		}
		if sc["allowPrivilegeEscalation"] != false || sc["privileged"] == true {
			t.Errorf("%s: privilege escalation is allowed", name)
		}
		if !slices.Contains(list(get(sc, "capabilities", "drop")), any("ALL")) {
			t.Errorf("%s: capabilities are not all dropped", name)
		}
		port := ""
		for _, p := range list(c["ports"]) {
			if str(get(p, "name")) == "http" {
				port = fmt.Sprint(get(p, "containerPort"))
			}
		}
		if port == "" {
			t.Errorf("%s: no http port", name)
		}
		for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
			if got := str(get(c, probe, "httpGet", "path")); got != path {
				t.Errorf("%s: %s path %q, want %q", name, probe, got, path)
			}
			if got := fmt.Sprint(get(c, probe, "httpGet", "port")); got != "http" {
				t.Errorf("%s: %s port %q, want the http port", name, probe, got)
			}
		}
		for _, e := range list(c["env"]) {
			checkEnv(t, name, mapOf(e))
		}
	}
}

var secretish = regexp.MustCompile(`(?i)password|secret|token|_key$|creds|seed`)

// checkEnv fails for an environment variable that looks like it carries a
// secret but holds a literal value (rather than a secretKeyRef), and for a
// DSN with a literal password.
func checkEnv(t *testing.T, container string, e map[string]any) {
	t.Helper()
	name, value := str(e["name"]), e["value"]
	if value == nil {
		return
	}
	if secretish.MatchString(name) {
		t.Errorf("%s: env %s has a literal value; a secret must come from a secretKeyRef", container, name)
	}
	if strings.HasSuffix(name, "_DSN") {
		if m := regexp.MustCompile(`://[^:@/]+:([^@]*)@`).FindStringSubmatch(str(value)); m != nil && !strings.HasPrefix(m[1], "$(") {
			t.Errorf("%s: env %s holds a literal password", container, name)
		}
	}
}

// checkHostMounts checks the collector mounts each target's location from
// the host, read-only, and nothing else from the host but what the values
// ask for.
func checkHostMounts(t *testing.T, ds object, targets []any) {
	t.Helper()
	spec := podSpec(ds)
	hostVolumes := map[string]string{} // volume name → host path
	for _, v := range list(spec["volumes"]) {
		if name := str(get(v, "name")); name == "state" || name == "nats-auth" {
			continue // the node's own state and credential (TestCollectorNodeState)
		}
		if p := str(get(v, "hostPath", "path")); p != "" {
			hostVolumes[str(get(v, "name"))] = p
		}
	}
	mounted := map[string]bool{}
	c := mapOf(list(spec["containers"])[0])
	for _, m := range list(c["volumeMounts"]) {
		p, ok := hostVolumes[str(get(m, "name"))]
		if !ok {
			continue
		}
		if get(m, "readOnly") != true {
			t.Errorf("host path %s is mounted writable", p)
		}
		if got := str(get(m, "mountPath")); got != p {
			t.Errorf("host path %s is mounted at %s, not at the same path", p, got)
		}
		mounted[p] = true
	}
	for _, tg := range targets {
		var want []string
		switch str(get(tg, "kind")) {
		case "git":
			want = []string{str(get(tg, "path"))}
		case "codex":
			want = []string{str(get(tg, "cwd"))}
		case "python":
			want = []string{str(get(tg, "env"))}
		case "node":
			want = []string{str(get(tg, "dir"))}
		case "systemd":
			want = []string{"/run/systemd", "/run/dbus"}
		}
		for _, p := range want {
			if !mounted[p] {
				t.Errorf("target %s: host path %s is not mounted", str(get(tg, "name")), p)
			}
		}
	}
	if len(targets) == 0 && len(hostVolumes) != 0 {
		t.Errorf("no targets, but host paths are mounted: %v", hostVolumes)
	}
}

// checkConfig writes the component's rendered config file where the pod
// would see it, builds the environment the pod would have (secret values
// and field references replaced by stand-ins), maps every Secret and
// ConfigMap mount to a temporary directory with stand-in files, and runs
// the service's own --check-config.
func checkConfig(t *testing.T, bin, comp string, objs []object, w object) {
	t.Helper()
	spec := podSpec(w)
	c := mapOf(list(spec["containers"])[0])
	args := list(c["args"])
	if len(args) != 2 || args[0] != "--config" {
		t.Fatalf("%s: args %v, want --config <file>", comp, args)
	}
	cfgPath := str(args[1])

	volumes := map[string]map[string]any{}
	for _, v := range list(spec["volumes"]) {
		volumes[str(get(v, "name"))] = mapOf(v)
	}
	dir := t.TempDir()
	var mounts [][2]string // mount path → local directory
	var configText string
	for i, m := range list(c["volumeMounts"]) {
		mountPath := str(get(m, "mountPath"))
		v := volumes[str(get(m, "name"))]
		if v == nil {
			t.Fatalf("%s: mount of unknown volume %v", comp, get(m, "name"))
		}
		local := filepath.Join(dir, fmt.Sprintf("mount-%d", i))
		files := map[string][]byte{}
		switch {
		case v["configMap"] != nil:
			name := str(get(v, "configMap", "name"))
			if name == w.name() {
				cm := find(t, objs, "ConfigMap", name)
				for k, val := range mapOf(cm["data"]) {
					files[k] = []byte(str(val))
				}
				if !strings.HasPrefix(cfgPath, mountPath+"/") {
					t.Fatalf("%s: config %s is not in the config volume at %s", comp, cfgPath, mountPath)
				}
				configText = str(mapOf(cm["data"])[strings.TrimPrefix(cfgPath, mountPath+"/")])
			} else {
				for _, it := range list(get(v, "configMap", "items")) {
					files[str(get(it, "path"))] = []byte(`{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
				}
			}
		case v["secret"] != nil:
			items := list(get(v, "secret", "items"))
			if len(items) == 0 {
				t.Errorf("%s: Secret volume %s mounts every key; name the keys it needs", comp, get(v, "name"))
			}
			for _, it := range items {
				files[str(get(it, "path"))] = standIn(t, str(get(v, "name")), str(get(it, "path")))
			}
		case v["projected"] != nil:
			for _, src := range list(get(v, "projected", "sources")) {
				if p := str(get(src, "serviceAccountToken", "path")); p != "" {
					files[p] = []byte("eyJhbGciOiJub25lIn0.e30.")
				}
			}
		default:
			continue // emptyDir, hostPath, PVC: written at run time
		}
		for name, data := range files {
			f := filepath.Join(local, name)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mounts = append(mounts, [2]string{mountPath, local})
	}
	if configText == "" {
		t.Fatalf("%s: the rendered config file %s is empty or missing", comp, cfgPath)
	}
	checkNoLiteralSecrets(t, comp, configText)
	checkListen(t, comp, configText, c)

	// Rewrite the pod's paths to the local directories, longest first.
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i][0]) > len(mounts[j][0]) })
	local := configText
	for _, m := range mounts {
		local = strings.ReplaceAll(local, m[0]+"/", m[1]+"/")
	}
	file := filepath.Join(dir, filepath.Base(cfgPath))
	if err := os.WriteFile(file, []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}

	env := podEnv(t, comp, list(c["env"]))
	cmd := exec.Command(bin, "--config", file, "--check-config")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s --check-config rejects the rendered config: %v\n%s\nconfig:\n%s", comp, err, out, configText)
	}
}

// checkListen checks the config's HTTP server listens on the container's
// http port, which the probes use.
func checkListen(t *testing.T, comp, text string, c map[string]any) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatalf("%s: config is not YAML: %v", comp, err)
	}
	port := ""
	for _, p := range list(c["ports"]) {
		if str(get(p, "name")) == "http" {
			port = fmt.Sprint(get(p, "containerPort"))
		}
	}
	if got, want := str(get(cfg, "http", "listen")), ":"+port; got != want {
		t.Errorf("%s: http.listen %q, want %q (the probed port)", comp, got, want)
	}
}

// checkNoLiteralSecrets fails for a config file key that would hold a
// secret itself rather than name a file.
func checkNoLiteralSecrets(t *testing.T, comp, text string) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatalf("%s: config is not YAML: %v", comp, err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		default:
			if strings.HasSuffix(path, ".password") || strings.HasSuffix(path, ".dsn") || strings.HasSuffix(path, ".token") {
				t.Errorf("%s: config key %s holds a value; secrets come from files or secretKeyRefs", comp, path[1:])
			}
		}
	}
	walk("", cfg)
}

// podEnv is the process environment of the pod's container: this
// process's, without RUNTIMETRUTH_ variables, plus the container's env
// with stand-ins for secretKeyRef and fieldRef values and $(VAR)
// references expanded as the kubelet does.
func podEnv(t *testing.T, comp string, vars []any) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RUNTIMETRUTH_") {
			env = append(env, kv)
		}
	}
	set := map[string]string{}
	for _, e := range vars {
		e := mapOf(e)
		name := str(e["name"])
		var val string
		switch {
		case get(e, "valueFrom", "secretKeyRef") != nil:
			val = "stand-in-" + str(get(e, "valueFrom", "secretKeyRef", "key"))
		case get(e, "valueFrom", "fieldRef") != nil:
			val = "node-1"
		case get(e, "valueFrom") != nil:
			t.Fatalf("%s: env %s: unexpected source %v", comp, name, e["valueFrom"])
		default:
			val = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(str(e["value"]), func(ref string) string {
				if v, ok := set[ref[2:len(ref)-1]]; ok {
					return v
				}
				return ref
			})
		}
		set[name] = val
		env = append(env, name+"="+val)
	}
	return env
}

// standIn is the content of a stand-in secret file: a real ECDSA P-256 key
// for the signing key (the attestor's --check-config loads it), text for
// the rest.
func standIn(t *testing.T, volume, path string) []byte {
	t.Helper()
	if volume == "signing-key" && strings.HasSuffix(path, ".key") {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	return []byte("stand-in secret file content, 32+ bytes long\n")
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// serviceBinaries builds the four services' binaries once (each from its
// own module, so that it works with the workspace on or off).
func serviceBinaries(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "runtimetruth-deploy-bin-")
		if buildErr != nil {
			return
		}
		for _, comp := range append(slices.Collect(maps.Keys(components)), "notifier") {
			out := filepath.Join(builtDir, "runtimetruth-"+comp)
			cmd := exec.Command("go", "build", "-o", out, "./cmd/runtimetruth-"+comp)
			cmd.Dir = filepath.Join("..", "services", comp)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build runtimetruth-%s: %w\n%s", comp, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	bins := map[string]string{"notifier": filepath.Join(builtDir, "runtimetruth-notifier")}
	for comp := range components {
		bins[comp] = filepath.Join(builtDir, "runtimetruth-"+comp)
	}
	return bins
}

// TestCheckConfigIsStrict shows the check above has teeth: a config key
// the service does not know fails its --check-config.
func TestCheckConfigIsStrict(t *testing.T) {
	bins := serviceBinaries(t)
	objs := render(t, nil, "verifier.config.no_such_key=1")
	cm := find(t, objs, "ConfigMap", "rt-runtimetruth-verifier")
	file := filepath.Join(t.TempDir(), "verifier.yaml")
	if err := os.WriteFile(file, []byte(str(mapOf(cm["data"])["verifier.yaml"])), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins["verifier"], "--config", file, "--check-config").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no_such_key") {
		t.Fatalf("--check-config accepted an unknown key (err %v):\n%s", err, out)
	}
}

// TestConfigChecksum checks that a config change changes the pod
// template's checksum annotation of that component only.
func TestConfigChecksum(t *testing.T) {
	sum := func(objs []object, kind, name string) string {
		return str(get(find(t, objs, kind, name), "spec", "template", "metadata", "annotations", "checksum/config"))
	}
	base := render(t, nil)
	changed := render(t, nil, "verifier.concurrency=9")
	for comp, kind := range components {
		name := "rt-runtimetruth-" + comp
		a, b := sum(base, kind, name), sum(changed, kind, name)
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(a) {
			t.Fatalf("%s: checksum/config %q", comp, a)
		}
		if (a != b) != (comp == "verifier") {
			t.Errorf("%s: checksum %s → %s after changing the verifier's config", comp, a, b)
		}
	}
	if again := render(t, nil); sum(again, "Deployment", "rt-runtimetruth-verifier") != sum(base, "Deployment", "rt-runtimetruth-verifier") {
		t.Error("the checksum is not stable across renders")
	}
}

// TestChartRefusesBadValues checks the schema and the guards.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"writable root", []string{"securityContext.readOnlyRootFilesystem=false"}, "readOnlyRootFilesystem"},
		{"root user", []string{"verifier.podSecurityContext.runAsUser=0"}, "runAsUser"},
		{"auth without secret", []string{"nats.auth.type=creds"}, "existingSecret"},
		{"key mode without secret", []string{"attestor.signing.mode=key"}, "attestor.signing.key.existingSecret"},
		{"no required sink", []string{"auditor.jsonl.enabled=false"}, "required sink"},
		{"clickhouse without host", []string{"clickhouse.enabled=true"}, "clickhouse.host"},
		{"unknown target kind", []string{"collector.targets[0].name=x", "collector.targets[0].kind=docker"}, "kind"},
		{"target without location", []string{"collector.targets[0].name=x", "collector.targets[0].kind=git"}, "path"},
		{"typo", []string{"verifer.replicaCount=1"}, "verifer"},
		{"node credentials for a service", []string{"nats.auth.type=creds", "nats.auth.hostPath=/etc/runtimetruth/nats"}, "collector's per-node credentials only"},
		{"node credentials with a password", []string{"collector.nats.auth.type=userPassword", "collector.nats.auth.user=u", "collector.nats.auth.hostPath=/etc/runtimetruth/nats"}, "creds or nkey"},
		{"relative node credentials", []string{"collector.nats.auth.type=creds", "collector.nats.auth.hostPath=etc/nats"}, "hostPath"},
		{"two state volumes", []string{"collector.stateVolume.emptyDir.sizeLimit=64Mi"}, "collector.stateVolume.hostPath: null"},
		{"unknown enrollment", []string{"verifier.enrollment=trust"}, "enrollment"},
		{"unknown syslog format", []string{"auditor.syslog.format=leef"}, "format"},
		{"notifier without alertmanager", []string{"notifier.enabled=true"}, "notifier.alertmanager.url"},
		{"console without a login", []string{"console.enabled=true"}, "console.oidc.issuer"},
		{"console trends without clickhouse", []string{"console.enabled=true", "console.oidc.issuer=https://login.example.com", "console.oidc.clientId=rt",
			"console.oidc.existingSecret=oidc", "console.trends.enabled=true"}, "console.trends.enabled needs clickhouse.enabled"},
		{"console with an nkey", []string{"console.enabled=true", "console.oidc.issuer=https://login.example.com", "console.oidc.clientId=rt",
			"console.oidc.existingSecret=oidc", "console.nats.auth.type=nkey", "console.nats.auth.existingSecret=nats"}, "nkey is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(t, nil, tc.sets...)
			if err == nil {
				t.Fatalf("helm template accepted %v", tc.sets)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error does not name %q: %v", tc.want, err)
			}
		})
	}
}

// TestCollectorNodeState checks that the collector's state directory (its
// signing key and sequence) is a directory of the node by default, so a
// replaced pod signs with the same key, and that an emptyDir can be asked
// for; and that a node's own NATS credential comes from a node directory
// (collector.nats.auth.hostPath) while the services keep their Secrets.
func TestCollectorNodeState(t *testing.T) {
	volume := func(objs []object, name string) map[string]any {
		ds := find(t, objs, "DaemonSet", "rt-runtimetruth-collector")
		for _, v := range list(podSpec(ds)["volumes"]) {
			if str(get(v, "name")) == name {
				return mapOf(v)
			}
		}
		return nil
	}
	mount := func(objs []object, name string) map[string]any {
		ds := find(t, objs, "DaemonSet", "rt-runtimetruth-collector")
		for _, m := range list(get(list(podSpec(ds)["containers"])[0], "volumeMounts")) {
			if str(get(m, "name")) == name {
				return mapOf(m)
			}
		}
		return nil
	}
	collectorConfig := func(objs []object) map[string]any {
		var cfg map[string]any
		text := str(get(find(t, objs, "ConfigMap", "rt-runtimetruth-collector"), "data", "collector.yaml"))
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	objs := render(t, nil)
	state := volume(objs, "state")
	if got := str(get(state, "hostPath", "path")); got != "/var/lib/runtimetruth/collector" {
		t.Errorf("state volume %v, want the node's /var/lib/runtimetruth/collector", state)
	}
	if got := str(get(mount(objs, "state"), "mountPath")); got != str(get(collectorConfig(objs), "state_dir")) {
		t.Errorf("the state volume is mounted at %s, the state_dir is %v", got, get(collectorConfig(objs), "state_dir"))
	}
	if got := str(get(mount(objs, "state"), "readOnly")); got == "true" {
		t.Error("the state directory is read-only")
	}
	if v := volume(render(t, nil, "collector.stateVolume.hostPath=null", "collector.stateVolume.emptyDir.sizeLimit=64Mi"), "state"); v["emptyDir"] == nil || v["hostPath"] != nil {
		t.Errorf("collector.stateVolume emptyDir: %v", v)
	}

	objs = render(t, nil, "nats.auth.type=creds", "nats.auth.existingSecret=rt-nats",
		"collector.nats.auth.hostPath=/etc/runtimetruth/nats", "collector.nats.auth.credsKey=node.creds")
	auth := volume(objs, "nats-auth")
	if got := str(get(auth, "hostPath", "path")); got != "/etc/runtimetruth/nats" || get(auth, "secret") != nil {
		t.Errorf("collector nats-auth volume %v, want the node's /etc/runtimetruth/nats", auth)
	}
	if get(mount(objs, "nats-auth"), "readOnly") != true {
		t.Error("the node's credential is mounted writable")
	}
	want := str(get(mount(objs, "nats-auth"), "mountPath")) + "/node.creds"
	if got := str(get(collectorConfig(objs), "nats", "creds_file")); got != want {
		t.Errorf("collector nats.creds_file %q, want %q", got, want)
	}
	for _, comp := range []string{"verifier", "auditor", "attestor"} {
		d := find(t, objs, "Deployment", "rt-runtimetruth-"+comp)
		for _, v := range list(podSpec(d)["volumes"]) {
			if str(get(v, "name")) == "nats-auth" && str(get(v, "secret", "secretName")) != "rt-nats" {
				t.Errorf("%s nats-auth volume %v, want Secret rt-nats", comp, v)
			}
		}
	}
}

// TestVerifierEnrollment checks the verifier's enrollment and clock skew
// values reach its config file, manual by default.
func TestVerifierEnrollment(t *testing.T) {
	for _, tc := range []struct {
		sets             []string
		enrollment, skew string
	}{
		{nil, "manual", "5m"},
		{[]string{"verifier.enrollment=first-use", "verifier.maxClockSkew=90s"}, "first-use", "90s"},
		{[]string{"verifier.enrollment=off"}, "off", "5m"},
	} {
		objs := render(t, nil, tc.sets...)
		var cfg map[string]any
		text := str(get(find(t, objs, "ConfigMap", "rt-runtimetruth-verifier"), "data", "verifier.yaml"))
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			t.Fatal(err)
		}
		if got := str(cfg["enrollment"]); got != tc.enrollment {
			t.Errorf("%v: enrollment %q, want %q", tc.sets, got, tc.enrollment)
		}
		if got := str(cfg["max_clock_skew"]); got != tc.skew {
			t.Errorf("%v: max_clock_skew %q, want %q", tc.sets, got, tc.skew)
		}
	}
}

// TestDashboardsConfigMap checks the chart ships deploy/grafana/*.json
// verbatim, labelled for the Grafana sidecar, only when asked.
func TestDashboardsConfigMap(t *testing.T) {
	for _, o := range render(t, nil) {
		if o.kind() == "ConfigMap" && strings.HasSuffix(o.name(), "-dashboards") {
			t.Fatal("dashboards ConfigMap rendered while grafana.dashboards.enabled is false")
		}
	}
	objs := render(t, nil, "grafana.dashboards.enabled=true", "grafana.dashboards.labelValue=yes")
	cm := find(t, objs, "ConfigMap", "rt-runtimetruth-grafana-dashboards")
	if got := str(get(cm, "metadata", "labels", "grafana_dashboard")); got != "yes" {
		t.Errorf("sidecar label grafana_dashboard=%q, want yes", got)
	}
	files, err := filepath.Glob(filepath.Join("grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/: %v", err)
	}
	data := mapOf(cm["data"])
	if len(data) != len(files) {
		t.Errorf("ConfigMap holds %d dashboards, grafana/ %d", len(data), len(files))
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := str(data[filepath.Base(f)]); got != strings.TrimRight(string(want), "\n") {
			t.Errorf("%s differs from the ConfigMap's copy", f)
		}
	}
}

// Helpers over decoded YAML.

func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.kind() == kind && o.name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func get(v any, path ...string) any {
	for _, p := range path {
		m := mapOf(v)
		if m == nil {
			return nil
		}
		v = m[p]
	}
	return v
}

func mapOf(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case object:
		return m
	}
	return nil
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestNotes renders NOTES.txt with every value set (helm template skips
// it, and helm install needs a cluster): in a copy of the chart it becomes
// a ConfigMap's data.
func TestNotes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runtimetruth")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	// The dashboards link is relative to the original chart.
	if err := os.Remove(filepath.Join(dir, "dashboards")); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := `{{- define "test.notes" }}` + string(notes) + "{{ end }}\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ include \"test.notes\" . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes.yaml"), []byte(wrapped), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "templates", "NOTES.txt")); err != nil {
		t.Fatal(err)
	}
	for _, set := range valueSets {
		out, err := runHelm(t, "template", "rt", dir, "--namespace", "runtimetruth", "--kube-version", kubeVersion,
			"--values", valueFile(set), "--show-only", "templates/notes.yaml")
		if err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		var cm object
		if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		text := str(get(cm, "data", "notes"))
		for _, want := range []string{"installed as release rt", "/healthz", "verifier: Deployment"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: NOTES lack %q:\n%s", set, want, text)
			}
		}
		if strings.Contains(text, "<no value>") {
			t.Errorf("%s: NOTES print <no value>:\n%s", set, text)
		}
		if set == "all-targets" {
			t.Logf("NOTES:\n%s", text)
		}
	}
}

// TestConsoleDeployment: with console.enabled, the chart runs
// `runtimetruth console` behind the OpenID Connect login it is given, as
// its own NATS user (the password and the client secret mounted as files
// from their Secrets, never in the arguments), with a Service, its own
// service account and a NetworkPolicy that lets it reach NATS and the
// provider; off by default.
func TestConsoleDeployment(t *testing.T) {
	for _, o := range render(t, nil) {
		if str(get(o, "metadata", "labels", "app.kubernetes.io/component")) == "console" {
			t.Fatalf("the console is rendered by default: %s %s", o.kind(), o.name())
		}
	}
	objs := render(t, nil, "console.enabled=true", "console.oidc.issuer=https://login.example.com", "console.oidc.clientId=rt",
		"console.oidc.existingSecret=rt-oidc", "console.oidc.redirectURL=https://rt.example.com/auth/callback",
		"console.oidc.viewerGroups={platform}", "console.oidc.approverGroups={leads,sre}", "console.apiTokens.existingSecret=rt-tokens",
		"console.nats.auth.type=userPassword", "console.nats.auth.user=rt-console", "console.nats.auth.existingSecret=rt-nats")
	d := find(t, objs, "Deployment", "rt-runtimetruth-console")
	c := get(d, "spec", "template", "spec", "containers").([]any)[0]
	var args []string
	for _, a := range get(c, "args").([]any) {
		args = append(args, str(a))
	}
	want := []string{"console", "--listen", "0.0.0.0:8080", "--nats", "nats://nats:4222",
		"--nats-user", "rt-console", "--nats-password-file", "/etc/runtimetruth/secrets/nats-password/password",
		"--oidc-issuer", "https://login.example.com", "--oidc-client-id", "rt",
		"--oidc-client-secret-file", "/etc/runtimetruth/secrets/oidc/client-secret",
		"--oidc-redirect-url", "https://rt.example.com/auth/callback", "--groups-claim", "groups",
		"--viewer-group", "platform", "--approver-group", "leads", "--approver-group", "sre",
		"--api-tokens-file", "/etc/runtimetruth/secrets/api-tokens/tokens"}
	if !slices.Equal(args, want) {
		t.Fatalf("args:\n got %q\nwant %q", args, want)
	}
	secrets := map[string]bool{}
	for _, v := range get(d, "spec", "template", "spec", "volumes").([]any) {
		if s := str(get(v, "secret", "secretName")); s != "" {
			secrets[s] = true
		}
	}
	for _, s := range []string{"rt-oidc", "rt-nats", "rt-tokens"} {
		if !secrets[s] {
			t.Errorf("no volume of Secret %s: %v", s, secrets)
		}
	}
	if env := get(c, "env"); env != nil {
		t.Errorf("no secret in the environment: %v", env)
	}
	find(t, objs, "Service", "rt-runtimetruth-console")
	find(t, objs, "ServiceAccount", "rt-runtimetruth-console")
	np := find(t, objs, "NetworkPolicy", "rt-runtimetruth-console")
	var ports []string
	for _, rule := range get(np, "spec", "egress").([]any) {
		for _, p := range get(rule, "ports").([]any) {
			ports = append(ports, fmt.Sprint(get(p, "port")))
		}
	}
	for _, p := range []string{"53", "4222", "443"} {
		if !slices.Contains(ports, p) {
			t.Errorf("no egress to port %s: %v", p, ports)
		}
	}

	// With the trends: the DSN in the environment (its password a
	// reference to the Secret's), the chart's dashboards as a ConfigMap
	// mounted where --dashboards reads them, and egress to ClickHouse.
	objs = render(t, nil, "console.enabled=true", "console.oidc.issuer=https://login.example.com", "console.oidc.clientId=rt",
		"console.oidc.existingSecret=rt-oidc", "console.trends.enabled=true", "clickhouse.enabled=true", "clickhouse.host=ch",
		"clickhouse.passwordSecret.name=rt-ch")
	d = find(t, objs, "Deployment", "rt-runtimetruth-console")
	c = get(d, "spec", "template", "spec", "containers").([]any)[0]
	args = nil
	for _, a := range get(c, "args").([]any) {
		args = append(args, str(a))
	}
	if i := slices.Index(args, "--dashboards"); i < 0 || args[i+1] != "/etc/runtimetruth/dashboards" {
		t.Errorf("no --dashboards: %q", args)
	}
	if strings.Contains(strings.Join(args, " "), "clickhouse://") {
		t.Errorf("a DSN in the arguments: %q", args)
	}
	env := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		env[str(get(e, "name"))] = str(get(e, "value"))
	}
	if got := env["RUNTIMETRUTH_CONSOLE_CLICKHOUSE_DSN"]; got != "clickhouse://default:$(RUNTIMETRUTH_CLICKHOUSE_PASSWORD)@ch:9000/default?dial_timeout=5s" {
		t.Errorf("the DSN: %q", got)
	}
	cm := find(t, objs, "ConfigMap", "rt-runtimetruth-console-dashboards")
	for _, f := range []string{"fleet.json", "audit-chain.json"} {
		if str(get(cm, "data", f)) == "" {
			t.Errorf("no %s in the console's dashboards", f)
		}
	}
}

// TestNotifierDeployment: the notifier is off by default; on, it is one
// pod (Recreate: one alert state) whose rendered config its own
// --check-config accepts, with its Service, ServiceAccount and egress to
// Alertmanager's port.
func TestNotifierDeployment(t *testing.T) {
	for _, o := range render(t, nil) {
		if str(get(o, "metadata", "labels", "app.kubernetes.io/component")) == "notifier" {
			t.Fatalf("the notifier is rendered by default: %s %s", o.kind(), o.name())
		}
	}
	bins := serviceBinaries(t)
	for _, tc := range []struct{ url, port string }{
		{"http://alertmanager.monitoring:9093", "9093"},
		{"https://alerts.example.com", "443"},
	} {
		objs := render(t, nil, "notifier.enabled=true", "notifier.alertmanager.url="+tc.url, "notifier.alertmanager.resendInterval=30s")
		d := find(t, objs, "Deployment", "rt-runtimetruth-notifier")
		if fmt.Sprint(get(d, "spec", "replicas")) != "1" || str(get(d, "spec", "strategy", "type")) != "Recreate" {
			t.Errorf("notifier: replicas %v, strategy %v; want one pod, Recreate", get(d, "spec", "replicas"), get(d, "spec", "strategy"))
		}
		checkConfig(t, bins["notifier"], "notifier", objs, d)
		checkPod(t, d)
		find(t, objs, "Service", "rt-runtimetruth-notifier")
		find(t, objs, "ServiceAccount", "rt-runtimetruth-notifier")
		np := find(t, objs, "NetworkPolicy", "rt-runtimetruth-notifier")
		var ports []string
		for _, rule := range get(np, "spec", "egress").([]any) {
			for _, p := range get(rule, "ports").([]any) {
				ports = append(ports, fmt.Sprint(get(p, "port")))
			}
		}
		for _, p := range []string{"53", "4222", tc.port} {
			if !slices.Contains(ports, p) {
				t.Errorf("%s: no egress to port %s: %v", tc.url, p, ports)
			}
		}
		var cfg map[string]any
		text := str(get(find(t, objs, "ConfigMap", "rt-runtimetruth-notifier"), "data", "notifier.yaml"))
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			t.Fatal(err)
		}
		if got := str(get(cfg, "alertmanager", "url")); got != tc.url {
			t.Errorf("alertmanager.url %q, want %q", got, tc.url)
		}
		if got := str(get(cfg, "alertmanager", "resend_interval")); got != "30s" {
			t.Errorf("alertmanager.resend_interval %q, want 30s", got)
		}
	}

	// A webhook: its URL and secret mounted from its Secret, named by
	// file in the config, which --check-config accepts.
	objs := render(t, nil, "notifier.enabled=true", "notifier.alertmanager.url=http://am:9093",
		"notifier.webhooks[0].name=ops", "notifier.webhooks[0].format=slack", "notifier.webhooks[0].existingSecret=rt-hook",
		"notifier.webhooks[0].secretKey=secret", "notifier.webhooks[0].groupBy={alertname}", "notifier.webhooks[0].groupInterval=5m",
		"notifier.webhooks[0].match.severity=critical")
	d := find(t, objs, "Deployment", "rt-runtimetruth-notifier")
	checkConfig(t, bins["notifier"], "notifier", objs, d)
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(str(get(find(t, objs, "ConfigMap", "rt-runtimetruth-notifier"), "data", "notifier.yaml"))), &cfg); err != nil {
		t.Fatal(err)
	}
	hook := list(get(cfg, "webhooks"))
	if len(hook) != 1 || str(get(hook[0], "url_file")) != "/etc/runtimetruth/secrets/webhooks/ops/url" ||
		str(get(hook[0], "secret_file")) != "/etc/runtimetruth/secrets/webhooks/ops/secret" || str(get(hook[0], "group_interval")) != "5m" ||
		str(get(hook[0], "match", "severity")) != "critical" {
		t.Errorf("webhooks %v", hook)
	}
	found := false
	for _, v := range list(podSpec(d)["volumes"]) {
		if str(get(v, "secret", "secretName")) == "rt-hook" {
			found = true
		}
	}
	if !found {
		t.Error("no volume of the webhook's Secret")
	}
}
