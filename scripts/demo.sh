#!/usr/bin/env bash
# demo.sh is what `make run` does until the streaming pipeline (`runtimetruth
# up`) lands: it takes a baseline of this repository, verifies the live state
# against it (PASS), then shows a DRIFT on a scratch clone and the JSON report.
set -euo pipefail
cd "$(dirname "$0")/.."
rt="${RUNTIMETRUTH:-bin/runtimetruth}"
work="$(mktemp -d -t runtimetruth-demo.XXXXXX)"
trap 'rm -rf "$work"' EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

git clone -q . "$work/repo"
step "runtimetruth inspect git $work/repo > baseline.json"
"$rt" inspect git "$work/repo" --pretty >"$work/baseline.json"
sed -n '1,14p' "$work/baseline.json"; echo "  ..."
step "runtimetruth digest baseline.json"
"$rt" digest "$work/baseline.json"
step "runtimetruth verify baseline.json --git $work/repo"
"$rt" verify "$work/baseline.json" --git "$work/repo"
echo "exit $?"
step "echo change > $work/repo/NOTES && runtimetruth verify baseline.json --git $work/repo"
echo change >"$work/repo/NOTES"
set +e
"$rt" verify "$work/baseline.json" --git "$work/repo"
echo "exit $?"
step "runtimetruth verify baseline.json --git $work/repo --json"
"$rt" verify "$work/baseline.json" --git "$work/repo" --json
echo "exit $?"
step "runtimetruth verify baseline.json --git $work/repo --protect git.repository.head_commit"
"$rt" verify "$work/baseline.json" --git "$work/repo" --protect git.repository.head_commit
echo "exit $?"
