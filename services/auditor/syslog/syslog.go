// Package syslog forwards audit links and checkpoints to a syslog receiver
// (a SIEM) as RFC 5424 messages: over TCP with RFC 6587 octet counting,
// TLS (RFC 5425), UDP (RFC 5426), or a local socket: datagram (unixgram,
// as /dev/log) or stream (unixstream, octet counting).
//
// Each link is one message whose structured data carries the event type,
// subject, chain, sequence number, hash and prev, so a SIEM holds the
// chain's skeleton and can follow it; runnable.modified, drift verdicts
// and rejected events are sent at warning severity. Checkpoints are sent
// as messages with MSGID "checkpoint" and an rtcheckpoint element.
//
// # Delivery over a stream (tcp, tls, unixstream)
//
// Plain syslog has no acknowledgements, and a successful write only means
// the kernel took the bytes: a receiver that dies (or restarts) with data
// unread in its socket loses it, although our TCP stack saw it
// acknowledged. So the sink keeps a resend window: the newest messages
// written, links and checkpoints alike, in the order written, up to
// Options.ResendWindow bytes (default 8 MiB; the batch just written is
// always kept whole). Before each batch the connection is probed; when it
// is found closed, or a write fails, the sink reconnects and first sends
// the whole window again, then the batch. Delivery is therefore at least
// once: a SIEM sees duplicates after a reconnect and de-duplicates on the
// chain and seq parameters (links) or chain and seq of rtcheckpoint
// (checkpoints).
//
// The window is trimmed only by its bound, not by what the peer's TCP
// stack acknowledged (SIOCOUTQ, TCP_INFO): an acknowledged byte can still
// sit unread in the receiver's socket buffer. The bound is what makes a
// message known good: on one connection, unread bytes are at most our send
// buffer plus the receiver's receive buffer (a write blocks beyond that),
// so a message followed by more than that many bytes has been read by the
// receiver. Since a reconnect resends the whole window, the window is
// always the tail of the current connection's stream and the argument
// holds across reconnects. Size ResendWindow above SO_SNDBUF plus the
// receiver's SO_RCVBUF (Linux autotuning caps them at 4 MiB and 6 MiB by
// default; loopback and LAN buffers stay far smaller): a message can be
// lost only if a receiver dies with more than ResendWindow bytes unread,
// or crashes after reading it (its own queue is its business).
//
// # Datagrams (udp, unixgram)
//
// Datagrams are lossy by nature: a datagram the network or a busy
// receiver drops is never reported, so there is no window. A write that
// fails is retried once on a new socket.
//
// With a cursor file, the last link sent per chain survives a restart,
// and the auditor sends what a crash left unsent (the sink then reports
// its heads); the window does not survive a restart.
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
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
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
	// Network is tcp, tls, udp, unixgram ("unix" is taken as
	// unixgram) or unixstream; Address is host:port or a socket path.
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
	// Timeout bounds a connection attempt and a write (default 5s); a
	// stream write fails when no 64 KiB chunk goes out within it.
	Timeout time.Duration
	// ResendWindow bounds, in bytes, the messages a stream keeps to send
	// again after a reconnect (default 8 MiB; see the package
	// documentation).
	ResendWindow int
	// CursorFile, if set, keeps the last link sent per chain across
	// restarts, and, beside it (<CursorFile>.episodes), the open episodes
	// of a SIEM format's compliance findings, so a finding keeps its uid.
	CursorFile string
	// Format is a link message's body: "" or "rfc5424" for a one-line
	// summary, or a SIEM record of the link ("ocsf", "ecs", "cef";
	// package siem), whose host and target episodes the sink keeps. The
	// structured data carries the link either way. Over UDP a record is
	// rendered within MaxDatagram, its raw event left out and the cut
	// said in the record (siem.Render).
	Format string
	// Product names the SIEM records' producer.
	Product siem.Product
}

