#!/usr/bin/env bash
# test-services.sh starts the real services the tests need — ClickHouse
# (scripts/start-clickhouse.sh) and an rsyslog receiver
# (scripts/start-rsyslog.sh), each installed with apt when missing and run
# on loopback from a temporary directory — exports their addresses, runs
# the given command, then stops both and returns the command's status:
#
#   scripts/test-services.sh go test ./...
#
# Exported: RUNTIMETRUTH_CLICKHOUSE_DSN, RUNTIMETRUTH_CLICKHOUSE_DIR and the
# RUNTIMETRUTH_RSYSLOG_* variables (TCP, TLS, TLS_CA, UDP, UNIX, FILE,
# DIR). Tests that need them fail, never skip, when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || { echo "usage: scripts/test-services.sh COMMAND [ARG...]" >&2; exit 1; }

ch_dir= rs_dir=
cleanup() {
	[[ -n "$ch_dir" ]] && scripts/start-clickhouse.sh stop "$ch_dir" || true
	[[ -n "$rs_dir" ]] && scripts/start-rsyslog.sh stop "$rs_dir" || true
}
trap cleanup EXIT

ch=$(scripts/start-clickhouse.sh)
ch_dir=$(sed -n 's/^RUNTIMETRUTH_CLICKHOUSE_DIR=//p' <<<"$ch")
rs=$(scripts/start-rsyslog.sh)
rs_dir=$(sed -n 's/^RUNTIMETRUTH_RSYSLOG_DIR=//p' <<<"$rs")
while IFS= read -r line; do
	[[ "$line" == RUNTIMETRUTH_*=* ]] && export "${line?}"
done <<<"$ch"$'\n'"$rs"

status=0
"$@" || status=$?
exit "$status"
