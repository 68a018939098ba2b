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
# Built from the Go module proxy and cached by scripts/install-go-tool.sh.
set -euo pipefail
exec "$(dirname "$0")/install-go-tool.sh" cosign github.com/sigstore/cosign/v2 v2.6.5 "$@"
