// Package deployed holds the end-to-end tests of runtimetruth as it is
// deployed: the collector, verifier and auditor run as separate processes
// (the binaries built from this workspace) against a nats-server process
// started from the configuration package buspolicy renders, each service
// connecting as the NATS user rendered for it, and an operator drives them
// with the runtimetruth CLI, as a person would. It runs in both of
// buspolicy's modes: accounts in the server's configuration (ServerConfig:
// a user per service, a user per host for its collector) and operator
// mode (OperatorMode: the server trusts an operator JWT, a memory resolver
// holds the accounts, and every service, host and the operator gets a
// .creds file).
//
// Each guarantee is observed from outside: the CLI's output and exit
// codes, the services' readiness endpoints, and what the harness reads
// from the streams and buckets with the operator's credential (the
// pipeline's account, as the CLI reads them). No service runs as an
// unrestricted user. The scenario, the same in both modes: a host's
// evidence is refused until its key is enrolled; a reviewed baseline is
// approved; PASS, then DRIFT when the target changes, then STALE when the
// collector is silent; a collect-now request answered and accepted; a key
// rotation and a revocation; what a host's own credential cannot do (publish
// in another host's name), what a key that is not the host's cannot do
// (change a verdict), the web console (runtimetruth console, as its own
// NATS user, behind an OpenID Connect login: a viewer may not approve, an
// approver approves the snapshot the page shows and collects now), and
// what the host's own key cannot do either (an old
// sequence, a time far off, other data than signed, a broken or missing
// signature: each refused with its reason); what one hostile host's own credential and keys do
// to the others (key churn and junk: nothing, its registry record and its
// dead letters bounded); and the audit log the auditor wrote, which
// verifies.
//
// TestMain builds the binaries once (nats-server at the version of this
// module's graph, runtimetruth and the runtimetruth-* services). A failing
// test shows the output of its processes and commands, one log with the
// time of each line; DEPLOYED_LOG=1 shows it for passing tests too.
package deployed
