#!/usr/bin/env bash
# install-codex.sh installs the pinned OpenAI Codex CLI that the collector's
# codex source is tested against (services/collector/source/codex).
#
#   scripts/install-codex.sh              install if needed; progress on stderr
#   scripts/install-codex.sh --print-bin  the same, then print the codex path
#                                         (for RUNTIMETRUTH_CODEX_BIN)
#
# Idempotent: when `codex --version` (on PATH, or in the install prefix)
# already prints the pinned version, nothing is installed. Otherwise the
# package is installed with `npm install -g` into RUNTIMETRUTH_CODEX_PREFIX,
# or npm's global prefix when that is unset (/usr for root on Debian), so
# the binary lands on PATH and `go test` finds it without the Makefile. The
# native binary ships inside a registry package (@openai/codex-<os>-<arch>,
# about 420 MB unpacked); there is no postinstall download.
set -euo pipefail

readonly version=0.171.0
print_bin=false
case "${1:-}" in
--print-bin) print_bin=true ;;
"") ;;
*)
	echo "usage: $0 [--print-bin]" >&2
	exit 2
	;;
esac

log() { echo "install-codex: $*" >&2; }

# pinned reports whether the executable $1 is the pinned version.
pinned() {
	[[ -x "$1" ]] && [[ "$("$1" --version 2>/dev/null || true)" == "codex-cli $version" ]]
}

prefix="${RUNTIMETRUTH_CODEX_PREFIX:-}"
bin=""
if [[ -z "$prefix" ]] && command -v codex >/dev/null 2>&1 && pinned "$(command -v codex)"; then
	bin="$(command -v codex)"
else
	if [[ -z "$prefix" ]]; then
		command -v npm >/dev/null 2>&1 || {
			log "npm not found; install Node.js >= 16 and npm first"
			exit 1
		}
		prefix="$(npm prefix -g)"
	fi
	bin="$prefix/bin/codex"
	if ! pinned "$bin"; then
		command -v npm >/dev/null 2>&1 || {
			log "npm not found; install Node.js >= 16 and npm first"
			exit 1
		}
		log "installing @openai/codex@$version into $prefix"
		npm install --global --prefix "$prefix" --no-audit --no-fund --loglevel=error "@openai/codex@$version" >&2
		pinned "$bin" || {
			log "$bin --version does not print codex-cli $version after installing"
			exit 1
		}
	fi
fi
log "codex-cli $version at $bin"
if $print_bin; then
	echo "$bin"
fi
