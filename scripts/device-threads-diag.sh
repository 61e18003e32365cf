#!/usr/bin/env bash
# triage serve alone at 1, 2 and 4 serving threads (fifo, gate off, one shared lane): requests
# served by wrk in 3 s and each thread's user/system CPU and context switches per request,
# from /proc. No lab harness: the server pinned with taskset to CPUs 0..N-1, wrk (8 threads,
# 50 connections) to the CPUs W (default 8-15), a 1 KB file, nothing idle held.
#
#   scripts/device-pack.sh DIR && scripts/device-threads-diag.sh DIR     (about 35 s)
# On a 2-CPU machine: W=1 scripts/device-threads-diag.sh DIR (the 2- and 4-thread rows then
# share CPUs with wrk and mean little).
set -u
D=$(readlink -f "${1:?usage: $0 DIR (from scripts/device-pack.sh)}")
B=$D/bin; T=$D/real/triage
mkdir -p /tmp/dg/www; head -c 1024 /dev/urandom | base64 | head -c 1024 > /tmp/dg/www/f.html
run() { # name, cpus, extra serve args
  taskset -c $2 $T serve --listen 127.0.0.1:18993 --root /tmp/dg/www $3 > /tmp/dg/log 2>&1 &
  local P=$!; sleep 0.5
  taskset -c ${W:-8-15} $B/wrk -t8 -c50 -d1s http://127.0.0.1:18993/f.html > /dev/null 2>&1
  local s0; s0=$(for t in /proc/$P/task/*; do echo "$(cat $t/comm) $(awk '{print $14, $15}' $t/stat) $(awk '/^voluntary/ {v=$2} /^nonvoluntary/ {n=$2} END {print v, n}' $t/status)"; done)
  local out; out=$(taskset -c ${W:-8-15} $B/wrk -t8 -c50 -d3s http://127.0.0.1:18993/f.html)
  local s1; s1=$(for t in /proc/$P/task/*; do echo "$(cat $t/comm) $(awk '{print $14, $15}' $t/stat) $(awk '/^voluntary/ {v=$2} /^nonvoluntary/ {n=$2} END {print v, n}' $t/status)"; done)
  local req; req=$(echo "$out" | awk '/requests in/ {print $1}')
  echo "== $1 cpus=$2 $3: $req requests in 3s"
  paste <(echo "$s0") <(echo "$s1") | awk -v r="$req" '{printf "  %-16s user %5.1f us/req  sys %5.1f us/req  vcs %6.3f/req  nvcs %6.3f/req\n", $1, ($7-$2)*10000/r, ($8-$3)*10000/r, ($9-$4)/r, ($10-$5)/r}'
  kill $P; wait $P 2>/dev/null
}
run fifo-1 0 "--threads 1 --slots 1"
run fifo-2 0-1 "--threads 2 --slots 2"
run gateoff-2 0-1 "--threads 2 --slots 2 --gate off"
run fifo-2-lanes1 0-1 "--threads 2 --slots 2 --lanes 1"
run fifo-4 0-3 "--threads 4 --slots 4"
run gateoff-4 0-3 "--threads 4 --slots 4 --gate off"
run gateoff-1 0 "--threads 1 --slots 1 --gate off"
taskset -c 0-1 $B/nginx -v 2>&1 | head -1
