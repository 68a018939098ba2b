// Package deploy holds the tests of what deploys runtimetruth: the Helm
// chart in helm/runtimetruth and the Grafana dashboards in grafana/.
//
// The chart tests (helm_test.go) run the pinned helm (RUNTIMETRUTH_HELM_BIN,
// from scripts/install-helm.sh): `helm lint` and `helm template` with the
// value sets in testdata/values, then feed every rendered service config to
// that service's own `--check-config`. The dashboard test
// (dashboards_test.go) loads the events of an end-to-end run into the real
// ClickHouse (RUNTIMETRUTH_CLICKHOUSE_DSN, from scripts/test-services.sh)
// through the auditor, then runs every panel's query. A missing helm or
// ClickHouse fails the tests; nothing is skipped.
package deploy
