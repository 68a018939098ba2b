// Package attestationtest provides in-memory Sigstore deployments for
// tests: a VirtualSigstore (sigstore-go's pkg/testing/ca) that signs
// bundles directly, and a Fulcio, a timestamp authority and a Rekor
// transparency log served over HTTP on the loopback interface for the
// keyless signer. Nothing reaches the network. WriteCosignKey writes a key
// pair in cosign's files for key signing.
package attestationtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/stretchr/testify/require"
)

const payloadType = "application/vnd.in-toto+json"

// Virtual is a VirtualSigstore: a Fulcio CA and a timestamp authority in
// memory. Make a new one per test: its CA is valid for an hour, its
// certificates for ten minutes.
type Virtual struct {
	VS *ca.VirtualSigstore
}

// NewVirtual returns a new virtual deployment.
func NewVirtual(tb testing.TB) *Virtual {
	tb.Helper()
	vs, err := ca.NewVirtualSigstore()
	require.NoError(tb, err)
	return &Virtual{VS: vs}
}

// TrustedRoot returns the deployment's trusted root: its Fulcio CA and its
// timestamp authority (no Rekor or CT log, so none is required).
func (v *Virtual) TrustedRoot(tb testing.TB) *root.TrustedRoot {
	tb.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, v.VS.FulcioCertificateAuthorities(), nil, v.VS.TimestampingAuthorities(), nil)
	require.NoError(tb, err)
	return tr
}

// TrustedRootJSON returns TrustedRoot as trusted_root.json.
func (v *Virtual) TrustedRootJSON(tb testing.TB) []byte {
	tb.Helper()
	return marshalRoot(tb, v.TrustedRoot(tb))
}

func marshalRoot(tb testing.TB, tr *root.TrustedRoot) []byte {
	tb.Helper()
	b, err := tr.MarshalJSON()
	require.NoError(tb, err)
	return b
}

// Sign returns a DSSE bundle of stmt signed by a certificate for identity
// (an e-mail SAN) from issuer, with a signed timestamp.
func (v *Virtual) Sign(tb testing.TB, identity, issuer string, stmt []byte) []byte {
	tb.Helper()
	return v.sign(tb, identity, issuer, &sign.DSSEData{Data: stmt, PayloadType: payloadType})
}

// SignBlob returns a message-signature bundle over stmt (what `cosign
// sign-blob` writes), signed as Sign does.
func (v *Virtual) SignBlob(tb testing.TB, identity, issuer string, stmt []byte) []byte {
	tb.Helper()
	return v.sign(tb, identity, issuer, &sign.PlainData{Data: stmt})
}

func (v *Virtual) sign(tb testing.TB, identity, issuer string, content sign.Content) []byte {
	tb.Helper()
	leaf, priv, err := v.VS.GenerateLeafCert(identity, issuer)
	require.NoError(tb, err)
	kp := &Keypair{Key: priv.(*ecdsa.PrivateKey)}
	pb, err := sign.Bundle(content, kp, sign.BundleOptions{CertificateProvider: certProvider(leaf.Raw)})
	require.NoError(tb, err)
	sig := pb.GetMessageSignature().GetSignature()
	if env := pb.GetDsseEnvelope(); env != nil {
		sig = env.GetSignatures()[0].GetSig()
	}
	ts, err := v.VS.TimestampResponse(sig)
	require.NoError(tb, err)
	pb.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{
		Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: ts}},
	}
	return marshalBundle(tb, pb)
}

// SignKey returns a DSSE bundle of stmt signed with key (no certificate,
// no timestamp), as `cosign attest-blob --key` writes it offline.
func SignKey(tb testing.TB, key *ecdsa.PrivateKey, stmt []byte) []byte {
	tb.Helper()
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: payloadType}, &Keypair{Key: key}, sign.BundleOptions{})
	require.NoError(tb, err)
	return marshalBundle(tb, pb)
}

// SignBlobKey returns a message-signature bundle over stmt signed with key,
// as `cosign sign-blob --key` writes it offline.
func SignBlobKey(tb testing.TB, key *ecdsa.PrivateKey, stmt []byte) []byte {
	tb.Helper()
	pb, err := sign.Bundle(&sign.PlainData{Data: stmt}, &Keypair{Key: key}, sign.BundleOptions{})
	require.NoError(tb, err)
	return marshalBundle(tb, pb)
}

func marshalBundle(tb testing.TB, pb *protobundle.Bundle) []byte {
	tb.Helper()
	b, err := bundle.NewBundle(pb)
	require.NoError(tb, err)
	out, err := b.MarshalJSON()
	require.NoError(tb, err)
	return out
}

type certProvider []byte

func (c certProvider) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// Keypair is a sign.Keypair over an ECDSA P-256 key.
type Keypair struct {
	Key *ecdsa.PrivateKey
}

var _ sign.Keypair = (*Keypair)(nil)

