#!/usr/bin/env bash
# front-ab.sh: the front end's CPU per request beside HAProxy's, and an A/B between two triage
# builds (docs/front.md, "CPU per request under the cluster lab's load").
#
#   scripts/front-ab.sh [-r REPS] [-k ROUNDS] [-o DIR] BIN_A [BIN_B] [-- LAB_ARGS...]
#
# Each round runs `BIN lab cluster --quick --nodes 4 --reps REPS --only chbl,haproxy-uri` for
# every binary given (A then B, B then A in odd rounds): the same trace and back ends (each
# binary's own `triage serve`), `triage front` (chbl) and HAProxy (`balance uri`, the emitted
# configuration) interleaved point by point, CPU per request read by the lab from each front
# end's /proc/PID/stat. It prints, per run, the lab's ratio with its ci95, and at the end, per
# binary, the ratios of every interleaved pair (chbl rep i over haproxy-uri rep i) pooled over
# the rounds, with a seeded bootstrap ci95, and B's pooled ratio over A's.
#
# FRONT_AB_ARGS_A and FRONT_AB_ARGS_B, if set, are lab flags added to A's or B's runs, e.g.
# FRONT_AB_ARGS_B="--front-engine relay" (A/B of the front end's engines with one binary).
# FRONT_AB_ENV_B, if set, is a list of VAR=VALUE words put in the environment of B's runs
# (the lab passes its environment on to the front ends it starts). FRONT_AB_HOOK_B, if set, is a command run in the background during B's runs (and stopped
# after each): an A/B of a run-time setting with BIN_B = BIN_A, e.g. one that changes the
# scheduling of every `triage front` process it finds.
#
# Run it under the lab lock: flock /tmp/lab.lock /work/notes/quiet0.sh scripts/front-ab.sh ...
# Results: DIR (default results/front-ab/UTC-TIME)/<round>-<a|b>/summary.json.
set -euo pipefail
reps=5 rounds=1 out=""
while getopts "r:k:o:" o; do
  case $o in
    r) reps=$OPTARG ;;
    k) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n 2,16p "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n 2,16p "$0" >&2; exit 2; }
bins=("$1"); shift
if [ $# -ge 1 ] && [ "$1" != "--" ]; then bins+=("$1"); shift; fi
[ "${1:-}" = "--" ] && shift
out=${out:-results/front-ab/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
[ "${AB_REPORT_ONLY:-}" = 1 ] && rounds=0
names=(a b)
for ((k = 0; k < rounds; k++)); do
  order=(0 1)
  [ $((k % 2)) = 1 ] && order=(1 0)
  for i in "${order[@]}"; do
    [ "$i" -lt "${#bins[@]}" ] || continue
    dir="$out/$k-${names[$i]}"
    echo "front-ab: round $((k + 1))/$rounds, ${names[$i]} = ${bins[$i]}" >&2
    hook=""
    if [ "$i" = 1 ] && [ -n "${FRONT_AB_HOOK_B:-}" ]; then
      bash -c "$FRONT_AB_HOOK_B" &
      hook=$!
    fi
    # The lab exits non-zero when a goal or its simulator check fails; the figures are there.
    envs=() extra=()
    [ "$i" = 1 ] && read -r -a envs <<<"${FRONT_AB_ENV_B:-}"
    if [ "$i" = 1 ]; then read -r -a extra <<<"${FRONT_AB_ARGS_B:-}"; else read -r -a extra <<<"${FRONT_AB_ARGS_A:-}"; fi
    env "${envs[@]}" "${bins[$i]}" lab cluster --quick --nodes 4 --reps "$reps" --only chbl,haproxy-uri \
      --out "$dir" "${extra[@]}" "$@" >"$dir.log" 2>&1 || true
    if [ -n "$hook" ]; then kill "$hook" 2>/dev/null || true; wait "$hook" 2>/dev/null || true; fi
    [ -f "$dir/summary.json" ] || { echo "front-ab: no summary in $dir (see $dir.log)" >&2; exit 1; }
  done
done
python3 - "$out" "${#bins[@]}" <<'EOF'
import json, random, sys, glob, os
out, nbins = sys.argv[1], int(sys.argv[2])
pairs = {n: [] for n in "ab"[:nbins]}
for d in sorted(glob.glob(os.path.join(out, "*-[ab]"))):
    s = json.load(open(os.path.join(d, "summary.json")))
    name = d[-1]
    r = s.get("front_cpu_vs_haproxy") or {}
    ci = r.get("ci95") or [float("nan")] * 2
    ci = {"low": ci[0], "high": ci[1]} if isinstance(ci, list) else ci
    pts = [p for p in s["points"] if p["role"] == "headline"]
    cpu = {(p["variant"], p["rep"]): p["front_cpu_us_per_req"] for p in pts}
    rps = {(p["variant"], p["rep"]): p["rps"] for p in pts}
    got = []
    for (v, rep), c in cpu.items():
        h = cpu.get(("haproxy-uri", rep))
        if v == "chbl" and h:
            got.append(c / h)
            pairs[name].append((c / h, c, h, rps[(v, rep)], rps[("haproxy-uri", rep)]))
    prof = (s.get("build") or {}).get("profile", "?")
    print(f"{os.path.basename(d)} ({prof}): chbl/haproxy-uri {r.get('value', float('nan')):.3f} "
          f"ci95 [{ci.get('low', float('nan')):.3f}, {ci.get('high', float('nan')):.3f}]; "
          "pairs " + " ".join(f"{x:.2f}" for x in got))
rng = random.Random(1)
def boot(v, n=4000):
    ms = sorted(sum(rng.choice(v) for _ in v) / len(v) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n)]
means = {}
for name, v in pairs.items():
    if not v:
        continue
    r = [x[0] for x in v]
    m = sum(r) / len(r)
    means[name] = r
    lo, hi = boot(r)
    f = lambda i: sum(x[i] for x in v) / len(v)
    print(f"{name}: {len(r)} pairs, chbl/haproxy-uri mean {m:.3f} ci95 [{lo:.3f}, {hi:.3f}]; "
          f"chbl {f(1):.1f} us/req at {f(3):.0f} req/s, haproxy-uri {f(2):.1f} us/req at {f(4):.0f} req/s")
if len(means) == 2:
    a, b = means["a"], means["b"]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    bs = sorted((sum(rng.choice(b) for _ in b) / len(b)) / (sum(rng.choice(a) for _ in a) / len(a))
                for _ in range(4000))
    print(f"b/a: {mb / ma:.3f} ci95 [{bs[100]:.3f}, {bs[3899]:.3f}]")
EOF
