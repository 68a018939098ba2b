package deployed_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// The NATS identities of a deployment: the services', each host's
// collector's, and the operator's (the runtimetruth CLI, and the harness
// reading streams and buckets).
const (
	idVerifier = buspolicy.Verifier
	idAuditor  = buspolicy.Auditor
	idOperator = "operator"
	idConsole  = buspolicy.Console
	idNotifier = buspolicy.Notifier
)

// idHost is the identity of host's collector.
func idHost(host string) string { return "host " + host }

// mode is one of buspolicy's ways to configure nats-server.
type mode struct {
	name string
	// policy renders the server's policy configuration and makes every
	// identity's credential in dir: it returns the configuration, the
	// server's environment (the passwords the configuration names) and
	// how each identity connects (its URL left out).
	policy func(t *testing.T, dir string, hosts []string) (conf string, env []string, ids map[string]natsbus.Config)
}

var modes = []mode{
	{"accounts", accountsPolicy},
	{"operator", operatorPolicy},
}

// accountsPolicy is buspolicy.ServerConfig: a user per service with its
// role, and a user per host with HostRole, passwords in the server's
// environment; no shared collector user. The operator's user goes into the
// pipeline's account, by hand: ServerConfig renders the services' users
// only, and docs/security.md says to add the operator's there.
func accountsPolicy(t *testing.T, dir string, hosts []string) (string, []string, map[string]natsbus.Config) {
	t.Helper()
	ids := map[string]natsbus.Config{}
	var env []string
	user := func(id, name string) {
		pw := rand.Text()
		file := filepath.Join(dir, name+".password")
		require.NoError(t, os.WriteFile(file, []byte(pw+"\n"), 0o600))
		env = append(env, buspolicy.PasswordEnv(name)+"="+pw)
		ids[id] = natsbus.Config{User: name, PasswordFile: file}
	}
	users := map[string]string{}
	for _, s := range []string{buspolicy.Verifier, buspolicy.Auditor, buspolicy.Console, buspolicy.Notifier} {
		users[s] = "rt-" + s
		user(s, users[s])
	}
	var hs []buspolicy.Host
	for i, h := range hosts {
		name := fmt.Sprintf("rt-collector-%d", i)
		hs = append(hs, buspolicy.Host{Name: h, User: name})
		user(idHost(h), name)
	}
	conf, err := buspolicy.ServerConfig(users, hs...)
	require.NoError(t, err)
	anchor := fmt.Sprintf("  %s {\n    jetstream: enabled\n    users = [\n", buspolicy.AccountPipeline)
	require.Contains(t, conf, anchor, "the pipeline's account and its users")
	user(idOperator, "rt-operator")
	conf = strings.Replace(conf, anchor, anchor+
		"      # the operator (the runtimetruth CLI): no restrictions, added as docs/security.md says\n"+
		"      { user: \"rt-operator\", password: $"+buspolicy.PasswordEnv("rt-operator")+" }\n", 1)
	return conf, env, ids
}

// operatorPolicy is buspolicy.OperatorMode: the server trusts the
// operator and preloads the accounts; every identity gets a .creds file
// (a host's issued by the collectors' scoped signing key).
func operatorPolicy(t *testing.T, dir string, hosts []string) (string, []string, map[string]natsbus.Config) {
	t.Helper()
	o, err := buspolicy.NewOperatorMode("runtimetruth-deployed")
	require.NoError(t, err)
	ids := map[string]natsbus.Config{}
	creds := func(id string, b []byte, err error) {
		require.NoError(t, err, id)
		file := filepath.Join(dir, strings.ReplaceAll(id, " ", "-")+".creds")
		require.NoError(t, os.WriteFile(file, b, 0o600))
		ids[id] = natsbus.Config{CredsFile: file}
	}
	for _, s := range []string{buspolicy.Verifier, buspolicy.Auditor, buspolicy.Console, buspolicy.Notifier} {
		b, err := o.IssueServiceCredential(s)
		creds(s, b, err)
	}
	for _, h := range hosts {
		b, err := o.IssueHostCredential(h)
		creds(idHost(h), b, err)
	}
	b, err := o.IssueOperatorCredential("operator")
	creds(idOperator, b, err)
	return o.ServerConfig(), nil, ids
}