// GetHashAlgorithm is SHA2-256.
func (k *Keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

// GetSigningAlgorithm is ECDSA P-256 with SHA-256.
func (k *Keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

// GetHint is base64(sha256(PKIX DER)).
func (k *Keypair) GetHint() []byte {
	der, _ := x509.MarshalPKIXPublicKey(k.Key.Public())
	sum := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

// GetKeyAlgorithm is ECDSA.
func (k *Keypair) GetKeyAlgorithm() string { return "ECDSA" }

// GetPublicKey returns the public key.
func (k *Keypair) GetPublicKey() crypto.PublicKey { return k.Key.Public() }

// GetPublicKeyPem returns the public key as PEM.
func (k *Keypair) GetPublicKeyPem() (string, error) {
	der, err := x509.MarshalPKIXPublicKey(k.Key.Public())
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// SignData signs sha256(data).
func (k *Keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := ecdsa.SignASN1(rand.Reader, k.Key, sum[:])
	return sig, sum[:], err
}

// Token returns an unsigned OIDC identity token (a JWT) for identity from
// issuer: an e-mail claim (verified) when identity holds '@' and no
// "://", a subject claim otherwise. Servers' Fulcio trusts it as is.
func Token(identity, issuer string) string {
	claims := map[string]any{"iss": issuer, "aud": "sigstore", "exp": time.Now().Add(time.Hour).Unix()}
	if isEmail(identity) {
		claims["email"], claims["email_verified"], claims["sub"] = identity, true, identity
	} else {
		claims["sub"] = identity
	}
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	payload, _ := json.Marshal(claims)
	return enc.EncodeToString(header) + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString([]byte("unsigned-test-token-signature"))
}

func isEmail(s string) bool { return strings.Contains(s, "@") && !strings.Contains(s, "://") }

// Servers is a Fulcio (POST /api/v2/signingCert), an RFC 3161 timestamp
// authority (POST /api/v1/timestamp) and a Rekor transparency log (Rekor)
// on httptest servers, with their own CA and log key. Fulcio certifies
// any requested key for the identity and issuer of the bearer token after
// checking the proof of possession; it does not verify the token's
// signature.
type Servers struct {
	// FulcioURL, TSAURL and RekorURL are the services' URLs.
	FulcioURL, TSAURL, RekorURL string
	// Rekor is the transparency log.
	Rekor *Rekor
	// Requests counts the requests served.
	Requests atomic.Int64
	// Tokens receives every bearer token Fulcio was sent.
	Tokens chan string

	rootCert, fulcioCert *x509.Certificate
	fulcioKey            *ecdsa.PrivateKey
	tsaRoot, tsaInter    *x509.Certificate
	tsaLeaf              *x509.Certificate
	tsaKey               *ecdsa.PrivateKey
	start                time.Time
}

// NewServers starts the servers; they stop when the test ends.
func NewServers(tb testing.TB) *Servers {
	tb.Helper()
	s := &Servers{Tokens: make(chan string, 64), start: time.Now().Add(-5 * time.Hour)}
	var rootKey *ecdsa.PrivateKey
	var err error
	s.rootCert, rootKey, err = ca.GenerateRootCa()
	require.NoError(tb, err)
	s.fulcioCert, s.fulcioKey, err = ca.GenerateFulcioIntermediate(s.rootCert, rootKey)
	require.NoError(tb, err)
	var tsaInterKey *ecdsa.PrivateKey
	s.tsaInter, tsaInterKey, err = ca.GenerateTSAIntermediate(s.rootCert, rootKey)
	require.NoError(tb, err)
	s.tsaRoot = s.rootCert
	s.tsaKey, err = ecdsa.GenerateKey(s.fulcioKey.Curve, rand.Reader)
	require.NoError(tb, err)
	// The leaf must be valid when the timestamps are made: from now on,
	// for as long as the intermediate (two hours).
	s.tsaLeaf, err = tsaLeafCert(s.tsaKey, s.tsaInter, tsaInterKey)
	require.NoError(tb, err)

	fulcio := httptest.NewServer(http.HandlerFunc(s.fulcio))
	tb.Cleanup(fulcio.Close)
	tsa := httptest.NewServer(http.HandlerFunc(s.tsa))
	tb.Cleanup(tsa.Close)
	s.FulcioURL, s.TSAURL = fulcio.URL, tsa.URL+"/api/v1/timestamp"
	s.Rekor = NewRekor(tb)
	s.RekorURL = s.Rekor.URL
	return s
}

// RootOption adds to the trusted root of Servers.
type RootOption func(*rootParts)

type rootParts struct {
	rekor bool
}

// WithRekor lists the transparency log in the trusted root, which makes a
// verified log entry mandatory for the attestation verifier (and gives it
// a signed time: the entry's integrated time).
func WithRekor() RootOption { return func(p *rootParts) { p.rekor = true } }

// TrustedRoot returns the servers' trusted root: the Fulcio CA and the
// timestamp authority, and the Rekor log WithRekor.
func (s *Servers) TrustedRoot(tb testing.TB, opts ...RootOption) *root.TrustedRoot {
	tb.Helper()
	var parts rootParts
	for _, o := range opts {
		o(&parts)
	}
	var logs map[string]*root.TransparencyLog
	if parts.rekor {
		logs = s.Rekor.Logs()
	}
	fca := &root.FulcioCertificateAuthority{
		Root: s.rootCert, Intermediates: []*x509.Certificate{s.fulcioCert}, ValidityPeriodStart: s.start, URI: s.FulcioURL,
	}
	tsa := &root.SigstoreTimestampingAuthority{
		Root: s.tsaRoot, Intermediates: []*x509.Certificate{s.tsaInter}, Leaf: s.tsaLeaf, ValidityPeriodStart: s.start, URI: s.TSAURL,
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fca}, nil, []root.TimestampingAuthority{tsa}, logs)
	require.NoError(tb, err)
	return tr
}

// TrustedRootJSON returns TrustedRoot as trusted_root.json.
func (s *Servers) TrustedRootJSON(tb testing.TB, opts ...RootOption) []byte {
	tb.Helper()
	return marshalRoot(tb, s.TrustedRoot(tb, opts...))
}

var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}
)

func (s *Servers) fulcio(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/api/v2/signingCert" {
		http.NotFound(w, r)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		http.Error(w, "no bearer token", http.StatusUnauthorized)
		return
	}
	select {
	case s.Tokens <- token:
	default:
	}
	var claims struct {
		Iss   string `json:"iss"`
		Sub   string `json:"sub"`
		Email string `json:"email"`
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		http.Error(w, "malformed token", http.StatusUnauthorized)
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &claims) != nil || claims.Iss == "" {
		http.Error(w, "malformed token", http.StatusUnauthorized)
		return
	}
	subject := claims.Sub
	if claims.Email != "" {
		subject = claims.Email
	}
	var req struct {
		PublicKeyRequest struct {
			PublicKey struct {
				Content string `json:"content"`
			} `json:"publicKey"`
			ProofOfPossession string `json:"proofOfPossession"`
		} `json:"publicKeyRequest"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	block, _ := pem.Decode([]byte(req.PublicKeyRequest.PublicKey.Content))
	if block == nil {
		http.Error(w, "bad public key", http.StatusBadRequest)
		return
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	ecPub, ok := pub.(*ecdsa.PublicKey)
	if err != nil || !ok {
		http.Error(w, "bad public key", http.StatusBadRequest)
		return
	}
	pop, err := base64.StdEncoding.DecodeString(req.PublicKeyRequest.ProofOfPossession)
	sum := sha256.Sum256([]byte(subject))
	if err != nil || !ecdsa.VerifyASN1(ecPub, sum[:], pop) {
		http.Error(w, "proof of possession does not verify", http.StatusBadRequest)
		return
	}
	v2, _ := asn1.MarshalWithParams(claims.Iss, "utf8")
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(10 * time.Minute),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{
			{Id: oidIssuerV1, Value: []byte(claims.Iss)},
			{Id: oidIssuerV2, Value: v2},
		},
	}
	if isEmail(subject) {
		tmpl.EmailAddresses = []string{subject}
	} else if u, err := parseURL(subject); err == nil {
		tmpl.URIs = append(tmpl.URIs, u)
	} else {
		http.Error(w, "unsupported subject", http.StatusBadRequest)
		return
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.fulcioCert, ecPub, s.fulcioKey)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	chain := []string{
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.fulcioCert.Raw})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.rootCert.Raw})),
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"signedCertificateEmbeddedSct": map[string]any{"chain": map[string]any{"certificates": chain}},
	})
}

func (s *Servers) tsa(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/timestamp" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, "bad timestamp request", http.StatusBadRequest)
		return
	}
	ts := timestamp.Timestamp{
		HashAlgorithm: req.HashAlgorithm, HashedMessage: req.HashedMessage, Time: time.Now(),
		Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2}, Nonce: req.Nonce, ExtraExtensions: req.Extensions,
	}
	resp, err := ts.CreateResponseWithOpts(s.tsaLeaf, s.tsaKey, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	_, _ = io.Copy(w, bytes.NewReader(resp))
}

// tsaLeafCert issues a timestamping leaf valid for as long as its
// intermediate (ca.GenerateTSALeafCert's is valid ten minutes only).
func tsaLeafCert(key *ecdsa.PrivateKey, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, error) {
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "runtimetruth test tsa"},
		NotBefore:    parent.NotBefore,
		NotAfter:     parent.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: eku},
		},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, errors.New("not an absolute URL")
	}
	return u, nil
}
