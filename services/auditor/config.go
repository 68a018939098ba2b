package auditor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// Config is the auditor's configuration (README.md lists every key). Load
// it with config.Load(path, "RUNTIMETRUTH_AUDITOR", &cfg, nil) over
// NewDefaultConfig().
type Config struct {
	// ServiceConfig is how to reach NATS (nats.*; ignored when
	// Settings.Conn is set), the instance named in the source of the
	// rejection records the auditor makes (/auditor/<instance>) and the
	// replica count of the streams and consumers it ensures.
	natsbus.ServiceConfig `mapstructure:",squash"`
	// Streams are the streams this instance audits, each through its
	// durable Consumer. Every stream must be audited by exactly one
	// instance per partition (one writer per chain); split the streams
	// over instances, or partition the chains (Partitions), to scale out.
	Streams []string `mapstructure:"streams"`
	// Consumer is the durable consumer on each stream.
	Consumer string `mapstructure:"consumer"`
	// Partitions splits the chains of the audited streams between that
	// many instances (README "Chains"): a chain belongs to partition
	// link.Partition(chain, Partitions). Above 1, this instance reads each
	// stream through its own durable consumer, PartitionConsumer(), and
	// writes only the chains of partition Partition. Every instance must
	// have the same Partitions; each partition needs its own jsonl.path.
	Partitions int `mapstructure:"partitions"`
	// Partition is this instance's partition, in [0, Partitions).
	Partition int `mapstructure:"partition"`
	// Batch is the most messages appended and acknowledged together
	// (bounded by the consumer's MaxAckPending, and by MaxInflightBytes).
	Batch int `mapstructure:"batch"`
	// IdleWait is how long one pull waits for a message when the stream is
	// idle, counted by the server (which ends the pull); Shutdown waits for
	// the pull in hand, so up to IdleWait.
	IdleWait time.Duration `mapstructure:"idle_wait"`
	// MaxInflightBytes bounds the bytes of the messages the auditor holds
	// at once, over every stream: pulled or read back from a stream and
	// not yet acknowledged (README "Memory"). Pulls ask the server for at
	// most the bytes left (and at most 8 MiB each), so a batch is cut by
	// bytes as well as by Batch. Their links and the sink writes take
	// about as much again; the heap stays within a small multiple of it.
	// At least MinInflightBytes, and a pull's worth (just over 1 MiB) per
	// stream and one more.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
	// StrictPayloads checks every payload against its JSON Schema and
	// rules before recording it (a failing one is recorded as rejected);
	// off, the envelope and the JSON are checked and the payload recorded
	// as it came, at a twentieth of the cost.
	StrictPayloads bool `mapstructure:"strict_payloads"`
	// Allowance bounds what one host's messages add to the audit sinks
	// (README "Bulkheads").
	Allowance AllowanceConfig `mapstructure:"allowance"`
	// HMAC keys the chain.
	HMAC HMACConfig `mapstructure:"hmac"`
	// JSONL is the file sink; an empty path turns it off.
	JSONL JSONLConfig `mapstructure:"jsonl"`
	// ClickHouse is the database sink; an empty DSN turns it off.
	ClickHouse ClickHouseConfig `mapstructure:"clickhouse"`
	// Syslog forwards every link (and the checkpoints) to a syslog
	// receiver; an empty address turns it off.
	Syslog SyslogConfig `mapstructure:"syslog"`
	// Checkpoint configures the signed checkpoints.
	Checkpoint CheckpointConfig `mapstructure:"checkpoint"`
	// Lease configures the writer leases that keep a second instance from
	// writing the same streams' chains.
	Lease LeaseConfig `mapstructure:"lease"`
	// StartTimeout bounds Start: connecting, waiting for the leases,
	// opening and reconciling the sinks.
	StartTimeout time.Duration `mapstructure:"start_timeout"`
	// ShutdownTimeout bounds Shutdown.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// LeaseConfig configures the writer leases (bucket BucketLeases).
type LeaseConfig struct {
	// TTL is how long a lease outlives its holder's last renewal (renewed
	// every TTL/3): how long a standby waits after a writer dies without
	// Shutdown. At least a second; zero means 30s.
	TTL time.Duration `mapstructure:"ttl"`
}

// HMACConfig keys the chain's hashes (HMAC-SHA-256).
type HMACConfig struct {
	// KeyFile holds the key (at least 16 bytes; a final newline is not
	// part of it). Empty: plain SHA-256 links. A chain keeps the key it was
	// started with.
	KeyFile string `mapstructure:"key_file"`
}

// JSONLConfig configures the JSONL file sink.
type JSONLConfig struct {
	// Path is the active file; rotated files are Path.000001, ….
	Path string `mapstructure:"path"`
	// MaxBytes rotates the active file at this size (0: never).
	MaxBytes int64 `mapstructure:"max_bytes"`
	// Required: a message is acknowledged only once its link is in this
	// sink. A sink that is not required is written best effort.
	Required bool `mapstructure:"required"`
}

// ClickHouseConfig configures the ClickHouse sink.
type ClickHouseConfig struct {
	// DSN is clickhouse://user:password@host:9000/database?dial_timeout=5s
	// (native protocol).
	DSN string `mapstructure:"dsn"`
	// Table is the links table (the views are named after it).
	Table string `mapstructure:"table"`
	// Required: acknowledge only once the link is in ClickHouse.
	Required bool `mapstructure:"required"`
	// Timeout bounds one query or insert.
	Timeout time.Duration `mapstructure:"timeout"`
}

// SyslogConfig configures the syslog sink (RFC 5424).
type SyslogConfig struct {
	// Network is tcp (RFC 6587 octet counting), tls (RFC 5425), udp
	// (RFC 5426), unixgram (a local socket such as /dev/log) or unixstream
	// (octet counting over a local stream socket).
	Network string `mapstructure:"network"`
	// Address is host:port, or the socket path.
	Address string `mapstructure:"address"`
	// CAFile verifies a TLS receiver (default: the system pool);
	// ServerName overrides the name checked.
	CAFile     string `mapstructure:"ca_file"`
	ServerName string `mapstructure:"server_name"`
	// Facility is a syslog facility name (auth, authpriv, daemon, local0…7,
	// audit, …).
	Facility string `mapstructure:"facility"`
	// Hostname is the HOSTNAME field; empty means the host name.
	Hostname string `mapstructure:"hostname"`
	// SDID is the structured-data ID of the link element (name@PEN).
	SDID string `mapstructure:"sd_id"`
	// CursorFile records the last link sent per chain, so links missed
	// across a crash are sent after a restart; empty: none (Start warns).
	CursorFile string `mapstructure:"cursor_file"`
	// ResendWindow is how many bytes of the newest messages a stream
	// connection keeps to send again after a reconnect (0: the syslog
	// package's default, 8 MiB).
	ResendWindow int `mapstructure:"resend_window"`
	// Required: acknowledge only once the link is written to the
	// receiver.
	Required bool `mapstructure:"required"`
	// Timeout bounds a connection attempt and a write.
	Timeout time.Duration `mapstructure:"timeout"`
	// Format is each link message's body: rfc5424 (the default: a
	// one-line summary, the link in the structured data), or the link as
	// a SIEM record, ocsf (OCSF 1.8.0 JSON), ecs (ECS 9.4 JSON) or cef.
	Format string `mapstructure:"format"`
}

// CheckpointConfig configures checkpoints: every Interval, each chain that
// grew gets a checkpoint (chain, seq, head hash), signed with the Ed25519
// key, sent to syslog and appended to File.
type CheckpointConfig struct {
	// Interval between checkpoints (0: none).
	Interval time.Duration `mapstructure:"interval"`
	// KeyFile is a PEM Ed25519 private key (PKCS #8); empty: unsigned.
	KeyFile string `mapstructure:"key_file"`
	// File receives the checkpoints as JSON lines; empty: none.
	File string `mapstructure:"file"`
}

// DefaultStreams are the pipeline's streams.
var DefaultStreams = []string{topology.StreamEvidence, topology.StreamVerdicts, topology.StreamBaselines, topology.StreamDLQ}

// NewDefaultConfig returns the defaults: a local NATS server, every stream,
// the JSONL sink under /var/lib/runtimetruth/auditor.
func NewDefaultConfig() Config {
	return Config{
		ServiceConfig: natsbus.NewDefaultServiceConfig(),
		Streams:       slices.Clone(DefaultStreams),
		Consumer:      topology.ConsumerAuditor,
		Partitions:    1,
		Batch:         topology.AuditorMaxAckPending / 2,
		IdleWait:      time.Second,

		MaxInflightBytes: DefaultMaxInflightBytes,
		Allowance:        DefaultAllowance,

		JSONL:      JSONLConfig{Path: "/var/lib/runtimetruth/auditor/audit.jsonl", MaxBytes: 256 << 20, Required: true},
		ClickHouse: ClickHouseConfig{Table: "audit_links", Required: true, Timeout: 10 * time.Second},
		Syslog: SyslogConfig{Network: "tcp", Facility: "auth", SDID: "rtlink@32473", Required: true, Timeout: 5 * time.Second,
			CursorFile: "/var/lib/runtimetruth/auditor/syslog.cursor", Format: syslog.FormatRFC5424},
		Checkpoint:      CheckpointConfig{Interval: time.Minute},
		Lease:           LeaseConfig{TTL: 30 * time.Second},
		StartTimeout:    time.Minute,
		ShutdownTimeout: 20 * time.Second,
	}
}

// Validate checks every value.
func (c *Config) Validate() error {
	if err := c.ServiceConfig.Validate(); err != nil {
		return err
	}
	if len(c.Streams) == 0 {
		return config.Invalidf("streams: empty")
	}
	seen := map[string]bool{}
	for _, s := range c.Streams {
		if s == "" || strings.ContainsAny(s, ".*>/\\ \t\r\n") || seen[s] {
			return config.Invalidf("streams: %q is empty, not a stream name, or listed twice", s)
		}
		seen[s] = true
	}
	if c.Consumer == "" || len(c.Consumer) > 255 || strings.ContainsAny(c.Consumer, ".*>/\\ \t\r\n") {
		return config.Invalidf("consumer: %q is not a durable consumer name", c.Consumer)
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		return config.Invalidf("partitions: %d (want 1 to %d)", c.Partitions, MaxPartitions)
	}
	if c.Partition < 0 || c.Partition >= c.Partitions {
		return config.Invalidf("partition: %d (want 0 to partitions-1, %d)", c.Partition, c.Partitions-1)
	}
	if len(c.PartitionConsumer()) > 255 {
		return config.Invalidf("consumer: %q is too long for its partition's consumer name", c.Consumer)
	}
	if c.Batch < 1 || c.Batch > 100000 {
		return config.Invalidf("batch: %d (want 1 to 100000)", c.Batch)
	}
	if c.IdleWait < 10*time.Millisecond {
		return config.Invalidf("idle_wait: %s (want at least 10ms)", c.IdleWait)
	}
	if least := max(int64(MinInflightBytes), int64(len(c.Streams)+1)*minPull); c.MaxInflightBytes < least {
		return config.Invalidf("max_inflight_bytes: %d (want at least %d for %d streams)", c.MaxInflightBytes, least, len(c.Streams))
	}
	if err := c.Allowance.Validate(); err != nil {
		return err
	}
	if c.JSONL.Path == "" && c.ClickHouse.DSN == "" {
		return config.Invalidf("no sink that keeps the chain: set jsonl.path or clickhouse.dsn")
	}
	jsonlKeeps := c.JSONL.Path != "" && c.JSONL.Required
	clickhouseKeeps := c.ClickHouse.DSN != "" && c.ClickHouse.Required
	if !jsonlKeeps && !clickhouseKeeps {
		return config.Invalidf("the JSONL or the ClickHouse sink must be required: the auditor resumes from it")
	}
	if c.JSONL.MaxBytes < 0 {
		return config.Invalidf("jsonl.max_bytes: %d", c.JSONL.MaxBytes)
	}
	if c.ClickHouse.DSN != "" {
		// A DSN Open cannot use would have Start wait for ClickHouse
		// forever: it is refused here.
		if err := chstore.CheckDSN(c.ClickHouse.DSN); err != nil {
			return config.Invalidf("clickhouse.dsn: %s", err)
		}
		if !chstore.Identifier(c.ClickHouse.Table) {
			return config.Invalidf("clickhouse.table: %q is not a plain identifier", c.ClickHouse.Table)
		}
		if c.ClickHouse.Timeout <= 0 {
			return config.Invalidf("clickhouse.timeout: %s (want above 0)", c.ClickHouse.Timeout)
		}
	}
	if c.Syslog.Address != "" {
		switch c.Syslog.Network {
		case "tcp", "tls", "udp", "unixgram", "unix", "unixstream":
		default:
			return config.Invalidf("syslog.network: %q (want tcp, tls, udp, unixgram or unixstream)", c.Syslog.Network)
		}
		if c.Syslog.Timeout <= 0 {
			return config.Invalidf("syslog.timeout: %s (want above 0)", c.Syslog.Timeout)
		}
		if c.Syslog.Format != "" && c.Syslog.Format != syslog.FormatRFC5424 {
			if _, err := siem.ParseFormat(c.Syslog.Format); err != nil {
				return config.Invalidf("syslog.format: %q (want rfc5424, ocsf, ecs or cef)", c.Syslog.Format)
			}
		}
	}
	if c.Checkpoint.Interval < 0 {
		return config.Invalidf("checkpoint.interval: %s", c.Checkpoint.Interval)
	}
	if c.Lease.TTL != 0 && c.Lease.TTL < time.Second {
		return config.Invalidf("lease.ttl: %s is less than a second", c.Lease.TTL)
	}
	if c.StartTimeout <= 0 || c.ShutdownTimeout <= 0 {
		return config.Invalidf("start_timeout and shutdown_timeout must be above 0")
	}
	return nil
}

// MaxPartitions bounds Config.Partitions.
const MaxPartitions = 1024

// Partitioned reports whether the chains are split between instances.
func (c *Config) Partitioned() bool { return c.Partitions > 1 }

// PartitionConsumer is the durable consumer this instance reads each
// stream through: Consumer, or "<consumer>-p<partition>of<partitions>"
// ("auditor-p0of4") when partitioned.
func (c *Config) PartitionConsumer() string {
	if !c.Partitioned() {
		return c.Consumer
	}
	return fmt.Sprintf("%s-p%dof%d", c.Consumer, c.Partition, c.Partitions)
}

// Owns reports whether this instance's partition owns chain.
func (c *Config) Owns(chain string) bool {
	return !c.Partitioned() || link.Partition(chain, c.Partitions) == c.Partition
}
