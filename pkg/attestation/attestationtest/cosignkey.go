package attestationtest

import (
	"crypto/ecdsa"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
)

// CosignKey is a key pair written as `cosign generate-key-pair` writes
// it: the private key in cosign's format, encrypted with Password, in
// KeyFile (cosign.key) and its public key in PublicKeyFile (cosign.pub).
type CosignKey struct {
	Key *ecdsa.PrivateKey
	// PEM is KeyFile's content.
	PEM      []byte
	Password string
	KeyFile  string
	// PublicKeyFile is the public key as PEM.
	PublicKeyFile string
}

// WriteCosignKey generates a key pair and writes it into dir, the private
// key encrypted with password.
func WriteCosignKey(tb testing.TB, dir, password string) *CosignKey {
	tb.Helper()
	key, err := attestation.GenerateKey()
	require.NoError(tb, err)
	k := &CosignKey{Key: key, Password: password, KeyFile: filepath.Join(dir, "cosign.key"), PublicKeyFile: filepath.Join(dir, "cosign.pub")}
	k.PEM, err = attestation.MarshalPrivateKey(key, []byte(password))
	require.NoError(tb, err)
	pub, err := attestation.MarshalPublicKey(key.Public())
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(k.KeyFile, k.PEM, 0o600))
	require.NoError(tb, os.WriteFile(k.PublicKeyFile, pub, 0o600))
	return k
}

// WritePasswordFile writes the password and a newline to cosign.password
// beside KeyFile, as the attestor's key_password_file holds it, and
// returns its path.
func (k *CosignKey) WritePasswordFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(filepath.Dir(k.KeyFile), "cosign.password")
	require.NoError(tb, os.WriteFile(path, []byte(k.Password+"\n"), 0o600))
	return path
}