// Sink sends links to a syslog receiver.
type Sink struct {
	opts     Options
	facility int
	pen      string
	pid      string

	mu     sync.Mutex
	conn   net.Conn
	fresh  bool     // conn was just opened: resend the window first
	window [][]byte // streams: the newest framed messages written, oldest first
	winLen int      // bytes in window
	cursor map[string]link.Head
	// written counts messages written, resent ones included.
	written int
	// format is Options.Format's SIEM format ("" for rfc5424), episodes
	// its compliance findings' episodes.
	format   siem.Format
	episodes *siem.Episodes
}

// DefaultResendWindow is the default Options.ResendWindow.
const DefaultResendWindow = 8 << 20

// chunk is the most a stream write sends under one deadline.
const chunk = 64 << 10

// New checks opts and returns a sink; it connects on the first write.
func New(opts Options) (*Sink, error) {
	switch opts.Network {
	case "tcp", "tls", "udp", "unixgram", "unixstream":
	case "unix":
		opts.Network = "unixgram"
	default:
		return nil, fmt.Errorf("syslog: network %q (want tcp, tls, udp, unixgram or unixstream)", opts.Network)
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
	if opts.ResendWindow <= 0 {
		opts.ResendWindow = DefaultResendWindow
	}
	s := &Sink{opts: opts, facility: fac, pen: pen, pid: strconv.Itoa(os.Getpid())}
	switch opts.Format {
	case "", FormatRFC5424:
	default:
		f, err := siem.ParseFormat(opts.Format)
		if err != nil {
			return nil, fmt.Errorf("syslog: %w (or rfc5424)", err)
		}
		s.format, s.episodes = f, siem.NewEpisodes()
		if opts.CursorFile != "" {
			ep, err := readEpisodes(episodesFile(opts.CursorFile))
			if err != nil {
				return nil, err
			}
			s.episodes = ep
		}
	}
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
		if s.episodes != nil && s.episodes.Changed() {
			return writeEpisodes(episodesFile(s.opts.CursorFile), s.episodes)
		}
	}
	return nil
}

// SendCheckpoints sends one message per checkpoint.
func (s *Sink) SendCheckpoints(ctx context.Context, cps []chain.Checkpoint) error {
	msgs := make([][]byte, len(cps))
	for i, c := range cps {
		msgs[i] = s.header(SevNotice, c.Time, "checkpoint", c.SD(s.pen),
			[]byte(text(fmt.Sprintf("checkpoint %s seq %d %s", c.Chain, c.Seq, c.Head))))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.send(ctx, msgs)
}

// send writes msgs, reconnecting once if the connection fails; on a new
// stream connection the window goes first.
func (s *Sink) send(ctx context.Context, msgs [][]byte) error {
	if s.stream() {
		msgs = frame(msgs)
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err = s.connect(ctx); err != nil {
			return err
		}
		if s.fresh && len(s.window) > 0 {
			// A new connection: what went out on the old one may be lost.
			if err = s.write(s.window); err != nil {
				s.drop()
				continue
			}
			s.written += len(s.window)
		}
		s.fresh = false
		if err = s.write(msgs); err != nil {
			s.drop()
			continue
		}
		s.written += len(msgs)
		if s.stream() {
			s.remember(msgs)
		}
		return nil
	}
	return fmt.Errorf("syslog %s %s: %w", s.opts.Network, s.opts.Address, err)
}

// frame prefixes each message with its length (RFC 6587 octet counting).
func frame(msgs [][]byte) [][]byte {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		f := make([]byte, 0, len(m)+8)
		f = strconv.AppendInt(f, int64(len(m)), 10)
		f = append(f, ' ')
		out[i] = append(f, m...)
	}
	return out
}

