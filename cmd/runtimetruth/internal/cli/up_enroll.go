package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// enrollSelf enrolls the signing key of up's own collector on first use:
// the verifier up runs enrolls hosts manually (the services' default), so
// a collector on another machine that shares up's server waits for
// `runtimetruth host approve`, while up's own, whose key it holds, is
// pinned the first time. A host already enrolled with another key (a data
// directory replaced, a second machine under the same name) is refused
// with the way out, as are a revoked host and one whose new key waits
// for approval after `runtimetruth host rotate`.
func enrollSelf(ctx context.Context, js jetstream.JetStream, vcfg verifier.Config, ccfg collector.Config, busArgs []string) (string, error) {
	if err := verifier.Topology(vcfg.Replicas, vcfg.Consumer).Ensure(ctx, js); err != nil {
		return "", fmt.Errorf("host registry: %w", err)
	}
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	if err != nil {
		return "", fmt.Errorf("host registry: %w", err)
	}
	id, err := collector.LoadIdentity(ccfg)
	if err != nil {
		return "", err
	}
	key := id.KeyID()
	err = verifier.NewHosts(kv, verifier.EnrollFirstUse).Announcing(js, events.Source("up", ccfg.Host)).Admit(ctx, ccfg.Host, key)
	bus := ""
	if len(busArgs) > 0 {
		bus = " " + shellArgs(busArgs)
	}
	host := snapshot.ShellQuote(ccfg.Host)
	switch {
	case err == nil:
		return key, nil
	case errors.Is(err, verifier.ErrKeyChanged):
		return "", fmt.Errorf("host %s is enrolled with another signing key than this data directory's (%s), so its evidence would be refused; "+
			"if the key changed on purpose, approve it: runtimetruth host approve %s --key %s%s", printable(ccfg.Host), key, host, key, bus)
	case errors.Is(err, verifier.ErrRevoked):
		return "", fmt.Errorf("host %s is revoked in the registry; approve a new key for it: runtimetruth host approve %s --key %s%s",
			printable(ccfg.Host), host, key, bus)
	case errors.Is(err, verifier.ErrNotEnrolled):
		return "", fmt.Errorf("the signing key %s of host %s waits for approval (the host is rotating its key): runtimetruth host approve %s --key %s%s",
			key, printable(ccfg.Host), host, key, bus)
	}
	return "", fmt.Errorf("host registry: %w", err)
}

// handleRejected prints the verifier's dead-letter record of evidence of
// host it refused (not authentic: its reason), once while its target's
// evidence is refused for that reason (rejectedState), and counts it as
// its target's outcome, as a verdict would be: the evidence changed
// nothing.
func (p *verdictPrinter) handleRejected(m *nats.Msg) {
	r, ok := decodeMsg[events.EventRejected](m)
	if !ok || r.Stream != topology.StreamEvidence ||
		!strings.HasPrefix(r.OriginalSubject, events.Prefix+".evidence."+events.Token(p.host)+".") || r.Envelope.Subject == "" {
		return
	}
	key := r.Envelope.Subject // the evidence's target
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	msg := printable(r.Error)
	if p.printed.changed(key, rejectedState(r)) {
		_, _ = fmt.Fprintf(p.out, "%s  REJECTED  %s  %s\n", time.Now().Format("15:04:05"), printable(key), msg)
	}
	p.seen[key], p.failed[key] = events.StatusError, "the verifier refused its evidence: "+msg
	if p.done != nil {
		p.done(len(p.seen))
	}
}
