#!/usr/bin/env bash
# The CPU a `triage serve` spends holding idle keep-alive connections with no traffic: the
# server as `triage lab events` starts it (one slot, keep-alive and header timeouts of an
# hour) on CPU 0, N connections opened by a Python holder on the last CPU (each sends one
# request and reads its response, then stays idle), and the server's CPU (the sum of its
# threads' /proc/PID/task/*/schedstat) over WINDOW seconds, for 0 and N held, twice each.
#
# Usage: scripts/events-idle-cost.sh TRIAGE_BIN [N] [WINDOW]   (default N 10000, WINDOW 20)
# Prints one line per measurement: held=N cpu_ms_per_s=X rss_kib=Y. Loopback only; bounded.
set -euo pipefail
bin=$(readlink -f "${1:?usage: events-idle-cost.sh TRIAGE_BIN [N] [WINDOW]}")
n=${2:-10000}
window=${3:-20}
last=$(($(nproc) - 1))
work=$(mktemp -d /tmp/idle-cost.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c 1024 /dev/zero | tr '\0' a > "$work/file.html"
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
ulimit -n "$(ulimit -Hn)"
port=18411
for held in 0 "$n" 0 "$n"; do
    taskset -c 0 "$bin" serve --root "$work" --listen 127.0.0.1:$port --slots 1 \
        --keepalive-timeout 1h --header-timeout 1h --max-conns $((n + 100)) >"$work/serve.log" 2>&1 &
    pid=$!
    sleep 1
    if [ "$held" -gt 0 ]; then
        taskset -c "$last" python3 "$(dirname "$0")/hold_conns.py" $port "$held" $((window + 30)) >"$work/hold.log" 2>&1 &
        hp=$!
        for _ in $(seq 120); do grep -q held "$work/hold.log" && break; sleep 0.5; done
        grep -q "held $held" "$work/hold.log" || { echo "the holder did not open $held connections"; exit 1; }
    fi
    sleep 3
    a=$(cpu_ns "$pid"); sleep "$window"; b=$(cpu_ns "$pid")
    rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
    awk -v h="$held" -v d=$((b - a)) -v w="$window" -v r="$rss" \
        'BEGIN {printf "held=%d cpu_ms_per_s=%.3f rss_kib=%d\n", h, d / w / 1e6, r}'
    [ "$held" -gt 0 ] && kill "$hp" 2>/dev/null
    kill "$pid"; wait "$pid" 2>/dev/null || true
    port=$((port + 1))
done
