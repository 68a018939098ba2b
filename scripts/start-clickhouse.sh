#!/usr/bin/env bash
# start-clickhouse.sh starts a throwaway ClickHouse server for the tests:
# Debian's clickhouse-server (installed with apt when missing, idempotent),
# listening on loopback only, on free ports, with every file under one
# temporary directory, without systemd. It prints shell assignments:
#
#   RUNTIMETRUTH_CLICKHOUSE_DSN=clickhouse://127.0.0.1:<port>/default
#   RUNTIMETRUTH_CLICKHOUSE_DIR=<dir>     (pid file, data, logs)
#
# so that `eval "$(scripts/start-clickhouse.sh)"` sets them.
#
#   scripts/start-clickhouse.sh            start, print the assignments
#   scripts/start-clickhouse.sh stop DIR   stop the server started in DIR, remove DIR
#
# Runs as root (apt and the server's data directory). The start line is
# the one measured in shared/reference/deps-clickhouse-nats.md, section 2.
set -euo pipefail

log() { echo "start-clickhouse: $*" >&2; }

stop() {
	local dir=$1 pid
	[[ -f "$dir/ch.pid" ]] || { log "no server in $dir"; rm -rf "$dir"; return 0; }
	pid=$(cat "$dir/ch.pid")
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
	rm -rf "$dir"
}

if [[ "${1:-}" == stop ]]; then
	stop "${2:?usage: start-clickhouse.sh stop DIR}"
	exit 0
fi

if ! command -v clickhouse-server >/dev/null 2>&1 || ! command -v clickhouse-client >/dev/null 2>&1; then
	log "installing clickhouse-server and clickhouse-client (Debian)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq clickhouse-server clickhouse-client >/dev/null
fi

# free_port prints a loopback TCP port nobody listens on, from $1 upwards.
free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}
base=$((20000 + RANDOM % 20000))
tcp=$(free_port "$base")
http=$(free_port $((tcp + 1)))
inter=$(free_port $((http + 1)))

dir=$(mktemp -d -t runtimetruth-clickhouse.XXXXXX)
/usr/sbin/clickhouse-server --config-file=/etc/clickhouse-server/config.xml --pid-file="$dir/ch.pid" --daemon -- \
	--path="$dir/data/" --tmp_path="$dir/tmp/" --user_files_path="$dir/user_files/" \
	--format_schema_path="$dir/format_schemas/" --listen_host=127.0.0.1 \
	--tcp_port="$tcp" --http_port="$http" --interserver_http_port="$inter" \
	--logger.log="$dir/server.log" --logger.errorlog="$dir/err.log" >/dev/null

for _ in $(seq 1 300); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null &&
		[[ "$(clickhouse-client --host 127.0.0.1 --port "$tcp" --query 'SELECT 1' 2>/dev/null)" == 1 ]]; then
		log "ClickHouse $(clickhouse-client --host 127.0.0.1 --port "$tcp" --query 'SELECT version()') on 127.0.0.1:$tcp (dir $dir)"
		echo "RUNTIMETRUTH_CLICKHOUSE_DSN=clickhouse://127.0.0.1:$tcp/default"
		echo "RUNTIMETRUTH_CLICKHOUSE_DIR=$dir"
		exit 0
	fi
	sleep 0.1
done
log "ClickHouse did not start within 30s; its log:"
tail -20 "$dir/err.log" >&2 || true
stop "$dir"
exit 1
