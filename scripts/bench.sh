#!/usr/bin/env bash
# bench.sh runs every benchmark of the workspace and prints, per benchmark,
# ops/s and the ratio of each runtimetruth sub-benchmark to the reference
# sub-benchmarks (named reference-*) measured in the same run.
#
#   scripts/bench.sh [go test -bench regexp]      (default: .)
#   BENCHTIME=2s scripts/bench.sh                 (default: 1s)
#   FIXED_N=12000 FIXED_COUNT=5 scripts/bench.sh  (the verifier variants, below)
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

# Variants that must move the same inputs to be compared: with a duration
# (-benchtime 1s) each variant picks its own count (the verifier about
# 9,500 snapshots, raw JetStream about 18,000, and raw JetStream is faster
# per message at the larger count), so these variants (the verifier, the
# verifier with enrollment off, raw JetStream) run at one fixed count
# (FIXED_N messages each), FIXED_COUNT rounds with the variants
# alternating, and are left out of the pass by duration. The ratio is of
# the mean ns/op over the rounds.
fixed_pkg=./services/verifier
fixed_top=BenchmarkVerifierThroughput
fixed_subs='runtimetruth|runtimetruth-enrollment-off|reference-raw-jetstream'
fixed_n="${FIXED_N:-12000}"

echo "bench: go test -bench '$pattern' (raw output in $out)" >&2
# -p 1: go test runs one package's benchmarks at a time but, by default,
# builds and links the next packages meanwhile, on the same two cores; one
# action at a time keeps the compiler out of every measurement (it had cut
# BenchmarkVerifyJSONL from about 600,000 to 440,000 links/s).
# shellcheck disable=SC2086
go test -p 1 -run '^$' -bench "$pattern" -skip "^$fixed_top\$/^($fixed_subs)\$" -benchmem -benchtime "${BENCHTIME:-1s}" -count 1 -timeout 60m $modules | tee "$out" |
	grep -E '^(Benchmark|ok|FAIL|---)' >&2 || true

# The fixed-count pass, when the pattern selects these variants (its first
# element matches the benchmark and its second, if any, a variant).
top="${pattern%%/*}" sub=""
[[ "$pattern" == */* ]] && sub="${pattern#*/}"
selected=false
if [[ "$fixed_top" =~ $top ]]; then
	for v in ${fixed_subs//|/ }; do
		[[ -z "$sub" || "$v" =~ $sub ]] && selected=true
	done
fi
if $selected; then
	echo "bench: $fixed_top ($fixed_subs) at $fixed_n messages each, ${FIXED_COUNT:-5} rounds" >&2
	bin="$(mktemp -d -t runtimetruth-bench.XXXXXX)"
	trap 'rm -rf "$bin"' EXIT
	go test -c -o "$bin/fixed.test" "$fixed_pkg"
	for _ in $(seq "${FIXED_COUNT:-5}"); do
		for v in ${fixed_subs//|/ }; do
			rc=0
			(cd "$fixed_pkg" && "$bin/fixed.test" -test.run '^$' -test.bench "^$fixed_top\$/^$v\$" -test.benchmem -test.benchtime "${fixed_n}x" -test.timeout 30m) >"$bin/round" 2>&1 || rc=$?
			cat "$bin/round" >>"$out"
			grep -E '^(Benchmark|ok|FAIL|PASS|---)' "$bin/round" >&2 || true
			# A panic or timeout prints no FAIL line of its own.
			((rc == 0)) || echo "FAIL $fixed_top/$v: the test binary exited $rc" | tee -a "$out" >&2
		done
	done
fi
grep -q '^FAIL' "$out" && { echo "bench: a benchmark failed" >&2; exit 1; }

echo
awk '
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	ns = ""
	for (i = 2; i <= NF; i++) if ($(i+1) == "ns/op") ns = $i
	if (ns == "") next
	n = split(name, parts, "/")
	group = parts[1]; sub_ = (n > 1) ? substr(name, length(group) + 2) : "-"
	if (!(group in seen)) { order[++groups] = group; seen[group] = 1 }
	key = group SUBSEP sub_
	if (!(key in runs)) { subs[group] = subs[group] "\t" sub_; metrics[key] = "" }
	# A variant run more than once (-count) is reported by its means.
	runs[key]++; sumns[key] += ns
	for (i = 3; i < NF; i += 2) { # name, iterations, then value-unit pairs
		u = $(i+1)
		if (u != "B/op" && u != "allocs/op" && u != "MB/s" && u != "ns/op") {
			if (!((key, u) in sum)) metrics[key] = metrics[key] "\t" u
			sum[key, u] += $i
		}
	}
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
			# A fixed-rate variant (named *-per-s) measures latency at an
			# offered rate, not throughput: no ratio.
			if (ref != "" && list[i] !~ /^reference/ && list[i] !~ /-per-s$/) ratio = sprintf("%.2fx", sumns[group SUBSEP ref] / runs[group SUBSEP ref] / (sumns[key] / runs[key]))
			extra = ""
			k = split(substr(metrics[key], 2), us, "\t")
			for (j = 1; j <= k; j++) extra = extra sprintf(" %s=%.4g", us[j], sum[key, us[j]] / runs[key])
			if (runs[key] > 1) extra = extra sprintf(" (mean of %d runs)", runs[key])
			printf "%-44s %-34s %14.1f %12s %s\n", group, list[i], 1e9 * runs[key] / sumns[key], ratio, extra
		}
	}
	print "\nvs reference = ops/s of the variant / ops/s of the reference-* variant of the same benchmark with the same parameters (after the first /), else the first one (higher is faster); none for fixed-rate variants (*-per-s), which report latency."
}' "$out"
