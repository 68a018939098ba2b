package buspolicy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// runOperatorServer starts a JetStream server in operator mode from
// o.ServerConfig (the operator JWT, a memory resolver preloaded with the
// account JWTs).
func runOperatorServer(t *testing.T, o *buspolicy.OperatorMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nats.conf")
	conf := fmt.Sprintf("host: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\n", t.TempDir()) + o.ServerConfig()
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err, "the rendered configuration is valid nats-server configuration")
	opts.NoLog, opts.NoSigs, opts.ServerName = true, true, "operator"
	require.Len(t, opts.TrustedOperators, 1)
	assert.Equal(t, int32(buspolicy.MaxPayload), opts.MaxPayload)
	_, url := natstest.Run(t, opts)
	return url
}

// connectCreds connects with a credentials file.
func connectCreds(t *testing.T, url string, creds []byte) *client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "user.creds")
	require.NoError(t, os.WriteFile(path, creds, 0o600))
	return connectAs(t, natsbus.Config{URL: url, CredsFile: path})
}

// userClaims decodes the user JWT of a credentials file.
func userClaims(t *testing.T, creds []byte) *jwt.UserClaims {
	t.Helper()
	tok, err := jwt.ParseDecoratedJWT(creds)
	require.NoError(t, err)
	uc, err := jwt.DecodeUserClaims(tok)
	require.NoError(t, err)
	return uc
}

// TestOperatorMode runs the operator-mode policy against a real server:
// host credentials issued by the collectors' scoped signing key publish
// and answer for their own host only, whatever the host name's encoding;
// the services' credentials do their work.
func TestOperatorMode(t *testing.T) {
	o, err := buspolicy.NewOperatorMode("runtimetruth-test")
	require.NoError(t, err)
	url := runOperatorServer(t, o)
	start := ctx(t)

	verifier := connectCreds(t, url, must(t)(o.IssueServiceCredential(buspolicy.Verifier)))
	require.NoError(t, verifierTopology().Ensure(start, verifier.js), "the verifier ensures the topology with its role's permissions")
	operator := connectCreds(t, url, must(t)(o.IssueOperatorCredential("admin")))

	credA, err := o.IssueHostCredential(hostA)
	require.NoError(t, err)
	uc := userClaims(t, credA)
	assert.Equal(t, events.Token(hostA), uc.Name, "the template's value")
	assert.Equal(t, o.AccountKey(buspolicy.AccountCollectors), uc.IssuerAccount)
	assert.True(t, uc.HasEmptyPermissions(), "a scoped user: its permissions are the signing key's template")
	a := connectCreds(t, url, credA)
	b := connectCreds(t, url, must(t)(o.IssueHostCredential(hostB)))

	t.Run("A", func(t *testing.T) { checkHostIsolation(t, a, operator, hostA, hostB) })
	t.Run("B", func(t *testing.T) { checkHostIsolation(t, b, operator, hostB, hostA) })

	// Host names that the template would turn into wildcards or several
	// tokens if the name were not events.Token of the host.
	for _, host := range []string{"Web-01.Example.COM", "*", ">", "a.b", "web 01"} {
		t.Run(fmt.Sprintf("host %q", host), func(t *testing.T) {
			c := connectCreds(t, url, must(t)(o.IssueHostCredential(host)))
			checkHostIsolation(t, c, operator, host, hostB)
		})
	}

	t.Run("the collectors' account has no JetStream", func(t *testing.T) {
		ac, err := jwt.DecodeAccountClaims(o.AccountJWTs()[o.AccountKey(buspolicy.AccountCollectors)])
		require.NoError(t, err)
		assert.False(t, ac.Limits.IsJSEnabled(), "no storage: no stream, no consumer")
		assert.Equal(t, int64(buspolicy.MaxPayload), ac.Limits.Payload)
		short, cancel := context.WithTimeout(ctx(t), time.Second)
		defer cancel()
		_, err = a.js.AccountInfo(short)
		require.Error(t, err)
		a.violation(t, "$JS.API.INFO")
	})

	t.Run("the shared collector credential publishes for any host", func(t *testing.T) {
		shared := connectCreds(t, url, must(t)(o.IssueServiceCredential(buspolicy.Collector)))
		for _, h := range []string{hostA, hostB} {
			_, err := shared.js.PublishMsg(ctx(t), hostEvidence(t, h))
			require.NoError(t, err, "only evidence signing tells %s from an impostor here", h)
		}
	})

	t.Run("an issuer holding only the signing key", func(t *testing.T) {
		_, err := buspolicy.NewHostIssuer(o.AccountKey(buspolicy.AccountCollectors), []byte("SUAxxx"))
		require.Error(t, err)
		other, err := nkeys.CreateAccount()
		require.NoError(t, err)
		seed, err := other.Seed()
		require.NoError(t, err)
		iss, err := buspolicy.NewHostIssuer(o.AccountKey(buspolicy.AccountCollectors), seed)
		require.NoError(t, err)
		creds, err := iss.Issue(hostA)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "forged.creds")
		require.NoError(t, os.WriteFile(path, creds, 0o600))
		_, err = natsbus.Connect(natsbus.Config{URL: url, CredsFile: path}, "forged")
		require.Error(t, err, "a key the account does not list signs no credential it accepts")
	})
}

// TestHostTagsLoseTheToken is why the host template is {{name()}} and not
// {{tag(host)}}: JWT tags are lower-cased (jwt.TagList, as nsc --tag),
// and a host's subject token keeps the host name's case and writes its
// escapes in upper case, so a tag would name subjects the collector never
// publishes to.
func TestHostTagsLoseTheToken(t *testing.T) {
	for _, host := range []string{hostA, "Web-01"} {
		var tags jwt.TagList
		tags.Add("host:" + events.Token(host))
		require.Len(t, tags, 1)
		assert.NotEqual(t, "host:"+events.Token(host), tags[0], "%s: the tag is not the token", host)
	}
	var tags jwt.TagList
	tags.Add("host:" + events.Token("web-01"))
	assert.Equal(t, "host:web-01", tags[0], "only an all-lower-case host without escapes survives")
	assert.Equal(t, "{{name()}}", buspolicy.HostTemplateName)
}

// must returns an issued credential, failing the test on an error.
func must(t *testing.T) func([]byte, error) []byte {
	return func(creds []byte, err error) []byte {
		t.Helper()
		require.NoError(t, err)
		return creds
	}
}
