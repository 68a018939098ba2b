#!/usr/bin/env bash
# install-cosign.sh installs the pinned Sigstore cosign CLI that the
# attestor's interoperability tests run against (services/attestor,
# interop_test.go): bundles runtimetruth makes must verify with cosign, and
# bundles cosign makes must verify with runtimetruth.
#
#   scripts/install-cosign.sh              install if needed; progress on stderr
#   scripts/install-cosign.sh --print-bin  the same, then print the cosign path
#                                          (for RUNTIMETRUTH_COSIGN_BIN)
#
# Idempotent and cached across runs: cosign is built from the Go module proxy
# with `go install` into ~/.cache/runtimetruth/bin ($RUNTIMETRUTH_TOOLS_BIN),
# outside the clone so fresh clones reuse it, and nothing is
# built when the binary there was already built from the pinned module
# version (`go version -m`). A cold build takes a few minutes on 2 cores.
set -euo pipefail

readonly module=github.com/sigstore/cosign/v2
readonly version=v2.6.5
print_bin=false
case "${1:-}" in
--print-bin) print_bin=true ;;
"") ;;
*)
	echo "usage: $0 [--print-bin]" >&2
	exit 2
	;;
esac

log() { echo "install-cosign: $*" >&2; }

gobin="${RUNTIMETRUTH_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/runtimetruth/bin}"
bin="$gobin/cosign"

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
	log "building $module/cmd/cosign@$version into $gobin (a few minutes the first time)"
	# Outside the workspace: cosign's own go.mod and go.sum decide its
	# dependencies.
	(cd "$gobin" && GOWORK=off GOBIN="$gobin" GOFLAGS=-trimpath go install "$module/cmd/cosign@$version")
	pinned || {
		log "$bin is not $module $version after installing"
		exit 1
	}
fi
log "ok: $bin ($module $version)"
if $print_bin; then
	echo "$bin"
fi
