package notifier

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Webhook formats.
const (
	// FormatJSON is the notifier's own JSON body (WebhookBody).
	FormatJSON = "json"
	// FormatSlack is Slack's incoming-webhook body: text and blocks.
	FormatSlack = "slack"
)

// WebhookConfig configures a webhook receiver. Its URL and signing secret
// are secrets: each is read from a file or an environment variable, never
// from the configuration itself, and neither is logged.
type WebhookConfig struct {
	// Name names the receiver in logs, metrics and the outbox.
	Name string `mapstructure:"name"`
	// URLFile or URLEnv holds the URL (a Slack incoming-webhook URL is
	// its own credential).
	URLFile string `mapstructure:"url_file"`
	URLEnv  string `mapstructure:"url_env"`
	// Format is json or slack.
	Format string `mapstructure:"format"`
	// SecretFile or SecretEnv holds the Standard Webhooks signing secret
	// (whsec_ and base64); empty: requests are not signed.
	SecretFile string `mapstructure:"secret_file"`
	SecretEnv  string `mapstructure:"secret_env"`
	// Match routes alerts to the receiver: only those whose labels hold
	// every one of these values (empty: every alert).
	Match map[string]string `mapstructure:"match"`
	// GroupBy are the labels that group alerts into one request;
	// GroupWait how long a group's first alert waits for others, and
	// GroupInterval the least time between two requests of a group.
	// Zero both: one request per alert change.
	GroupBy       []string      `mapstructure:"group_by"`
	GroupWait     time.Duration `mapstructure:"group_wait"`
	GroupInterval time.Duration `mapstructure:"group_interval"`
	// Timeout bounds one request; MaxBackoff the wait between retries of
	// a receiver that answers 5xx or 429 or cannot be reached.
	Timeout    time.Duration `mapstructure:"timeout"`
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
}

// Validate checks a receiver's configuration (not its files).
func (w WebhookConfig) Validate() error {
	switch {
	case w.Name == "" || strings.ContainsAny(w.Name, ". *>\t\n"):
		return fmt.Errorf("webhook name %q: a token without dots, spaces or wildcards", w.Name)
	case (w.URLFile == "") == (w.URLEnv == ""):
		return fmt.Errorf("webhook %s: give url_file or url_env (the URL is a secret)", w.Name)
	case w.Format != FormatJSON && w.Format != FormatSlack:
		return fmt.Errorf("webhook %s: format %q: want json or slack", w.Name, w.Format)
	case w.SecretFile != "" && w.SecretEnv != "":
		return fmt.Errorf("webhook %s: give secret_file or secret_env, not both", w.Name)
	case w.GroupWait < 0 || w.GroupInterval < 0 || w.Timeout <= 0 || w.MaxBackoff <= 0:
		return fmt.Errorf("webhook %s: group_wait and group_interval at least 0, timeout and max_backoff above 0", w.Name)
	}
	return nil
}

// maxSecret bounds a secret file.
const maxSecret = 16 << 10

// secret reads a secret from a file (a regular file of at most maxSecret
// bytes, trailing newline removed) or an environment variable.
func secret(what, file, env string) (string, error) {
	if file != "" {
		b, err := regfile.Read(file, maxSecret) // a regular file, bounded
		if err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	if env == "" {
		return "", nil
	}
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return "", fmt.Errorf("%s: $%s is not set", what, env)
	}
	return v, nil
}

// Signer signs requests per Standard Webhooks 1.0: webhook-id,
// webhook-timestamp (Unix seconds) and webhook-signature, v1, and the
// base64 HMAC-SHA256 of id.timestamp.body under the secret's key.
type Signer struct{ key []byte }

// NewSigner reads a secret: whsec_ then the base64 key (the prefix is
// optional).
func NewSigner(secret string) (*Signer, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, errors.New("the signing secret is not whsec_ and a base64 key")
	}
	return &Signer{key: key}, nil
}

