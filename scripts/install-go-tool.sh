#!/usr/bin/env bash
# install-go-tool.sh builds a pinned Go command from the Go module proxy,
# cached across runs; scripts/install-cosign.sh and install-helm.sh call it.
#
#   scripts/install-go-tool.sh NAME MODULE VERSION [--print-bin]
#
# NAME is the binary (built from MODULE/cmd/NAME@VERSION), --print-bin
# prints its path after installing. Idempotent: the binary goes into
# ~/.cache/runtimetruth/bin ($RUNTIMETRUTH_TOOLS_BIN), outside the clone so
# fresh clones reuse it, and nothing is built when the binary there was
# already built from the pinned module version (`go version -m`). A cold
# build takes a few minutes on 2 cores. Progress goes to stderr.
set -euo pipefail

if (($# < 3 || $# > 4)) || { (($# == 4)) && [[ "$4" != --print-bin ]]; }; then
	echo "usage: $0 NAME MODULE VERSION [--print-bin]" >&2
	exit 2
fi
readonly name=$1 module=$2 version=$3
print_bin=false
(($# == 4)) && print_bin=true

log() { echo "install-$name: $*" >&2; }

gobin="${RUNTIMETRUTH_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/runtimetruth/bin}"
bin="$gobin/$name"

# pinned reports whether $bin was built from the pinned module version.
pinned() {
	[[ -x "$bin" ]] && go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$module[[:space:]]+$version([[:space:]]|\$)"
}

if ! pinned; then
	command -v go >/dev/null 2>&1 || {
		log "go not found; install Go first"
		exit 1
	}
	mkdir -p "$gobin"
	log "building $module/cmd/$name@$version into $gobin (a few minutes the first time)"
	# Outside the workspace: the tool's own go.mod and go.sum decide its
	# dependencies.
	(cd "$gobin" && GOWORK=off GOBIN="$gobin" GOFLAGS=-trimpath go install "$module/cmd/$name@$version")
	pinned || {
		log "$bin is not $module $version after installing"
		exit 1
	}
fi
log "ok: $bin ($module $version)"
if $print_bin; then
	echo "$bin"
fi
