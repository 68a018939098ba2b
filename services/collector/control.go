package collector

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
)

// ControlTimeout bounds the collections one request asks for.
const ControlTimeout = 2 * time.Minute

// The collect-now protocol (request-reply on CollectNowSubject). A request
// is a JSON CollectNowRequest (a target name, empty for every target, and
// the requester's nonce) or, as before, a target name as plain text (no
// nonce). The reply is a DSSE envelope (events.OpenEnvelope) of payload
// type ReplyPayloadType, signed with the collector's key, whose payload is
// the JSON CollectNowReply: the host, the request's target and nonce, the
// reply time and the results. A requester accepts it only when it verifies
// with the key the host registry holds as the host's enrolled key and
// says the host and nonce it asked (VerifyCollectNowReply).
const (
	// ReplyPayloadType is the payload type of a reply's envelope.
	ReplyPayloadType = "application/vnd.runtimetruth.collect-reply.v1+json"
	// MaxNonceLength bounds a request's nonce: printable ASCII without
	// spaces.
	MaxNonceLength = 128
	// MaxRequestSize bounds a request.
	MaxRequestSize = 4 << 10
)

// CollectNowRequest is a request on CollectNowSubject, as JSON.
type CollectNowRequest struct {
	// Target names the target to collect; empty for every target.
	Target string `json:"target,omitempty"`
	// Nonce is the requester's fresh random value, signed back in the
	// reply so that a reply to an earlier request does not pass for this
	// one. Required in a JSON request.
	Nonce string `json:"nonce"`
}

// CollectNowReply is what a collector signs in reply to a request on
// CollectNowSubject (the payload of the ReplyPayloadType envelope).
type CollectNowReply struct {
	Host string `json:"host"`
	// Target and Nonce are the request's (both empty for a request that
	// could not be read).
	Target string `json:"target"`
	Nonce  string `json:"nonce"`
	// Time is when the reply was signed.
	Time time.Time `json:"time"`
	// Results has one entry per collected target.
	Results []Result `json:"results,omitempty"`
	// Error says why nothing was collected (an unknown target, a
	// malformed request, a shutdown).
	Error string `json:"error,omitempty"`
}

// Why a collect-now request or reply is refused (wrapped).
var (
	// ErrBadRequest: the request is malformed.
	ErrBadRequest = errors.New("bad collect-now request")
	// ErrBadReply: the signed payload is not a CollectNowReply.
	ErrBadReply = errors.New("bad collect-now reply")
	// ErrReplyMismatch: an authentic reply, but to another request (its
	// host, nonce or target is not the request's).
	ErrReplyMismatch = errors.New("the reply is not to this request")
)

