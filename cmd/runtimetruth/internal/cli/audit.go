package cli

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/signatures"
)

// auditSource says where the audit chain is: a JSONL log or ClickHouse.
type auditSource struct {
	jsonl      string
	clickhouse string
	table      string
}

func (s *auditSource) register(c *cobra.Command) {
	c.Flags().StringVar(&s.jsonl, "jsonl", "", "the JSONL audit log: its active `PATH` (rotated PATH.NNNNNN files come first), a directory or a glob")
	c.Flags().StringVar(&s.clickhouse, "clickhouse", "", "a ClickHouse `DSN` (clickhouse://user:password@host:9000/database), native protocol")
	c.Flags().StringVar(&s.table, "table", chstore.DefaultTable, "the ClickHouse links `TABLE`")
}

func (s *auditSource) check() error {
	switch {
	case s.jsonl != "" && s.clickhouse != "":
		return errors.New("give either --jsonl or --clickhouse, not both")
	case s.jsonl == "" && s.clickhouse == "":
		return errors.New("give --jsonl PATH or --clickhouse DSN")
	}
	return nil
}

// run verifies the chains of the log or table with opts, as audit verify
// does; it returns the JSONL files read (none for ClickHouse).
func (s *auditSource) run(ctx context.Context, h chain.Hasher, opts chain.Options) (chain.Report, []string, error) {
	if s.jsonl != "" {
		files, err := jsonl.Files(s.jsonl)
		if err != nil {
			return chain.Report{}, nil, err
		}
		if len(files) == 0 {
			return chain.Report{}, nil, fmt.Errorf("no audit log at %s", s.jsonl)
		}
		vr, err := chain.RunWith(ctx, h, jsonl.Source(files), opts)
		return vr, files, err
	}
	st, err := s.openClickHouse(ctx)
	if err != nil {
		return chain.Report{}, nil, err
	}
	defer func() { _ = st.Close() }()
	vr, err := chain.RunWith(ctx, h, st.Source(ctx), opts)
	return vr, nil, err
}

// openClickHouse opens the links table of --clickhouse and --table; the
// caller closes it.
func (s *auditSource) openClickHouse(ctx context.Context) (*chstore.Store, error) {
	return chstore.Open(ctx, chstore.Options{DSN: s.clickhouse, Table: s.table})
}

func newAuditCmd(version string) *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Verify and follow the hash-chained audit log (JSONL or ClickHouse)",
		Long: `The auditor appends every event of the pipeline to hash-chained audit logs: one
chain per stream and host (EVIDENCE/<host>, VERDICTS/<host>) and one per
low-volume stream (BASELINES, DLQ). Each link commits to the previous link's
hash, its sequence number and the canonical form of the event.`,
		Args: cobra.NoArgs,
		RunE: helpRun,
	}
	c.AddCommand(newAuditVerifyCmd(), newAuditTailCmd(), newAuditExportCmd(version))
	return c
}

// auditReport is the --json document of audit verify.
type auditReport struct {
	ReportSchemaVersion int                  `json:"report_schema_version"`
	Status              string               `json:"status"`
	Source              string               `json:"source"`
	Files               []string             `json:"files,omitempty"`
	Links               int                  `json:"links"`
	Chains              map[string]auditHead `json:"chains"`
	Checkpoints         int                  `json:"checkpoints"`
	// CheckpointFile is --checkpoints; CheckpointLinesSkipped counts its
	// lines that hold no checkpoint (in a syslog receiver's log: the
	// links' messages and everyone else's), skipped whatever their text.
	CheckpointFile         string      `json:"checkpoint_file,omitempty"`
	CheckpointLinesSkipped int         `json:"checkpoint_lines_skipped"`
	SignaturesChecked      bool        `json:"checkpoint_signatures_checked"`
	Broken                 *auditBreak `json:"broken,omitempty"`
	// DuplicateID is the first event id linked twice in a chain;
	// DuplicateIDs counts the links that repeat an id.
	DuplicateID  *auditDuplicate `json:"duplicate_id,omitempty"`
	DuplicateIDs int             `json:"duplicate_ids"`
	// Evidence is what the evidence signatures showed (--registry or
	// --hosts), absent when they were not checked.
	Evidence       *auditEvidence `json:"evidence,omitempty"`
	Seconds        float64        `json:"elapsed_seconds"`
	LinksPerSecond float64        `json:"links_per_second"`
}

