package verifier

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// rejectionsPrefix starts the keys of the rejection logs in the hosts
// bucket: rejections.<host token>, beside the hosts' records (whose keys,
// host tokens, hold no dot).
const rejectionsPrefix = "rejections."

// maxRejections is how many refusals a host's rejection log keeps.
const maxRejections = 64

// Rejections is the log of the evidence refused in a host's name (the
// host the evidence claims: its signature may be anyone's), kept by the
// verifier in the hosts bucket.
type Rejections struct {
	Host string `json:"host"`
	// Total counts every refusal since the log began.
	Total uint64 `json:"total"`
	// Recent are the last refusals, up to 64, the oldest first.
	Recent []Rejection `json:"recent"`
}

// Rejection is one refused evidence event.
type Rejection struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	// Seq is the log's Total once this refusal was counted.
	Seq uint64 `json:"seq"`
	// EvidenceID is the refused event's id.
	EvidenceID string `json:"evidence_id"`
}

// Since counts the refusals after t (the host's last authentic
// evidence) and reports whether the count is exact: it is a lower bound
// when the log's recent refusals all came after t and older ones were
// dropped.
func (r Rejections) Since(t time.Time) (n uint64, exact bool) {
	for i := len(r.Recent) - 1; i >= 0; i-- {
		if !r.Recent[i].Time.After(t) {
			return r.Total - r.Recent[i].Seq, true
		}
	}
	return r.Total, len(r.Recent) == 0 || r.Recent[0].Seq == 1
}

// Last is the latest refusal (the zero Rejection when there is none).
func (r Rejections) Last() Rejection {
	if len(r.Recent) == 0 {
		return Rejection{}
	}
	return r.Recent[len(r.Recent)-1]
}

func rejectionsKey(host string) string { return rejectionsPrefix + events.Token(host) }

// recordRejections adds refusals (their reasons and evidence ids) to
// host's rejection log, in one write.
func recordRejections(ctx context.Context, kv jetstream.KeyValue, host string, at time.Time, refused []Rejection) error {
	_, err := updateRecord(ctx, kv, rejectionsKey(host), decodeRejections, func(r *Rejections, _ bool) (bool, error) {
		r.Host = host
		for _, x := range refused {
			r.Total++
			x.Time, x.Seq = at.UTC(), r.Total
			r.Recent = append(r.Recent, x)
		}
		if len(r.Recent) > maxRejections {
			r.Recent = r.Recent[len(r.Recent)-maxRejections:]
		}
		return true, nil
	})
	return err
}

// Rejections returns every host's rejection log, by host name.
func (h *Hosts) Rejections(ctx context.Context) ([]Rejections, error) {
	all, err := entries(ctx, h.kv, rejectionsPrefix+">")
	if err != nil {
		return nil, err
	}
	out, err := decodeEntries(all, "rejections", rejectionsPrefix, decodeRejections)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, nil
}

// HostRejections is what `status` shows of a host's refused evidence.
type HostRejections struct {
	Host string `json:"host"`
	// SinceAuthentic counts the refusals after the host's last authentic
	// evidence (all of them when it has none); Exact is false when it is
	// a lower bound (more refusals than the log keeps).
	SinceAuthentic uint64 `json:"since_authentic"`
	Exact          bool   `json:"exact"`
	// Total counts every refusal in the host's name.
	Total uint64 `json:"total"`
	// Last is the latest refusal.
	Last Rejection `json:"last"`
}

// RejectedSinceAuthentic returns, for each host with a rejection log, how
// many of its refusals came after its last authentic evidence, as the
// verdict records recs tell it (the time of the latest verdict on
// authentic evidence of any of its targets; a stale verdict's last_seen).
func RejectedSinceAuthentic(recs []VerdictRecord, logs []Rejections) []HostRejections {
	last := map[string]time.Time{}
	for _, r := range recs {
		t := r.Time
		if r.Verdict.Status == events.StatusStale {
			t, _ = time.Parse(time.RFC3339Nano, r.Verdict.LastSeen)
		}
		if t.After(last[r.Verdict.Host]) {
			last[r.Verdict.Host] = t
		}
	}
	out := make([]HostRejections, 0, len(logs))
	for _, l := range logs {
		n, exact := l.Since(last[l.Host])
		out = append(out, HostRejections{Host: l.Host, SinceAuthentic: n, Exact: exact, Total: l.Total, Last: l.Last()})
	}
	return out
}

// Rejected reads the rejection logs (none when the host registry does not
// exist yet) and returns, by host, the refusals since each host's last
// authentic evidence among recs (RejectedSinceAuthentic).
func (s *Status) Rejected(ctx context.Context, recs []VerdictRecord) (map[string]HostRejections, error) {
	kv, err := s.js.KeyValue(ctx, topology.BucketHosts)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host registry: %w", err)
	}
	logs, err := NewHosts(kv, EnrollManual).Rejections(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]HostRejections{}
	for _, h := range RejectedSinceAuthentic(recs, logs) {
		out[h.Host] = h
	}
	return out, nil
}
