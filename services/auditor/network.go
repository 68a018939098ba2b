package auditor

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// openNetworkSinks opens the ClickHouse sink (migrating its schema) and
// the syslog sink, as configured.
func (a *Auditor) openNetworkSinks(ctx context.Context) (specs []SinkSpec, cps []CheckpointSink, err error) {
	if c := a.cfg.ClickHouse; c.DSN != "" {
		s, err := chstore.Open(ctx, chstore.Options{DSN: c.DSN, Table: c.Table, Timeout: c.Timeout, Logger: a.log})
		if err != nil {
			return specs, nil, err
		}
		specs = append(specs, SinkSpec{Sink: s, Required: c.Required})
		applied, err := s.Migrate(ctx)
		if err != nil {
			return specs, nil, fmt.Errorf("clickhouse schema: %w", err)
		}
		if len(applied) > 0 {
			a.log.InfoContext(ctx, "clickhouse schema migrated", "table", s.Table(), "versions", applied)
		}
	}
	if c := a.cfg.Syslog; c.Address != "" {
		var tc *tls.Config
		if c.Network == "tls" {
			if tc, err = syslog.TLSConfig(c.CAFile, c.ServerName); err != nil {
				return specs, nil, err
			}
		}
		s, err := syslog.New(syslog.Options{Network: c.Network, Address: c.Address, TLS: tc, Facility: c.Facility,
			Hostname: c.Hostname, SDID: c.SDID, Timeout: c.Timeout, CursorFile: c.CursorFile, ResendWindow: c.ResendWindow})
		if err != nil {
			return specs, nil, err
		}
		if c.CursorFile == "" {
			a.log.WarnContext(ctx, "syslog sink without a cursor file: links a crash leaves unsent are not sent after a restart")
		}
		specs = append(specs, SinkSpec{Sink: s, Required: c.Required})
		cps = append(cps, s)
	}
	return specs, cps, nil
}
