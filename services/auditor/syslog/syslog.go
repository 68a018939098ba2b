// Package syslog forwards audit links and checkpoints to a syslog receiver
// (a SIEM) as RFC 5424 messages: over TCP with RFC 6587 octet counting,
// TLS (RFC 5425), UDP (RFC 5426) or a local datagram socket.
//
// Each link is one message whose structured data carries the event type,
// subject, chain, sequence number, hash and prev, so a SIEM holds the
// chain's skeleton and can follow it; runnable.modified, drift verdicts
// and rejected events are sent at warning severity. Checkpoints are sent
// as messages with MSGID "checkpoint" and an rtcheckpoint element.
//
// A write that fails reconnects and sends the batch again; before each
// batch the connection is probed, and after a reconnect the previous batch
// is sent again too, since a receiver that went away may not have read it.
// Delivery is therefore at least once: a SIEM de-duplicates on chain and
// seq. With a cursor file, the last link sent per chain survives a
// restart, and the auditor sends what a crash left unsent (the sink then
// reports its heads).
package syslog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/auditor/checkpoint"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Severities (RFC 5424).
const (
	SevError   = 3
	SevWarning = 4
	SevNotice  = 5
	SevInfo    = 6
)

// Facilities by name (RFC 5424, table 1).
var Facilities = map[string]int{
	"kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7,
	"uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "audit": 13, "alert": 14, "clock": 15,
	"local0": 16, "local1": 17, "local2": 18, "local3": 19, "local4": 20, "local5": 21, "local6": 22, "local7": 23,
}

// Options configure a Sink.
type Options struct {
	// Network is tcp, tls, udp or unixgram ("unix" is taken as
	// unixgram); Address is host:port or a socket path.
	Network string
	Address string
	// TLS configures a tls connection (nil: the system roots).
	TLS *tls.Config
	// Facility is a facility name (default auth).
	Facility string
	// Hostname is the HOSTNAME field (default: the host name).
	Hostname string
	// AppName is the APP-NAME field (default runtimetruth-auditor).
	AppName string
	// SDID is the link element's SD-ID, name@PEN (default
	// rtlink@32473, the PEN reserved for documentation: use your own).
	SDID string
	// MaxDatagram bounds a UDP message (default 2048); longer messages
	// lose the end of their free-text part.
	MaxDatagram int
	// Timeout bounds a connection attempt and a batch's write (default
	// 5s).
	Timeout time.Duration
	// CursorFile, if set, keeps the last link sent per chain across
	// restarts.
	CursorFile string
}

// Sink sends links to a syslog receiver.
type Sink struct {
	opts     Options
	facility int
	pen      string
	pid      string

	mu      sync.Mutex
	conn    net.Conn
	sent    [][]byte // the last batch written on conn
	fresh   bool     // conn was just opened: resend sent first
	cursor  map[string]link.Head
	written int
}

