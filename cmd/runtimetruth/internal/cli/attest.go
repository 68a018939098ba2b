package cli

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// Public-good Sigstore, the default of keyless signing.
const (
	defaultFulcioURL = "https://fulcio.sigstore.dev"
	defaultRekorURL  = "https://rekor.sigstore.dev"
)

// Environment variables read by attest and verify-attestation.
const (
	// envKeyPassword holds the password of a cosign-format private key
	// (cosign's own variable, so one setting serves both tools).
	envKeyPassword = "COSIGN_PASSWORD"
	// envIDToken holds an OIDC identity token for keyless signing
	// (cosign's and sigstore's variable).
	envIDToken = "SIGSTORE_ID_TOKEN"
)

// Size limits of the files attest and verify-attestation read.
const (
	maxKeySize   = 64 << 10
	maxTokenSize = 64 << 10
	maxRootSize  = 4 << 20
)

func newAttestCmd() *cobra.Command {
	var (
		stmtPath, bundlePath string
		keyPath              string
		tokenFile            string
		fulcioURL, rekorURL  string
		tsaURL, rootPath     string
		timeout              time.Duration
	)
	c := &cobra.Command{
		Use:   "attest BASELINE --statement FILE --bundle FILE [--key KEY]",
		Short: "Sign a baseline: write its in-toto statement and a Sigstore bundle",
		Long: `Build the in-toto Statement v1 of a baseline (subject runtimetruth-baseline,
its RFC 8785 sha256 digest; predicate type
https://sidelobe.dev/runtimetruth/attestation/v1), sign it with Sigstore, and
write the statement (RFC 8785 bytes) and the bundle. Neither file may exist:
attest refuses to overwrite, and leaves nothing behind when it fails.

With --key, the statement is signed with an ECDSA P-256 private key: PEM
(PKCS #8 or SEC 1) or cosign's encrypted format, whose password is read from
$COSIGN_PASSWORD. The bundle carries the key's hint and no transparency log
entry; verify it with --key and the public key.

Without --key, signing is keyless: an OIDC identity token ($SIGSTORE_ID_TOKEN
or --identity-token-file) is exchanged at Fulcio for a short-lived
certificate naming the token's identity, and the signature is logged in
Rekor and/or timestamped by a timestamp authority. The token is never
printed.

The bundle is a Sigstore v0.3 bundle holding a DSSE envelope of the
statement, which cosign verify-blob-attestation also verifies.

  BASELINE: sha256:<hex>
  STATEMENT: <path>
  BUNDLE: <path>`,
		Args: usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if stmtPath == "" || bundlePath == "" {
				return errors.New("attest requires --statement and --bundle")
			}
			if sameFile(stmtPath, bundlePath) {
				return errors.New("--statement and --bundle must be different files")
			}
			baseline, digest, err := readBaseline(args[0], c.InOrStdin())
			if err != nil {
				return err
			}
			stmt, err := statement.Build(baseline)
			if err != nil {
				return err
			}
			// Refuse before signing: a keyless signature costs a token
			// and a log entry.
			for _, p := range []string{stmtPath, bundlePath} {
				if _, err := os.Lstat(p); err == nil {
					return fmt.Errorf("%w: %s", statement.ErrExists, snapshot.Quote(p))
				}
			}
			var signer attestation.Signer
			if keyPath != "" {
				if tokenFile != "" {
					return errors.New("--key and --identity-token-file are exclusive: --key signs with the key, keyless signing uses the token")
				}
				signer, err = keySigner(keyPath)
			} else {
				signer, err = keylessSigner(attestation.KeylessConfig{
					FulcioURL: fulcioURL, RekorURL: rekorURL, TSAURL: tsaURL, Timeout: timeout,
				}, rootPath, tokenFile)
			}
			if err != nil {
				return err
			}
			signed, err := signer.Sign(c.Context(), stmt)
			if err != nil {
				return err
			}
			if err := writeOutputs(stmtPath, stmt, bundlePath, signed.Bundle); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "BASELINE: %s\nSTATEMENT: %s\nBUNDLE: %s\n", digest, printable(stmtPath), printable(bundlePath))
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&stmtPath, "statement", "", "write the in-toto statement to this new `FILE` (baseline.intoto.json)")
	f.StringVar(&bundlePath, "bundle", "", "write the Sigstore bundle to this new `FILE` (baseline.sigstore.json)")
	f.StringVar(&keyPath, "key", "", "sign with this ECDSA P-256 private `KEY` (PEM or cosign format; password in $COSIGN_PASSWORD) instead of keyless")
	f.StringVar(&tokenFile, "identity-token-file", "", "keyless: read the OIDC identity token from `FILE` (default $SIGSTORE_ID_TOKEN)")
	f.StringVar(&fulcioURL, "fulcio-url", defaultFulcioURL, "keyless: Fulcio `URL`")
	f.StringVar(&rekorURL, "rekor-url", defaultRekorURL, "keyless: Rekor `URL` (empty for no transparency log entry; then --timestamp-server-url is required)")
	f.StringVar(&tsaURL, "timestamp-server-url", "", "keyless: RFC 3161 timestamp authority `URL`")
	f.StringVar(&rootPath, "trusted-root", "", "keyless: verify the new bundle against this trusted root `FILE` before writing it")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "keyless: deadline of each request to Fulcio, Rekor and the timestamp authority")
	return c
}

