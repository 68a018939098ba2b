#!/usr/bin/env bash
# fuzz.sh runs every fuzz target of the workspace for a while each
# (default 20s): scripts/fuzz.sh 1m. Minimization is capped at 200 runs per
# input: with multi-kilobyte seeds the default (60s per new input) stalls.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-20s}"
for dir in $(go list -m -f '{{.Dir}}'); do
	(
		cd "$dir"
		for pkg in $(go list ./...); do
			pdir=$(go list -f '{{.Dir}}' "$pkg")
			for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$pdir"/*_test.go 2>/dev/null | awk '{print $2}'); do
				echo "fuzz: $pkg $target ($fuzztime)" >&2
				go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 200x "$pkg"
			done
		done
	)
done
