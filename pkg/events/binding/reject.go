package binding

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reject builds the dead-letter record of a JetStream message that a
// consumer gives up on because of cause: an *events.Error from this package (its
// events.Reason is kept) or a handler's own permanent error (events.ReasonPermanent).
//
// The consumer publishes the record (NewMsg, to rt.dlq.<stream>.<host>) and only
// then terminates the message (Term), so that nothing disappears
// unrecorded. It fails only when m carries no JetStream metadata.
func Reject(m jetstream.Msg, cause error) (events.EventRejected, error) {
	md, err := m.Metadata()
	if err != nil {
		return events.EventRejected{}, fmt.Errorf("dead-letter record: %w", err)
	}
	return Rejected(md.Stream, md.Consumer, m.Subject(), md.Sequence.Stream, md.NumDelivered, m.Headers(), m.Data(), cause), nil
}

// Rejected builds a dead-letter record from the parts of a message (see
// Reject).
func Rejected(stream, consumer, subject string, seq, deliveries uint64, h nats.Header, data []byte, cause error) events.EventRejected {
	reason := events.ReasonOf(cause)
	if reason == "" {
		reason = events.ReasonPermanent
	}
	msg := "unknown error"
	if cause != nil && strings.TrimSpace(cause.Error()) != "" {
		msg = strings.ReplaceAll(cause.Error(), "\x00", "\uFFFD")
	}
	sum := sha256.Sum256(data)
	return events.EventRejected{
		Stream:          stream,
		Consumer:        consumer,
		OriginalSubject: subject,
		StreamSequence:  seq,
		Deliveries:      deliveries,
		Reason:          reason,
		Error:           Clip(msg, events.MaxMessageLength, ""),
		Envelope: events.Envelope{
			ID:          rawHeader(h, HeaderPrefix+"id"),
			Type:        rawHeader(h, HeaderPrefix+"type"),
			Source:      rawHeader(h, HeaderPrefix+"source"),
			Subject:     rawHeader(h, HeaderPrefix+"subject"),
			SpecVersion: rawHeader(h, HeaderPrefix+"specversion"),
			MsgID:       rawHeader(h, HeaderMsgID),
		},
		DataSize:   len(data),
		DataDigest: "sha256:" + hex.EncodeToString(sum[:]),
	}
}

// rawHeader returns the first value of a header matched case-insensitively,
// made printable (control characters and invalid UTF-8 percent-encoded) and
// cut to events.MaxEnvelopeValue bytes.
func rawHeader(h nats.Header, name string) string {
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return Clip(printable(vs[0]), events.MaxEnvelopeValue, "")
		}
	}
	return ""
}

func printable(s string) string {
	if events.ControlIndex(s) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || r < 0x20 || 0x7F <= r && r <= 0x9F {
			for j := 0; j < n; j++ {
				fmt.Fprintf(&b, "%%%02X", s[i+j])
			}
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Clip makes s valid UTF-8 (an invalid byte becomes U+FFFD) and, when it
// is longer than n bytes, cuts it to at most n bytes without splitting a
// character, ending with mark (counted in the n; "" for none, and none
// when it does not fit): the one way
// a message is bounded before it goes into an event or a reply.
func Clip(s string, n int, mark string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	if len(mark) > n {
		mark = ""
	}
	n -= len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