type auditDuplicate struct {
	Chain    string `json:"chain"`
	ID       string `json:"id"`
	FirstSeq uint64 `json:"first_seq"`
	Seq      uint64 `json:"seq"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Row      int    `json:"row,omitempty"`
}

type auditEvidence struct {
	Registry string `json:"registry"`
	Required bool   `json:"signatures_required"`
	Signed   int    `json:"signed"`
	Unsigned int    `json:"unsigned"`
	Other    int    `json:"other"`
	// Refused counts the links whose signature fails but whose event the
	// verifier refused (its dead letter is in the DLQ chain): notes, not
	// failures. Notes lists the first of them (signatures.MaxNotes).
	Refused int                `json:"refused"`
	Notes   []auditRefusal     `json:"notes,omitempty"`
	Bad     *auditBadSignature `json:"bad,omitempty"`
}

// auditRefusal is a link whose evidence signature fails, refused by the
// verifier: the link, the finding, and the verifier's decision (its dead
// letter).
type auditRefusal struct {
	auditBadSignature
	// Note says it in words: "…; refused by the verifier: <reason> (dead
	// letter: …)".
	Note string `json:"note"`
	// Consumer and Refused are the dead letter's consumer and reason;
	// DeadLetterChain and DeadLetterSeq its link.
	Consumer        string `json:"consumer"`
	Refused         string `json:"refused"`
	DeadLetterChain string `json:"dead_letter_chain"`
	DeadLetterSeq   uint64 `json:"dead_letter_seq"`
}

// auditBadSignature is the first link whose evidence signature failed.
type auditBadSignature struct {
	Chain  string `json:"chain"`
	Seq    uint64 `json:"seq"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Row    int    `json:"row,omitempty"`
}

type auditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

type auditBreak struct {
	Chain  string       `json:"chain"`
	Seq    uint64       `json:"seq"`
	Reason chain.Reason `json:"reason"`
	Detail string       `json:"detail"`
	File   string       `json:"file,omitempty"`
	Line   int          `json:"line,omitempty"`
	Row    int          `json:"row,omitempty"`
}

