#!/usr/bin/env bash
# install-helm.sh installs the pinned Helm CLI that the chart tests run
# (deploy/helm_test.go): `helm lint` and `helm template` of
# deploy/helm/runtimetruth with several value sets.
#
#   scripts/install-helm.sh              install if needed; progress on stderr
#   scripts/install-helm.sh --print-bin  the same, then print the helm path
#                                        (for RUNTIMETRUTH_HELM_BIN)
#
# Built from the Go module proxy and cached by scripts/install-go-tool.sh.
set -euo pipefail
exec "$(dirname "$0")/install-go-tool.sh" helm helm.sh/helm/v3 v3.22.0 "$@"
