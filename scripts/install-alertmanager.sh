#!/usr/bin/env bash
# install-alertmanager.sh installs Debian's Prometheus Alertmanager (the
# prometheus-alertmanager package, 0.25 in bookworm) for the notifier's
# tests, which start their own on loopback. The package's service is not
# started (no systemd here; a policy-rc.d refuses it during the install).
#
#   scripts/install-alertmanager.sh              install if needed
#   scripts/install-alertmanager.sh --print-bin  the same, then print the
#                                                binary (RUNTIMETRUTH_ALERTMANAGER_BIN)
set -euo pipefail

bin=/usr/bin/prometheus-alertmanager
if ! dpkg-query -W -f='${Status}' prometheus-alertmanager 2>/dev/null | grep -q 'install ok installed'; then
	echo "install-alertmanager: installing prometheus-alertmanager (Debian)" >&2
	export DEBIAN_FRONTEND=noninteractive
	policy=/usr/sbin/policy-rc.d
	made=
	if [[ ! -e "$policy" ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		made=1
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
	[[ -n "$made" ]] && rm -f "$policy"
fi
[[ -x "$bin" ]] || { echo "install-alertmanager: $bin missing after the install" >&2; exit 1; }
if [[ "${1:-}" == --print-bin ]]; then
	echo "$bin"
fi