func newAuditVerifyCmd() *cobra.Command {
	var (
		src       auditSource
		keyFile   string
		cpFile    string
		cpKeyFile string
		asJSON    bool
		heads     bool
		reg       registryFlags
	)
	c := &cobra.Command{
		Use:   "verify (--jsonl PATH | --clickhouse DSN) [--key FILE] [--checkpoints FILE [--checkpoint-key FILE]] [--registry | --hosts FILE [--require-signatures]]",
		Short: "Recompute every chain and name the first broken link and why",
		Long: `Recompute every chain of the audit log and name the first broken link and why:
changed (content or prev does not match), missing (links deleted), reordered,
duplicated, malformed, or, against checkpoints, truncated (the chain ends
before a checkpoint) or rewritten (the link at a checkpoint has another hash).
It also names an event id linked twice in a chain (the id and both links'
sequence numbers): each event is linked once per chain.

--registry (the verifier's hosts bucket, over --nats and its credentials) or
--hosts FILE (the output of runtimetruth host list --json) re-checks the
evidence signatures the links carry: the envelope verifies with the key its
key id names, its claim says what the link records (id, type, source,
subject, time, host, target and the digest of the payload bytes the auditor
received), and the registry holds the key as an enrolled key of the claimed
host at the event's time (or one revoked after it). It names the first link
that fails. Links of collector events without a signature are counted, and
fail only with --require-signatures. A link that fails whose event the
verifier refused (its dead letter, naming the same stream message and event
id, is in the DLQ chain of the same log or table) is a note, "refused by the
verifier: <reason>", not a failure: the chain records refused events as it
records everything.

--key is the chain's HMAC key (the auditor's hmac.key_file); without it, a
keyed chain cannot be checked. --checkpoints reads the auditor's checkpoints
from a file: its checkpoint file (JSON lines), or a syslog receiver's log of
RFC 5424 messages, one a line, where a checkpoint is the rtcheckpoint@<PEN>
structured-data element of a message of MSGID checkpoint and every other line
(the links' messages, whatever their text, and anyone else's) is skipped and
counted; a malformed checkpoint message is an error naming its line.
--checkpoint-key (the Ed25519 public or private key, PEM) checks their
signatures.

Exit codes: 0 every chain intact, 2 a broken link, an event id linked twice
or a bad signature, 1 error (usage errors included).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := src.check(); err != nil {
				return err
			}
			key, err := auditor.LoadKey(keyFile)
			if err != nil {
				return err
			}
			h := chain.NewHasher(key)
			rep := auditReport{ReportSchemaVersion: 1, Chains: map[string]auditHead{}}
			var cps []chain.Checkpoint
			if cpFile != "" {
				var pub ed25519.PublicKey
				if cpKeyFile != "" {
					if pub, err = auditor.LoadCheckpointPublicKey(cpKeyFile); err != nil {
						return err
					}
					rep.SignaturesChecked = true
				}
				found, skipped, err := auditor.ReadCheckpoints(cpFile, pub)
				if err != nil {
					return err
				}
				cps = found
				rep.Checkpoints, rep.CheckpointFile, rep.CheckpointLinesSkipped = len(cps), cpFile, skipped
			} else if cpKeyFile != "" {
				return errors.New("--checkpoint-key needs --checkpoints")
			}
			ctx := c.Context()
			opts := chain.Options{Checkpoints: cps, EventIDs: true}
			sigs, err := reg.evidence(ctx)
			if err != nil {
				return err
			}
			if sigs != nil {
				opts.Inspector = sigs
			}
			start := time.Now()
			rep.Source = "clickhouse"
			if src.jsonl != "" {
				rep.Source = "jsonl"
			}
			vr, files, err := src.run(ctx, h, opts)
			if err != nil {
				return err
			}
			rep.Files = files
			rep.Seconds = time.Since(start).Seconds()
			rep.Links = vr.Links
			if rep.Seconds > 0 {
				rep.LinksPerSecond = float64(vr.Links) / rep.Seconds
			}
			for name, hd := range vr.Chains {
				rep.Chains[name] = auditHead{Seq: hd.Seq, Hash: hd.Hash}
			}
			rep.Status = "intact"
			if b := vr.Broken; b != nil {
				if b.Reason == chain.KeyRequired {
					return fmt.Errorf("%s: the chain is keyed (HMAC); give its key with --key", b.Error())
				}
				rep.Status = "broken"
				rep.Broken = &auditBreak{Chain: b.Chain, Seq: b.Seq, Reason: b.Reason, Detail: b.Detail, File: b.File, Line: b.Line, Row: b.Row}
			}
			rep.DuplicateIDs = vr.Duplicates
			if d := vr.Duplicate; d != nil {
				rep.DuplicateID = &auditDuplicate{Chain: d.Chain, ID: d.ID, FirstSeq: d.First, Seq: d.Seq, File: d.Pos.File, Line: d.Pos.Line, Row: d.Pos.Row}
				if rep.Status == "intact" {
					rep.Status = "duplicate_id"
				}
			}
			var evr *signatures.EvidenceReport
			if sigs != nil {
				evr = sigs.Report()
			}
			if ev := evr; ev != nil {
				rep.Evidence = &auditEvidence{Registry: reg.name(), Required: reg.require, Signed: ev.Signed, Unsigned: ev.Unsigned, Other: ev.Other,
					Refused: ev.Refused}
				for _, n := range ev.Notes {
					rep.Evidence.Notes = append(rep.Evidence.Notes, auditRefusal{
						auditBadSignature: auditBadSignature{Chain: n.Chain, Seq: n.Seq, ID: n.ID, Reason: n.Reason, File: n.Pos.File, Line: n.Pos.Line, Row: n.Pos.Row},
						Note:              n.Note(), Consumer: n.Consumer, Refused: n.Refused, DeadLetterChain: n.DeadLetter.Chain, DeadLetterSeq: n.DeadLetter.Seq,
					})
				}
				if b := ev.Bad; b != nil {
					rep.Evidence.Bad = &auditBadSignature{Chain: b.Chain, Seq: b.Seq, ID: b.ID, Reason: b.Reason,
						File: b.Pos.File, Line: b.Pos.Line, Row: b.Pos.Row}
					if rep.Status == "intact" {
						rep.Status = "bad_signature"
					}
				}
			}
			if asJSON {
				if err := writeIndentedJSON(c.OutOrStdout(), rep); err != nil {
					return err
				}
			} else if err := renderAudit(c.OutOrStdout(), rep, vr, evr, heads, cpFile != "" && cpKeyFile == ""); err != nil {
				return err
			}
			if rep.Status != "intact" {
				return errDrift
			}
			return nil
		},
	}
	src.register(c)
	reg.register(c)
	c.Flags().StringVar(&keyFile, "key", "", "the chain's HMAC key `FILE`")
	c.Flags().StringVar(&cpFile, "checkpoints", "", "a `FILE` of checkpoints (JSON lines, or a syslog receiver's log of RFC 5424 lines: messages of MSGID checkpoint)")
	c.Flags().StringVar(&cpKeyFile, "checkpoint-key", "", "the Ed25519 key `FILE` (PEM, public or private) that signed the checkpoints")
	c.Flags().BoolVar(&asJSON, "json", false, "print a versioned JSON report (exit code unchanged)")
	c.Flags().BoolVar(&heads, "heads", false, "list every chain's last link")
	return c
}

// maxPrintedNotes bounds the notes audit verify prints (--json lists up
// to signatures.MaxNotes).
const maxPrintedNotes = 10

func renderAudit(w io.Writer, rep auditReport, vr chain.Report, evr *signatures.EvidenceReport, heads, unsigned bool) error {
	bw := bufio.NewWriter(w)
	where := rep.Source
	if len(rep.Files) > 0 {
		where = fmt.Sprintf("%s, %d file(s)", where, len(rep.Files))
	}
	if unsigned {
		_, _ = fmt.Fprintln(bw, "note: checkpoint signatures not checked (give --checkpoint-key)")
	}
	if b := vr.Broken; b != nil {
		_, _ = fmt.Fprintf(bw, "✗  audit chain BROKEN: %s\n", b.Error())
		_, _ = fmt.Fprintf(bw, "   %d links verified before it (%s)\n", vr.Links, where)
	} else if vr.Duplicate != nil || (evr != nil && evr.Bad != nil) {
		_, _ = fmt.Fprintf(bw, "✗  audit chain verifies (%d links in %d chains, %s) but:\n", vr.Links, len(vr.Chains), where)
	} else {
		_, _ = fmt.Fprintf(bw, "✓  audit chain intact: %d links in %d chains (%s", vr.Links, len(vr.Chains), where)
		if rep.Checkpoints > 0 {
			_, _ = fmt.Fprintf(bw, ", %d checkpoints", rep.Checkpoints)
		}
		_, _ = fmt.Fprintf(bw, "), %.0f links/s\n", rep.LinksPerSecond)
	}
	if rep.CheckpointFile != "" {
		_, _ = fmt.Fprintf(bw, "   checkpoints: %d read from %s, %d other line(s) skipped\n",
			rep.Checkpoints, printable(rep.CheckpointFile), rep.CheckpointLinesSkipped)
	}
	if d := vr.Duplicate; d != nil {
		_, _ = fmt.Fprintf(bw, "✗  event id linked twice: %s", printable(d.Error()))
		if vr.Duplicates > 1 {
			_, _ = fmt.Fprintf(bw, " (%d links repeat an id)", vr.Duplicates)
		}
		_, _ = fmt.Fprintln(bw)
	}
	if ev := evr; ev != nil {
		if b := ev.Bad; b != nil {
			_, _ = fmt.Fprintf(bw, "✗  evidence signature BAD: %s\n", printable(b.Error()))
		}
		for i, n := range ev.Notes {
			if i == maxPrintedNotes {
				_, _ = fmt.Fprintf(bw, "note: %d more refused by the verifier (--json lists %d)\n", ev.Refused-i, len(ev.Notes))
				break
			}
			_, _ = fmt.Fprintf(bw, "note: %s\n", printable(n.Note()))
		}
		_, _ = fmt.Fprintf(bw, "   evidence signatures: %d signed and checked, %d unsigned collector events, %d other events",
			ev.Signed, ev.Unsigned, ev.Other)
		if ev.Refused > 0 {
			_, _ = fmt.Fprintf(bw, ", %d refused by the verifier (notes)", ev.Refused)
		}
		_, _ = fmt.Fprintln(bw)
	}
	if heads {
		names := make([]string, 0, len(vr.Chains))
		for n := range vr.Chains {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			_, _ = fmt.Fprintf(bw, "   %-40s seq %-8d %s\n", n, vr.Chains[n].Seq, vr.Chains[n].Hash)
		}
	}
	return bw.Flush()
}

func newAuditTailCmd() *cobra.Command {
	var (
		src    auditSource
		last   int
		follow bool
		asJSON bool
		poll   time.Duration
	)
	c := &cobra.Command{
		Use:   "tail (--jsonl PATH | --clickhouse DSN) [-n N] [--follow=false] [--json]",
		Short: "Print the last links, then follow new ones as the auditor appends them",
		Long: `Print the last N links of the audit log, then every new link as the auditor
appends it, until interrupted. A line shows the time the stream stored the
event, the chain and sequence number, the event type, host and subject, and
the start of the hash; --json prints the links as stored.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := src.check(); err != nil {
				return err
			}
			if last < 0 {
				return errors.New("-n must not be negative")
			}
			out := bufio.NewWriter(c.OutOrStdout())
			emit := func(r link.Record) error {
				if asJSON {
					_, _ = out.Write(r.Line)
					_ = out.WriteByte('\n')
				} else {
					_, _ = fmt.Fprintln(out, tailLine(r))
				}
				return nil
			}
			if src.jsonl != "" {
				return tailJSONL(c.Context(), src.jsonl, last, follow, poll, out, emit)
			}
			return tailClickHouse(c.Context(), src, last, follow, poll, out, emit)
		},
	}
	src.register(c)
	c.Flags().IntVarP(&last, "lines", "n", 10, "print the last `N` links first")
	c.Flags().BoolVarP(&follow, "follow", "f", true, "keep printing new links")
	c.Flags().BoolVar(&asJSON, "json", false, "print the links as stored (JSON lines)")
	c.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often to look for new links")
	return c
}

