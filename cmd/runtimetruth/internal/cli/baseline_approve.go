package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// approveFlags are baseline approve's own flags.
type approveFlags struct {
	protect          []string
	host             string
	identity, issuer string
	digest           string
	dryRun           bool
	unauthenticated  bool
	asJSON           bool
}

const approveLong = `Promote the latest snapshot of TARGET received by the verifier (the
"evidence-latest" bucket) to its baseline: only the snapshot you reviewed,
and only authentic evidence.

Without --digest (or with --dry-run) nothing is approved: approve prints
what it would adopt (the snapshot's digest, the host it came from, the key
that signed it and whether the host registry holds that key as the host's
enrolled one, its collection time, the changes against the current
baseline) and the command that approves exactly that snapshot, and exits 1.
With --digest sha256:<hex> (as that preview, "baseline show" and "status"
print it) it adopts that snapshot: the latest if it still has that digest,
or, as an unchanged target gets a new digest at every collection (only
captured_at differs), the snapshot the review showed (kept by digest in
~/.local/state/runtimetruth/reviewed) while the host's latest snapshot has
its evidence. A snapshot whose evidence changed since you reviewed it is
refused, naming both digests and what changed, and nothing changes.

Only authentic evidence is adopted: the snapshot must carry the verified
signature the verifier recorded with it, by a key that is, at approval, an
enrolled key of its host ("runtimetruth host list"). A pending or revoked
key, another host's key or a host missing from the registry is refused.
A verifier running with enrollment off checks no signature: its snapshots
are unauthenticated (nothing proves which host sent them, and anyone who
may publish evidence could have), and approve refuses them unless you pass
--allow-unauthenticated, which it then says in capitals in its output.

A host whose latest snapshot had the evidence of the baseline it was
verified against stands for that baseline (the verifier does not keep such
snapshots), so approving it changes nothing, or restores that baseline if
it has been replaced since (among the last 16); its signer is that of the
evidence its verdict records. When several hosts collect TARGET and their
latest snapshots differ, name the one to promote with --host. --protect and
--identity/--issuer set the new baseline's selectors and required signing
identity; without them the current baseline's are kept.

  REVIEW: KIND:IDENTIFIER (not approved)
    digest: sha256:<latest snapshot>
    host: HOST
    key: ed25519:<key> (enrolled)
    collected: <time> (evidence <id>)
    evidence:
      PLANE KIND (COLLECTOR, METHOD)
        FIELD: VALUE
    current baseline: sha256:<digest> (approved <time> by <who>)
    changes against the current baseline:
      ...
  approve exactly this snapshot with:
    runtimetruth baseline approve 'KIND:IDENTIFIER' --host HOST --digest sha256:<latest snapshot>

--json prints the same as a versioned report (report_schema_version 1,
status "preview" or "approved"; the changes as the report of
"runtimetruth diff --json"); the exit code is unchanged.`

func newBaselineApproveCmd(bus *busFlags, by *string, author func() string) *cobra.Command {
	var f approveFlags
	c := &cobra.Command{
		Use:   "approve TARGET",
		Short: "Review the latest snapshot of TARGET, then promote it to its baseline with --digest",
		Long:  approveLong,
		Args:  usageArgs(1, 1),
		PreRunE: func(*cobra.Command, []string) error {
			if _, err := diff.ParseSelectors(f.protect); err != nil {
				return err
			}
			if err := checkDigestFlag(f.digest); err != nil {
				return err
			}
			_, err := requiredIdentity(f.identity, f.issuer)
			return err
		},
		RunE: bus.onTarget(author, func(c *cobra.Command, s *baselineSession) error {
			if f.digest == "" || f.dryRun {
				return previewApproval(c, s, f)
			}
			id, err := requiredIdentity(f.identity, f.issuer)
			if err != nil {
				return err
			}
			o := verifier.ApproveOptions{Host: f.host, Digest: f.digest, By: *by, RequiredIdentity: id, AllowUnauthenticated: f.unauthenticated,
				Reviewed: reviewedSnapshot(f.digest)}
			if c.Flags().Changed("protect") {
				o.Protect = f.protect
			}
			b, err := s.baselines.Approve(c.Context(), s.target, o)
			if err != nil {
				return approveError(err)
			}
			if f.asJSON {
				return writeIndentedJSON(c.OutOrStdout(), approvedReport(b))
			}
			return printBaseline(c.OutOrStdout(), "APPROVED", b)
		}),
	}
	fl := c.Flags()
	fl.StringVar(&f.digest, "digest", "", "approve only if the latest snapshot has this `DIGEST` (sha256:<hex>), the one you reviewed; without it, show what would be approved")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show what would be approved and approve nothing (exit 1)")
	fl.BoolVar(&f.unauthenticated, "allow-unauthenticated", false, "approve a snapshot that carries no verified signature (a verifier running with enrollment off)")
	fl.BoolVar(&f.asJSON, "json", false, "print a versioned JSON report (exit code unchanged)")
	fl.StringArrayVar(&f.protect, "protect", nil, "selectors that gate the baseline (repeatable; default: keep the current ones, or strict)")
	fl.StringVar(by, "by", *by, "approver recorded in the baseline")
	fl.StringVar(&f.host, "host", "", "promote the latest snapshot from `HOST` (needed when hosts disagree)")
	identityFlags(c, &f.identity, &f.issuer, "default: keep the current one")
	return c
}

