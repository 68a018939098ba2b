package auditor_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// TestRefusedEvidenceCostsARecord: ten messages with a real signed
// event's headers (its signature included; without Nats-Msg-Id, so that
// the stream keeps every copy) on 1 MiB of other data, as
// anyone who may publish evidence can send, and the real event. The
// auditor links the real event whole and each copy as a rejection record
// of about a kilobyte naming the reason, the event's id, the data's size
// and SHA-256: the JSONL log grows by kilobytes, not the 10 MiB sent.
// (Before the check the first copy was linked whole, a line of 1 MiB, as
// the event of that id; the others and the real event were dropped as
// copies of it.)
func TestRefusedEvidenceCostsARecord(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	a := start(t, cfg)
	const host, copies = "web-01.example.com", 10
	genuine := auditortest.SignedMsg(t, auditortest.Evidence(t, host, 1), 1, auditortest.Key, 1)
	big := auditortest.LargeMsg(t, host, 1, events.MaxEventSize-events.MaxHeaderSize).Data
	ctx := context.Background()
	for range copies {
		m := auditortest.HeadersOn(genuine, big)
		m.Header.Del("Nats-Msg-Id")
		ack, err := e.js.PublishMsg(ctx, m)
		require.NoError(t, err)
		require.False(t, ack.Duplicate)
	}
	_, err := e.js.PublishMsg(ctx, genuine)
	require.NoError(t, err)
	e.waitConsumed(t, 60*time.Second, testConsumer)
	stop(t, a)

	recs := readLog(t, cfg.JSONL.Path)
	refused := 0
	for _, r := range recs {
		require.Equal(t, "EVIDENCE/"+host, r.Chain)
		if !r.Meta.Rejected {
			assert.Equal(t, genuine.Header.Get("ce-id"), r.Meta.ID)
			assert.Less(t, len(r.Line), 4<<10, "the real event, whole (the copies' data is not its)")
			continue
		}
		refused++
		assert.LessOrEqual(t, len(r.Line), 2<<10, "a refused event's line")
		assert.Equal(t, "claim_mismatch", r.Meta.Reason)
		assert.Equal(t, host, r.Meta.Host)
		assert.Contains(t, string(r.Event), `"id":"`+genuine.Header.Get("ce-id")+`"`, "the event's own id, in the record's envelope")
		assert.Contains(t, string(r.Event), fmt.Sprintf(`"data_size":%d`, len(big)))
		assert.Contains(t, string(r.Event), "payload_sha256 differs")
	}
	assert.Equal(t, copies, refused, "each copy a record, the real event linked once")
	assert.Len(t, recs, copies+1)
	st, err := os.Stat(cfg.JSONL.Path)
	require.NoError(t, err)
	assert.Less(t, st.Size(), int64(32<<10), "the log, after %d MiB of refused data", copies)
	t.Logf("log: %d bytes for %d refused copies of %d bytes and the real event", st.Size(), copies, len(big))
}
