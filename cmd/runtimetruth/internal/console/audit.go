package console

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// AuditLog is an audit log the console reads: runtimetruth up's JSONL
// log, as `runtimetruth audit verify --jsonl PATH --checkpoints FILE
// --checkpoint-key KEY` checks it, or a deployment's ClickHouse table, as
// `audit verify --clickhouse` checks it.
type AuditLog struct {
	// Path is the JSONL log (its rotated files beside it are read too);
	// Store, when set instead, the ClickHouse table.
	Path  string
	Store *chstore.Store
	// Key is the chains' HMAC key (nil: the chains are not keyed).
	Key []byte
	// Checkpoints is the auditor's checkpoint file ("" for none), and
	// CheckpointKey the Ed25519 key file (PEM) that signed them.
	Checkpoints, CheckpointKey string
}

// auditShown is how many links an audit page lists: the newest that
// match its filters.
const auditShown = 200

// AuditQuery filters an audit page's links: Host, Target and Actor (the
// event's source) are substrings, Type a substring of the event type, and
// Since and Until bound the time the link was stored.
type AuditQuery struct {
	Host, Target, Type, Actor string
	Since, Until              time.Time
	// Modified selects runnable.modified links only (the integrity
	// history).
	Modified bool
}

// Audit is an audit page: the chains' status as audit verify computes it,
// and the newest links the query selects.
type Audit struct {
	Query AuditQuery
	// Status is intact, broken, duplicate_id (as audit verify --json
	// names it) or "none" (no log yet); Detail says where and why.
	Status, Detail string
	Links          int
	Chains         int
	Checkpoints    int
	// Rows are the newest matching links, newest first; Matched counts
	// every match.
	Rows    []AuditRow
	Matched int
}

// AuditRow is one link.
type AuditRow struct {
	link.Record
	// Type is the event type without its prefix; Modified the
	// runnable.modified data when it is one.
	Type     string
	Modified *events.RunnableModified
	// Change says what a baseline.changed or host.key.changed changed.
	Change string
}

// readAudit verifies the log's chains as audit verify does (every event
// id checked once per chain, against the checkpoints) and keeps the
// newest links q selects.
func readAudit(ctx context.Context, l AuditLog, q AuditQuery) (Audit, error) {
	a := Audit{Query: q, Status: "none"}
	var src chain.Source
	if l.Store != nil {
		src = l.Store.Source(ctx)
	} else {
		files, err := jsonl.Files(l.Path)
		if err != nil {
			return a, err
		}
		if len(files) == 0 {
			return a, nil
		}
		src = jsonl.Source(files)
	}
	var err error
	var cps []chain.Checkpoint
	if l.Checkpoints != "" {
		var pub ed25519.PublicKey
		if l.CheckpointKey != "" {
			if pub, err = auditor.LoadCheckpointPublicKey(l.CheckpointKey); err != nil {
				return a, err
			}
		}
		// None written yet: the chains are checked without.
		if cps, _, err = auditor.ReadCheckpoints(l.Checkpoints, pub); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return a, err
		}
	}
	ring := make([]AuditRow, 0, auditShown)
	next := 0
	visit := func(c *chain.Candidate) {
		var r link.Record
		var err error
		if c.Line != nil {
			r, err = link.Parse(c.Line)
		} else {
			r, err = link.FromRow(c.Chain, c.Seq, c.Prev, c.Hash, c.Event)
		}
		if err != nil || !q.selects(r) {
			return
		}
		a.Matched++
		row := AuditRow{Record: r, Type: strings.TrimPrefix(r.Meta.Type, events.TypePrefix)}
		if !r.Meta.Rejected {
			row.Modified, row.Change = describe(r)
		}
		if len(ring) < auditShown {
			ring = append(ring, row)
			return
		}
		ring[next] = row
		next = (next + 1) % auditShown
	}
	rep, err := chain.RunWith(ctx, chain.NewHasher(l.Key), src, chain.Options{Checkpoints: cps, EventIDs: true, Visit: visit})
	if err != nil {
		return a, err
	}
	for i := range ring { // newest first
		a.Rows = append(a.Rows, ring[(next+len(ring)-1-i)%len(ring)])
	}
	a.Links, a.Chains, a.Checkpoints, a.Status = rep.Links, len(rep.Chains), len(cps), "intact"
	switch {
	case rep.Broken != nil:
		a.Status, a.Detail = "broken", rep.Broken.Error()
	case rep.Duplicate != nil:
		d := rep.Duplicate
		a.Status, a.Detail = "duplicate_id", fmt.Sprintf("event %s linked twice in chain %s (#%d and #%d)", d.ID, d.Chain, d.First, d.Seq)
	}
	return a, nil
}

