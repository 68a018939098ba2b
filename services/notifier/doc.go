// Package notifier turns verdicts and runnable.modified events into alerts
// that fire and resolve, sent to Prometheus Alertmanager (API v2).
//
// It keeps one alert per host and target while its latest verdict is not a
// pass: RuntimeTruthDrift, RuntimeTruthError or RuntimeTruthStale, by the
// verdict's status. A verdict of another status than the firing alert's
// resolves it and fires its own; a pass resolves it (for a STALE target,
// any verdict is the fresh evidence that resolves it). A runnable.modified
// fires RuntimeTruthModified for its host, environment and package until
// the environment's target (python.environment or node.project) passes
// again.
//
// Alertmanager learns an alert's end only from the alert: a firing alert
// is sent again every ResendInterval with endsAt a lease ahead (so an alert
// whose notifier died resolves by itself after the lease, never silently
// stays firing), and a resolved one with endsAt the time it resolved, sent
// until Alertmanager took it. Alertmanager groups, deduplicates and repeats
// the notifications (group_interval, repeat_interval).
//
// A host holds at most MaxAlertsPerHost alerts: one host reporting ever new
// targets uses its own share only.
package notifier
