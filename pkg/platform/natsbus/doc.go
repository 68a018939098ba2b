// Package natsbus connects services to NATS JetStream: Connect (URL,
// credentials, TLS), and Consume, the message loop that turns a handler's
// result into an explicit acknowledgement (nil → Ack, retryable → NakWithDelay,
// Permanent → dead-letter + Term).
package natsbus