// describe reads what a link's event changed: the runnable.modified
// data, or a line saying what a baseline.changed or host.key.changed
// changed. The link's event was checked when it was linked; one that does
// not read is shown without.
func describe(r link.Record) (*events.RunnableModified, string) {
	var ev struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(r.Event, &ev) != nil {
		return nil, ""
	}
	switch r.Meta.Type {
	case events.TypeRunnableModified:
		var m events.RunnableModified
		if json.Unmarshal(ev.Data, &m) == nil {
			return &m, ""
		}
	case events.TypeBaselineChanged:
		var c events.BaselineChanged
		if json.Unmarshal(ev.Data, &c) == nil {
			d := c.Digest
			if d == "" {
				d = c.PreviousDigest
			}
			return nil, fmt.Sprintf("%s %s by %s", c.Change, d, c.Actor)
		}
	case events.TypeHostKeyChanged:
		var c events.HostKeyChanged
		if json.Unmarshal(ev.Data, &c) == nil {
			parts := make([]string, len(c.Keys))
			for i, k := range c.Keys {
				from := string(k.Previous)
				if from == "" {
					from = "new"
				}
				parts[i] = fmt.Sprintf("%s %s → %s", k.Key, from, k.State)
			}
			return nil, strings.Join(parts, "; ") + " by " + c.Actor
		}
	}
	return nil, ""
}

func (q AuditQuery) selects(r link.Record) bool {
	m := r.Meta
	return (!q.Modified || (m.Type == events.TypeRunnableModified && !m.Rejected)) &&
		(q.Host == "" || strings.Contains(m.Host, q.Host)) &&
		(q.Target == "" || strings.Contains(m.Target, q.Target) || strings.Contains(m.Subject, q.Target)) &&
		(q.Type == "" || strings.Contains(m.Type, q.Type)) &&
		(q.Actor == "" || strings.Contains(m.Source, q.Actor)) &&
		(q.Since.IsZero() || !m.Stored.Before(q.Since)) &&
		(q.Until.IsZero() || m.Stored.Before(q.Until))
}

// audit serves GET /audit and, with only runnable.modified links, GET
// /integrity.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Audit == nil {
		http.Error(w, "this console reads no audit log", http.StatusNotFound)
		return
	}
	v := r.URL.Query()
	q := AuditQuery{Host: v.Get("host"), Target: v.Get("target"), Type: v.Get("type"), Actor: v.Get("actor"),
		Modified: r.URL.Path == "/integrity"}
	for _, b := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if t := v.Get(b.name); t != "" {
			parsed, err := parseWhen(t)
			if err != nil {
				http.Error(w, b.name+": "+err.Error(), http.StatusBadRequest)
				return
			}
			*b.to = parsed
		}
	}
	a, err := readAudit(r.Context(), *s.cfg.Audit, q)
	if err != nil {
		s.log.Warn("console: audit", "err", err)
		http.Error(w, "the audit log cannot be read now", http.StatusServiceUnavailable)
		return
	}
	page := "audit.html"
	if q.Modified {
		page = "integrity.html"
	}
	s.render(w, page, a)
}

// parseWhen reads a time as RFC 3339, or as an HTML datetime-local field
// sends it (UTC).
func parseWhen(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, or YYYY-MM-DDTHH:MM in UTC)", v)
}
