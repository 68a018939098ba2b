package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newBaselineCmd() *cobra.Command {
	var bus busFlags
	c := &cobra.Command{
		Use:   "baseline",
		Short: "Manage the reviewed baselines the verifier checks snapshots against",
		Long: `Baselines live in the bus's "baselines" key-value bucket, one per target
(KIND:IDENTIFIER, as in a snapshot's target). Each holds the snapshot, the
selectors that gate it, and who approved it and when; "baseline sign" stores
its Sigstore attestation next to it.`,
		Args: cobra.NoArgs,
		RunE: helpRun,
	}
	var (
		protect          []string
		identity, issuer string
	)
	by := os.Getenv("USER")
	author := func() string { return events.Source("cli", by) }
	approve := newBaselineApproveCmd(&bus, &by, author)

	put := &cobra.Command{
		Use:   "put FILE",
		Short: "Store a reviewed snapshot file as the baseline of its target",
		Args:  usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			snap, err := readSnapshot(args[0], "baseline", c.InOrStdin())
			if err != nil {
				return err
			}
			if _, err := diff.ParseSelectors(protect); err != nil {
				return err
			}
			id, err := requiredIdentity(identity, issuer)
			if err != nil {
				return err
			}
			raw, err := snap.Marshal(false)
			if err != nil {
				return err
			}
			s, err := bus.session(c.Context(), author())
			if err != nil {
				return err
			}
			defer s.close()
			t := events.Target{Kind: snap.Target.Kind, Identifier: snap.Target.Identifier}
			b, err := s.baselines.Put(c.Context(), events.Baseline{
				Target: t, Snapshot: raw, Protect: protect, RequiredIdentity: id, ApprovedBy: by,
			})
			if err != nil {
				return err
			}
			return printBaseline(c.OutOrStdout(), "STORED", b)
		},
	}
	put.Flags().StringArrayVar(&protect, "protect", nil, "selectors that gate the baseline (repeatable)")
	put.Flags().StringVar(&by, "by", by, "approver recorded in the baseline")
	identityFlags(put, &identity, &issuer, "default: none")

	get := &cobra.Command{
		Use:   "get TARGET",
		Short: "Print the baseline snapshot of TARGET (its digest: baseline show or list)",
		Args:  usageArgs(1, 1),
		RunE: bus.onTarget(nil, func(c *cobra.Command, s *baselineSession) error {
			b, err := s.baselines.Get(c.Context(), s.target)
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(append(b.Snapshot, '\n'))
			return err
		}),
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the baselines",
		Args:  usageArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := bus.session(c.Context(), "")
			if err != nil {
				return err
			}
			defer s.close()
			bs, err := s.baselines.List(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(c.OutOrStdout()).Encode(bs)
			}
			tw := newTable(c.OutOrStdout())
			_, _ = fmt.Fprintln(tw, "TARGET\tDIGEST\tPROTECT\tAPPROVED")
			for _, b := range bs {
				_, _ = fmt.Fprintf(tw, "%s\t%s\t%d selector(s)\t%s by %s\n", printable(b.Target.String()), printable(b.Digest), len(b.Protect), b.ApprovedAt.Format("2006-01-02 15:04:05Z07:00"), printable(b.ApprovedBy))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	rm := &cobra.Command{
		Use:   "rm TARGET",
		Short: "Remove the baseline of TARGET",
		Args:  usageArgs(1, 1),
		RunE: bus.onTarget(author, func(c *cobra.Command, s *baselineSession) error {
			if err := s.baselines.Delete(c.Context(), s.target, by); err != nil {
				return err
			}
			_, err := fmt.Fprintf(c.OutOrStdout(), "REMOVED: %s\n", printable(s.target.String()))
			return err
		}),
	}
	for _, sub := range []*cobra.Command{approve, put, get, newBaselineShowCmd(&bus), list, rm, newBaselineSignCmd(&bus)} {
		bus.register(sub)
		c.AddCommand(sub)
	}
	return c
}

// identityFlags registers --identity and --issuer, the signer an
// attestation of the baseline must come from.
func identityFlags(c *cobra.Command, identity, issuer *string, dflt string) {
	c.Flags().StringVar(identity, "identity", "", "certificate `IDENTITY` the baseline's attestation must be signed by (with --issuer; "+dflt+")")
	c.Flags().StringVar(issuer, "issuer", "", "OIDC `ISSUER` of --identity")
}

// requiredIdentity is the baseline's required signer given by --identity
// and --issuer: nil when neither is set, an error when only one is.
func requiredIdentity(identity, issuer string) (*events.SignerIdentity, error) {
	identity, issuer = strings.TrimSpace(identity), strings.TrimSpace(issuer)
	switch {
	case identity == "" && issuer == "":
		return nil, nil
	case identity == "" || issuer == "":
		return nil, errors.New("--identity and --issuer go together: the signer's certificate identity and its OIDC issuer")
	}
	return &events.SignerIdentity{Identity: identity, Issuer: issuer}, nil
}

// checkDigestFlag checks --digest, the baseline digest the operator
// reviewed: empty (not given) or sha256:<64 hex digits>.
func checkDigestFlag(digest string) error {
	if digest != "" && !events.ValidDigest(digest) {
		return fmt.Errorf("--digest %q: want sha256:<64 hex digits>", digest)
	}
	return nil
}

// writeRequiredIdentity writes the line naming the signer a baseline's
// attestation must come from, when it requires one.
func writeRequiredIdentity(b *strings.Builder, id *events.SignerIdentity) {
	if id != nil {
		fmt.Fprintf(b, "  required_identity: %s (issuer %s)\n", printable(id.Identity), printable(id.Issuer))
	}
}

// printBaseline prints what baseline approve or put stored: for approve,
// the key that signed the evidence adopted too, or that none did.
func printBaseline(w io.Writer, verb string, b *verifier.Baseline) error {
	var out strings.Builder
	fmt.Fprintf(&out, "%s: %s\n  digest: %s\n", verb, printable(b.Target.String()), printable(b.Digest))
	if b.Host != "" {
		fmt.Fprintf(&out, "  host: %s\n", printable(b.Host))
	}
	if e := b.Evidence; e != nil && e.SignedBy != "" {
		fmt.Fprintf(&out, "  key: %s\n", printable(e.SignedBy))
	} else if e != nil {
		out.WriteString("  key: NONE: UNAUTHENTICATED EVIDENCE approved (--allow-unauthenticated): nothing proves this host sent it\n")
	}
	writeRequiredIdentity(&out, b.RequiredIdentity)
	_, err := io.WriteString(w, out.String())
	return err
}

// baselineSession is a baseline subcommand's connection to the bus and the
// baselines store over it.
type baselineSession struct {
	nc        *nats.Conn
	baselines *verifier.Baselines
	// target is the command's TARGET argument (onTarget).
	target events.Target
}

// session connects to the bus; the baselines store announces its changes
// with source (empty for a command that changes nothing).
func (b *busFlags) session(ctx context.Context, source string) (*baselineSession, error) {
	nc, js, err := b.connect(ctx)
	if err != nil {
		return nil, err
	}
	return &baselineSession{nc: nc, baselines: verifier.NewBaselines(js, source)}, nil
}

func (s *baselineSession) close() { s.nc.Close() }

// onTarget is the RunE of a subcommand on one TARGET (KIND:IDENTIFIER): it
// parses the target — a bad one fails before any connection — opens a
// session (source, when not nil, names the author of changes) and runs fn.
func (b *busFlags) onTarget(source func() string, fn func(*cobra.Command, *baselineSession) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		t, err := events.ParseTarget(args[0])
		if err != nil {
			return err
		}
		src := ""
		if source != nil {
			src = source()
		}
		s, err := b.session(c.Context(), src)
		if err != nil {
			return err
		}
		defer s.close()
		s.target = t
		return fn(c, s)
	}
}

