package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

// Delivery timing.
const (
	// PublishTimeout bounds one publish attempt, acknowledgement included.
	PublishTimeout = 10 * time.Second
	// RetryFirst and RetryLongest bound the wait between publish
	// attempts of the same event (doubling).
	RetryFirst   = 100 * time.Millisecond
	RetryLongest = 5 * time.Second
)

var sendPolicy = retry.Policy{First: RetryFirst, Max: RetryLongest}

// send delivers the spool in order until ctx ends: each event is
// published until JetStream acknowledges it (or refuses it for good), and
// only then committed, i.e. removed from the spool.
func (c *Collector) send(ctx context.Context) {
	defer close(c.senderDone)
	commits := sendPolicy.Backoff()
	for {
		rec, err := c.spool.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, spool.ErrClosed) {
				return
			}
			c.in.spoolError(ctx, SpoolRead)
			c.log.Error("spool read failed; restart the collector to cut the damaged record", "err", err)
			if !retry.Sleep(ctx, RetryLongest) {
				return
			}
			continue
		}
		msg, enqueued, err := decodeMsg(rec.Data)
		if err != nil {
			c.in.spoolError(ctx, SpoolDecode)
			c.log.Error("undecodable spool record skipped", "err", err, "bytes", len(rec.Data))
		} else if !c.deliver(ctx, msg, enqueued) {
			return
		}
		for {
			err := c.spool.Commit(rec)
			if err == nil {
				commits.Reset()
				break
			}
			if errors.Is(err, spool.ErrClosed) {
				return
			}
			c.in.spoolError(ctx, SpoolCommit)
			c.log.Error("spool commit failed", "err", err)
			if !commits.Wait(ctx) {
				return
			}
		}
	}
}

// deliver publishes msg until it is acknowledged or permanently refused;
// it returns false when ctx ended first. Each attempt's span is a child of
// the collection's, whose context the message carries.
func (c *Collector) deliver(ctx context.Context, msg *nats.Msg, enqueued time.Time) bool {
	id := msg.Header.Get(binding.HeaderMsgID)
	attempts := sendPolicy.Backoff()
	failing := false
	traced := eventtrace.Extract(ctx, c.in.prop, msg.Header)
	for {
		pctx, cancel := context.WithTimeout(traced, PublishTimeout)
		ack, err := c.pub.Publish(pctx, msg, jetstream.WithMsgID(id))
		cancel()
		switch {
		case err == nil:
			if ack.Duplicate {
				c.in.duplicates.Add(traced, 1)
			}
			c.in.lag.Record(traced, time.Since(enqueued).Seconds())
			if failing {
				c.log.Info("publishing again", "id", id, "subject", msg.Subject)
			}
			return true
		case ctx.Err() != nil:
			return false
		case permanent(err):
			c.in.rejected.Add(traced, 1)
			c.log.Error("event refused by NATS for good; removed from the spool",
				"id", id, "subject", msg.Subject, "bytes", len(msg.Data), "err", err)
			return true
		}
		if !failing {
			failing = true
			pending, _ := c.spool.Pending()
			c.log.Warn("publish failing; events wait in the spool", "id", id, "subject", msg.Subject,
				"pending_events", pending, "err", err)
		}
		if !attempts.Wait(ctx) {
			return false
		}
	}
}

// permanent reports publish errors that no retry fixes: the message is
// larger than the server or stream allows, or its subject is invalid.
func permanent(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return true
	}
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject)
}

// A spool record holds one NATS message:
//
//	version 1 (1 byte) | enqueued at, Unix ns (varint)
//	subject (uvarint length + bytes)
//	header count (uvarint), then per header name in sorted order:
//	  name (uvarint length + bytes), value count (uvarint), values
//	data (uvarint length + bytes)
const recordVersion = 1

func encodeMsg(m *nats.Msg, enqueued time.Time) []byte {
	b := make([]byte, 0, 64+len(m.Subject)+len(m.Data)+64*len(m.Header))
	b = append(b, recordVersion)
	b = binary.AppendVarint(b, enqueued.UnixNano())
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(m.Subject)
	keys := make([]string, 0, len(m.Header))
	for k := range m.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		str(k)
		b = binary.AppendUvarint(b, uint64(len(m.Header[k])))
		for _, v := range m.Header[k] {
			str(v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Data)))
	return append(b, m.Data...)
}

var errRecord = errors.New("malformed spool record")

func decodeMsg(b []byte) (*nats.Msg, time.Time, error) {
	if len(b) == 0 || b[0] != recordVersion {
		return nil, time.Time{}, fmt.Errorf("%w: unknown version", errRecord)
	}
	b = b[1:]
	ns, n := binary.Varint(b)
	if n <= 0 {
		return nil, time.Time{}, errRecord
	}
	b = b[n:]
	num := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	bytesOf := func() ([]byte, bool) {
		l, ok := num()
		if !ok || l > uint64(len(b)) {
			return nil, false
		}
		v := b[:l:l]
		b = b[l:]
		return v, true
	}
	subj, ok := bytesOf()
	if !ok {
		return nil, time.Time{}, errRecord
	}
	nh, ok := num()
	if !ok || nh > uint64(len(b)) {
		return nil, time.Time{}, errRecord
	}
	h := make(nats.Header, nh)
	for range nh {
		k, ok := bytesOf()
		if !ok {
			return nil, time.Time{}, errRecord
		}
		nv, ok := num()
		if !ok || nv > uint64(len(b))+1 {
			return nil, time.Time{}, errRecord
		}
		vals := make([]string, 0, nv)
		for range nv {
			v, ok := bytesOf()
			if !ok {
				return nil, time.Time{}, errRecord
			}
			vals = append(vals, string(v))
		}
		h[string(k)] = vals
	}
	data, ok := bytesOf()
	if !ok || len(b) != 0 {
		return nil, time.Time{}, errRecord
	}
	return &nats.Msg{Subject: string(subj), Header: h, Data: data}, time.Unix(0, ns), nil
}
