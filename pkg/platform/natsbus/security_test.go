package natsbus_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus/natsbustest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func TestConnectWithMutualTLS(t *testing.T) {
	p := natsbustest.NewPKI(t)
	url := natsbustest.RunMutualTLS(t, p)

	cfg := natsbus.Config{URL: url, TLS: natsbus.TLSConfig{CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey}}
	require.NoError(t, cfg.Validate())
	nc, err := natsbus.Connect(cfg, "tls-client")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())
	state, err := nc.TLSConnectionState()
	require.NoError(t, err)
	assert.True(t, state.HandshakeComplete)

	// Without the client certificate the server refuses. Under TLS 1.3 the
	// refusal may reach the client only after its side of the handshake
	// completed, looking like a dropped connection, so Connect may return a
	// connection that keeps retrying; either way it never connects.
	bare, err := natsbus.Connect(natsbus.Config{URL: url, TLS: natsbus.TLSConfig{CAFile: p.CA}}, "no-cert")
	if err == nil {
		defer bare.Close()
		require.Error(t, bare.FlushTimeout(500*time.Millisecond), "connected without a client certificate")
		assert.False(t, bare.IsConnected())
	}
	// A server certificate from another CA is not trusted.
	other := natsbustest.NewPKI(t)
	_, err = natsbus.Connect(natsbus.Config{URL: url, TLS: natsbus.TLSConfig{CAFile: other.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey}}, "wrong-ca")
	require.Error(t, err)
}

func TestConnectWithNKeySeedFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	opts := natstest.Options(t.TempDir())
	opts.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	_, url := natstest.Run(t, opts)

	nc, err := natsbus.Connect(natsbus.Config{URL: url, NKeySeedFile: writeFile(t, "user.nk", seed)}, "nkey-client")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())

	other, err := nkeys.CreateUser()
	require.NoError(t, err)
	otherSeed, err := other.Seed()
	require.NoError(t, err)
	_, err = natsbus.Connect(natsbus.Config{URL: url, NKeySeedFile: writeFile(t, "other.nk", otherSeed)}, "nkey-client")
	require.Error(t, err, "an unknown nkey is refused")
}

func TestConnectWithCredsFile(t *testing.T) {
	operator, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opub, err := operator.PublicKey()
	require.NoError(t, err)
	account, err := nkeys.CreateAccount()
	require.NoError(t, err)
	apub, err := account.PublicKey()
	require.NoError(t, err)
	ajwt, err := jwt.NewAccountClaims(apub).Encode(operator)
	require.NoError(t, err)
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	upub, err := user.PublicKey()
	require.NoError(t, err)
	useed, err := user.Seed()
	require.NoError(t, err)
	ujwt, err := jwt.NewUserClaims(upub).Encode(account)
	require.NoError(t, err)
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	require.NoError(t, err)

	resolver := &server.MemAccResolver{}
	require.NoError(t, resolver.Store(apub, ajwt))
	opts := natstest.Options(t.TempDir())
	opts.JetStream = false
	opts.TrustedKeys = []string{opub}
	opts.AccountResolver = resolver
	_, url := natstest.Run(t, opts)

	nc, err := natsbus.Connect(natsbus.Config{URL: url, CredsFile: writeFile(t, "user.creds", creds)}, "creds-client")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())

	_, err = natsbus.Connect(natsbus.Config{URL: url, User: "someone", Password: "x"}, "creds-client")
	require.Error(t, err, "operator mode takes no passwords")
}

func TestConnectWithPasswordFile(t *testing.T) {
	url := runAuthServer(t, 0)
	cfg := natsbus.Config{URL: url, User: testUser, PasswordFile: writeFile(t, "password", []byte(testPassword+"\n"))}
	require.NoError(t, cfg.Validate())
	nc, err := natsbus.Connect(cfg, "test-client")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())

	cfg.PasswordFile = filepath.Join(t.TempDir(), "missing")
	_, err = natsbus.Connect(cfg, "test-client")
	require.ErrorContains(t, err, "password file")

	require.Error(t, natsbus.Config{URL: url, User: "u", Password: "p", PasswordFile: "f"}.Validate())
	require.Error(t, natsbus.Config{URL: url, PasswordFile: "f"}.Validate())
}

func TestConfigKeysAreStrict(t *testing.T) {
	type svc struct {
		NATS natsbus.Config `mapstructure:"nats"`
	}
	good := writeFile(t, "good.yaml", []byte("nats:\n  url: tls://nats:4222\n  user: collector\n  password_file: /run/secrets/nats\n"+
		"  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}\n"))
	cfg := svc{NATS: natsbus.NewDefaultConfig()}
	require.NoError(t, config.Load(good, "RT_TEST", &cfg, nil))
	assert.Equal(t, "/ca.pem", cfg.NATS.TLS.CAFile)
	require.NoError(t, cfg.NATS.Validate())

	for _, text := range []string{"nats: {tls: {ca: /ca.pem}}\n", "nats: {token: x}\n", "nats: {nkey_seed: x}\n"} {
		cfg := svc{NATS: natsbus.NewDefaultConfig()}
		require.Error(t, config.Load(writeFile(t, "bad.yaml", []byte(text)), "RT_TEST", &cfg, nil), text)
	}
}
