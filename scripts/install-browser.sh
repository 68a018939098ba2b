#!/usr/bin/env bash
# install-browser.sh installs what the console's browser tests need
# (cmd/runtimetruth/internal/console/browser_test.go): Debian's chromium,
# which chromedp drives headless, and the pinned axe-core, whose
# axe.min.js the tests run in each page for its accessibility check.
#
#   scripts/install-browser.sh              install if needed; progress on stderr
#   scripts/install-browser.sh --print-axe  the same, then print the path of
#                                           axe.min.js (for RUNTIMETRUTH_AXE)
#
# Idempotent: chromium is installed only when dpkg does not list it, and
# axe-core only when its pinned version is not in the cache directory
# (RUNTIMETRUTH_CACHE, default ~/.cache/runtimetruth).
set -euo pipefail

readonly axe_version=4.14.1
print_axe=false
case "${1:-}" in
--print-axe) print_axe=true ;;
"") ;;
*)
	echo "usage: $0 [--print-axe]" >&2
	exit 2
	;;
esac

log() { echo "install-browser: $*" >&2; }

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q 'install ok installed'; then
	log "installing Debian's chromium"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

cache="${RUNTIMETRUTH_CACHE:-$HOME/.cache/runtimetruth}"
dir="$cache/axe-core-$axe_version"
axe="$dir/node_modules/axe-core/axe.min.js"
if [[ ! -s "$axe" ]] || [[ "$(cd "$dir" && node -p 'require("axe-core/package.json").version' 2>/dev/null || true)" != "$axe_version" ]]; then
	command -v npm >/dev/null 2>&1 || {
		log "npm not found; install Node.js and npm first"
		exit 1
	}
	log "installing axe-core@$axe_version into $dir"
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "axe-core@$axe_version" >&2
	[[ -s "$axe" ]] || {
		log "no $axe after installing"
		exit 1
	}
fi
log "$(chromium --version 2>/dev/null | head -n1), axe-core $axe_version at $axe"
if $print_axe; then
	echo "$axe"
fi