func tailLine(r link.Record) string {
	m := r.Meta
	typ := strings.TrimPrefix(m.Type, "dev.runtimetruth.")
	if m.Rejected {
		typ = "REJECTED(" + m.Reason + ")"
	}
	h := r.Hash
	if i := strings.IndexByte(h, ':'); i >= 0 && len(h) > i+13 {
		h = h[:i+13]
	}
	host := m.Host
	if host == "" {
		host = "-"
	}
	line := fmt.Sprintf("%s  %s #%d  %s  %s  %s  %s", m.Stored.UTC().Format(time.RFC3339), r.Chain, r.Seq, typ, host, m.Subject, h)
	if d := linkDetail(r); d != "" {
		line += "  " + d
	}
	return line
}

// linkDetail summarizes a drift or error verdict link, of either verdict
// version, as status does ("2 change(s), first systemd.unit.main_pid", or
// the error), with control characters escaped; "" for any other link.
func linkDetail(r link.Record) string {
	if r.Meta.Rejected {
		return ""
	}
	s, ok := events.Lookup(r.Meta.Type)
	if !ok || (s.Current() != events.TypeVerdictDrift && s.Current() != events.TypeVerdictError) {
		return ""
	}
	var ev struct {
		Data events.Verdict `json:"data"`
	}
	if err := json.Unmarshal(r.Event, &ev); err != nil {
		return ""
	}
	return verdictDetail(ev.Data)
}

