package collector

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// ControlTimeout bounds the collections one request asks for.
const ControlTimeout = 2 * time.Minute

// CollectNowReply is the JSON reply to a request on CollectNowSubject.
type CollectNowReply struct {
	Host string `json:"host"`
	// Results has one entry per collected target.
	Results []Result `json:"results,omitempty"`
	// Error says why nothing was collected (an unknown target, a
	// shutdown).
	Error string `json:"error,omitempty"`
}

// handleControl answers a collect-now request: the payload is a target
// name as plain text, or empty for every target. The collection runs in
// its own goroutine so a slow one does not hold up the next request.
func (c *Collector) handleControl(m *nats.Msg) {
	c.stats.controlRequests.Add(1)
	name := strings.TrimSpace(string(m.Data))
	c.mu.Lock()
	running := c.state == stateRunning
	if running {
		c.inflight.Add(1)
	}
	c.mu.Unlock()
	if !running {
		c.reply(m, CollectNowReply{Host: c.cfg.Host, Error: ErrNotRunning.Error()})
		return
	}
	go func() {
		defer c.inflight.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ControlTimeout)
		defer cancel()
		results, err := c.collectNow(ctx, name)
		rep := CollectNowReply{Host: c.cfg.Host, Results: results}
		if results == nil && err != nil {
			rep.Error = err.Error()
		}
		c.reply(m, rep)
	}()
}

func (c *Collector) reply(m *nats.Msg, rep CollectNowReply) {
	if m.Reply == "" {
		return
	}
	data, err := json.Marshal(rep)
	if err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		c.log.Warn("collect-now reply failed", "err", err)
	}
}

// Stats are the collector's counters since New (see the README's
// metrics table).
type Stats struct {
	Collections         uint64 // collections run
	CollectionFailures  uint64 // collections that spooled collection.failed
	RunnableModified    uint64 // runnable.modified events spooled
	EventsSpooled       uint64 // events written to the spool
	EventsRefused       uint64 // events refused because the spool was full
	EventsInvalid       uint64 // events the codec refused to build
	EventsDelivered     uint64 // events acknowledged by JetStream
	EventsDuplicate     uint64 // of those, acknowledged as duplicates
	EventsRejected      uint64 // events NATS refused for good (removed, logged)
	PublishErrors       uint64 // failed publish attempts (retried)
	SpoolErrors         uint64 // spool read, write or commit failures
	SpoolRecoveredBytes int64  // damaged bytes cut when the spool was opened
	SpoolPendingEvents  int    // undelivered events now
	SpoolPendingBytes   int64  // their size on disk
	DeliveryLag         time.Duration
	ControlRequests     uint64 // collect-now requests received
}

type counters struct {
	collections, failures, runnableModified                    atomic.Uint64
	spooled, refused, invalid, delivered, duplicates, rejected atomic.Uint64
	publishErrors, spoolErrors, controlRequests                atomic.Uint64
	spoolRecoveredBytes, lastLagNanos                          atomic.Int64
}

// Stats returns the counters.
func (c *Collector) Stats() Stats {
	s := Stats{
		Collections:         c.stats.collections.Load(),
		CollectionFailures:  c.stats.failures.Load(),
		RunnableModified:    c.stats.runnableModified.Load(),
		EventsSpooled:       c.stats.spooled.Load(),
		EventsRefused:       c.stats.refused.Load(),
		EventsInvalid:       c.stats.invalid.Load(),
		EventsDelivered:     c.stats.delivered.Load(),
		EventsDuplicate:     c.stats.duplicates.Load(),
		EventsRejected:      c.stats.rejected.Load(),
		PublishErrors:       c.stats.publishErrors.Load(),
		SpoolErrors:         c.stats.spoolErrors.Load(),
		SpoolRecoveredBytes: c.stats.spoolRecoveredBytes.Load(),
		DeliveryLag:         time.Duration(c.stats.lastLagNanos.Load()),
		ControlRequests:     c.stats.controlRequests.Load(),
	}
	c.mu.Lock()
	sp := c.spool
	c.mu.Unlock()
	if sp != nil {
		s.SpoolPendingEvents, s.SpoolPendingBytes = sp.Pending()
	}
	return s
}
