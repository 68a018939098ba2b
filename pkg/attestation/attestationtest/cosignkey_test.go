package attestationtest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
)

// The files read back as the key pair: the private key only with the
// password, the password file as the attestor reads it.
func TestWriteCosignKey(t *testing.T) {
	dir := t.TempDir()
	k := attestationtest.WriteCosignKey(t, dir, "pw")
	assert.Equal(t, filepath.Join(dir, "cosign.key"), k.KeyFile)
	assert.Equal(t, filepath.Join(dir, "cosign.pub"), k.PublicKeyFile)

	data, err := os.ReadFile(k.KeyFile)
	require.NoError(t, err)
	assert.Equal(t, k.PEM, data)
	priv, err := attestation.LoadPrivateKey(data, []byte("pw"))
	require.NoError(t, err)
	assert.True(t, k.Key.Equal(priv))
	_, err = attestation.LoadPrivateKey(data, []byte("wrong"))
	require.ErrorIs(t, err, attestation.ErrKey)

	data, err = os.ReadFile(k.PublicKeyFile)
	require.NoError(t, err)
	pub, err := attestation.LoadPublicKey(data)
	require.NoError(t, err)
	assert.True(t, k.Key.PublicKey.Equal(pub))

	passwordFile := k.WritePasswordFile(t)
	assert.Equal(t, filepath.Join(dir, "cosign.password"), passwordFile)
	data, err = os.ReadFile(passwordFile)
	require.NoError(t, err)
	assert.Equal(t, "pw\n", string(data))
}
