#!/usr/bin/env bash
# start-rsyslog.sh starts a throwaway rsyslog receiver for the tests:
# Debian's rsyslogd (with rsyslog-gnutls; installed with apt when missing,
# idempotent), in the foreground of its own process, without systemd and
# without touching /dev/log, receiving on loopback only:
#
#   TCP  (RFC 6587 octet counting or LF framing)  127.0.0.1:<port>
#   TLS  (RFC 5425, a self-signed CA made here)   127.0.0.1:<port>
#   UDP                                           127.0.0.1:<port>
#   a local datagram socket                       <dir>/log.sock
#
# Every message received is written as received (%rawmsg%, one per line)
# to <dir>/messages.log. Three more inputs (TCP, TLS, UDP) take SIEM
# records (the auditor's syslog format ocsf, ecs or cef) and parse them as
# a SIEM's collector would: mmpstrucdata (the structured data), then
# mmjsonparse (a JSON body, into \$!rec) or, for a CEF body, mmnormalize
# with the cef parser of Debian's liblognorm (into \$!cef); each message's
# HOSTNAME and every variable it yields are written, one JSON line each,
# to <dir>/siem.log. It prints shell assignments for eval:
#
#   RUNTIMETRUTH_RSYSLOG_TCP=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_TLS=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_TLS_CA=<dir>/ca.pem
#   RUNTIMETRUTH_RSYSLOG_UDP=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_UNIX=<dir>/log.sock
#   RUNTIMETRUTH_RSYSLOG_FILE=<dir>/messages.log
#   RUNTIMETRUTH_RSYSLOG_SIEM_TCP=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_SIEM_TLS=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_SIEM_UDP=127.0.0.1:<port>
#   RUNTIMETRUTH_RSYSLOG_SIEM_FILE=<dir>/siem.log
#   RUNTIMETRUTH_RSYSLOG_DIR=<dir>
#
#   scripts/start-rsyslog.sh            start, print the assignments
#   scripts/start-rsyslog.sh stop DIR   stop the receiver started in DIR, remove DIR
set -euo pipefail

log() { echo "start-rsyslog: $*" >&2; }

stop() {
	local dir=$1 pid
	if [[ -f "$dir/rsyslog.pid" ]]; then
		pid=$(cat "$dir/rsyslog.pid")
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}

if [[ "${1:-}" == stop ]]; then
	stop "${2:?usage: start-rsyslog.sh stop DIR}"
	exit 0
fi

