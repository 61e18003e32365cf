#!/usr/bin/env python3
"""Offline: the events lab's prediction error on saved runs under other choices of fit, each
against the same measured crossing (`events::runout`: every open-loop run out of CPU when its
idle is under 3 % or it did not sustain its rate, split by the rate offered where the fewest
disagree, lowest of ties, the bracket's geometric midpoint). The fitted points are the quick
ladder's rates (10 %, 30 %, 50-95 % of the overload run's served rate in 6 steps; from a denser
ladder the nearest rate to each), the knee split by the rate offered as the lab splits it
(`capacity::analyze::busy_range`), no prediction with |r| < 0.8.

  lab          the busy range (at or above 40 % of the reference), else every unsaturated rate
  cut55/cut65  the cut at 55 / 65 % of the reference
  top3/4/5     the 3 / 4 / 5 highest unsaturated rates below the knee
  cuttop50/60/70  the cut at 50 / 60 / 70 % of the highest unsaturated rate below the knee
  wls1/2/4     weighted least squares, weights rate^1 / ^2 / ^4
  theil-sen    the median of the pairwise slopes (intercept: median residual)
  huber        iteratively reweighted least squares, Huber's k = 1.345
  origin       least squares through idle 100 % at rate 0 (the intercept fixed)
  fallback-top3  the lab's, but under 3 busy rates the 3 highest unsaturated ones
  util-top     not a regression: the highest unsaturated rate over its busy share,
               rate / (1 - idle), for scale

Also lists the rows whose runs do not bracket the crossing (every run out of CPU, or none).

  scripts/events-fits.py results/DIR ... [--rows]
"""
import argparse, csv, math, os, statistics

from events_fitlib import SAT, crossing, fit, ranout, split

ap = argparse.ArgumentParser()
ap.add_argument("dirs", nargs="+")
ap.add_argument("--rows", action="store_true", help="print every row's errors")
a = ap.parse_args()
MIN_R = 0.8
QUICK = [0.1, 0.3] + [0.5 + 0.09 * i for i in range(6)]


def theil_sen(pts):
    if len(pts) < 3:
        return None
    m = statistics.median([(b[1] - p[1]) / (b[0] - p[0]) for i, p in enumerate(pts)
                           for b in pts[i + 1:] if b[0] != p[0]])
    c = statistics.median([p[1] - m * p[0] for p in pts])
    return ((-c / m) if m < 0 else None, fit(pts)[1])


def huber(pts, k=1.345):
    if len(pts) < 3:
        return None
    w = [1.0] * len(pts)
    for _ in range(20):
        W = sum(w)
        mx = sum(wi * p[0] for wi, p in zip(w, pts)) / W
        my = sum(wi * p[1] for wi, p in zip(w, pts)) / W
        sxx = sum(wi * (p[0] - mx) ** 2 for wi, p in zip(w, pts))
        if sxx <= 0:
            return None
        m = sum(wi * (p[0] - mx) * (p[1] - my) for wi, p in zip(w, pts)) / sxx
        c = my - m * mx
        res = [p[1] - (c + m * p[0]) for p in pts]
        s = statistics.median([abs(r) for r in res]) / 0.6745 or 1e-9
        w = [1.0 if abs(r) <= k * s else k * s / abs(r) for r in res]
    return ((-c / m) if m < 0 else None, fit(pts)[1])


def origin(pts):
    if len(pts) < 3:
        return None
    sxy = sum(p[0] * (100 - p[1]) for p in pts)
    return (100 * sum(p[0] ** 2 for p in pts) / sxy if sxy > 0 else None, fit(pts)[1])


def pts(rs):
    return [(float(r["rps"]), float(r["idle_pct"])) for r in rs]


def trusted(f):
    return None if f is None or f[0] is None or abs(f[1]) < MIN_R else f[0]