// approveError adds to an error of Approve what to do about it.
func approveError(err error) error {
	switch {
	case errors.Is(err, verifier.ErrAmbiguous):
		return fmt.Errorf("%w (--host HOST)", err)
	case errors.Is(err, verifier.ErrUnauthenticated):
		return fmt.Errorf("%w; approve it anyway with --allow-unauthenticated, or run the verifier with enrollment manual or first-use", err)
	case errors.Is(err, verifier.ErrDigestChanged):
		return fmt.Errorf("%w (runtimetruth baseline approve TARGET shows it); nothing approved", err)
	}
	return err
}

// errNotApproved ends a preview: exit 1, nothing adopted.
var errNotApproved = errors.New("nothing approved")

// previewApproval prints what approve would adopt and approves nothing.
func previewApproval(c *cobra.Command, s *baselineSession, f approveFlags) error {
	cand, err := s.baselines.Candidate(c.Context(), s.target, f.host)
	if err != nil {
		return approveError(err)
	}
	rep := previewReport(cand)
	keepReviewed(cand.Observation.Digest, cand.Observation.Snapshot)
	args := append([]string{"runtimetruth", "baseline", "approve", s.target.String()}, busArgsOf(c)...)
	args = append(args, "--host", cand.Observation.Host, "--digest", cand.Observation.Digest)
	if errors.Is(cand.Unauthentic, verifier.ErrUnauthenticated) {
		args = append(args, "--allow-unauthenticated")
	}
	if f.asJSON {
		if err := writeIndentedJSON(c.OutOrStdout(), rep); err != nil {
			return err
		}
	} else if err := printPreview(c.OutOrStdout(), s.target, cand, rep, args); err != nil {
		return err
	}
	switch {
	case cand.Unauthentic != nil && !errors.Is(cand.Unauthentic, verifier.ErrUnauthenticated):
		return fmt.Errorf("%w: approve would refuse this snapshot: %w", errNotApproved, cand.Unauthentic)
	case f.digest != "" && f.digest != cand.Observation.Digest:
		return fmt.Errorf("%w: --digest %s is not the latest snapshot's (%s): approve adopts it only if it is the snapshot a review showed and the host still reports its evidence", errNotApproved, f.digest, cand.Observation.Digest)
	case f.dryRun:
		return fmt.Errorf("%w (--dry-run)", errNotApproved)
	}
	return fmt.Errorf("%w: review the snapshot above, then approve it with --digest %s", errNotApproved, cand.Observation.Digest)
}

// busArgsOf are the bus flags c was given, for a command line to
// suggest (file names only: no flag takes a secret).
func busArgsOf(c *cobra.Command) []string {
	var out []string
	for _, name := range []string{"nats", "nats-creds", "nats-user", "nats-password-file", "nats-tls-ca", "nats-tls-cert", "nats-tls-key", "data-dir"} {
		if fl := c.Flags().Lookup(name); fl != nil && fl.Changed {
			out = append(out, "--"+name, fl.Value.String())
		}
	}
	return out
}

// approveReportVersion is the report_schema_version of baseline approve
// --json.
const approveReportVersion = 1

