// Package natsbus connects services to NATS JetStream: Connect (URL,
// credentials, TLS; a server not up yet is retried in the background) and
// Dial (the same, one attempt, for commands); ServiceConfig, the keys
// every service on the bus shares (nats.*, instance, replicas); Client, a service's one
// connection (lent by an embedding process or opened and owned, closed
// only if owned) with its JetStream context and Publisher; Consume, the message loop that turns a handler's
// result into an explicit acknowledgement (nil → Ack, retryable →
// NakWithDelay, Permanent → dead-letter + Term), ConsumeBatch, the same
// loop handing its handler batches of what has arrived and settling each
// message by its own result, and Publisher. All are instrumented: a span
// per handled message, a child of the producer's span named by the event's
// traceparent, a producer span per publish with its context injected into
// the event, and the counters named by the Metric constants.
package natsbus
