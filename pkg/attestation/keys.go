package attestation

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
)

// PEM block types of the private keys LoadPrivateKey reads.
const (
	// PEMPrivateKey is a PKCS #8 private key (openssl genpkey).
	PEMPrivateKey = "PRIVATE KEY"
	// PEMECPrivateKey is a SEC 1 EC private key (openssl ecparam -genkey).
	PEMECPrivateKey = "EC PRIVATE KEY"
	// PEMSigstorePrivateKey is cosign's password-encrypted key
	// (cosign generate-key-pair, import-key-pair).
	PEMSigstorePrivateKey = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// PEMCosignPrivateKey is the same format under its older name.
	PEMCosignPrivateKey = "ENCRYPTED COSIGN PRIVATE KEY"
)

// ErrKey means a key cannot be read or is not an ECDSA P-256 key. The error never
// holds key material or the password.
var ErrKey = errors.New("invalid key")

// LoadPrivateKey reads an ECDSA P-256 private key from PEM: PKCS #8, SEC 1,
// or cosign's encrypted format, which needs password (possibly empty). A
// plain key ignores password.
func LoadPrivateKey(pemData, password []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case PEMPrivateKey:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case PEMECPrivateKey:
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case PEMSigstorePrivateKey, PEMCosignPrivateKey:
		var der []byte
		if der, err = encrypted.Decrypt(block.Bytes, password); err != nil {
			// encrypted's messages name neither the key nor the password.
			return nil, fmt.Errorf("%w: decrypt %s: %w", ErrKey, block.Type, err)
		}
		key, err = x509.ParsePKCS8PrivateKey(der)
	default:
		return nil, fmt.Errorf("%w: PEM type %q (want %q, %q or %q)", ErrKey, block.Type, PEMPrivateKey, PEMECPrivateKey, PEMSigstorePrivateKey)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKey, block.Type, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: not an ECDSA P-256 key", ErrKey)
	}
	return ec, nil
}

// LoadPublicKey reads an ECDSA P-256 public key from a PEM "PUBLIC KEY"
// block (cosign.pub, openssl pkey -pubout).
func LoadPublicKey(pemData []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: PEM type %q (want \"PUBLIC KEY\")", ErrKey, block.Type)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: not an ECDSA P-256 public key", ErrKey)
	}
	return ec, nil
}

// MarshalPublicKey returns the PEM "PUBLIC KEY" of a key.
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// MarshalPrivateKey returns a private key as PEM: cosign's encrypted format
// when password is not nil (an empty password is allowed, as cosign
// allows), PKCS #8 otherwise.
func MarshalPrivateKey(key *ecdsa.PrivateKey, password []byte) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	if password == nil {
		return pem.EncodeToMemory(&pem.Block{Type: PEMPrivateKey, Bytes: der}), nil
	}
	enc, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, fmt.Errorf("%w: encrypt: %w", ErrKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMSigstorePrivateKey, Bytes: enc}), nil
}

// GenerateKey returns a new ECDSA P-256 key.
func GenerateKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// KeyHint returns the public key hint of a key: base64(sha256(PKIX DER)),
// the hint cosign and sigstore-go write into a key-signed bundle.
func KeyHint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrKey, err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// keypair is a sign.Keypair over a static ECDSA P-256 key.
type keypair struct {
	key    *ecdsa.PrivateKey
	hint   []byte
	pubPEM string
}

var _ sign.Keypair = (*keypair)(nil)

func newKeypair(key *ecdsa.PrivateKey) (*keypair, error) {
	if key == nil || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: not an ECDSA P-256 key", ErrKey)
	}
	hint, err := KeyHint(key.Public())
	if err != nil {
		return nil, err
	}
	pub, err := MarshalPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	return &keypair{key: key, hint: []byte(hint), pubPEM: string(pub)}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (k *keypair) GetHint() []byte { return k.hint }

func (k *keypair) GetKeyAlgorithm() string { return "ECDSA" }

func (k *keypair) GetPublicKey() crypto.PublicKey { return k.key.Public() }

func (k *keypair) GetPublicKeyPem() (string, error) { return k.pubPEM, nil }

// SignData returns the ASN.1 ECDSA signature over sha256(data), and the
// digest.
func (k *keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.key, sum[:])
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return sig, sum[:], nil
}