def estimators(q, ref):
    k = split([(float(r["target_rps"]), ranout(r)) for r in q])[1]
    k = math.inf if k is None else k
    keep = sorted((r for r in q if float(r["target_rps"]) < k and float(r["idle_pct"]) >= SAT),
                  key=lambda r: float(r["rps"]))
    above = lambda cut: [r for r in keep if float(r["rps"]) >= cut]
    busy = above(0.4 * ref)
    top = float(keep[-1]["rps"]) if keep else math.inf

    def lab(b, fn=fit, fb=None):
        f = fn(pts(b)) if len(b) >= 3 else None
        if f is None:
            f = fn(pts(fb if fb is not None else keep))
        return trusted(f)

    return {
        "lab": lab(busy),
        "cut55": lab(above(0.55 * ref)),
        "cut65": lab(above(0.65 * ref)),
        "top3": trusted(fit(pts(keep[-3:]))),
        "top4": trusted(fit(pts(keep[-4:]))),
        "top5": trusted(fit(pts(keep[-5:]))),
        "cuttop50": lab(above(0.5 * top)),
        "cuttop60": lab(above(0.6 * top)),
        "cuttop70": lab(above(0.7 * top)),
        "wls1": lab(busy if len(busy) >= 3 else keep, lambda p: fit(p, [x[0] for x in p])),
        "wls2": lab(busy if len(busy) >= 3 else keep, lambda p: fit(p, [x[0] ** 2 for x in p])),
        "wls4": lab(busy if len(busy) >= 3 else keep, lambda p: fit(p, [x[0] ** 4 for x in p])),
        "theil-sen": lab(busy, theil_sen),
        "huber": lab(busy, huber),
        "origin": lab(busy, origin),
        "fallback-top3": lab(busy, fit, keep[-3:]),
        "util-top": (float(keep[-1]["rps"]) / (1 - float(keep[-1]["idle_pct"]) / 100)
                     if keep else None),
    }, len(busy) >= 3


res, unbracketed, fallback, ratios = {}, [], {}, []
for d in a.dirs:
    rows = list(csv.DictReader(open(os.path.join(d, "raw.csv"))))
    for key in sorted({(r["server"], int(r["cold"]), int(r["rep"])) for r in rows}):
        g = [r for r in rows if (r["server"], int(r["cold"]), int(r["rep"])) == key]
        over = next((r for r in g if r["step"] == "overload"), None)
        rates = [r for r in g if r["step"] == "rate"]
        probes = [r for r in g if r["step"] == "probe"]
        if over is None or len(rates) < 3:
            continue
        name = f"{os.path.basename(d.rstrip('/'))}:{key[0]}@{key[1]}r{key[2]}"
        runs = [over] + rates + probes
        lo, hi = crossing([(float(r["target_rps"]), ranout(r)) for r in runs])
        if not (lo and hi):
            how = "every run out of CPU, down to" if hi else "no run out of CPU, up to"
            edge = min if hi else max
            unbracketed.append(f"{name}: {how} {edge(float(r['target_rps']) for r in runs):.0f} req/s")
            continue
        meas = math.sqrt(lo * hi)
        ratios.append(float(over["rps"]) / meas)
        q = list({id(r): r for r in (min(rates, key=lambda r: abs(float(r["frac"]) - f))
                                      for f in QUICK)}.values())
        est, has_busy = estimators(q, float(over["rps"]))
        err = {n: None if p is None else (p - meas) / meas * 100 for n, p in est.items()}
        for n, e in err.items():
            res.setdefault(n, []).append(e)
        if not has_busy:
            for n in ("lab", "fallback-top3"):
                fallback.setdefault(n, []).append(err[n])
        if a.rows:
            print(f"{name:<44} crossing {meas:7.0f} " + " ".join(
                f"{n} {'-' if e is None else f'{e:+.1f}'}" for n, e in err.items()))


def line(n, v):
    got = sorted(abs(e) for e in v if e is not None)
    if not got:
        return f"{n:<16} no prediction in {len(v)} rows"
    mean = sum(e for e in v if e is not None) / len(got)
    return (f"{n:<16} predicted {len(got):3d}/{len(v):3d}, within 10%: {sum(x <= 10 for x in got):3d}, "
            f"largest {got[-1]:6.1f}%, median |error| {got[len(got) // 2]:4.1f}%, mean {mean:+5.1f}%")


print(f"rows not bracketed ({len(unbracketed)}):")
for u in unbracketed:
    print("  " + u)
print(f"bracketed rows: {len(res.get('lab', []))}; the overload run served {min(ratios):.2f}-"
      f"{max(ratios):.2f}x the crossing (median {sorted(ratios)[len(ratios) // 2]:.2f})")
for n, v in res.items():
    print(line(n, v))
print("rows with under 3 busy rates (the fallback):")
for n, v in fallback.items():
    print(line(n, v))
