#!/usr/bin/env bash
# lag_trace.sh OUT TRIAGE [LAB-POS-ARGS...]: scripts/t1_trace.sh with the EEVDF lag of the
# server's children logged beside it (scripts/lagtrace: vruntime, deadline, vlag,
# sched_delayed and eligibility of every `apache2` task and of the tasks sharing its cfs_rq, at
# each wake-up and switch, and a snapshot of the cfs_rq each time the CPU passes to it from
# outside). Writes OUT/lag.txt (monotonic ns, the clock of OUT/sched.txt); read it with
# scripts/lag_read.py. A diagnostic; needs root, clang, bpftool, libbpf-dev. Under the lab lock:
#   flock /tmp/lab.lock /work/notes/quiet0.sh scripts/keep-cpu-quiet.sh \
#     scripts/lag_trace.sh results/x target/ci/triage --exp 1 --quick --variants apache,apache+pos
set -eu
out=$1
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
"$here/lagtrace/build.sh" target/lagtrace >/dev/null
taskset -c "$(($(nproc) - 1))" target/lagtrace/lagtrace "$out/lag.txt" &
lt=$!
trap 'kill -INT $lt 2>/dev/null || true; wait $lt || true' EXIT
sleep 1
"$here/t1_trace.sh" "$out" "$@"