// tailJSONL prints the last links of the log, then follows the active
// file, reopening it when it is rotated.
func tailJSONL(ctx context.Context, path string, last int, follow bool, poll time.Duration, out *bufio.Writer, emit func(link.Record) error) error {
	files, err := jsonl.Files(path)
	if err != nil {
		return err
	}
	if len(files) == 0 && !follow {
		return fmt.Errorf("no audit log at %s", path)
	}
	active := path
	if len(files) > 0 {
		active = files[len(files)-1]
	}
	var f *os.File
	var ino uint64
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	var partial []byte
	open := func(seekEnd bool) {
		if f != nil {
			_ = f.Close()
			f = nil
		}
		nf, err := regfile.Open(active)
		if err != nil {
			return
		}
		if seekEnd {
			if _, err := nf.Seek(0, io.SeekEnd); err != nil {
				_ = nf.Close()
				return
			}
		}
		f, ino, partial = nf, inode(nf), nil
	}
	open(true)
	// The last N links, up to where following starts: read the files from
	// the newest back as needed.
	var end int64 = -1
	if f != nil {
		end, _ = f.Seek(0, io.SeekCurrent)
	}
	var tail []link.Record
	for i := len(files) - 1; i >= 0 && len(tail) < last; i-- {
		limit := int64(-1)
		if i == len(files)-1 && files[i] == active {
			limit = end
		}
		recs, err := readLinksN(files[i], limit)
		if err != nil {
			return err
		}
		tail = append(recs[max(0, len(recs)-(last-len(tail))):], tail...)
	}
	for _, r := range tail {
		_ = emit(r)
	}
	if err := out.Flush(); err != nil || !follow {
		return err
	}
	buf := make([]byte, 256<<10)
	drain := func() error {
		if f == nil {
			return nil
		}
		for {
			n, err := f.Read(buf)
			partial = append(partial, buf[:n]...)
			for {
				i := slices.Index(partial, '\n')
				if i < 0 {
					break
				}
				if i > 0 {
					r, perr := link.Parse(partial[:i])
					if perr != nil {
						return fmt.Errorf("%s: %w", active, perr)
					}
					_ = emit(r)
				}
				partial = partial[i+1:]
			}
			if n == 0 || err != nil {
				return out.Flush()
			}
		}
	}
	for {
		if err := drain(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		// Rotated: the active name now holds a new file. Finish the old
		// one (the writer may have appended after the last read), then
		// start the new one from its beginning.
		if st, err := os.Stat(active); err == nil && (f == nil || statInode(st) != ino) {
			if err := drain(); err != nil {
				return err
			}
			// The writer may have rotated more than once: open the active
			// file first, then print the whole files between the old one
			// and it.
			nf, err := regfile.Open(active)
			if err != nil {
				continue
			}
			newIno := inode(nf)
			if files, err := jsonl.Files(path); err == nil {
				started := false
				for _, name := range files {
					if name == active {
						break // only rotated files come between
					}
					st, err := os.Stat(name)
					if err != nil {
						continue
					}
					switch in := statInode(st); {
					case in == ino:
						started = true
						continue
					case !started:
						continue
					case in == newIno:
					default:
						recs, err := readLinks(name)
						if err != nil {
							_ = nf.Close()
							return err
						}
						for _, r := range recs {
							_ = emit(r)
						}
						continue
					}
					break
				}
			}
			if f != nil {
				_ = f.Close()
			}
			f, ino, partial = nf, newIno, nil
		}
	}
}

func inode(f *os.File) uint64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return statInode(st)
}

