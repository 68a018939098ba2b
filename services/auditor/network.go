package auditor

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// openClickHouse opens the ClickHouse sink and migrates its schema. It
// fails while the server cannot be reached; Start then waits for it
// (Auditor.waitSinks).
func (a *Auditor) openClickHouse(ctx context.Context) (*chstore.Store, error) {
	c := a.cfg.ClickHouse
	s, err := chstore.Open(ctx, chstore.Options{DSN: c.DSN, Table: c.Table, Timeout: c.Timeout, Logger: a.log})
	if err != nil {
		return nil, err
	}
	applied, err := s.Migrate(ctx)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("clickhouse schema: %w", err)
	}
	if len(applied) > 0 {
		a.log.InfoContext(ctx, "clickhouse schema migrated", "table", s.Table(), "versions", applied)
	}
	return s, nil
}

// openSyslog opens the syslog sink, as configured (nil when off); it
// connects when it first writes.
func (a *Auditor) openSyslog(ctx context.Context) (*syslog.Sink, error) {
	c := a.cfg.Syslog
	if c.Address == "" {
		return nil, nil
	}
	var tc *tls.Config
	if c.Network == "tls" {
		var err error
		if tc, err = syslog.TLSConfig(c.CAFile, c.ServerName); err != nil {
			return nil, err
		}
	}
	s, err := syslog.New(syslog.Options{Network: c.Network, Address: c.Address, TLS: tc, Facility: c.Facility,
		Hostname: c.Hostname, SDID: c.SDID, Timeout: c.Timeout, CursorFile: c.CursorFile, ResendWindow: c.ResendWindow,
		Format: c.Format, Product: siem.Product{Version: a.version, Hostname: a.instance}})
	if err != nil {
		return nil, err
	}
	if c.CursorFile == "" {
		a.log.WarnContext(ctx, "syslog sink without a cursor file: links a crash leaves unsent are not sent after a restart")
	}
	return s, nil
}
