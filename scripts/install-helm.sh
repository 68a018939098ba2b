#!/usr/bin/env bash
# install-helm.sh installs the pinned Helm CLI that the chart tests run
# (deploy/helm_test.go): `helm lint` and `helm template` of
# deploy/helm/runtimetruth with several value sets.
#
#   scripts/install-helm.sh              install if needed; progress on stderr
#   scripts/install-helm.sh --print-bin  the same, then print the helm path
#                                        (for RUNTIMETRUTH_HELM_BIN)
#
# Idempotent and cached across runs, like scripts/install-cosign.sh: helm
# is built from the Go module proxy with `go install` into
# ~/.cache/runtimetruth/bin ($RUNTIMETRUTH_TOOLS_BIN), outside the clone so
# fresh clones reuse it, and nothing is built when the binary there was
# already built from the pinned module version (`go version -m`). A cold
# build takes a few minutes on 2 cores.
set -euo pipefail

readonly module=helm.sh/helm/v3
readonly version=v3.22.0
print_bin=false
case "${1:-}" in
--print-bin) print_bin=true ;;
"") ;;
*)
	echo "usage: $0 [--print-bin]" >&2
	exit 2
	;;
esac

log() { echo "install-helm: $*" >&2; }

gobin="${RUNTIMETRUTH_TOOLS_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/runtimetruth/bin}"
bin="$gobin/helm"

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
	log "building $module/cmd/helm@$version into $gobin (a few minutes the first time)"
	# Outside the workspace: helm's own go.mod and go.sum decide its
	# dependencies.
	(cd "$gobin" && GOWORK=off GOBIN="$gobin" GOFLAGS=-trimpath go install "$module/cmd/helm@$version")
	pinned || {
		log "$bin is not $module $version after installing"
		exit 1
	}
fi
log "ok: $bin ($module $version)"
if $print_bin; then
	echo "$bin"
fi
