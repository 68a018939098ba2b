package events

// Size limits of one event on the wire. A NATS server refuses a message whose
// headers and data together exceed its max_payload (1 MiB by default), and the
// streams of package topology set MaxMsgSize to MaxEventSize, so every event
// this package encodes fits a default server.
const (
	// MaxEventSize bounds a whole message: the encoded header block plus the
	// data, counted as NATS counts them (1 MiB, the default max_payload).
	MaxEventSize = 1 << 20
	// MaxHeaderSize bounds the encoded header block ("NATS/1.0\r\n", every
	// "Name: value\r\n" line and the closing "\r\n"). The attributes of a
	// catalog event take a few hundred bytes.
	MaxHeaderSize = 8 << 10
	// MaxDataSize bounds the event data (the JSON payload): MaxEventSize
	// minus MaxHeaderSize, so that any event within both limits fits.
	// A snapshot too large for it cannot be published as one event; the
	// collector reports a collection.failed event instead.
	MaxDataSize = MaxEventSize - MaxHeaderSize
	// MaxIDLength bounds the id attribute, which is also the JetStream
	// Nats-Msg-Id (a UUIDv7 takes 36 characters).
	MaxIDLength = 128
	// MaxTokenLength bounds one encoded NATS subject token (see Token);
	// longer values are shortened with a hash.
	MaxTokenLength = 128
)
