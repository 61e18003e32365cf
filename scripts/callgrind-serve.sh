#!/usr/bin/env bash
# callgrind-serve.sh [-o DIR] [-d SECS] LABEL [serve args...]
#
# User-space instructions per request of a one-thread `triage serve` under load, counted by
# valgrind's callgrind: a figure that does not move with the machine's noise (a shared VM's
# CPU per request moves 5-10% from run to run), for A/Bs of the request path. The server runs
# on CPU 0 under callgrind (about 50x slower, so the load is light and the gate's queue
# shorter than at full speed: compare policies by it, not absolute CPU); wrk, 50 connections,
# on CPU 1 fetches a 1,000-byte file for SECS seconds (default 8) after an 8 s warm-up; counts
# are zeroed before the load and dumped after it. Prints `LABEL requests N Ir I per-req I/N`
# and the 25 functions with the most instructions of their own, per request. Needs valgrind
# (`apt-get install valgrind`), wrk, and a built binary (BIN, default target/ci/triage).
# Instructions only: the kernel's side of each request (system calls) is not counted.
set -euo pipefail
out=results/callgrind; secs=8
while getopts "o:d:" o; do case $o in o) out=$OPTARG;; d) secs=$OPTARG;; *) exit 2;; esac; done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n 2,13p "$0"; exit 2; }
label=$1; shift
for t in valgrind callgrind_control callgrind_annotate wrk; do
  command -v $t >/dev/null || { echo "callgrind-serve: $t not found (apt-get install valgrind wrk)" >&2; exit 1; }
done
bin=${BIN:-target/ci/triage}
[ -x "$bin" ] || { echo "callgrind-serve: $bin not built (cargo build --profile ci -p triage)" >&2; exit 1; }
mkdir -p "$out/root"
head -c 1000 /dev/zero | tr '\0' 'x' > "$out/root/f.html"
port=${PORT:-18090}
rm -f "$out/cg.$label".out*
taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out/cg.$label.out" "$bin" serve \
  --root "$out/root" --listen 127.0.0.1:$port --threads 1 --slots 1 "$@" >"$out/cg.$label.log" 2>&1 &
sp=$!
trap 'kill -INT $sp 2>/dev/null || true' EXIT
sleep 8
kill -0 $sp 2>/dev/null || { echo "callgrind-serve: the server did not start:" >&2; tail -5 "$out/cg.$label.log" >&2; exit 1; }
callgrind_control -z $sp >/dev/null 2>&1
taskset -c 1 wrk -t1 -c50 -d${secs}s http://127.0.0.1:$port/f.html >"$out/wrk.$label" 2>&1
callgrind_control -d $sp >/dev/null 2>&1
sleep 1
kill -INT $sp; wait $sp 2>/dev/null || true
trap - EXIT
n=$(awk '/requests in/ {print $1}' "$out/wrk.$label")
grep -q "Non-2xx" "$out/wrk.$label" && { echo "callgrind-serve: wrk saw errors:" >&2; cat "$out/wrk.$label" >&2; exit 1; }
f=$(ls "$out/cg.$label".out.* | head -1)
ir=$(grep -E "^summary|^totals" "$f" | head -1 | awk '{print $2}')
echo "$label requests $n Ir $ir per-req $((ir / n))"
callgrind_annotate --threshold=100 "$f" 2>/dev/null \
  | awk -v n="$n" '$1 ~ /^[0-9,]+$/ && $2 == "(" {v=$1; gsub(",","",v); $1=""; $2=""; $3=""; sub(/ \[.*/, ""); printf "%7d %s\n", v/n, $0}' \
  | grep -v "below main\|PROGRAM TOTALS\|libc_start\|lang_start\|rust_begin_short\|block_on\|enter_runtime\|triage::main\|cmd::serve::run\|:main$\|0x0000" \
  | head -25