// approveReport is the --json document of baseline approve: what it would
// adopt (status preview) or adopted (status approved).
type approveReport struct {
	ReportSchemaVersion int           `json:"report_schema_version"`
	Status              string        `json:"status"`
	Target              events.Target `json:"target"`
	// Digest, Host, Key, KeySequence, CollectedAt and EvidenceID are the
	// latest snapshot's: Key empty when it carries no verified signature.
	Digest      string    `json:"digest"`
	Host        string    `json:"host"`
	Key         string    `json:"key,omitempty"`
	KeySequence uint64    `json:"key_sequence,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
	EvidenceID  string    `json:"evidence_id"`
	AtBaseline  bool      `json:"at_baseline,omitempty"`
	// Authentic says the evidence is signed by an enrolled key of the
	// host; Refusal, in a preview, why approve would refuse it.
	Authentic bool   `json:"authentic"`
	Refusal   string `json:"refusal,omitempty"`
	// CurrentBaseline is the baseline approve would replace (preview).
	CurrentBaseline *baselineSummary `json:"current_baseline,omitempty"`
	// Diff is the changes from the current baseline to the snapshot, as
	// `runtimetruth diff --json` reports them; DiffError why they could
	// not be computed (preview).
	Diff      *report.Report `json:"diff,omitempty"`
	DiffError string         `json:"diff_error,omitempty"`
	// Revision is the baseline's bucket revision (approved).
	Revision uint64 `json:"revision,omitempty"`
}

// baselineSummary is a stored baseline without its snapshot.
type baselineSummary struct {
	Digest     string    `json:"digest"`
	ApprovedAt time.Time `json:"approved_at"`
	ApprovedBy string    `json:"approved_by,omitempty"`
	Host       string    `json:"host,omitempty"`
	Protect    []string  `json:"protect,omitempty"`
}

func summarize(b *verifier.Baseline) *baselineSummary {
	if b == nil {
		return nil
	}
	return &baselineSummary{Digest: b.Digest, ApprovedAt: b.ApprovedAt, ApprovedBy: b.ApprovedBy, Host: b.Host, Protect: b.Protect}
}

func observed(status string, o verifier.Observation) approveReport {
	return approveReport{
		ReportSchemaVersion: approveReportVersion, Status: status, Target: o.Target,
		Digest: o.Digest, Host: o.Host, Key: o.SignedBy, KeySequence: o.SignedSeq,
		CollectedAt: o.Time, EvidenceID: o.EvidenceID, AtBaseline: o.AtBaseline,
	}
}

func previewReport(c *verifier.Candidate) approveReport {
	r := observed("preview", c.Observation)
	r.Authentic = c.Unauthentic == nil
	if c.Unauthentic != nil {
		r.Refusal = c.Unauthentic.Error()
	}
	r.CurrentBaseline = summarize(c.Current)
	if c.Current != nil {
		res, err := changesFrom(c.Current.Snapshot, c.Observation.Snapshot)
		if err != nil {
			r.DiffError = err.Error()
		} else {
			r.Diff = report.New(res, nil)
		}
	}
	return r
}

func approvedReport(b *verifier.Baseline) approveReport {
	var r approveReport
	if b.Evidence != nil {
		r = observed("approved", *b.Evidence)
		r.Authentic = b.Evidence.SignedBy != ""
	} else {
		r = approveReport{ReportSchemaVersion: approveReportVersion, Status: "approved", Target: b.Target, Digest: b.Digest, Host: b.Host}
	}
	r.Revision = b.Revision
	return r
}

// changesFrom compares two snapshot documents as `runtimetruth diff` does.
func changesFrom(before, after []byte) (*diff.Result, error) {
	b, err := snapshot.Parse(before)
	if err != nil {
		return nil, fmt.Errorf("current baseline: %w", err)
	}
	a, err := snapshot.Parse(after)
	if err != nil {
		return nil, fmt.Errorf("latest snapshot: %w", err)
	}
	return diff.Compare(b, a)
}

// printPreview prints what approve would adopt, every value escaped.
func printPreview(w io.Writer, target events.Target, c *verifier.Candidate, r approveReport, approve []string) error {
	var b strings.Builder
	o := c.Observation
	fmt.Fprintf(&b, "REVIEW: %s (not approved)\n  digest: %s\n  host: %s\n", printable(target.String()), printable(o.Digest), printable(o.Host))
	switch {
	case errors.Is(c.Unauthentic, verifier.ErrUnauthenticated):
		b.WriteString("  key: NONE: UNAUTHENTICATED EVIDENCE. Nothing proves this host sent this snapshot\n" +
			"       (the verifier runs with enrollment off); approve refuses it without --allow-unauthenticated\n")
	case c.Unauthentic != nil:
		fmt.Fprintf(&b, "  key: %s (NOT AN ENROLLED KEY OF THIS HOST: approve refuses it)\n    %s\n", printable(o.SignedBy), printable(c.Unauthentic.Error()))
	default:
		fmt.Fprintf(&b, "  key: %s (enrolled)\n", printable(o.SignedBy))
	}
	fmt.Fprintf(&b, "  collected: %s (evidence %s)\n", o.Time.UTC().Format(time.RFC3339), printable(o.EvidenceID))
	if o.AtBaseline {
		b.WriteString("  the host's latest snapshot had this baseline's evidence (it stands for it)\n")
	}
	writeEvidence(&b, o.Snapshot)
	if cur := c.Current; cur == nil {
		b.WriteString("  current baseline: none (approving creates it)\n")
	} else {
		fmt.Fprintf(&b, "  current baseline: %s (approved %s%s", printable(cur.Digest), cur.ApprovedAt.UTC().Format(time.RFC3339), approvedBy(cur))
		if cur.Host != "" {
			fmt.Fprintf(&b, ", from %s", printable(cur.Host))
		}
		b.WriteString(")\n")
		switch {
		case r.DiffError != "":
			fmt.Fprintf(&b, "  changes against the current baseline: cannot compare: %s\n", printable(r.DiffError))
		case cur.Digest == o.Digest:
			b.WriteString("  changes against the current baseline: none, it is the current baseline\n")
		default:
			res, _ := changesFrom(cur.Snapshot, o.Snapshot) // compared once already
			b.WriteString("  changes against the current baseline:\n")
			for _, line := range strings.Split(res.Render(), "\n") { // Render escapes the values
				if line != "" {
					b.WriteString("    " + line)
				}
				b.WriteString("\n")
			}
		}
	}
	if c.Unauthentic == nil || errors.Is(c.Unauthentic, verifier.ErrUnauthenticated) {
		fmt.Fprintf(&b, "approve exactly this snapshot with:\n  %s\n", printable(shellArgs(approve)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeEvidence writes what a snapshot says, record by record and field
// by field, every value escaped: what approving it adopts.
func writeEvidence(b *strings.Builder, raw []byte) {
	s, err := snapshot.Parse(raw)
	if err != nil {
		fmt.Fprintf(b, "  evidence: cannot read it: %s\n", printable(err.Error()))
		return
	}
	b.WriteString("  evidence:\n")
	for _, r := range s.Evidence {
		fmt.Fprintf(b, "    %s %s (%s, %s)\n", printable(string(r.Plane)), printable(r.Kind), printable(r.Source.Collector), printable(r.Source.Method))
		keys := make([]string, 0, len(r.Data))
		for k := range r.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(b, "      %s: %s\n", printable(k), printable(r.Data[k].String()))
		}
	}
}

// reviewedDir holds the snapshots reviews showed, by digest, so that an
// approval made after the host collected again (the same evidence under
// a new digest) can adopt the one reviewed (ApproveOptions.Reviewed).
// Approve checks a kept snapshot's digest and evidence itself: the
// directory is a convenience, not trusted.
func reviewedDir() (string, error) {
	state, err := stateDirectory("")
	if err != nil {
		return "", err
	}
	return filepath.Join(state, "reviewed"), nil
}

// reviewedKeep is how long a reviewed snapshot is kept.
const reviewedKeep = 30 * 24 * time.Hour

// keepReviewed keeps the snapshot a review showed (best effort: without
// it, only the latest snapshot can be approved), and lets go of those
// older than reviewedKeep.
func keepReviewed(digest string, raw []byte) {
	dir, err := reviewedDir()
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if err != nil || !ok || os.MkdirAll(dir, 0o700) != nil {
		return
	}
	if old, err := os.ReadDir(dir); err == nil {
		for _, e := range old {
			if info, err := e.Info(); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) > reviewedKeep {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	_ = os.WriteFile(filepath.Join(dir, hex+".json"), raw, 0o600)
}

// reviewedSnapshot is the snapshot of digest a review kept, or nil.
func reviewedSnapshot(digest string) []byte {
	dir, err := reviewedDir()
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if err != nil || !ok || strings.ContainsAny(hex, "/.") {
		return nil
	}
	raw, err := readFile(filepath.Join(dir, hex+".json"), snapshot.MaxSize)
	if err != nil {
		return nil
	}
	return raw
}

// approvedBy is " by <approver>", escaped, or "" when none is recorded.
func approvedBy(b *verifier.Baseline) string {
	if b.ApprovedBy == "" {
		return ""
	}
	return " by " + printable(b.ApprovedBy)
}

// firstUseApproval is what `up --approve` approves when a target of its
// own host has no baseline: the snapshot whose verdict it saw (by its
// digest, so a newer one is refused and approved at its own verdict),
// from its host; evidence without a verified signature only when up's own
// verifier runs with enrollment off (enrollment), and so authenticates no
// evidence at all.
func firstUseApproval(v events.Verdict, enrollment string) verifier.ApproveOptions {
	return verifier.ApproveOptions{
		Host: v.Host, Digest: v.SnapshotDigest, By: "runtimetruth up --approve",
		AllowUnauthenticated: verifier.Enrollment(enrollment) == verifier.EnrollOff,
	}
}

func newBaselineShowCmd(bus *busFlags) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show TARGET",
		Short: "Show the baseline of TARGET and each host's latest snapshot, with the digests approve takes",
		Long: `Show the baseline of TARGET (its digest, who approved it and when, from which
host, its selectors and required identity) and the latest snapshot of
TARGET from every host: its digest (what "baseline approve --digest" takes),
the key that signed it, when it was collected, and whether it is the
baseline. "baseline get" prints the baseline snapshot itself.`,
		Args: usageArgs(1, 1),
		RunE: bus.onTarget(nil, func(c *cobra.Command, s *baselineSession) error {
			cur, err := s.baselines.Get(c.Context(), s.target)
			if err != nil && !errors.Is(err, verifier.ErrNoBaseline) {
				return err
			}
			obs, err := s.baselines.Observations(c.Context(), s.target)
			if err != nil {
				return err
			}
			if asJSON {
				doc := showReport{ReportSchemaVersion: 1, Target: s.target, Baseline: summarize(cur), Latest: []latestSnapshot{}}
				if cur != nil && cur.RequiredIdentity != nil {
					doc.RequiredIdentity = cur.RequiredIdentity
				}
				for _, o := range obs {
					doc.Latest = append(doc.Latest, latestSnapshot{Host: o.Host, Digest: o.Digest, Key: o.SignedBy,
						CollectedAt: o.Time, EvidenceID: o.EvidenceID, AtBaseline: o.AtBaseline})
				}
				return writeIndentedJSON(c.OutOrStdout(), doc)
			}
			return printShow(c.OutOrStdout(), s.target, cur, obs)
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// showReport is the --json document of baseline show.
type showReport struct {
	ReportSchemaVersion int                    `json:"report_schema_version"`
	Target              events.Target          `json:"target"`
	Baseline            *baselineSummary       `json:"baseline"`
	RequiredIdentity    *events.SignerIdentity `json:"required_identity,omitempty"`
	Latest              []latestSnapshot       `json:"latest"`
}

// latestSnapshot is a host's latest snapshot of the target.
type latestSnapshot struct {
	Host        string    `json:"host"`
	Digest      string    `json:"digest"`
	Key         string    `json:"key,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
	EvidenceID  string    `json:"evidence_id"`
	AtBaseline  bool      `json:"at_baseline,omitempty"`
}

