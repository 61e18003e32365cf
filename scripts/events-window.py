#!/usr/bin/env python3
"""Offline: how the events lab's prediction error scales with the seconds each fitted rate is
read over, from saved quick runs' per-second CPU samples (`cpu/SERVER-r0-coldN.csv`) and
access logs (`logs/SERVER-r0.access.log`, counted per second). For each row with the quick
ladder (8 rates) whose fit the lab made (the busy range, else every unsaturated rate, from
raw.csv, the knee on the rate offered), each fitted rate is matched to its run of whole seconds
in the log, and the line is fitted again with each rate's request rate and idle share read over
1 s (each of its first three seconds alone), 2 s (its first two, its last two) and 3 s; the
error is against the row's measured crossing (as `events::runout`). If the noise of a rate's
reading is white at the scale of seconds, the spread of the errors falls as 1/sqrt(seconds).

  scripts/events-window.py results/DIR ... [--cache DIR] [--seconds]   (counting a run's logs takes a minute)
"""
import argparse, collections, csv, datetime, math, os, subprocess

from events_fitlib import SAT, crossing, ranout, split

ap = argparse.ArgumentParser()
ap.add_argument("dirs", nargs="+")
ap.add_argument("--cache", default="/tmp/events-window-counts")
ap.add_argument("--seconds", action="store_true",
                help="print each fitted rate's seconds: requests and idle %% of each")
a = ap.parse_args()


def counts(d, srv):
    """Requests per whole second of a server's access log (cached)."""
    log = os.path.join(d, "logs", f"{srv}-r0.access.log")
    if not os.path.exists(log):
        return None
    cache = os.path.join(a.cache, os.path.basename(d.rstrip("/")), f"{srv}.txt")
    if not os.path.exists(cache):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        out = subprocess.run(f"cut -d'[' -f2 '{log}' | cut -c1-26 | uniq -c", shell=True,
                             check=True, capture_output=True, text=True).stdout
        open(cache, "w").write(out)
    c = collections.Counter()
    for line in open(cache):
        n, k = line.split(None, 1)
        try:
            c[int(datetime.datetime.strptime(k.strip(), "%d/%b/%Y:%H:%M:%S %z").timestamp())] += int(n)
        except ValueError:
            pass
    return c


def seconds(d, srv, cold, quota):
    """Runs of whole seconds at one rate: [(second, requests, idle %)]."""
    f = os.path.join(d, "cpu", f"{srv}-r0-cold{cold}.csv")
    c = counts(d, srv)
    if c is None or not os.path.exists(f):
        return None
    s = [tuple(map(float, l.split(","))) for l in open(f) if l[0].isdigit()]
    secs = [(int(round(p[0])), c.get(int(round(p[0])), 0), (q[3] - p[3]) / (quota * (q[0] - p[0])) * 100)
            for p, q in zip(s, s[1:]) if abs(q[0] - p[0] - 1) < 0.01]
    runs, cur = [], []
    for x in secs:
        if cur and x[0] == cur[-1][0] + 1 and x[1] > 20 and abs(x[1] - cur[-1][1]) <= 0.12 * cur[-1][1]:
            cur.append(x)
        else:
            if len(cur) >= 2:
                runs.append(cur)
            cur = [x] if x[1] > 20 else []
    if len(cur) >= 2:
        runs.append(cur)
    return runs


def xint(pts):
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    m = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx > 0 else 0
    return -(my - m * mx) / m if m < 0 else None


agg = collections.defaultdict(list)
for d in a.dirs:
    rows = list(csv.DictReader(open(os.path.join(d, "raw.csv"))))
    summ = os.path.join(d, "summary.json")
    quota = 0.2
    if os.path.exists(summ):
        import json
        quota = json.load(open(summ))["params"].get("quota", 0.2)
    for key in sorted({(r["server"], int(r["cold"])) for r in rows if r["rep"] == "0"}):
        g = [r for r in rows if (r["server"], int(r["cold"])) == key and r["rep"] == "0"]
        over = next((r for r in g if r["step"] == "overload"), None)
        rates = [r for r in g if r["step"] == "rate"]
        if over is None or len(rates) != 8:
            continue
        lo, hi = crossing([(float(r["target_rps"]), ranout(r)) for r in [over] + rates +
                          [r for r in g if r["step"] == "probe"]])
        if not (lo and hi):
            continue
        meas = math.sqrt(lo * hi)
        k = split([(float(r["target_rps"]), ranout(r)) for r in rates])[1] or math.inf
        keep = [r for r in rates if float(r["target_rps"]) < k and float(r["idle_pct"]) >= SAT]
        busy = [r for r in keep if float(r["rps"]) >= 0.4 * float(over["rps"])]
        use = busy if len(busy) >= 3 else keep
        st = seconds(d, key[0], key[1], quota)
        if len(use) < 3 or not st:
            continue
        m = []
        for r in use:
            x = min(st, key=lambda s: abs(sum(y[1] for y in s) / len(s) - float(r["rps"])))
            if abs(sum(y[1] for y in x) / len(x) - float(r["rps"])) > 0.05 * float(r["rps"]):
                break
            m.append(x)
        if len(m) != len(use):
            continue
        if a.seconds:
            for t in m:
                print(f"{os.path.basename(d.rstrip('/'))} {key[0]}@{key[1]}: " + ", ".join(
                    f"{y[1]} req {y[2]:.1f}% idle" for y in t[:3]))

        def err(sel):
            p = xint([(sum(y[1] for y in t) / len(t), sum(y[2] for y in t) / len(t))
                      for t in (sel(s) for s in m)])
            return None if p is None else (p - meas) / meas * 100

        agg["lab (raw.csv)"].append((xint([(float(r["rps"]), float(r["idle_pct"])) for r in use]) - meas) / meas * 100
                                    if xint([(float(r["rps"]), float(r["idle_pct"])) for r in use]) else None)
        agg["3 s"].append(err(lambda s: s[:3]))
        for i in range(2):
            agg["2 s"].append(err(lambda s, i=i: s[i:i + 2] if len(s) >= i + 2 else s[-2:]))
        for i in range(3):
            agg["1 s"].append(err(lambda s, i=i: s[i:i + 1] if len(s) > i else s[-1:]))

for n, v in agg.items():
    g = sorted(e for e in v if e is not None)
    q = lambda f: g[int(f * (len(g) - 1))]
    ab = sorted(abs(e) for e in g)
    print(f"{n:<14} fits {len(g):3d}  median error {q(.5):+5.1f}%  spread (IQR/1.349) {(q(.75) - q(.25)) / 1.349:5.1f}%  "
          f"median |error| {ab[len(ab) // 2]:5.1f}%  within 10%: {sum(x <= 10 for x in ab) / len(ab) * 100:3.0f}%")
