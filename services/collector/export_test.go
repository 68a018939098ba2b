package collector

import (
	"time"

	"github.com/nats-io/nats.go"
)

// SetSpoolHook makes c report the ids of every batch it spools, in order.
func SetSpoolHook(c *Collector, f func(ids []string)) { c.onSpooled = f }

// EncodeMsg and DecodeMsg expose the spool record codec.
func EncodeMsg(m *nats.Msg, at time.Time) []byte { return encodeMsg(m, at) }

func DecodeMsg(b []byte) (*nats.Msg, time.Time, error) { return decodeMsg(b) }

// HandleControl runs c's handler of collect-now requests on m.
func HandleControl(c *Collector, m *nats.Msg) { c.handleControl(m) }