func statInode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

func readLinks(path string) ([]link.Record, error) { return readLinksN(path, -1) }

// readLinksN reads the links of a file's first limit bytes (all if limit
// is negative).
func readLinksN(path string, limit int64) ([]link.Record, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if limit >= 0 {
		r = io.LimitReader(f, limit)
	}
	var out []link.Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256<<10), chain.MaxLinkSize+1)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		r, err := link.Parse(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// tailClickHouse prints the newest links, then polls every chain's head
// and prints what follows the heads already printed.
func tailClickHouse(ctx context.Context, src auditSource, last int, follow bool, poll time.Duration, out *bufio.Writer, emit func(link.Record) error) error {
	s, err := src.openClickHouse(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	seen, err := s.Heads(ctx)
	if err != nil {
		return err
	}
	if last > 0 {
		recs, err := s.Latest(ctx, last)
		if err != nil {
			return err
		}
		for _, r := range recs {
			_ = emit(r)
		}
	}
	if err := out.Flush(); err != nil || !follow {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
		heads, err := s.Heads(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		names := make([]string, 0, len(heads))
		for n, h := range heads {
			if h.Seq > seen[n].Seq {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			if err := s.Links(ctx, n, seen[n].Seq, func(r link.Record) error {
				seen[n] = r.Head()
				return emit(r)
			}); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// registryFlags say where audit verify finds the host registry to check
// evidence signatures against: the bus's hosts bucket (--registry, over
// --nats) or a file of `runtimetruth host list --json` (--hosts).
type registryFlags struct {
	bus     busFlags
	bucket  bool
	file    string
	require bool
}

func (r *registryFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&r.bucket, "registry", false, "check evidence signatures against the host registry: the verifier's hosts bucket, over --nats")
	c.Flags().StringVar(&r.file, "hosts", "", "check evidence signatures against the host registry in `FILE` (runtimetruth host list --json)")
	c.Flags().BoolVar(&r.require, "require-signatures", false, "a collector event without a signature is a failure (with --registry or --hosts)")
	r.bus.register(c)
}

func (r *registryFlags) name() string {
	if r.file != "" {
		return r.file
	}
	return "bucket " + topology.BucketHosts
}

// maxHostsFile bounds a --hosts file.
const maxHostsFile = 64 << 20

// evidence is the signature check the flags ask for, nil for none.
func (r *registryFlags) evidence(ctx context.Context) (*signatures.Evidence, error) {
	var recs []events.HostRecord
	switch {
	case r.bucket && r.file != "":
		return nil, errors.New("give either --registry or --hosts, not both")
	case r.file != "":
		b, err := regfile.Read(r.file, maxHostsFile)
		if err != nil {
			return nil, fmt.Errorf("--hosts: %w", err)
		}
		if err := json.Unmarshal(b, &recs); err != nil {
			return nil, fmt.Errorf("--hosts %s: want the output of runtimetruth host list --json: %w", r.file, err)
		}
	case r.bucket:
		nc, hosts, err := r.bus.hosts(ctx, "")
		if err != nil {
			return nil, err
		}
		defer nc.Close()
		if recs, err = hosts.List(ctx); err != nil {
			return nil, err
		}
	case r.require:
		return nil, errors.New("--require-signatures needs --registry or --hosts")
	default:
		return nil, nil
	}
	return &signatures.Evidence{Registry: signatures.NewHosts(recs), Require: r.require}, nil
}
