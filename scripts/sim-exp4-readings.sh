#!/bin/bash
# Every reading of seed 001 exp 4 tried for issue 21 (docs/sim.md, "Experiment 4 per client
# machine" and "The 4.4BSD base"): one markdown row per reading, exp 1, 3 and 4 at seed ${SEED:-1}. Needs target/ci/triage
# (cargo build --profile ci -p triage). Usage: bash scripts/sim-exp4-readings.sh > results/x.md
T=${T:-target/ci/triage}
row() {
  local name="$1"; shift
  e1=$($T sim pos --exp 1 --no-rw-auto --rw 3,6,9 --no-context --seed ${SEED:-1} --json "$@" 2>/dev/null)
  e3=$($T sim pos --exp 3 --no-rw-auto --rw 3,6,9 --no-context --seed ${SEED:-1} --json "$@" 2>/dev/null)
  e4=$($T sim pos --exp 4 --no-rw-auto --rw 3,6,9 --seed ${SEED:-1} --json "$@" 2>/dev/null)
  python3 - "$name" "$*" <<PY
import json,sys
e1=json.loads('''$e1''');e3=json.loads('''$e3''');e4=json.loads('''$e4''')
def rw(d): return "/".join("%.1f"%(v['t1_mean_impr']*100) for v in d['runs'][0]['variants'][1:4])
x=e4['exp4']
f=lambda a:"/".join("%.1f"%(v*100) for v in a)
print("| %s | \`%s\` | %s | %s | %s | %s | %s | %s |"%(sys.argv[1],sys.argv[2],rw(e1),rw(e3),f(x['best_impr']),f(x['content_impr']),":".join("%.2f"%v for v in x['pl_ratio']),":".join("%.2f"%v for v in x['lrq_ratio'])))
PY
}
echo "| reading | flags | exp 1 RW 3/6/9 | exp 3 RW 3/6/9 | exp 4 best, 3/6/9/12 | content | PL ratio | LRQ ratio |"
echo "|---|---|---|---|---|---|---|---|"
row "per browser, 500 ms (default)"
row "per machine, 500 ms" --arrivals machines
row "per machine, 1 s" --arrivals machines --random-window 1s
row "per machine, 2 s" --arrivals machines --random-window 2s
row "per machine, stagger 50 ms" --arrivals machines --stagger 50ms
row "per machine, stagger 200 ms" --arrivals machines --stagger 200ms
row "per machine, FIFO link" --arrivals machines --link fifo
row "per machine, 2 s, FIFO link" --arrivals machines --random-window 2s --link fifo
row "per machine, t1 at first packet" --arrivals machines --t1-first-packet
row "per machine, 2 s, t1 at first packet" --arrivals machines --random-window 2s --t1-first-packet
row "per machine, Apache 1.2.5 pool" --arrivals machines --pool 5,5,10,150
row "per machine, pool 10/10/20" --arrivals machines --pool 10,10,20,150
row "per machine, pool 30/30/60" --arrivals machines --pool 30,30,60,150
row "per machine, 2 s, NIC PIO in the writer" --arrivals machines --random-window 2s --nic dma --per-kib 440us
row "same, t1 at first packet" --arrivals machines --random-window 2s --nic dma --per-kib 440us --t1-first-packet
row "4.4BSD base (wake-up preemption, posbsd)" --base bsd
row "4.4BSD base, POS FIFO tail" --base bsd-fifo-pos
row "4.4BSD base, quantum 10 ms" --base bsd --quantum 10ms
row "4.4BSD base, per machine" --base bsd --arrivals machines
row "4.4BSD base, per machine, 2 s, t1 at first packet" --base bsd --arrivals machines --random-window 2s --t1-first-packet
row "4.4BSD base, window 100 ms" --base bsd --random-window 100ms