// New checks opts and returns a sink; it connects on the first write.
func New(opts Options) (*Sink, error) {
	switch opts.Network {
	case "tcp", "tls", "udp", "unixgram":
	case "unix":
		opts.Network = "unixgram"
	default:
		return nil, fmt.Errorf("syslog: network %q (want tcp, tls, udp or unixgram)", opts.Network)
	}
	if opts.Address == "" {
		return nil, errors.New("syslog: empty address")
	}
	if opts.Facility == "" {
		opts.Facility = "auth"
	}
	fac, ok := Facilities[opts.Facility]
	if !ok {
		return nil, fmt.Errorf("syslog: unknown facility %q", opts.Facility)
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	opts.Hostname = field(opts.Hostname, 255)
	if opts.AppName == "" {
		opts.AppName = "runtimetruth-auditor"
	}
	opts.AppName = field(opts.AppName, 48)
	if opts.SDID == "" {
		opts.SDID = "rtlink@32473"
	}
	name, pen, ok := strings.Cut(opts.SDID, "@")
	if !ok || !sdName(name) || pen == "" || strings.Trim(pen, "0123456789.") != "" {
		return nil, fmt.Errorf("syslog: sd_id %q is not name@<private enterprise number>", opts.SDID)
	}
	if opts.MaxDatagram <= 0 {
		opts.MaxDatagram = 2048
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	s := &Sink{opts: opts, facility: fac, pen: pen, pid: strconv.Itoa(os.Getpid())}
	if opts.CursorFile != "" {
		c, err := readCursor(opts.CursorFile)
		if err != nil {
			return nil, err
		}
		s.cursor = c
	}
	return s, nil
}

// TLSConfig builds a client TLS configuration trusting the CA file (the
// system roots when empty).
func TLSConfig(caFile, serverName string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("syslog ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("syslog ca %s: no certificate", caFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// Name names the sink.
func (s *Sink) Name() string { return "syslog" }

// Heads returns the last link sent per chain, when the sink keeps a
// cursor file (nil otherwise: unknown).
func (s *Sink) Heads(context.Context) (map[string]link.Head, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursor == nil {
		return nil, nil
	}
	out := make(map[string]link.Head, len(s.cursor))
	for k, v := range s.cursor {
		out[k] = v
	}
	return out, nil
}

// Write sends one message per link.
func (s *Sink) Write(ctx context.Context, recs []link.Record) error {
	msgs := make([][]byte, len(recs))
	for i, r := range recs {
		msgs[i] = s.Format(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.send(ctx, msgs); err != nil {
		return err
	}
	if s.cursor != nil {
		for _, r := range recs {
			s.cursor[r.Chain] = r.Head()
		}
		if err := writeCursor(s.opts.CursorFile, s.cursor); err != nil {
			return err
		}
	}
	return nil
}

// SendCheckpoints sends one message per checkpoint.
func (s *Sink) SendCheckpoints(ctx context.Context, cps []checkpoint.Checkpoint) error {
	msgs := make([][]byte, len(cps))
	for i, c := range cps {
		msgs[i] = s.header(SevNotice, c.Time, "checkpoint", c.SD(s.pen),
			fmt.Sprintf("checkpoint %s seq %d %s", c.Chain, c.Seq, c.Head))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(ctx, msgs)
}

// send writes msgs, reconnecting once if the connection fails.
func (s *Sink) send(ctx context.Context, msgs [][]byte) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err = s.connect(ctx); err != nil {
			return err
		}
		if s.fresh && len(s.sent) > 0 {
			// A new connection: what went out on the old one may be lost.
			if err = s.write(s.sent); err != nil {
				s.drop()
				continue
			}
		}
		s.fresh = false
		if err = s.write(msgs); err != nil {
			s.drop()
			continue
		}
		s.sent = msgs
		s.written += len(msgs)
		return nil
	}
	return fmt.Errorf("syslog %s %s: %w", s.opts.Network, s.opts.Address, err)
}

func (s *Sink) connect(ctx context.Context) error {
	if s.conn != nil && s.stream() && !alive(s.conn) {
		s.drop()
	}
	if s.conn != nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var conn net.Conn
	var err error
	switch s.opts.Network {
	case "tls":
		d := tls.Dialer{Config: s.opts.TLS}
		conn, err = d.DialContext(dctx, "tcp", s.opts.Address)
	default:
		var d net.Dialer
		conn, err = d.DialContext(dctx, s.opts.Network, s.opts.Address)
	}
	if err != nil {
		return fmt.Errorf("syslog %s %s: %w", s.opts.Network, s.opts.Address, err)
	}
	s.conn, s.fresh = conn, true
	return nil
}

func (s *Sink) stream() bool { return s.opts.Network == "tcp" || s.opts.Network == "tls" }

// alive probes a stream connection: a receiver never sends, so a read
// that does not time out means it closed (or reset) the connection.
func alive(c net.Conn) bool {
	if err := c.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return false
	}
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Sink) drop() {
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

func (s *Sink) write(msgs [][]byte) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout)); err != nil {
		return err
	}
	if !s.stream() {
		for _, m := range msgs {
			if s.opts.Network == "udp" && len(m) > s.opts.MaxDatagram {
				m = cut(m, s.opts.MaxDatagram)
			}
			if _, err := s.conn.Write(m); err != nil {
				return err
			}
		}
		return nil
	}
	var buf []byte
	for _, m := range msgs {
		buf = strconv.AppendInt(buf, int64(len(m)), 10)
		buf = append(buf, ' ')
		buf = append(buf, m...)
	}
	_, err := s.conn.Write(buf)
	return err
}

// cut shortens a message to n bytes without splitting a UTF-8 character.
func cut(m []byte, n int) []byte {
	for n > 0 && !utf8.RuneStart(m[n]) {
		n--
	}
	return m[:n]
}

// Written counts the messages written (resent ones included).
func (s *Sink) Written() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// Close closes the connection.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// Severity is the severity a link is sent at: warning for
// runnable.modified, drift verdicts and rejected events, notice for error
// verdicts and collection failures, informational otherwise.
func Severity(m link.Meta) int {
	switch {
	case m.Rejected, m.Type == events.TypeRunnableModified, m.Type == events.TypeVerdictDrift, m.Type == events.TypeEventRejected:
		return SevWarning
	case m.Type == events.TypeVerdictError, m.Type == events.TypeCollectionFailed:
		return SevNotice
	}
	return SevInfo
}

// MsgID is a short event type: "verdict.drift", "runnable.modified", ….
func MsgID(m link.Meta) string {
	t := strings.TrimPrefix(m.Type, events.TypePrefix)
	if i := strings.LastIndex(t, ".v"); i > 0 {
		t = t[:i]
	}
	return field(t, 32)
}

// Format renders a link as an RFC 5424 message (without framing).
func (s *Sink) Format(r link.Record) []byte {
	m := r.Meta
	params := [][2]string{
		{"chain", r.Chain}, {"seq", strconv.FormatUint(r.Seq, 10)}, {"hash", r.Hash}, {"prev", r.Prev},
		{"type", m.Type}, {"subject", m.Subject}, {"id", m.ID}, {"source", m.Source},
		{"stream", m.Stream}, {"sseq", strconv.FormatUint(m.StreamSeq, 10)},
	}
	for _, p := range [][2]string{{"host", m.Host}, {"target", m.Target}, {"status", m.Status}, {"reason", m.Reason}} {
		if p[1] != "" {
			params = append(params, p)
		}
	}
	var sd strings.Builder
	sd.WriteString("[" + s.opts.SDID)
	for _, p := range params {
		sd.WriteString(" " + p[0] + `="` + checkpoint.EscapeParam(strings.ToValidUTF8(p[1], "\uFFFD")) + `"`)
	}
	sd.WriteString("]")
	msg := MsgID(m)
	for _, v := range []string{m.Host, m.Subject} {
		if v != "" {
			msg += " " + v
		}
	}
	if m.Rejected {
		msg += " rejected: " + m.Reason
	}
	return s.header(Severity(m), m.Stored, MsgID(m), sd.String(), msg)
}

func (s *Sink) header(sev int, t time.Time, msgid, sd, msg string) []byte {
	b := make([]byte, 0, 256+len(sd)+len(msg))
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(s.facility*8+sev), 10)
	b = append(b, ">1 "...)
	if t.IsZero() {
		b = append(b, '-')
	} else {
		b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	}
	b = append(b, ' ')
	b = append(b, s.opts.Hostname...)
	b = append(b, ' ')
	b = append(b, s.opts.AppName...)
	b = append(b, ' ')
	b = append(b, s.pid...)
	b = append(b, ' ')
	b = append(b, msgid...)
	b = append(b, ' ')
	b = append(b, sd...)
	b = append(b, ' ')
	return append(b, text(msg)...)
}

// field makes a header field: printable US-ASCII without space, at most n
// bytes, "-" when empty.
func field(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c > 32 && c < 127 {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// text makes the free-text part one line of valid UTF-8.
func text(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7F {
			return ' '
		}
		return r
	}, s)
}

func sdName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 32 || c >= 127 || c == '=' || c == ']' || c == '"' || c == '@' {
			return false
		}
	}
	return true
}

func readCursor(path string) (map[string]link.Head, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]link.Head{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("syslog cursor: %w", err)
	}
	c := map[string]link.Head{}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("syslog cursor %s: %w", path, err)
	}
	return c, nil
}

func writeCursor(path string, c map[string]link.Head) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("syslog cursor: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("syslog cursor: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("syslog cursor: %w", err)
	}
	return nil
}