// signReportVersion is the report_schema_version of baseline sign --json.
const signReportVersion = 1

// signReport is the --json document of baseline sign.
type signReport struct {
	ReportSchemaVersion int           `json:"report_schema_version"`
	Status              string        `json:"status"`
	Target              events.Target `json:"target"`
	BaselineDigest      string        `json:"baseline_digest"`
	StatementDigest     string        `json:"statement_digest"`
	BundleDigest        string        `json:"bundle_digest"`
	CertificateIdentity string        `json:"certificate_identity,omitempty"`
	OIDCIssuer          string        `json:"oidc_issuer,omitempty"`
	KeyHint             string        `json:"key_hint,omitempty"`
	Bucket              string        `json:"bucket"`
	Key                 string        `json:"key"`
	Revision            uint64        `json:"revision"`
	EventID             string        `json:"event_id,omitempty"`
}

func newBaselineSignCmd(bus *busFlags) *cobra.Command {
	var (
		digest  string
		timeout time.Duration
		asJSON  bool
	)
	c := &cobra.Command{
		Use:   "sign TARGET",
		Short: "Have the attestor sign the baseline of TARGET and store its attestation next to it",
		Long: `Send a sign request for the stored baseline of TARGET to the attestor over
the bus (request-reply on ` + events.AttestSubject + `). The attestor builds the baseline's
in-toto statement, signs it with its key or keylessly, stores the statement
and the Sigstore bundle in the "baselines" bucket next to the baseline (key
<kind>.<identifier>` + events.AttestationKeySuffix + `) and announces an attestation.created
event. A verifier requiring an identity for the baseline passes it only once
this attestation verifies.

With --digest, the attestor refuses to sign any baseline but the one you
reviewed (as "baseline approve" or "digest" printed it).

  SIGNED: KIND:IDENTIFIER
    digest: sha256:<baseline>
    certificate_identity: ...        (keyless; key_hint: ... for a key)
    oidc_issuer: ...
    stored: bucket baselines, key ..., revision N

Any failure (no attestor, no baseline, another digest, a signing error)
prints runtimetruth: error: ... and exits 1.`,
		Args: usageArgs(1, 1),
		PreRunE: func(*cobra.Command, []string) error {
			if err := checkDigestFlag(digest); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want above 0", timeout)
			}
			return nil
		},
		RunE: bus.onTarget(nil, func(c *cobra.Command, s *baselineSession) error {
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			rep, err := attestor.RequestSign(ctx, s.nc, events.AttestSubject, attestor.SignRequest{Target: s.target, Digest: digest})
			if errors.Is(err, nats.ErrNoResponders) {
				return fmt.Errorf("no attestor answers on %s: start runtimetruth-attestor (services/attestor) against this bus", events.AttestSubject)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return writeIndentedJSON(c.OutOrStdout(), signReport{
					ReportSchemaVersion: signReportVersion, Status: "signed", Target: rep.Target,
					BaselineDigest: rep.BaselineDigest, StatementDigest: rep.StatementDigest, BundleDigest: rep.BundleDigest,
					CertificateIdentity: rep.CertificateIdentity, OIDCIssuer: rep.OIDCIssuer, KeyHint: rep.KeyHint,
					Bucket: topology.BucketBaselines, Key: rep.Key, Revision: rep.Revision, EventID: rep.EventID,
				})
			}
			var b strings.Builder
			fmt.Fprintf(&b, "SIGNED: %s\n  digest: %s\n", printable(rep.Target.String()), printable(rep.BaselineDigest))
			if rep.KeyHint != "" {
				fmt.Fprintf(&b, "  key_hint: %s\n", printable(rep.KeyHint))
			} else {
				fmt.Fprintf(&b, "  certificate_identity: %s\n  oidc_issuer: %s\n", printable(rep.CertificateIdentity), printable(rep.OIDCIssuer))
			}
			fmt.Fprintf(&b, "  stored: bucket %s, key %s, revision %d\n", topology.BucketBaselines, printable(rep.Key), rep.Revision)
			_, err = io.WriteString(c.OutOrStdout(), b.String())
			return err
		}),
	}
	c.Flags().StringVar(&digest, "digest", "", "the baseline `DIGEST` you reviewed (sha256:<hex>); the attestor refuses any other")
	c.Flags().DurationVar(&timeout, "timeout", 90*time.Second, "how long to wait for the attestor's reply")
	c.Flags().BoolVar(&asJSON, "json", false, "print a versioned JSON report (exit code unchanged)")
	return c
}
