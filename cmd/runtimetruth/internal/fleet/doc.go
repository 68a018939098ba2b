// Package fleet holds the fleet benchmark (BenchmarkFleet, run by make
// bench): a simulated fleet of hosts, each with its own signing key and
// two or three targets collected on an interval, through a three-node
// JetStream cluster (every stream, consumer and bucket with three
// replicas, in the benchmark's process) to two verifier instances sharing
// one consumer and two auditors each writing one partition of the chains
// (each service its own process, built from this workspace), while one
// adversarial host runs, in turn and at full speed, the attacks the
// fleet-bulkheads issue names. It reports the honest hosts'
// evidence-to-verdict latency with and without the adversary, the honest
// verdicts missed, the time a silenced host takes to turn STALE, the
// key-value buckets' sizes, the audit log's bytes per host per day (and
// ClickHouse's, with a server), each service's peak RSS and the
// benchmark process's (the servers and the fleet) (docs/benchmarks.md,
// "The fleet").
package fleet
