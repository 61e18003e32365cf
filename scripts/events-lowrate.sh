#!/usr/bin/env bash
# events-lowrate.sh OUT SERVER RATE... : one server (triage|nginx) alone on CPU 0 in a cgroup
# with the events lab's quota (20% of 5 ms), loaded open-loop from CPU 1 by `triage load
# --mode rate` (16 connections, the lab's 1 KiB file) at each RATE for DUR (default 5s); per
# rate: requests, CPU per request (cgroup), and per thread of the server its CPU, voluntary and
# involuntary context switches per request. Env: TRIAGE (binary, default target/ci/triage),
# DUR, STRACE=1 (strace -c -f the server during the last rate), PERF=1 (perf record).
# Run under `flock /tmp/lab.lock`. Cleans up its processes and cgroups on exit.
set -euo pipefail
out=$1; server=$2; shift 2
TRIAGE=${TRIAGE:-target/ci/triage}; DUR=${DUR:-5s}
mkdir -p "$out"; out=$(cd "$out" && pwd)
root=$out/root; mkdir -p "$root"; head -c 1024 /dev/zero | tr '\0' a > "$root/file.html"
port=$((20000 + RANDOM % 20000))
cg=cap4probe$$
for c in cpu cpuacct; do mkdir -p /sys/fs/cgroup/$c/$cg; done
echo 5000 > /sys/fs/cgroup/cpu/$cg/cpu.cfs_period_us
echo 1000 > /sys/fs/cgroup/cpu/$cg/cpu.cfs_quota_us
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  sleep 0.2
  for c in cpu cpuacct; do rmdir /sys/fs/cgroup/$c/$cg 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
# The server joins the cgroup before it starts (its threads inherit it).
start() {
  case $server in
    triage)
      sh -c "echo \$\$ > /sys/fs/cgroup/cpu/$cg/cgroup.procs; echo \$\$ > /sys/fs/cgroup/cpuacct/$cg/cgroup.procs; exec taskset -c 0 $TRIAGE serve --root $root --listen 127.0.0.1:$port --slots 1 --keepalive-timeout 1h --header-timeout 1h --max-conns 10100 --access-log $out/access.log ${TRIAGE_ARGS:-}" > "$out/server.log" 2>&1 &
      pid=$! ;;
    nginx)
      mkdir -p "$out/nginx/tmp"
      cat > "$out/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
worker_rlimit_nofile 30000;
pid $out/nginx/nginx.pid;
error_log $out/nginx/error.log warn;
events { worker_connections 20000; }
http {
  default_type text/html;
  sendfile on;
  keepalive_timeout 3600s;
  keepalive_requests 100000000;
  client_body_temp_path $out/nginx/tmp;
  gzip off;
  access_log $out/access.log combined;
  server { listen 127.0.0.1:$port; root $root; }
}
CONF
      sh -c "echo \$\$ > /sys/fs/cgroup/cpu/$cg/cgroup.procs; echo \$\$ > /sys/fs/cgroup/cpuacct/$cg/cgroup.procs; exec taskset -c 0 nginx -c $out/nginx/nginx.conf -p $out/nginx" > "$out/server.log" 2>&1 &
      pid=$! ;;
  esac
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && return; sleep 0.1; done
  echo "server did not listen" >&2; cat "$out/server.log" >&2; exit 1
}
# per thread: tid comm utime+stime(ticks) voluntary nonvoluntary
threads() {
  for t in /proc/$pid/task/*; do
    tid=${t##*/}
    comm=$(tr ' ' _ < "$t/comm")
    ticks=$(awk '{print $14+$15}' "$t/stat")
    v=$(awk '/^voluntary_ctxt/{print $2}' "$t/status"); n=$(awk '/^nonvoluntary_ctxt/{print $2}' "$t/status")
    echo "$tid $comm $ticks $v $n"
  done
}
start
sleep 1
url=http://127.0.0.1:$port/file.html
taskset -c 1 "$TRIAGE" load --mode rate --rate 500 --connections 16 --duration 2s --plain "$url" > /dev/null 2>&1
printf "%-8s %8s %9s %10s | per thread: comm cpu_us/req vol/req invol/req\n" rate served cpu_us/req thr%
last=${@: -1}
for rate in "$@"; do
  threads > "$out/t0"; u0=$(cat /sys/fs/cgroup/cpuacct/$cg/cpuacct.usage); s0=$(awk '/nr_throttled/{print $2}' /sys/fs/cgroup/cpu/$cg/cpu.stat); p0=$(awk '/nr_periods/{print $2}' /sys/fs/cgroup/cpu/$cg/cpu.stat)
  if [ "${STRACE:-0}" = 1 ] && [ "$rate" = "$last" ]; then strace -c -f -p "$pid" -o "$out/strace-$rate.txt" & sp=$!; sleep 0.5; fi
  if [ "${PERF:-0}" = 1 ] && [ "$rate" = "$last" ]; then perf record -F 4999 -g -p "$pid" -o "$out/perf-$rate.data" 2>/dev/null & pp=$!; sleep 0.5; fi
  taskset -c 1 "$TRIAGE" load --mode rate --rate "$rate" --connections 16 --duration "$DUR" --plain --json "$url" > "$out/load-$rate.json" 2>/dev/null
  [ -n "${sp:-}" ] && { kill -INT $sp; wait $sp 2>/dev/null || true; sp=; }
  [ -n "${pp:-}" ] && { kill -INT $pp; wait $pp 2>/dev/null || true; pp=; }
  u1=$(cat /sys/fs/cgroup/cpuacct/$cg/cpuacct.usage); s1=$(awk '/nr_throttled/{print $2}' /sys/fs/cgroup/cpu/$cg/cpu.stat); p1=$(awk '/nr_periods/{print $2}' /sys/fs/cgroup/cpu/$cg/cpu.stat)
  threads > "$out/t1"
  req=$(python3 -c "import json,sys; d=json.load(open('$out/load-$rate.json')); s=d.get('summary',d); print(s['requests'])")
  p99=$(python3 -c "import json,sys; d=json.load(open('$out/load-$rate.json')); print(d['t1']['p99_ms'])")
  per=$(join <(sort "$out/t0") <(sort "$out/t1") | awk -v r="$req" '{c=($7-$3)*10000/r; v=($8-$4)/r; n=($9-$5)/r; if (c>0||v>0.001) printf " %s %.1f %.3f %.3f;", $2, c, v, n}')
  awk -v r="$rate" -v q="$req" -v du=$((u1-u0)) -v th=$((s1-s0)) -v pe=$((p1-p0)) -v per="$per" -v p99="$p99" 'BEGIN{printf "%-8s %8d %9.2f %9.1f%% p99 %s ms idle %.1f%% |%s\n", r, q, du/1000/q, 100*th/(pe>0?pe:1), p99, 100-100*du/1e9/(pe*0.001), per}'
  sleep 1
done
