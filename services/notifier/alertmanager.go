package notifier

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Alertmanager posts alerts to Prometheus Alertmanager's API v2 (POST
// /api/v2/alerts).
type Alertmanager struct {
	// URL is Alertmanager's base URL (http://alertmanager:9093).
	URL string
	// Client makes the requests (nil: one with a 10s timeout).
	Client *http.Client
	// Lease is how far ahead of now a firing alert's endsAt is set, so
	// that an alert nobody sends again resolves after it; the notifier
	// sends firing alerts again well within it.
	Lease time.Duration
	// GeneratorURL, when set, links each alert back (the console, say).
	GeneratorURL string
}

// amAlert is an alert of the API v2 (postableAlert).
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     string            `json:"startsAt"`
	EndsAt       string            `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// maxResponse bounds what is read of Alertmanager's answer.
const maxResponse = 64 << 10

// MaxPerRequest bounds the alerts of one request: a fleet with
// thousands firing sends them in several.
const MaxPerRequest = 1000

// Post sends alerts at now, at most MaxPerRequest a request: firing ones
// with endsAt now+Lease, resolved ones with their end. An answer other
// than 200 is an error naming its status and text; the requests before it
// were taken.
func (a *Alertmanager) Post(ctx context.Context, alerts []Alert, now time.Time) error {
	for len(alerts) > 0 {
		n := min(len(alerts), MaxPerRequest)
		if err := a.post(ctx, alerts[:n], now); err != nil {
			return err
		}
		alerts = alerts[n:]
	}
	return nil
}

func (a *Alertmanager) post(ctx context.Context, alerts []Alert, now time.Time) error {
	body := make([]amAlert, len(alerts))
	for i, al := range alerts {
		end := now.Add(a.Lease)
		if al.Resolved() {
			end = al.EndsAt
		}
		body[i] = amAlert{Labels: al.Labels(), Annotations: map[string]string{"summary": al.Summary, "description": al.Description},
			StartsAt: al.StartsAt.UTC().Format(time.RFC3339Nano), EndsAt: end.UTC().Format(time.RFC3339Nano), GeneratorURL: a.GeneratorURL}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.URL, "/")+"/api/v2/alerts", bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := a.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("alertmanager: %s: %s", resp.Status, strings.TrimSpace(string(text)))
	}
	return nil
}
