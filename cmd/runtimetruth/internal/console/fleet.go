package console

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// PageSize is how many rows a fleet page shows.
const PageSize = 50

// Row is one host and target on the fleet page.
type Row struct {
	Host   string
	Target events.Target
	// Status is the latest verdict's: PASS, DRIFT, ERROR or STALE.
	Status string
	// Verdict is when the latest verdict was made; Seen when the latest
	// authentic evidence came (a stale verdict's last_seen).
	Verdict, Seen time.Time
	// Digest is the host's latest snapshot's (verifier.LatestDigest).
	Digest string
	Detail string
	// Enrollment is the host's key state (enrolled, pending, revoked, or
	// "unregistered"), Key its enrolled key's id, and Pending the number
	// of its keys waiting for approval.
	Enrollment string
	Key        string
	Pending    int
	// Refused counts the evidence refused in the host's name since its
	// last authentic evidence.
	Refused uint64
	// Record is the verdict record the row shows.
	Record verifier.VerdictRecord
}

// Query selects fleet rows: by status, host (a substring) and target kind;
// Page is 1-based.
type Query struct {
	Status, Host, Kind string
	Page               int
}

// Fleet is one page of rows and what the filters offer.
type Fleet struct {
	Query Query
	Rows  []Row
	// Total counts the rows the query selects; Pages the pages they fill.
	Total, Pages int
	// Counts counts every row by status, Kinds lists the target kinds.
	Counts map[string]int
	Kinds  []string
	// Revision is the verdicts bucket's revision the page was read at,
	// where its live updates start.
	Revision uint64
	// all is every row the query selects, unpaged; hosts the registry's
	// records by host name.
	all   []Row
	hosts map[string]events.HostRecord
}

// readFleet reads every host and target's latest verdict, the hosts'
// registry records and rejection counts, and returns the page q selects.
func readFleet(ctx context.Context, js jetstream.JetStream, q Query) (Fleet, error) {
	st := verifier.NewStatus(js)
	// The revision first: a verdict stored while the bucket is read is
	// delivered again by the live updates, never lost.
	rev, err := st.Revision(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		err = nil
	}
	if err != nil {
		return Fleet{}, err
	}
	recs, err := st.List(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		recs, err = nil, nil // no verdict yet
	}
	if err != nil {
		return Fleet{}, err
	}
	refused, err := st.Rejected(ctx, recs)
	if err != nil {
		return Fleet{}, err
	}
	hosts, err := hostRecords(ctx, js)
	if err != nil {
		return Fleet{}, err
	}
	f := Fleet{Query: q, Counts: map[string]int{}, Revision: rev, hosts: hosts}
	var all []Row
	for _, r := range recs {
		row := rowOf(r)
		row.Refused = refused[row.Host].SinceAuthentic
		if h, ok := hosts[row.Host]; ok {
			row.Enrollment, row.Key, row.Pending = enrollment(h)
		}
		f.Counts[row.Status]++
		if !slices.Contains(f.Kinds, row.Target.Kind) {
			f.Kinds = append(f.Kinds, row.Target.Kind)
		}
		if q.selects(row) {
			all = append(all, row)
		}
	}
	slices.Sort(f.Kinds)
	f.Total = len(all)
	f.Pages = max(1, (len(all)+PageSize-1)/PageSize)
	f.Query.Page = min(max(q.Page, 1), f.Pages)
	lo := (f.Query.Page - 1) * PageSize
	f.Rows, f.all = all[lo:min(lo+PageSize, len(all))], all
	return f, nil
}

// rowOf is the row of a verdict record, before the host registry's
// facts and the refusals are added.
func rowOf(r verifier.VerdictRecord) Row {
	row := Row{
		Host: r.Verdict.Host, Target: r.Verdict.Target, Status: verifier.StatusWord(r.Verdict.Status),
		Verdict: r.Time, Seen: r.Time, Digest: verifier.LatestDigest(r), Detail: verifier.Summary(r.Verdict),
		Enrollment: "unregistered", Record: r,
	}
	if r.Verdict.Status == events.StatusStale {
		row.Seen, _ = time.Parse(time.RFC3339Nano, r.Verdict.LastSeen)
	}
	return row
}

func (q Query) selects(r Row) bool {
	return (q.Status == "" || strings.EqualFold(q.Status, r.Status)) &&
		(q.Host == "" || strings.Contains(r.Host, q.Host)) &&
		(q.Kind == "" || q.Kind == r.Target.Kind)
}

// hostRecords reads the host registry by host name (none before it
// exists: enrollment off).
func hostRecords(ctx context.Context, js jetstream.JetStream) (map[string]events.HostRecord, error) {
	hosts, err := registry(ctx, js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	recs, err := hosts.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]events.HostRecord, len(recs))
	for _, r := range recs {
		out[r.Host] = r
	}
	return out, nil
}

// registry opens the host registry (jetstream.ErrBucketNotFound before
// a verifier made it). The console never admits a key: the mode does not
// matter.
func registry(ctx context.Context, js jetstream.JetStream) (*verifier.Hosts, error) {
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	if err != nil {
		return nil, err
	}
	return verifier.NewHosts(kv, verifier.EnrollManual), nil
}

// enrollment is where a host's keys stand: "enrolled" with the key's id
// when one is, else "pending" or "revoked"; and how many keys wait.
func enrollment(h events.HostRecord) (state, key string, pending int) {
	for _, k := range h.Keys {
		switch k.State {
		case events.KeyEnrolled:
			state, key = string(k.State), k.Key
		case events.KeyPending:
			pending++
		}
	}
	switch {
	case state != "":
	case pending > 0:
		state = string(events.KeyPending)
	case len(h.Keys) > 0:
		state = string(events.KeyRevoked)
	default:
		state = "unregistered"
	}
	return state, key, pending
}