// Sign returns the webhook-signature of a request.
func (s *Signer) Sign(id string, at time.Time, body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// WebhookBody is the json format's body: one request per group of alert
// changes.
type WebhookBody struct {
	Version  string            `json:"version"`
	Receiver string            `json:"receiver"`
	Group    map[string]string `json:"group"`
	Alerts   []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert change of a request.
type WebhookAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      *time.Time        `json:"endsAt,omitempty"`
	// Cause is the id of the event that fired the alert.
	Cause string `json:"cause"`
}

// body renders a group's changes in format.
func body(format, receiver string, group map[string]string, changes []Alert) ([]byte, error) {
	alerts := make([]WebhookAlert, len(changes))
	for i, a := range changes {
		alerts[i] = WebhookAlert{Status: "firing", Labels: a.Labels(), Annotations: map[string]string{"summary": a.Summary, "description": a.Description},
			StartsAt: a.StartsAt, Cause: a.Cause}
		if a.Resolved() {
			end := a.EndsAt
			alerts[i].Status, alerts[i].EndsAt = "resolved", &end
		}
	}
	if format == FormatSlack {
		return slackBody(alerts)
	}
	return json.Marshal(WebhookBody{Version: "1", Receiver: receiver, Group: group, Alerts: alerts})
}

// slackBody is Slack's incoming-webhook body: a text (the notification's
// fallback) and a section block per alert, at most slackBlocks.
func slackBody(alerts []WebhookAlert) ([]byte, error) {
	const slackBlocks = 40
	firing := 0
	for _, a := range alerts {
		if a.Status == "firing" {
			firing++
		}
	}
	text := fmt.Sprintf("runtimetruth: %d firing, %d resolved", firing, len(alerts)-firing)
	type textObj struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type block struct {
		Type string  `json:"type"`
		Text textObj `json:"text"`
	}
	blocks := []block{{Type: "section", Text: textObj{"mrkdwn", "*" + slackEscape(text) + "*"}}}
	for i, a := range alerts {
		if i == slackBlocks-1 {
			blocks = append(blocks, block{Type: "section", Text: textObj{"mrkdwn", fmt.Sprintf("… and %d more", len(alerts)-i)}})
			break
		}
		mark := ":red_circle:"
		if a.Status == "resolved" {
			mark = ":large_green_circle:"
		}
		blocks = append(blocks, block{Type: "section", Text: textObj{"mrkdwn", fmt.Sprintf("%s *%s* %s\n%s", mark,
			slackEscape(a.Labels["alertname"]), slackEscape(a.Status), slackEscape(a.Annotations["summary"]))}})
	}
	return json.Marshal(struct {
		Text   string  `json:"text"`
		Blocks []block `json:"blocks"`
	}{text, blocks})
}

// slackEscape escapes what Slack's mrkdwn reads as markup: &, < and >.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(s string) string { return slackEscaper.Replace(s) }

// errPermanent marks an answer that retrying will not change (a 4xx
// other than 408 and 429).
var errPermanent = errors.New("refused")

// post sends one request, signed when signer is set; an error wraps
// errPermanent when retrying cannot help.
func post(ctx context.Context, client *http.Client, target string, signer *Signer, id string, at time.Time, b []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: the receiver's URL: %w", errPermanent, redact(err, target))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	if signer != nil {
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		req.Header.Set("webhook-signature", signer.Sign(id, at, b))
	}
	resp, err := client.Do(req)
	if err != nil {
		return redact(err, target)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return fmt.Errorf("%w: receiver answered %s", errPermanent, resp.Status)
}

// redact keeps the URL (a credential: a Slack webhook's path is its
// token) out of an error's text: a *url.Error says its operation and
// cause only.
func redact(err error, rawURL string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	if rawURL == "" {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), rawURL, "<url>"))
}

// routes reports whether alert a goes to the receiver w (Match).
func (w WebhookConfig) routes(a Alert) bool {
	labels := a.Labels()
	for k, v := range w.Match {
		if labels[k] != v {
			return false
		}
	}
	return true
}
