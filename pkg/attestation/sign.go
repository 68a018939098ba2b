package attestation

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// ErrSign means signing failed. The error never holds the key, its password or
// the OIDC token.
var ErrSign = errors.New("sign attestation")

// Signed is a signed statement.
type Signed struct {
	// Statement is the signed statement, as given.
	Statement []byte
	// Bundle is the Sigstore bundle (v0.3, a DSSE envelope carrying the
	// statement), JSON.
	Bundle []byte
	// Identity and Issuer name a keyless signer (the certificate's SAN
	// and OIDC issuer); empty for a key.
	Identity, Issuer string
	// KeyHint names the key of a key signature; empty for keyless.
	KeyHint string
}

// Signer signs statements into Sigstore bundles.
type Signer interface {
	Sign(ctx context.Context, stmt []byte) (*Signed, error)
}

// KeySigner signs with a static ECDSA P-256 key, offline: the bundle holds
// the DSSE envelope and the key's hint, nothing else (no transparency log,
// as `cosign attest-blob --key … --tlog-upload=false`).
type KeySigner struct {
	kp *keypair
}

// NewKeySigner returns a signer over key.
func NewKeySigner(key *ecdsa.PrivateKey) (*KeySigner, error) {
	kp, err := newKeypair(key)
	if err != nil {
		return nil, err
	}
	return &KeySigner{kp: kp}, nil
}

// Sign signs a statement.
func (s *KeySigner) Sign(ctx context.Context, stmt []byte) (*Signed, error) {
	b, err := bundleJSON(ctx, stmt, s.kp, sign.BundleOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSign, err)
	}
	return &Signed{Statement: stmt, Bundle: b, KeyHint: string(s.kp.hint)}, nil
}

// TokenSource returns an OIDC identity token (a JWT) for Fulcio.
type TokenSource func(ctx context.Context) (string, error)

// StaticToken returns a TokenSource of a fixed token.
func StaticToken(token string) TokenSource {
	return func(context.Context) (string, error) { return token, nil }
}

// KeylessConfig says where keyless signing gets its certificate and
// timestamps.
type KeylessConfig struct {
	// FulcioURL is the Fulcio base URL (https://fulcio.sigstore.dev).
	FulcioURL string
	// RekorURL is the Rekor base URL (https://rekor.sigstore.dev); empty
	// means no transparency log entry.
	RekorURL string
	// TSAURL is the full URL of an RFC 3161 timestamp authority
	// (https://timestamp.sigstore.dev/api/v1/timestamp); empty means none.
	// A short-lived certificate needs a signed time: set RekorURL or
	// TSAURL, or both.
	TSAURL string
	// Timeout bounds each request; 0 means 30 s.
	Timeout time.Duration
	// TrustedRoot, when set, verifies every bundle right after signing.
	TrustedRoot root.TrustedMaterial
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
}

// Validate checks the URLs.
func (c KeylessConfig) Validate() error {
	if c.FulcioURL == "" {
		return errors.New("keyless signing needs a Fulcio URL")
	}
	if c.RekorURL == "" && c.TSAURL == "" {
		return errors.New("keyless signing needs a Rekor URL or a timestamp authority URL (a short-lived certificate needs a signed time)")
	}
	for name, u := range map[string]string{"fulcio": c.FulcioURL, "rekor": c.RekorURL, "timestamp authority": c.TSAURL} {
		if u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
			return fmt.Errorf("%s URL: want an http(s) URL without user information", name)
		}
	}
	if c.Timeout < 0 {
		return errors.New("timeout: negative")
	}
	return nil
}

// KeylessSigner signs with an ephemeral key certified by Fulcio for the
// identity of an OIDC token, with a timestamp and/or a transparency log
// entry ("keyless", as `cosign sign-blob` without --key).
type KeylessSigner struct {
	cfg   KeylessConfig
	token TokenSource
}

