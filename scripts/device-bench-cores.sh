#!/usr/bin/env bash
# triage bench static at 1, 2, 4 and 8 cores, plain then with gzip, from the folder
# scripts/device-pack.sh builds (nothing installed on the machine it runs on). Within 6 minutes:
# each benchmark runs 2 rounds of 3 s per target and core count, and is cut off at 170 s.
#
# Usage: scripts/device-bench-cores.sh DIR OUT [CORES]
#   DIR    the packed folder (device-pack)
#   OUT    where the results go ($OUT on the device machine): OUT/cores/summary.json,
#          OUT/gzip/summary.json and OUT/bench.log
#   CORES  the core counts (default 1,2,4,8)
# ROUNDS and DURATION (env) set the plain run's rounds and seconds per run (default 2 and 3s),
# GZIP_ROUNDS the gzip run's rounds (default ROUNDS), KINDS which benchmarks run (default
# "cores gzip"; KINDS=gzip runs the compressed one alone); TIMEOUT cuts each benchmark off (default
# 170 s: about 4 x 3 x ROUNDS x (DURATION + 1 s) is what one takes at four core counts).
# The benchmark finds nginx and wrk through PATH (DIR/bin first) and runs the server through
# TRIAGE_BIN (the wrapper); a layout the machine cannot hold is refused with the reason.
set -uo pipefail
dir=$(readlink -f "${1:?usage: device-bench-cores.sh DIR OUT [CORES]}")
out=${2:?usage: device-bench-cores.sh DIR OUT [CORES]}
cores=${3:-1,2,4,8}
mkdir -p "$out/cores" "$out/gzip"
out=$(readlink -f "$out")
export PATH="$dir/bin:$PATH"
export TRIAGE_BIN="$dir/bin/triage"
log="$out/bench.log"
work=$(mktemp -d /tmp/device-bench.XXXXXX)
{
    echo "== $(date -u +%FT%TZ) $(uname -srm), $(nproc) CPUs, affinity $(grep Cpus_allowed_list /proc/self/status)"
    ok=1
    triage --version || ok=0
    nginx -v 2>&1 || ok=0
    # wrk prints its version and exits 1.
    v=$(wrk --version 2>&1 | head -1); echo "$v"; case "$v" in wrk*) ;; *) ok=0 ;; esac
    [ "$ok" = 1 ] || { echo "a carried program does not start"; exit 1; }
} 2>&1 | tee "$log"
[ "${PIPESTATUS[0]}" = 0 ] || exit 1
rc=0
for kind in ${KINDS:-cores gzip}; do
    rounds=${ROUNDS:-2}
    [ "$kind" = gzip ] && rounds=${GZIP_ROUNDS:-$rounds}
    args=(bench static --cores "$cores" --rounds "$rounds" --duration "${DURATION:-3s}" --out "$work/$kind")
    [ "$kind" = gzip ] && args+=(--gzip 6 --size 80000)
    echo "== triage ${args[*]}" | tee -a "$log"
    timeout -k 10 "${TIMEOUT:-170}" triage "${args[@]}" 2>&1 | tee -a "$log"
    st=${PIPESTATUS[0]}
    [ "$st" = 0 ] || { echo "== exit $st" | tee -a "$log"; rc=1; }
    f=$(find "$work/$kind" -name summary.json | head -1)
    [ -n "$f" ] && cp "$f" "$out/$kind/summary.json"
done
rm -rf "$work"
exit $rc
