package events_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// A collector builds an event from a payload and publishes the message
// (js.PublishMsg or PublishMsgAsync); a consumer decodes what it receives.
func Example() {
	p := events.CollectionFailed{
		Host:      "web-01.example.com",
		Collector: "codex",
		Reason:    "timeout",
		Message:   "codex app-server did not answer within 10s",
		Retryable: true,
	}
	m, e, err := binding.NewMsg(events.Source("collector", p.Host), p,
		binding.WithID("01920000-0000-7000-8000-000000000001"),
		binding.WithTime(time.Date(2026, 10, 6, 3, 9, 41, 0, time.UTC)),
		binding.WithTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Subject)
	fmt.Println(m.Header.Get("Nats-Msg-Id") == e.ID())

	// The consumer side: FromNATS checks the envelope, Decode the payload.
	got, err := binding.FromNATS(m.Header, m.Data)
	if err != nil {
		fmt.Println(err)
		return
	}
	failed, err := binding.Decode[events.CollectionFailed](got)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got.Type(), got.Subject(), failed.Reason)
	// Output:
	// rt.collect.failed.web-01=2Eexample=2Ecom
	// true
	// dev.runtimetruth.collection.failed.v1 codex timeout
}

// A bad event fails with an *events.Error whose Reason the consumer puts in
// its dead-letter record (events.Reject) before terminating the message.
func ExampleFromNATS_rejected() {
	p := events.CollectionFailed{Host: "h", Collector: "git", Reason: "timeout", Message: "git timed out"}
	m, _, err := binding.NewMsg(events.Source("collector", "h"), p)
	if err != nil {
		fmt.Println(err)
		return
	}
	m.Header.Set("ce-specversion", "0.3")
	_, err = binding.FromNATS(m.Header, m.Data)
	fmt.Println(errors.Is(err, events.ErrInvalid), events.ReasonOf(err))
	fmt.Println(err)
	// Output:
	// true specversion
	// invalid event: specversion: "0.3", want "1.0" (specversion)
}

func ExampleToken() {
	fmt.Println(events.Token("web-01.example.com"))
	fmt.Println(events.VerdictSubject("web-01.example.com", events.StatusDrift))
	fmt.Println(events.ParseToken("agent=20worker=2Eservice"))
	// Output:
	// web-01=2Eexample=2Ecom
	// rt.verdict.web-01=2Eexample=2Ecom.drift
	// agent worker.service <nil>
}