func printShow(w io.Writer, target events.Target, cur *verifier.Baseline, obs []verifier.Observation) error {
	var b strings.Builder
	if cur == nil {
		fmt.Fprintf(&b, "BASELINE: %s\n  none\n", printable(target.String()))
	} else {
		fmt.Fprintf(&b, "BASELINE: %s\n  digest: %s\n  approved: %s%s\n", printable(target.String()), printable(cur.Digest),
			cur.ApprovedAt.UTC().Format(time.RFC3339), approvedBy(cur))
		if cur.Host != "" {
			fmt.Fprintf(&b, "  host: %s\n", printable(cur.Host))
		}
		if len(cur.Protect) > 0 {
			fmt.Fprintf(&b, "  protect: %s\n", printable(strings.Join(cur.Protect, ", ")))
		}
		writeRequiredIdentity(&b, cur.RequiredIdentity)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(obs) == 0 {
		_, err := fmt.Fprintln(w, "no snapshot of it received")
		return err
	}
	tw := newTable(w)
	_, _ = fmt.Fprintln(tw, "HOST\tLATEST DIGEST\tKEY\tCOLLECTED\tNOTE")
	for _, o := range obs {
		key, note := o.SignedBy, ""
		if key == "" {
			key = "none (unauthenticated)"
		}
		if cur != nil && o.Digest == cur.Digest {
			note = "the baseline"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(o.Host), printable(o.Digest), printable(key), o.Time.UTC().Format(time.RFC3339), note)
	}
	return tw.Flush()
}