// remember appends the batch just written to the window and drops the
// oldest messages beyond its bound, never the batch's own.
func (s *Sink) remember(frames [][]byte) {
	s.window = append(s.window, frames...)
	for _, f := range frames {
		s.winLen += len(f)
	}
	n := 0
	for s.winLen > s.opts.ResendWindow && len(s.window)-n > len(frames) {
		s.winLen -= len(s.window[n])
		n++
	}
	if n > 0 {
		clear(s.window[:n]) // let the trimmed messages go
		s.window = s.window[n:]
	}
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
	case "unixstream":
		var d net.Dialer
		conn, err = d.DialContext(dctx, "unix", s.opts.Address)
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

func (s *Sink) stream() bool {
	return s.opts.Network == "tcp" || s.opts.Network == "tls" || s.opts.Network == "unixstream"
}

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

// write sends messages (framed ones on a stream).
func (s *Sink) write(msgs [][]byte) error {
	if !s.stream() {
		if err := s.conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout)); err != nil {
			return err
		}
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
	// A stream: up to chunk bytes per write, each under its own deadline,
	// so a long resend fails only when the receiver stops taking data.
	total := 0
	for _, m := range msgs {
		total += len(m)
	}
	buf := make([]byte, 0, min(total, chunk))
	for i, m := range msgs {
		buf = append(buf, m...)
		if len(buf) < chunk && i < len(msgs)-1 {
			continue
		}
		if err := s.conn.SetWriteDeadline(time.Now().Add(s.opts.Timeout)); err != nil {
			return err
		}
		if _, err := s.conn.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	return nil
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
// verdicts and collection failures, informational otherwise. A superseded
// type (verdict.drift.v1) is sent as the type that replaced it.
func Severity(m link.Meta) int {
	typ := m.Type
	if s, ok := events.Lookup(typ); ok {
		typ = s.Current()
	}
	switch {
	case m.Rejected, typ == events.TypeRunnableModified, typ == events.TypeVerdictDrift, typ == events.TypeEventRejected:
		return SevWarning
	case typ == events.TypeVerdictError, typ == events.TypeCollectionFailed:
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

// FormatRFC5424 is Options.Format's default: the link's summary.
const FormatRFC5424 = "rfc5424"

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
		sd.WriteString(" " + p[0] + `="` + chain.EscapeParam(strings.ToValidUTF8(p[1], "\uFFFD")) + `"`)
	}
	sd.WriteString("]")
	msgid := MsgID(m)
	if s.format != "" {
		if rec, err := s.record(r, sd.Len()); err == nil {
			// A record is one line of valid UTF-8 already (JSON escapes
			// control characters, CEF line breaks).
			return s.header(Severity(m), m.Stored, msgid, sd.String(), rec)
		} // else the summary: a record that cannot be made within its bound still leaves its link
	}
	msg := msgid
	for _, v := range []string{m.Host, m.Subject} {
		if v != "" {
			msg += " " + v
		}
	}
	if m.Rejected {
		msg += " rejected: " + m.Reason
	}
	return s.header(Severity(m), m.Stored, msgid, sd.String(), []byte(text(msg)))
}

// record is the link's SIEM record; over UDP within what MaxDatagram
// leaves after the header and the structured data of sdLen bytes.
func (s *Sink) record(r link.Record, sdLen int) ([]byte, error) {
	limit := 0 // a stream takes any size
	if s.opts.Network == "udp" {
		// PRI, VERSION, TIMESTAMP, MSGID and the spaces take under 96 bytes.
		limit = max(s.opts.MaxDatagram-sdLen-len(s.opts.Hostname)-len(s.opts.AppName)-len(s.pid)-96, 1)
	}
	return siem.Render(s.format, siem.Map(r, s.episodes), s.opts.Product, limit)
}

func (s *Sink) header(sev int, t time.Time, msgid, sd string, msg []byte) []byte {
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
	return append(b, msg...)
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
	if err := regfile.WriteAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("syslog cursor: %w", err)
	}
	return nil
}

// episodesFile is where the open episodes are kept beside the cursor.
func episodesFile(cursor string) string { return cursor + ".episodes" }

func readEpisodes(path string) (*siem.Episodes, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return siem.NewEpisodes(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("syslog episodes: %w", err)
	}
	ep, err := siem.DecodeEpisodes(b)
	if err != nil {
		return nil, fmt.Errorf("syslog episodes %s: %w", path, err)
	}
	return ep, nil
}

func writeEpisodes(path string, ep *siem.Episodes) error {
	b, err := ep.Encode()
	if err != nil {
		return err
	}
	if err := regfile.WriteAtomic(path, b, 0o600); err != nil {
		return fmt.Errorf("syslog episodes: %w", err)
	}
	return nil
}