// deployment is a running nats-server with the policy of a mode, the
// credentials of every identity, and the harness's connection as the
// operator.
type deployment struct {
	t    *testing.T
	dir  string
	log  *testLog
	url  string
	ids  map[string]natsbus.Config
	home string // the CLI's home and state directory
	js   jetstream.JetStream
}

// deploy starts nats-server from the policy of m (and a JetStream store),
// for hosts' collectors.
func deploy(t *testing.T, m mode, hosts ...string) *deployment {
	t.Helper()
	d := &deployment{t: t, dir: t.TempDir(), log: newTestLog(t)}
	d.home = filepath.Join(d.dir, "home")
	secrets, ports, store := filepath.Join(d.dir, "secrets"), filepath.Join(d.dir, "ports"), filepath.Join(d.dir, "jetstream")
	for _, dir := range []string{d.home, secrets, ports, store} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	policy, env, ids := m.policy(t, secrets, hosts)
	d.ids = ids
	conf := fmt.Sprintf("host: 127.0.0.1\nport: -1\nserver_name: deployed-%s\nports_file_dir: %q\njetstream { store_dir: %q }\n\n",
		m.name, ports, store) + policy
	path := filepath.Join(d.dir, "nats.conf")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	d.log.printf("harness", "nats.conf:\n%s", conf)
	srv := startProc(t, d.log, "nats-server", bins.natsServer, environ(d.home, env...), "-c", path)
	// The server writes its client URL into the ports file
	// (nats-server_<pid>.ports) once it listens.
	portsFile := filepath.Join(ports, fmt.Sprintf("nats-server_%d.ports", srv.cmd.Process.Pid))
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if srv.exited() {
			require.FailNow(t, "nats-server exited", "exit code %d", srv.cmd.ProcessState.ExitCode())
		}
		b, err := os.ReadFile(portsFile)
		if err != nil {
			return err
		}
		var p struct {
			Nats []string `json:"nats"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		if len(p.Nats) == 0 {
			return errors.New("no client URL in the ports file")
		}
		d.url = p.Nats[0]
		return nil
	})
	nc, err := natsbus.Dial(d.conn(idOperator), "deployed-harness")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	d.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return d
}

// conn is how identity id connects.
func (d *deployment) conn(id string) natsbus.Config {
	cfg, ok := d.ids[id]
	require.True(d.t, ok, "no credential for %s", id)
	cfg.URL = d.url
	return cfg
}

// flags are the --nats* flags that connect a service or the CLI as id.
func (d *deployment) flags(id string) []string {
	cfg := d.conn(id)
	args := []string{"--nats", cfg.URL}
	if cfg.CredsFile != "" {
		return append(args, "--nats-creds", cfg.CredsFile)
	}
	return append(args, "--nats-user", cfg.User, "--nats-password-file", cfg.PasswordFile)
}

// dial connects as id with opts.
func (d *deployment) dial(id string, opts ...nats.Option) *nats.Conn {
	nc, err := natsbus.Dial(d.conn(id), "deployed-"+strings.ReplaceAll(id, " ", "-"), opts...)
	require.NoError(d.t, err)
	d.t.Cleanup(nc.Close)
	return nc
}

// service starts a runtimetruth service: bin with the configuration file
// path (d.config), connecting as id, and waits until it is ready.
func (d *deployment) service(name, bin, id, path string, extra ...string) *proc {
	d.t.Helper()
	args := append([]string{"-config", path}, d.flags(id)...)
	p := startProc(d.t, d.log, name, bin, environ(d.home), append(args, extra...)...)
	waitReady(d.t, p)
	return p
}

// config writes a service's configuration file (JSON) and returns its
// path.
func (d *deployment) config(name string, cfg map[string]any) string {
	b, err := json.MarshalIndent(cfg, "", "  ")
	require.NoError(d.t, err)
	path := filepath.Join(d.dir, name+".json")
	require.NoError(d.t, os.WriteFile(path, b, 0o600))
	return path
}

// cli runs the runtimetruth CLI as the operator.
func (d *deployment) cli(args ...string) result {
	d.t.Helper()
	return d.run(append(args, d.flags(idOperator)...)...)
}

// run runs the runtimetruth CLI without connection flags.
func (d *deployment) run(args ...string) result {
	d.t.Helper()
	return runCommand(d.t, d.log, environ(d.home, "USER=operator", "RUNTIMETRUTH_STATE_DIR="+filepath.Join(d.home, "state")), bins.cli, args...)
}
