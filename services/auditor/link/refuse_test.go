package link_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// maxRefusedLine bounds the link line of a refused event in these tests
// (the README's figure: about 1.2 KiB with these headers).
const maxRefusedLine = 2 << 10

// TestRefusedSignedEvents: a signed event whose signature cannot be its
// own (events.CheckClaim) is linked as an auditor-made event.rejected
// naming the reason, the event's id, the data's size and SHA-256, and
// its host, never the data: a real event's headers (its signature
// included) on 1 MiB of other data make a link of about a kilobyte, as do
// its id changed, a damaged envelope and the real event published on
// another host's subject (else linked whole in that host's chain, past
// its id check), strict or not (strict, the
// payload's own checks may refuse it first). Without the
// check the first link held the megabyte.
func TestRefusedSignedEvents(t *testing.T) {
	host := hosts[0]
	genuine := auditortest.SignedMsg(t, auditortest.Evidence(t, host, 5), 5, auditortest.Key, 6)
	big := auditortest.LargeMsg(t, host, 5, events.MaxEventSize-events.MaxHeaderSize).Data
	require.Greater(t, len(big), 1000<<10)
	newID := auditortest.HeadersOn(genuine, genuine.Data)
	newID.Header.Set("ce-id", "01930000-0000-7000-8000-00000000dead")
	newID.Header.Set("Nats-Msg-Id", "01930000-0000-7000-8000-00000000dead")
	damaged := auditortest.HeadersOn(genuine, genuine.Data)
	damaged.Header.Set("ce-"+dsse.ExtSignature, `{"payloadType":"`+dsse.ClaimPayloadType+`","payload":"","signatures":[]}`)

	elsewhere := auditortest.HeadersOn(genuine, genuine.Data)
	elsewhere.Subject = events.EvidenceSubject(hosts[1], "systemd.unit")

	h := chain.NewHasher(nil)
	for _, tc := range []struct {
		name   string
		msg    *link.Message
		reason string
		detail string
	}{
		{"headers on other data", auditortest.Message(t, "EVIDENCE", 7, auditortest.HeadersOn(genuine, big)), "claim_mismatch", "payload_sha256 differs"},
		{"id changed", auditortest.Message(t, "EVIDENCE", 8, newID), "claim_mismatch", "id differs"},
		{"damaged envelope", auditortest.Message(t, "EVIDENCE", 9, damaged), "bad_signature", "0 signatures"},
		{"another host's subject", auditortest.Message(t, "EVIDENCE", 10, elsewhere), "claim_mismatch", "host differs"},
	} {
		for _, strict := range []bool{false, true} {
			r := link.Prepare(tc.msg, "/auditor/t", strict).Seal(h, link.Head{})
			assert.LessOrEqual(t, len(r.Line), maxRefusedLine, "%s: a refused event's link", tc.name)
			assert.NotContains(t, string(r.Line), "xxxxxxxxxxxxxxxx", tc.name)
			assert.True(t, r.Meta.Rejected, tc.name)
			if strict && r.Meta.Reason == string(events.ReasonSubjectMismatch) {
				continue // the payload's own checks came first
			}
			assert.Equal(t, tc.reason, r.Meta.Reason, tc.name)
			assert.Equal(t, link.HostOf(tc.msg.Subject), r.Meta.Host, "%s: the subject's host", tc.name)
			assert.Equal(t, "EVIDENCE/"+link.HostOf(tc.msg.Subject), r.Chain, tc.name)
			assert.Equal(t, link.RejectionID("EVIDENCE", tc.msg.Seq), r.Meta.ID, "%s: an auditor-made record", tc.name)

			var ev struct {
				Data events.EventRejected `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Event, &ev))
			sum := sha256.Sum256(tc.msg.Data)
			assert.Equal(t, len(tc.msg.Data), ev.Data.DataSize, tc.name)
			assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), ev.Data.DataDigest, tc.name)
			assert.Equal(t, tc.msg.Header.Get("ce-id"), ev.Data.Envelope.ID, "%s: the event's own id", tc.name)
			assert.Contains(t, ev.Data.Error, tc.detail, tc.name)
		}
	}

	// Every signed event of the fixture mix, on every stream, as its
	// signer sent it, is linked whole.
	for i := range 16 {
		m := auditortest.SignedMsg(t, auditortest.Payload(t, hosts, i), i, auditortest.Key, uint64(i+1))
		for _, strict := range []bool{false, true} {
			r := link.Prepare(auditortest.Message(t, auditortest.StreamOf(m.Subject), uint64(i+1), m), "/auditor/t", strict).Seal(h, link.Head{})
			assert.False(t, r.Meta.Rejected, "signed payload %d: %s", i, r.Meta.Reason)
		}
	}

	// The real event is linked whole, to the hash it had before the
	// check existed.
	for _, strict := range []bool{false, true} {
		r := link.Prepare(auditortest.Message(t, "EVIDENCE", 6, genuine), "/auditor/t", strict).Seal(h, link.Head{})
		assert.False(t, r.Meta.Rejected)
		assert.Contains(t, string(r.Event), `"`+link.DataDigestMember+`":`)
		assert.Contains(t, string(r.Event), `"`+dsse.ExtSignature+`":`)
		assert.Equal(t, "sha256:3a6d98a218654750ef77d90e2e222daaaba802a0ab0c1fe057df57edb5e5d85c", r.Hash)
	}
}