// sameFile reports whether two paths name the same file, existing or not.
func sameFile(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	aa, errA := filepath.Abs(a)
	bb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == bb
}

func keySigner(path string) (attestation.Signer, error) {
	data, err := readFile(path, maxKeySize)
	if err != nil {
		return nil, fmt.Errorf("could not read key %s: %w", snapshot.Quote(path), err)
	}
	key, err := attestation.LoadPrivateKey(data, []byte(os.Getenv(envKeyPassword)))
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", snapshot.Quote(path), err)
	}
	return attestation.NewKeySigner(key)
}

func keylessSigner(cfg attestation.KeylessConfig, rootPath, tokenFile string) (attestation.Signer, error) {
	if rootPath != "" {
		tr, err := loadTrustedRoot(rootPath)
		if err != nil {
			return nil, err
		}
		cfg.TrustedRoot = tr
	}
	token := func(context.Context) (string, error) {
		if tokenFile != "" {
			data, err := readFile(tokenFile, maxTokenSize)
			if err != nil {
				return "", fmt.Errorf("could not read identity token %s: %w", snapshot.Quote(tokenFile), err)
			}
			return strings.TrimSpace(string(data)), nil
		}
		if t := strings.TrimSpace(os.Getenv(envIDToken)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("keyless signing needs an OIDC identity token: set $%s or --identity-token-file (or sign with --key)", envIDToken)
	}
	return attestation.NewKeylessSigner(cfg, token)
}

// writeOutputs writes the statement, then the bundle, each with exclusive
// create; if the bundle cannot be written, the statement is removed.
func writeOutputs(stmtPath string, stmt []byte, bundlePath string, bundle []byte) error {
	if err := statement.WriteFile(stmtPath, stmt, 0o644); err != nil {
		return fmt.Errorf("write statement: %w", err)
	}
	if err := statement.WriteFile(bundlePath, bundle, 0o644); err != nil {
		_ = os.Remove(stmtPath)
		return fmt.Errorf("write bundle: %w", err)
	}
	return nil
}

func newVerifyAttestationCmd() *cobra.Command {
	var (
		g                    gate
		live                 liveSource
		stmtPath, bundlePath string
		certIdentity, issuer string
		keyPath, rootPath    string
	)
	c := &cobra.Command{
		Use:   "verify-attestation BASELINE [CURRENT] --statement FILE --bundle FILE (--certificate-identity ID --certificate-oidc-issuer URL | --key PUB)",
		Short: "Authenticate a signed baseline, then verify the runtime against it (exit 0 pass, 2 drift, 1 error)",
		Long: `Verify a signed baseline, then the runtime against it, in this order:

  1. the signature and the signer: the bundle must verify and sign exactly
     the statement file, by the certificate identity and OIDC issuer given
     (both exact matches) under the trusted root, or by the public key;
  2. the statement: RFC 8785 canonical, of the exact shape, and naming the
     baseline's digest;
  3. only then the runtime: the current snapshot or live collection, the
     policy and --protect selectors, and the diff, as verify does.

Selectors and the policy narrow the runtime gate only; they never weaken the
authentication of the baseline, which is bound whole by its digest. Both
DSSE bundles (runtimetruth attest, cosign attest-blob) and message-signature
bundles (cosign sign-blob over the statement file) are accepted.

Keyless verification uses --trusted-root, or else the public-good Sigstore
trusted root fetched over TUF. Whatever the trusted root lists is required:
its Rekor logs make a transparency log entry mandatory, its CT logs an
embedded certificate timestamp.

  IDENTITY: VERIFIED
    certificate_identity: ...
    oidc_issuer: ...
  BASELINE: VERIFIED
    sha256: ...
  RUNTIME: PASS                      exit 0 (DRIFT and the diff: exit 2)

Any failure prints runtimetruth: error: ... and exits 1.`,
		Args: usageArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			// Flag combinations are usage errors, checked before any file
			// is read.
			if err := live.exclusive(len(args) == 2); err != nil {
				return err
			}
			if stmtPath == "" || bundlePath == "" {
				return errors.New("verify-attestation requires --statement and --bundle")
			}
			keyless := certIdentity != "" || issuer != ""
			switch {
			case keyless && keyPath != "":
				return errors.New("verify-attestation takes --certificate-identity and --certificate-oidc-issuer, or --key, not both")
			case !keyless && keyPath == "":
				return errors.New("verify-attestation requires --certificate-identity and --certificate-oidc-issuer (or --key)")
			case keyless && (strings.TrimSpace(certIdentity) == "" || strings.TrimSpace(issuer) == ""):
				return errors.New("verify-attestation requires both --certificate-identity and --certificate-oidc-issuer")
			case !keyless && rootPath != "":
				return errors.New("--trusted-root applies to keyless verification, not --key")
			}

			// 1. The baseline, then the statement and bundle files.
			baseline, digest, err := readBaseline(args[0], c.InOrStdin())
			if err != nil {
				return err
			}
			stmt, err := readFile(stmtPath, statement.MaxSize)
			if err != nil {
				return fmt.Errorf("could not read statement %s: %w", snapshot.Quote(stmtPath), err)
			}
			bundle, err := readFile(bundlePath, attestation.MaxBundleSize)
			if err != nil {
				return fmt.Errorf("could not read bundle %s: %w", snapshot.Quote(bundlePath), err)
			}

			// 2. Signature and signer, then statement and binding.
			policy := attestation.Policy{Identity: certIdentity, Issuer: issuer}
			if keyless {
				if policy.TrustedMaterial, err = trustedRoot(rootPath); err != nil {
					return err
				}
			} else {
				data, err := readFile(keyPath, maxKeySize)
				if err != nil {
					return fmt.Errorf("could not read public key %s: %w", snapshot.Quote(keyPath), err)
				}
				if policy.PublicKey, err = attestation.LoadPublicKey(data); err != nil {
					return fmt.Errorf("public key %s: %w", snapshot.Quote(keyPath), err)
				}
			}
			v, err := attestation.NewVerifier(policy)
			if err != nil {
				return err
			}
			res, err := v.Verify(digest, baseline.SchemaVersion, stmt, bundle)
			if err != nil {
				return err
			}

			// 3. Only now the runtime: selectors, current, diff.
			diffRes, sels, err := g.check(c, baseline, args, &live)
			if err != nil {
				return err
			}
			if err := printAttestedVerdict(c.OutOrStdout(), res, policy, diffRes, sels, g.json); err != nil {
				return err
			}
			if !diffRes.Empty() {
				return errDrift
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&stmtPath, "statement", "", "the in-toto statement `FILE` that was signed")
	f.StringVar(&bundlePath, "bundle", "", "the Sigstore bundle `FILE`")
	f.StringVar(&certIdentity, "certificate-identity", "", "keyless: the signer's certificate identity `ID` (exact match), e.g. https://github.com/ORG/REPO/.github/workflows/W.yml@refs/heads/main")
	f.StringVar(&issuer, "certificate-oidc-issuer", "", "keyless: the signer's OIDC issuer `URL` (exact match), e.g. https://token.actions.githubusercontent.com")
	f.StringVar(&keyPath, "key", "", "verify a key-based signature with this ECDSA P-256 public `KEY` (PEM) instead of an identity")
	f.StringVar(&rootPath, "trusted-root", "", "keyless: Sigstore trusted root `FILE` (default: the public-good trusted root, fetched over TUF)")
	g.register(c)
	live.register(c)
	return c
}

// trustedRoot loads the trusted root file, or fetches the public-good one.
func trustedRoot(path string) (root.TrustedMaterial, error) {
	if path == "" {
		tr, err := root.FetchTrustedRoot()
		if err != nil {
			return nil, fmt.Errorf("fetch the public-good Sigstore trusted root (give --trusted-root to verify offline): %w", err)
		}
		return tr, nil
	}
	return loadTrustedRoot(path)
}

// printAttestedVerdict prints what was verified, then the runtime verdict:
// as text, or as the verify report with "identity" (keyless) and
// "baseline" added.
func printAttestedVerdict(w io.Writer, res *attestation.Result, p attestation.Policy, d *diff.Result, sels []diff.Selector, asJSON bool) error {
	sum := strings.TrimPrefix(res.BaselineDigest, "sha256:")
	if asJSON {
		tree := report.New(d, sels).Tree()
		str := func(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }
		yes := jsontree.Value{Kind: jsontree.Bool, Bool: true}
		member := func(k string, v jsontree.Value) jsontree.Member { return jsontree.Member{Key: k, Value: v} }
		tree.Members = append(tree.Members, member("baseline", jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
			member("sha256", str(sum)), member("verified", yes),
		}}))
		if p.Keyless() {
			tree.Members = append(tree.Members, member("identity", jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
				member("certificate_identity", str(res.Identity)), member("oidc_issuer", str(res.Issuer)), member("verified", yes),
			}}))
		}
		b, err := pyjson.Marshal(tree, pyjson.Compact)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	var b strings.Builder
	b.WriteString("IDENTITY: VERIFIED\n")
	if p.Keyless() {
		fmt.Fprintf(&b, "  certificate_identity: %s\n  oidc_issuer: %s\n", printable(res.Identity), printable(res.Issuer))
	} else {
		fmt.Fprintf(&b, "  public_key: %s\n", keyFingerprint(p))
	}
	fmt.Fprintf(&b, "BASELINE: VERIFIED\n  sha256: %s\n", sum)
	if d.Empty() {
		b.WriteString("RUNTIME: PASS\n")
	} else {
		fmt.Fprintf(&b, "RUNTIME: DRIFT\n\n%s\n", d.Render())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// keyFingerprint is sha256:<hex> of the public key's PKIX DER.
func keyFingerprint(p attestation.Policy) string {
	der, err := x509.MarshalPKIXPublicKey(p.PublicKey)
	if err != nil {
		return "?"
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// readBaseline reads the baseline snapshot at path ("-": stdin) and its
// digest, which an attestation binds.
func readBaseline(path string, stdin io.Reader) (*snapshot.Snapshot, string, error) {
	baseline, err := readSnapshot(path, "baseline", stdin)
	if err != nil {
		return nil, "", err
	}
	digest, err := baseline.Digest()
	if err != nil {
		return nil, "", err
	}
	return baseline, digest, nil
}
