#!/usr/bin/env bash
# serve-ab.sh FILE LABEL [serve args...]
#
# One 4 s measurement of a one-thread `triage serve` (CPU 0) serving FILE to wrk (CPU 1, one
# thread, 50 connections, `Accept-Encoding: gzip`), after a 1 s warm-up: prints `LABEL req/s N
# cpu/req_us C` (the server's utime + stime over the measured run). Interleave labels for an
# A/B, e.g. with and without `--wake-queue`:
#   for r in 1 2 3; do scripts/serve-ab.sh img.bmp on$r --policy pos --gzip --gzip-level 6
#                      scripts/serve-ab.sh img.bmp off$r --policy pos --gzip --gzip-level 6 --wake-queue off; done
# Run it under `flock /tmp/lab.lock` with nothing else on CPU 0. BIN: the binary (target/ci/triage).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,12p "$0"; exit 2; }
file=$(readlink -f "$1"); label=$2; shift 2
bin=${BIN:-target/ci/triage}
port=${PORT:-18778}
out=$(mktemp -d /tmp/serve-ab.XXXXXX)
taskset -c 0 "$bin" serve --root "$(dirname "$file")" --listen 127.0.0.1:$port --threads 1 --slots 1 "$@" > "$out/serve.log" 2>&1 &
sp=$!
trap 'kill -INT $sp 2>/dev/null || true; wait $sp 2>/dev/null || true; rm -rf "$out"' EXIT
for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
    kill -0 $sp 2>/dev/null || { echo "serve-ab: the server did not start:" >&2; cat "$out/serve.log" >&2; exit 1; }
    sleep 0.1
done
url=http://127.0.0.1:$port/$(basename "$file")
taskset -c 1 wrk -t1 -c50 -d1s -H 'Accept-Encoding: gzip' "$url" > /dev/null
c0=$(awk '{print $14 + $15}' /proc/$sp/stat)
taskset -c 1 wrk -t1 -c50 -d4s -H 'Accept-Encoding: gzip' "$url" > "$out/wrk"
c1=$(awk '{print $14 + $15}' /proc/$sp/stat)
n=$(awk '/requests in/ {print $1}' "$out/wrk")
tick=$(getconf CLK_TCK)
echo "$label req/s $((n / 4)) cpu/req_us $(( (c1 - c0) * 1000000 / tick / n ))"
