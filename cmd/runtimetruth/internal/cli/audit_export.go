package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem"
)

func newAuditExportCmd(version string) *cobra.Command {
	var (
		src          auditSource
		keyFile      string
		format       string
		since, until string
	)
	c := &cobra.Command{
		Use:   "export (--jsonl PATH | --clickhouse DSN) --format ocsf|ecs|cef [--key FILE] [--since TIME] [--until TIME]",
		Short: "Write the audit chain's links as SIEM records (OCSF, ECS or CEF), one a line, for backfill",
		Long: `Write every link of the audit log, as it verifies, as a SIEM record on
standard output, one a line: OCSF 1.8.0 or ECS 9.4 JSON, or CEF. They are the
records the auditor's syslog sink sends with format ocsf, ecs or cef (the
same mapping), so a SIEM can be filled with what happened before it was
connected. Each record carries its link's chain, seq, hash and prev.

A verdict's finding uid is its host and target's episode, followed from the
start of the log; --since and --until (RFC 3339, or YYYY-MM-DDTHH:MM in UTC)
select the links written, by the time their stream stored them.

The chains are verified as audit verify does: a link is written only once it
verified. Exit codes: 0 every link written, 2 a chain is broken (the links
before the break are written; the break is named on standard error), 1 error.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := src.check(); err != nil {
				return err
			}
			f, err := siem.ParseFormat(format)
			if err != nil {
				return err
			}
			from, err := exportTime("--since", since)
			if err != nil {
				return err
			}
			to, err := exportTime("--until", until)
			if err != nil {
				return err
			}
			key, err := auditor.LoadKey(keyFile)
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			product := siem.Product{Version: version, Hostname: host}
			out := bufio.NewWriter(c.OutOrStdout())
			ep := siem.NewEpisodes()
			var werr error
			visit := func(cand *chain.Candidate) {
				r, err := candidateRecord(cand)
				if err == nil {
					fd := siem.Map(r, ep) // every link, so episodes span the window
					if (from.IsZero() || !r.Meta.Stored.Before(from)) && (to.IsZero() || r.Meta.Stored.Before(to)) {
						var b []byte
						if b, err = siem.Render(f, fd, product, 0); err == nil {
							_, _ = out.Write(b)
							err = out.WriteByte('\n')
						}
					}
				}
				if err != nil && werr == nil {
					werr = fmt.Errorf("%s seq %d: %w", cand.Chain, cand.Seq, err)
				}
			}
			vr, _, err := src.run(c.Context(), chain.NewHasher(key), chain.Options{Visit: visit})
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			if err = errors.Join(err, werr); err != nil {
				return err
			}
			if b := vr.Broken; b != nil {
				if b.Reason == chain.KeyRequired {
					return fmt.Errorf("%s: the chain is keyed (HMAC); give its key with --key", b.Error())
				}
				_, _ = fmt.Fprintf(c.ErrOrStderr(), "runtimetruth: audit export: %s\n", printable(b.Error()))
				return errDrift
			}
			return nil
		},
	}
	src.register(c)
	c.Flags().StringVar(&format, "format", "", "the record `FORMAT`: ocsf, ecs or cef (required)")
	c.Flags().StringVar(&keyFile, "key", "", "the chain's HMAC key `FILE`")
	c.Flags().StringVar(&since, "since", "", "write the links stored at or after `TIME`")
	c.Flags().StringVar(&until, "until", "", "write the links stored before `TIME`")
	return c
}

// candidateRecord reads a verified link: a JSONL line, or a ClickHouse
// row.
func candidateRecord(c *chain.Candidate) (link.Record, error) {
	if c.Line != nil {
		return link.Parse(c.Line)
	}
	return link.FromRow(c.Chain, c.Seq, c.Prev, c.Hash, c.Event)
}

// exportTime parses a --since or --until value: RFC 3339, or a minute in
// UTC; zero when empty.
func exportTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s %q: want RFC 3339 or YYYY-MM-DDTHH:MM (UTC)", flag, v)
}
