// Package natsbustest runs in-process NATS servers that require what a
// production server does — TLS with client certificates, a user and
// password — for the tests of whatever connects through natsbus.Config
// (services, commands). Every file it writes lives in a t.TempDir(); every
// server stops when the test ends.
package natsbustest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// PKI is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, as PEM file paths.
type PKI struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewPKI writes a new CA, server and client certificate, valid for an
// hour around now.
func NewPKI(tb testing.TB) PKI {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(tb, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "runtimetruth test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(tb, err)
	ca, err := x509.ParseCertificate(caDER)
	must(tb, err)
	leaf := func(serial int64, usage x509.ExtKeyUsage, name string) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(tb, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		must(tb, err)
		kder, err := x509.MarshalECPrivateKey(key)
		must(tb, err)
		return writePEM(tb, dir, name+".pem", "CERTIFICATE", der), writePEM(tb, dir, name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := PKI{CA: writePEM(tb, dir, "ca.pem", "CERTIFICATE", caDER)}
	p.ServerCert, p.ServerKey = leaf(2, x509.ExtKeyUsageServerAuth, "server")
	p.ClientCert, p.ClientKey = leaf(3, x509.ExtKeyUsageClientAuth, "client")
	return p
}

// RunMutualTLS starts a JetStream server that serves TLS with p's server
// certificate and accepts only clients with a certificate of p's CA. It
// returns the client URL.
func RunMutualTLS(tb testing.TB, p PKI) string {
	tb.Helper()
	opts := natstest.Options(tb.TempDir())
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.ServerKey, CaFile: p.CA, Verify: true})
	must(tb, err)
	opts.TLS, opts.TLSVerify, opts.TLSConfig, opts.TLSTimeout = true, true, tc, 2
	_, url := natstest.Run(tb, opts)
	return url
}

// RunUserPassword starts a JetStream server that accepts only user with
// password. It returns the client URL.
func RunUserPassword(tb testing.TB, user, password string) string {
	tb.Helper()
	opts := natstest.Options(tb.TempDir())
	opts.Username, opts.Password = user, password
	_, url := natstest.Run(tb, opts)
	return url
}

// WriteFile writes data to name in a new temporary directory (0600) and
// returns its path: a password file, say.
func WriteFile(tb testing.TB, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	must(tb, os.WriteFile(path, data, 0o600))
	return path
}

func writePEM(tb testing.TB, dir, name, typ string, der []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	must(tb, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("natsbustest: %v", err)
	}
}