need=()
for pkg in rsyslog rsyslog-gnutls openssl; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if ((${#need[@]})); then
	log "installing ${need[*]} (Debian)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

free_port() {
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}
# UDP ports cannot be probed this way; the receiver fails to start if one
# is taken, and the caller sees it.
base=$((40000 + RANDOM % 20000))
tcp=$(free_port "$base")
tls=$(free_port $((tcp + 1)))
udp=$((tls + 1))
siemtcp=$(free_port $((udp + 1)))
siemtls=$(free_port $((siemtcp + 1)))
siemudp=$((siemtls + 1))

dir=$(mktemp -d -t runtimetruth-rsyslog.XXXXXX)
chmod 755 "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-subj "/CN=runtimetruth test CA" -keyout "$dir/ca-key.pem" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
	-subj "/CN=localhost" -keyout "$dir/key.pem" -out "$dir/req.pem" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$dir/ext.cnf"
openssl x509 -req -in "$dir/req.pem" -CA "$dir/ca.pem" -CAkey "$dir/ca-key.pem" -CAcreateserial \
	-days 2 -extfile "$dir/ext.cnf" -out "$dir/cert.pem" 2>/dev/null

cat >"$dir/rsyslog.conf" <<CONF
global(workDirectory="$dir" maxMessageSize="256k"
       defaultNetstreamDriverCAFile="$dir/ca.pem"
       defaultNetstreamDriverCertFile="$dir/cert.pem"
       defaultNetstreamDriverKeyFile="$dir/key.pem")
module(load="imuxsock" SysSock.Use="off")
module(load="imudp")
module(load="imtcp" maxSessions="1000" streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")
template(name="raw" type="string" string="%rawmsg%\n")
input(type="imuxsock" Socket="$dir/log.sock" CreatePath="on" UseSpecialParser="off" ParseHostname="on" UseSysTimeStamp="off")
input(type="imudp" address="127.0.0.1" port="$udp")
input(type="imtcp" address="127.0.0.1" port="$tcp" streamDriver.mode="0" name="tcp")
input(type="imtcp" address="127.0.0.1" port="$tls" streamDriver.mode="1" streamDriver.authMode="anon" name="tls")
action(type="omfile" file="$dir/messages.log" template="raw" flushOnTXEnd="on" asyncWriting="off")
module(load="mmpstrucdata")
module(load="mmjsonparse")
module(load="mmnormalize")
template(name="siem" type="list") {
	constant(value="{\"hostname\":\"") property(name="hostname" format="json") constant(value="\",\"vars\":")
	property(name="\$!") constant(value="}\n")
}
ruleset(name="siem") {
	action(type="mmpstrucdata")
	if (\$msg startswith "CEF:") or (\$msg startswith " CEF:") then {
		action(type="mmnormalize" rulebase="$dir/cef.rb" path="\$!cef")
	} else {
		action(type="mmjsonparse" cookie="" container="\$!rec")
	}
	action(type="omfile" file="$dir/siem.log" template="siem" flushOnTXEnd="on" asyncWriting="off")
}
input(type="imtcp" address="127.0.0.1" port="$siemtcp" streamDriver.mode="0" name="siemtcp" ruleset="siem")
input(type="imtcp" address="127.0.0.1" port="$siemtls" streamDriver.mode="1" streamDriver.authMode="anon" name="siemtls" ruleset="siem")
input(type="imudp" address="127.0.0.1" port="$siemudp" ruleset="siem")
CONF
printf 'version=2\nrule=:%%cef:cef%%\n' >"$dir/cef.rb"

rsyslogd -N1 -f "$dir/rsyslog.conf" >"$dir/check.log" 2>&1 || { cat "$dir/check.log" >&2; stop "$dir"; exit 1; }
rsyslogd -n -f "$dir/rsyslog.conf" -i "$dir/rsyslog.pid" >"$dir/rsyslogd.log" 2>&1 &
for _ in $(seq 1 100); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$tcp") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$tls") 2>/dev/null && [[ -S "$dir/log.sock" ]] &&
		(exec 3<>"/dev/tcp/127.0.0.1/$siemtcp") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$siemtls") 2>/dev/null; then
		log "rsyslogd $(rsyslogd -v | head -1 | awk '{print $2}') on 127.0.0.1 tcp $tcp tls $tls udp $udp (dir $dir)"
		cat <<OUT
RUNTIMETRUTH_RSYSLOG_TCP=127.0.0.1:$tcp
RUNTIMETRUTH_RSYSLOG_TLS=127.0.0.1:$tls
RUNTIMETRUTH_RSYSLOG_TLS_CA=$dir/ca.pem
RUNTIMETRUTH_RSYSLOG_UDP=127.0.0.1:$udp
RUNTIMETRUTH_RSYSLOG_UNIX=$dir/log.sock
RUNTIMETRUTH_RSYSLOG_FILE=$dir/messages.log
RUNTIMETRUTH_RSYSLOG_SIEM_TCP=127.0.0.1:$siemtcp
RUNTIMETRUTH_RSYSLOG_SIEM_TLS=127.0.0.1:$siemtls
RUNTIMETRUTH_RSYSLOG_SIEM_UDP=127.0.0.1:$siemudp
RUNTIMETRUTH_RSYSLOG_SIEM_FILE=$dir/siem.log
RUNTIMETRUTH_RSYSLOG_DIR=$dir
OUT
		exit 0
	fi
	sleep 0.1
done
log "rsyslogd did not start within 10s:"
cat "$dir/rsyslogd.log" >&2 || true
stop "$dir"
exit 1
