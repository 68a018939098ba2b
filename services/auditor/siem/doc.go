// Package siem renders links of the audit chain as the records SIEMs read
// natively: OCSF 1.8.0, Elastic Common Schema 9.4 and CEF, from one
// mapping (Map: a link to its Finding), so the three cannot disagree.
// Every record carries the link's chain, sequence number, hash and
// previous hash, so a SIEM record can be checked against the chain.
//
// The mapping:
//   - a verdict is a compliance finding (OCSF 2003): pass, fail (drift),
//     warning (error, stale). Its uid is the host and target's episode
//     (Episodes): the first verdict that is not a pass creates it, the
//     next ones update it, the pass closes it;
//   - runnable.modified, and evidence refused as not authentic (a dead
//     letter of the verifier's, a bad signature the auditor found), is a
//     detection finding (2004) and an alert, with the changed files;
//   - another rejected message, and a collection failure, an application
//     error (6008);
//   - a stream gap or reset in the audit log, event log activity (1008);
//   - baseline.changed, attestation.created and host.key.changed, entity
//     management (3004) with the actor;
//   - evidence.collected, a base event (0).
package siem
