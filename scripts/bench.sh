#!/usr/bin/env bash
# bench.sh runs every benchmark of the workspace and prints, per benchmark,
# ops/s and the ratio of each runtimetruth sub-benchmark to the reference
# sub-benchmarks (named reference-*) measured in the same run.
#
#   scripts/bench.sh [go test -bench regexp]      (default: .)
#   BENCHTIME=2s scripts/bench.sh                 (default: 1s)
#
# The auditor's benchmarks (append into ClickHouse against a raw insert,
# audit verify against ClickHouse) need the real ClickHouse: unless the
# caller already runs under scripts/test-services.sh (RUNTIMETRUTH_CLICKHOUSE_DSN
# set), the script runs itself under it, which starts ClickHouse and
# rsyslog for the run and stops them after.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${RUNTIMETRUTH_CLICKHOUSE_DSN:-}" || -z "${RUNTIMETRUTH_RSYSLOG_TCP:-}" ]]; then
	exec scripts/test-services.sh scripts/bench.sh "$@"
fi
pattern="${1:-.}"
out="${BENCH_OUT:-$(mktemp -t runtimetruth-bench.XXXXXX)}"
modules=$(go list -m -f '{{.Path}}/...')
echo "bench: go test -bench '$pattern' (raw output in $out)" >&2
# shellcheck disable=SC2086
go test -run '^$' -bench "$pattern" -benchmem -benchtime "${BENCHTIME:-1s}" -count 1 -timeout 60m $modules | tee "$out" |
	grep -E '^(Benchmark|ok|FAIL|---)' >&2 || true
grep -q '^FAIL' "$out" && { echo "bench: a benchmark failed" >&2; exit 1; }

echo
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	ns = ""; extra = ""
	for (i = 2; i <= NF; i++) {
		if ($(i+1) == "ns/op") ns = $i
		else if ($(i+1) ~ /^[a-zA-Z%/_-]+$/ && $(i+1) != "B/op" && $(i+1) != "allocs/op" && $(i+1) != "MB/s" && $(i+1) != "ns/op") extra = extra sprintf(" %s=%s", $(i+1), $i)
	}
	if (ns == "") next
	n = split(name, parts, "/")
	group = parts[1]; sub_ = (n > 1) ? substr(name, length(group) + 2) : "-"
	if (!(group in seen)) { order[++groups] = group; seen[group] = 1 }
	key = group SUBSEP sub_
	if (!(key in opsps)) subs[group] = subs[group] "\t" sub_
	opsps[key] = 1e9 / ns; nsop[key] = ns; extras[key] = extra
}
END {
	printf "%-44s %-34s %14s %12s  %s\n", "benchmark", "variant", "ops/s", "vs reference", "metrics"
	for (g = 1; g <= groups; g++) {
		group = order[g]
		m = split(substr(subs[group], 2), list, "\t")
		first = ""
		for (i = 1; i <= m; i++) if (list[i] ~ /^reference/) { first = list[i]; break }
		for (i = 1; i <= m; i++) {
			key = group SUBSEP list[i]
			# The reference of the same parameters (auditor/batch=N against
			# reference-…/batch=N), else the first one.
			ref = first
			if (index(list[i], "/") > 0) {
				tail_ = substr(list[i], index(list[i], "/"))
				for (j = 1; j <= m; j++) if (list[j] ~ /^reference/ && substr(list[j], length(list[j]) - length(tail_) + 1) == tail_) { ref = list[j]; break }
			}
			ratio = ""
			if (ref != "" && list[i] !~ /^reference/) ratio = sprintf("%.2fx", opsps[key] / opsps[group SUBSEP ref])
			printf "%-44s %-34s %14.1f %12s %s\n", group, list[i], opsps[key], ratio, extras[key]
		}
	}
	print "\nvs reference = ops/s of the variant / ops/s of the reference-* variant of the same benchmark with the same parameters (after the first /), else the first one (higher is faster)."
}' "$out"
