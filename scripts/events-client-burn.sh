#!/usr/bin/env bash
# events-client-burn.sh: alternate 3 nice-10 CPU burners on CPU 1 (like the helpers' builds) vs none; triage near saturation
cd "$(dirname "$0")/.."
for i in 1 2 3; do
  for b in 0 3; do
    pids=()
    for _ in $(seq $b); do taskset -c 1 nice -n 10 sh -c 'while :; do :; done' & pids+=($!); done
    echo "== rep $i burners $b"
    DUR=3s scripts/events-lowrate.sh results/cap4-burn-$i-$b triage 8000 9500 2>&1 | grep -v "^rate"
    for p in "${pids[@]}"; do kill $p; done
  done
done
