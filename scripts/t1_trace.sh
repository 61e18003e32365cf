#!/usr/bin/env bash
# t1_trace.sh OUT TRIAGE [LAB-POS-ARGS...]: run `TRIAGE lab pos LAB-POS-ARGS --keep-runs --out
# OUT` under a scheduler trace, for scripts/t1_parts.py (where an HTML request's t1 goes).
#
# - OUT/sched.data: perf's record of sched:sched_switch and sched:sched_wakeup on every CPU,
#   stamped with CLOCK_MONOTONIC; OUT/sched.txt: the same as text (`perf script`);
# - OUT/clock.txt: CLOCK_REALTIME - CLOCK_MONOTONIC (s) before and after the run, to put the
#   trace on the clock of the access logs and of the load's html.csv.
#
# perf itself runs on the last CPU (the lab's client CPU); each traced event costs the CPU it
# happens on about a microsecond, the server's CPU included, the same in every variant.
# Needs root and perf. Under the lab lock, as every measurement:
#   flock /tmp/lab.lock /work/notes/quiet0.sh scripts/keep-cpu-quiet.sh \
#     scripts/t1_trace.sh results/x target/ci/triage --exp 1 --quick --reps 6 --variants ...
set -eu
out=$1
bin=$2
shift 2
mkdir -p "$out"
offset() {
  python3 -c 'import time; print("%.6f" % (time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)))'
}
offset >"$out/clock.txt"
taskset -c "$(($(nproc) - 1))" perf record -q -a -k mono --mmap-pages 2048 \
  -e sched:sched_switch -e sched:sched_wakeup -o "$out/sched.data" -- \
  "$bin" lab pos "$@" --keep-runs --out "$out"
offset >>"$out/clock.txt"
perf script -i "$out/sched.data" --ns -F cpu,time,event,trace >"$out/sched.txt" 2>/dev/null
echo "t1_trace: $(wc -l <"$out/sched.txt") scheduler events in $out/sched.txt"