// ParseCollectNowRequest reads a request: JSON when it starts with "{"
// (strict: no unknown field, a nonce of at most MaxNonceLength printable
// non-space ASCII), else a target name as plain text, surrounding space
// trimmed.
func ParseCollectNowRequest(data []byte) (CollectNowRequest, error) {
	if len(data) > MaxRequestSize {
		return CollectNowRequest{}, fmt.Errorf("%w: longer than %d bytes", ErrBadRequest, MaxRequestSize)
	}
	text := bytes.TrimSpace(data)
	if !bytes.HasPrefix(text, []byte("{")) {
		return CollectNowRequest{Target: string(text)}, nil
	}
	var req CollectNowRequest
	if err := strictjson.Decode(text, &req); err != nil {
		return CollectNowRequest{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if req.Nonce == "" || len(req.Nonce) > MaxNonceLength ||
		strings.ContainsFunc(req.Nonce, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return CollectNowRequest{}, fmt.Errorf("%w: want a nonce of 1 to %d printable ASCII characters", ErrBadRequest, MaxNonceLength)
	}
	return req, nil
}

// OpenCollectNowReply checks a reply's envelope (events.OpenEnvelope: its
// errors wrap events.ErrUnsigned or events.ErrBadSignature, or key's
// error) and decodes the reply it signs, strictly (ErrBadReply). It does
// not check that the reply is to a given request: VerifyCollectNowReply
// does.
func OpenCollectNowReply(data []byte, key func(keyID string) (ed25519.PublicKey, error)) (keyID string, rep CollectNowReply, err error) {
	keyID, payload, err := dsse.OpenEnvelope(data, ReplyPayloadType, key)
	if err != nil {
		return "", CollectNowReply{}, err
	}
	if err := strictjson.Decode(payload, &rep); err != nil {
		return "", CollectNowReply{}, fmt.Errorf("%w: %w", ErrBadReply, err)
	}
	return keyID, rep, nil
}

// VerifyCollectNowReply accepts a reply to req sent to host's collector:
// it opens (OpenCollectNowReply, with key, which returns host's enrolled
// key for its id or an error) and says host, req's nonce and req's target
// (else ErrReplyMismatch).
func VerifyCollectNowReply(data []byte, host string, req CollectNowRequest, key func(keyID string) (ed25519.PublicKey, error)) (keyID string, rep CollectNowReply, err error) {
	keyID, rep, err = OpenCollectNowReply(data, key)
	switch {
	case err != nil:
		return "", CollectNowReply{}, err
	case rep.Host != host:
		return keyID, rep, fmt.Errorf("%w: signed for host %q, not %q", ErrReplyMismatch, rep.Host, host)
	case rep.Nonce != req.Nonce:
		return keyID, rep, fmt.Errorf("%w: its nonce %q is not the request's (a replay?)", ErrReplyMismatch, rep.Nonce)
	case rep.Target != req.Target:
		return keyID, rep, fmt.Errorf("%w: it answers for target %q, not %q", ErrReplyMismatch, rep.Target, req.Target)
	}
	return keyID, rep, nil
}

// handleControl answers a collect-now request on the collector's own
// subject (a request on any other is dropped and counted: the collector
// subscribes to its own only, and never answers for another host). The
// collection runs in its own goroutine so a slow one does not hold up the
// next request.
func (c *Collector) handleControl(m *nats.Msg) {
	if m.Subject != c.controlSubject {
		c.in.foreign.Add(context.Background(), 1)
		c.log.Warn("collect-now request for another host dropped", "subject", m.Subject)
		return
	}
	c.in.requests.Add(context.Background(), 1)
	req, err := ParseCollectNowRequest(m.Data)
	if err != nil {
		c.reply(m, CollectNowReply{Host: c.cfg.Host, Error: err.Error()})
		return
	}
	c.mu.Lock()
	running := c.state == lifecycle.Running
	if running {
		c.inflight.Add(1)
	}
	c.mu.Unlock()
	if !running {
		c.reply(m, CollectNowReply{Host: c.cfg.Host, Target: req.Target, Nonce: req.Nonce, Error: ErrNotRunning.Error()})
		return
	}
	go func() {
		defer c.inflight.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ControlTimeout)
		defer cancel()
		results, err := c.collectNow(ctx, req.Target)
		rep := CollectNowReply{Host: c.cfg.Host, Target: req.Target, Nonce: req.Nonce, Results: results}
		if results == nil && err != nil {
			rep.Error = err.Error()
		}
		c.reply(m, rep)
	}()
}

// reply signs rep, timed now, and sends its envelope.
func (c *Collector) reply(m *nats.Msg, rep CollectNowReply) {
	if m.Reply == "" {
		return
	}
	rep.Time = time.Now().UTC()
	payload, err := json.Marshal(rep)
	var env []byte
	if err == nil {
		env, err = c.signer.SignEnvelope(ReplyPayloadType, payload)
	}
	if err == nil {
		err = m.Respond(env)
	}
	if err != nil {
		c.log.Warn("collect-now reply failed", "err", err)
	}
}

// Bounds on what a requester keeps of the replies Ask refuses: anyone who
// sees the request may answer it, as often as the bus lets them.
const (
	MaxRefusals     = 16
	MaxRefusalBytes = 512
)

// Why Ask got no authentic reply.
var (
	// ErrNoCollector: nothing listens on the host's subject (the server's
	// no-responders status, or a forgery of it: it can end the wait,
	// never pass for a reply).
	ErrNoCollector = errors.New("no collector is listening")
	// ErrNoAuthenticReply: no reply verified before the context ended.
	ErrNoAuthenticReply = errors.New("no authentic reply")
)

// Ask sends req to host's collector over nc (replies to its own inbox)
// and reads the replies until one verifies (VerifyCollectNowReply, with
// key: the host's enrolled keys) or ctx ends, calling refused with each
// reply refused (the key id its envelope names, if any, and why); an
// error refused returns ends the wait with it. It returns the accepted
// reply and the key that signed it.
func Ask(ctx context.Context, nc *nats.Conn, host string, req CollectNowRequest, key func(keyID string) (ed25519.PublicKey, error),
	refused func(keyID string, why error) error) (string, CollectNowReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return "", CollectNowReply{}, err
	}
	subject := CollectNowSubject(host)
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return "", CollectNowReply{}, fmt.Errorf("subscribe %s: %w", inbox, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: data}); err != nil {
		return "", CollectNowReply{}, fmt.Errorf("request %s: %w", subject, err)
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		return "", CollectNowReply{}, fmt.Errorf("request %s: %w", subject, err)
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return "", CollectNowReply{}, fmt.Errorf("%w on %s", ErrNoCollector, subject)
		case err != nil && ctx.Err() != nil:
			return "", CollectNowReply{}, fmt.Errorf("%w: %w", ErrNoAuthenticReply, ctx.Err())
		case err != nil:
			return "", CollectNowReply{}, fmt.Errorf("read replies on %s: %w", inbox, err)
		}
		var named string
		keyID, rep, err := VerifyCollectNowReply(m.Data, host, req, func(id string) (ed25519.PublicKey, error) {
			named = id
			return key(id)
		})
		if err == nil {
			return keyID, rep, nil
		}
		if err := refused(named, err); err != nil {
			return "", CollectNowReply{}, err
		}
	}
}

// NewNonce is a request's fresh nonce: 16 random bytes, hex.
func NewNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("nonce: %w", err)
	}
	return hex.EncodeToString(b), nil
}
