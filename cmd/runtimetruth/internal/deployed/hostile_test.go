package deployed_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// What the hostile neighbour sends: evidence signed by that many new keys,
// and that many invalid messages (more than the DLQ keeps of a host).
const (
	churnKeys = 3 * verifier.MaxPendingKeys
	junkMsgs  = topology.DeadLettersPerHost + 500
)

// hostileNeighbour: db's own credential, used as a compromised host would,
// all at once: evidence in db's name signed by ever new keys (key churn)
// and invalid messages spread over its subjects (junk), more than the DLQ
// keeps of a host. Meanwhile web's verdicts keep coming on its own
// evidence. Afterwards db's record holds at most MaxPendingKeys pending
// keys, and `host approve db --key` one of them works (the record never
// outgrew the bucket); db's dead letters keep to db's DLQ subject, the
// newest DeadLettersPerHost; web's dead letters are untouched; and the
// verifier is ready (nothing it must do failed).
func (p *pipeline) hostileNeighbour() {
	t := p.t
	ctx := t.Context()
	webBefore := p.records(web)
	require.Len(t, webBefore, 1)
	webLetters := len(p.deadLetters(web, ""))

	nc := p.dial(idHost(db))
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	var acks []jetstream.PubAckFuture
	publish := func(m *nats.Msg) {
		f, err := js.PublishMsgAsync(m)
		require.NoError(t, err)
		acks = append(acks, f)
	}
	for i := range churnKeys {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "db.service"}, snapshot.Record{
			Plane: snapshot.Live, Kind: "systemd.unit",
			Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
			Data:   snapshot.Data{"main_pid": snapshot.Int(int64(1000 + i))},
		})
		s.CapturedAt = snapshot.FormatTime(time.Now().UTC())
		ev, err := events.NewEvidenceCollected(db, s, time.Second)
		require.NoError(t, err)
		m, _, err := binding.NewMsg(events.Source("collector", db), ev,
			binding.WithSigner(dsse.NewSigner(key, func() (uint64, error) { return 1, nil })))
		require.NoError(t, err)
		publish(m)
	}
	for i := range junkMsgs {
		// Over 20 of its subjects: a subject holds at most
		// EvidencePerSubject messages waiting.
		m := nats.NewMsg(events.EvidenceSubject(db, "junk"+strconv.Itoa(i%20)))
		m.Data = []byte(`{"junk":` + strconv.Itoa(i) + `}`)
		publish(m)
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			require.NoError(t, err, "db's credential publishes on db's subjects")
		case <-time.After(deadline):
			require.Fail(t, "a publish of db's was not acknowledged")
		}
	}

	// Web's evidence keeps getting verdicts.
	p.waitRecord(web, "web's verdicts through the flood", func(r statusRecord) error {
		if r.EvidenceID == webBefore[0].EvidenceID {
			return fmt.Errorf("still the verdict of %s", r.EvidenceID)
		}
		return signedWith(p.key, webBefore[0].Verdict.Status)(r)
	})

	// db's dead letters: every junk message refused, the newest kept.
	dlqSubject := events.DeadLetterSubject(topology.StreamEvidence, events.EvidenceSubject(db, "junk0"))
	natstest.CheckFor(t, deadline, poll, func() error {
		info, err := p.js.Stream(ctx, topology.StreamDLQ)
		if err != nil {
			return err
		}
		st, err := info.Info(ctx, jetstream.WithSubjectFilter(dlqSubject))
		if err != nil {
			return err
		}
		if n := st.State.Subjects[dlqSubject]; n != topology.DeadLettersPerHost {
			return fmt.Errorf("%d dead letters of db's, want the newest %d of %d", n, topology.DeadLettersPerHost, junkMsgs+churnKeys)
		}
		return nil
	})
	assert.Len(t, p.deadLetters(web, ""), webLetters, "web's dead letters untouched")

	rec := p.host(db)
	pending := 0
	var hint string
	for _, k := range rec.Keys {
		if k.State == events.KeyPending {
			pending++
			hint = k.Key
		}
	}
	assert.Equal(t, verifier.MaxPendingKeys, pending, "db's pending keys, bounded")
	r := p.cli("host", "approve", db, "--key", hint)
	require.Equal(t, 0, r.code, "host approve of the flooded host: %s", r.stderr)
	assert.Equal(t, events.KeyEnrolled, p.host(db).KeyOf(hint).State)
	assert.NoError(t, ready(p.verifier), "the verifier, ready")
}