// NewKeylessSigner returns a keyless signer; token is asked for a fresh
// token at every signature.
func NewKeylessSigner(cfg KeylessConfig, token TokenSource) (*KeylessSigner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSign, err)
	}
	if token == nil {
		return nil, fmt.Errorf("%w: no OIDC token source", ErrSign)
	}
	return &KeylessSigner{cfg: cfg, token: token}, nil
}

// Sign signs a statement.
func (s *KeylessSigner) Sign(ctx context.Context, stmt []byte) (*Signed, error) {
	token, err := s.token(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: oidc token: %w", ErrSign, redact(err, token))
	}
	if strings.TrimSpace(token) == "" {
		return nil, fmt.Errorf("%w: empty OIDC token", ErrSign)
	}
	signed, err := s.sign(ctx, stmt, token)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSign, redact(err, token))
	}
	return signed, nil
}

func (s *KeylessSigner) sign(ctx context.Context, stmt []byte, token string) (*Signed, error) {
	key, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	kp, err := newKeypair(key)
	if err != nil {
		return nil, err
	}
	timeout := s.cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	opts := sign.BundleOptions{
		CertificateProvider: sign.NewFulcio(&sign.FulcioOptions{
			BaseURL: strings.TrimSuffix(s.cfg.FulcioURL, "/"), Timeout: timeout, Retries: 1, Transport: s.cfg.Transport,
		}),
		CertificateProviderOptions: &sign.CertificateProviderOptions{IDToken: token},
		TrustedRoot:                s.cfg.TrustedRoot,
	}
	if s.cfg.TSAURL != "" {
		opts.TimestampAuthorities = []*sign.TimestampAuthority{sign.NewTimestampAuthority(&sign.TimestampAuthorityOptions{
			URL: s.cfg.TSAURL, Timeout: timeout, Retries: 1, Transport: s.cfg.Transport,
		})}
	}
	if s.cfg.RekorURL != "" {
		opts.TransparencyLogs = []sign.Transparency{sign.NewRekor(&sign.RekorOptions{
			BaseURL: strings.TrimSuffix(s.cfg.RekorURL, "/"), Timeout: timeout, Retries: 1,
		})}
	}
	b, err := bundleJSON(ctx, stmt, kp, opts)
	if err != nil {
		return nil, err
	}
	out := &Signed{Statement: stmt, Bundle: b}
	var parsed bundle.Bundle
	if err := parsed.UnmarshalJSON(b); err == nil {
		if vc, err := parsed.VerificationContent(); err == nil && vc.Certificate() != nil {
			out.Identity, out.Issuer = certIdentity(vc.Certificate())
		}
	}
	return out, nil
}

// certIdentity returns a Fulcio certificate's SAN and OIDC issuer.
func certIdentity(cert *x509.Certificate) (identity, issuer string) {
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return "", ""
	}
	return sum.SubjectAlternativeName, sum.Issuer
}

// bundleJSON signs stmt as an in-toto DSSE envelope into a bundle.
func bundleJSON(ctx context.Context, stmt []byte, kp sign.Keypair, opts sign.BundleOptions) ([]byte, error) {
	if len(stmt) == 0 || len(stmt) > statement.MaxSize {
		return nil, fmt.Errorf("statement of %d bytes (want 1 to %d)", len(stmt), statement.MaxSize)
	}
	opts.Context = ctx
	pb, err := sign.Bundle(&sign.DSSEData{Data: stmt, PayloadType: statement.PayloadType}, kp, opts)
	if err != nil {
		return nil, err
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, err
	}
	return b.MarshalJSON()
}

// redact removes a secret, and each long part of it, from an error's
// text. The result keeps no wrapped error, so nothing below it can print
// the secret either.
func redact(err error, secret string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if secret == "" {
		return errors.New(msg)
	}
	msg = strings.ReplaceAll(msg, secret, "[REDACTED]")
	for part := range strings.SplitSeq(secret, ".") {
		if len(part) >= 8 {
			msg = strings.ReplaceAll(msg, part, "[REDACTED]")
		}
	}
	return errors.New(msg)
}
