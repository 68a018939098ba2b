#!/usr/bin/env bash
# test-deps.sh installs, idempotently, what `make test` needs on a fresh
# Debian machine (run as root): Debian packages, then the pinned Codex CLI.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "test-deps: $*" >&2; }

need=()
for pkg in git ca-certificates coreutils python3 python3-venv; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
command -v npm >/dev/null 2>&1 || need+=(npm)
if ((${#need[@]})); then
	log "installing Debian packages: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

scripts/install-codex.sh
scripts/install-cosign.sh
log "ok"
