#!/usr/bin/env python3
"""Offline: what the events lab's prediction error would be on runs already made, had the fit
taken other points. The method as it is, the tool included, is re-read by the lab's own code:
`triage lab events --reread DIR ...`; this script re-implements it to try estimators it does
not have (`knee-offered,ranout,vote` is the lab before the one ladder rule of 2026-11-28,
`vote,mean` nearly the lab after it, with exact rates instead of 2% groups). It re-implements, from raw.csv, `capacity::analyze::prediction_fit` (OLS of
idle % on the served rate over the busy range: at or above the cut, idle >= 3 %, below the
knee, the fewest-disagreeing split of the fitted points on idle under 3 %, highest of ties;
else every unsaturated point; no prediction with |r| < 0.8) and `events::runout` (the measured
saturation: the fewest-disagreeing split of every open-loop run, out of CPU when idle < 3 %
or not sustained, lowest of ties, the bracket's geometric midpoint).

Estimators, each against the same measured crossing:
  quick           the quick ladder's rates (10 %, 30 %, 50-95 % of the overload run in 6 steps;
                  from a denser run's ladder, the nearest rate to each), the lab's fit
  vote,mean       the lab's fit, each ladder rate's point the mean of its runs (served rate,
                  idle) over the ladder's and the probes' repeats
  vote+probes     the lab's fit (knee-offered,ranout,vote) with every probe at a rate no
                  earlier run was offered as a point too (its repeats vote)
  quick+probes    the same and the probes (points near the crossing) as fitted points
  quick,knee-all  the quick ladder, its knee read off every run (probes, overload) too
  quick,knee-low  the quick ladder, the knee at the lowest of equally good splits
  quick,failed-out  the quick ladder, a rate not sustained counted as saturated in the fit
                  (as the crossing counts it), knee included
  all             every ladder rate of the run (a denser ladder)
  all+probes      every rate and the probes
  p99<=P          the quick ladder, a rate whose p99 exceeded P ms counted as saturated in the
                  fit and in the measured crossing (--p99 P)
  knee-low/crossing-highest-tie  the lab's fit (knee-low) against the crossing with the
                  highest of equally good splits
  knee-low/crossing-idle-only    ... against the crossing with a run out of CPU on idle alone
                  (a run that fell behind with idle left counts as idle left)
  knee-low/crossing-mid-region   ... against the middle of the rates where runs disagree
                  (lowest run out of CPU, highest with idle left)
  knee-low,throttled>=70%-out    a run throttled in >= 70 % of its CFS periods counted as out of
                  CPU in the fit and in the crossing
  knee-low/crossing-served       the lab's fit against the crossing split by the rate each run
                  *served* (as the fit's knee splits), not offered
  knee-offered    the quick ladder, its knee split by the rate *offered* (as the crossing splits),
                  out of CPU on idle alone; knee-offered,ranout: out as the crossing counts it
                  (idle under 3 % or not sustained). The lab only: a log has no offered rate.

Checked: on the cap7 runs it reproduces the lab's own error_pct (every rate of the ladder) in 33
of 34 rows, the 34th to 0.1 point.

  scripts/events-refit.py results/DIR ... [--p99 50] [--cut 0.4] [--rows]
"""
import argparse, csv, math, os

ap = argparse.ArgumentParser()
ap.add_argument("dirs", nargs="+")
ap.add_argument("--p99", type=float, default=50.0)
ap.add_argument("--cut", type=float, default=0.40, help="the low-rate cut, a fraction of the overload run (the lab: 0.40)")
ap.add_argument("--crossing", choices=["majority", "runs"], default="majority",
                help="the measured crossing: the lab's since cap14 (each rate's majority), or every run alone (before)")
ap.add_argument("--rows", action="store_true", help="print every row's errors")
a = ap.parse_args()
SAT, CUT, MIN_R = 3.0, a.cut, 0.8
QUICK = [0.1, 0.3] + [0.5 + 0.09 * i for i in range(6)]


def split(runs, highest):
    """(rate, out) -> (highest rate below, lowest above, disagreeing)."""
    v = sorted(runs, key=lambda r: (r[0], r[1]))
    out_below, left_above = 0, sum(1 for r in v if not r[1])
    best = (left_above, 0)
    for i, r in enumerate(v):
        if r[1]:
            out_below += 1
        else:
            left_above -= 1
        d = out_below + left_above
        if d < best[0] or (d == best[0] and highest):
            best = (d, i + 1)
    d, i = best
    return (v[i - 1][0] if i > 0 else None, v[i][0] if i < len(v) else None, d)


def fit(pts):
    """OLS of idle on rate: (X-intercept or None, r) or None."""
    n = len(pts)
    if n < 3:
        return None
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    syy = sum((p[1] - my) ** 2 for p in pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    if sxx <= 0:
        return None
    m = sxy / sxx
    r = sxy / math.sqrt(sxx * syy) if syy > 0 else 0.0
    return ((-(my - m * mx) / m) if m < 0 else None, r)


def predict(pts, cut, knee_pts=None, highest=True, knee_runs=None):
    """pts: (served rate, idle %); a saturated point carries idle -1. knee_runs: the knee
    split on (offered rate, out) instead, a point left out when its run's offered rate is at
    or above it (knee_runs[i] is pts[i]'s run)."""
    kp = knee_pts if knee_pts is not None else pts
    if knee_runs is not None:
        k = split(knee_runs, highest)[1]
        k = math.inf if k is None else k
        keep = [p for p, r in zip(pts, knee_runs) if r[0] < k]
    else:
        knee = split([(p[0], p[1] < SAT) for p in kp], highest)[1] if kp else None
        knee = math.inf if knee is None else knee
        keep = [p for p in pts if p[0] < knee]
    f = fit([p for p in keep if p[0] >= cut and p[1] >= SAT])
    if f is None:
        f = fit([p for p in keep if p[1] >= SAT])
    if f is None or f[0] is None or abs(f[1]) < MIN_R:
        return None
    return f[0]


def point(r, p99=None, failed_out=False):
    """(served rate, idle %): the lab fits a run's idle whether or not it sustained its rate;
    with a p99 bound, a run over it counts as saturated; with failed_out, a run that did not
    sustain its rate does (as the measured crossing counts it)."""
    failed = r["sustained"] != "true"
    bad = (failed_out and failed) or (p99 is not None and (failed or float(r["p99_ms"]) > p99))
    return (float(r["rps"]), -1.0 if bad else float(r["idle_pct"]))


def crossing(runs, p99=math.inf, highest=False, idle_only=False, throttled=math.inf,
             served=False):
    """The measured crossing: the fewest-disagreeing split of the runs, out of CPU when idle
    < 3 %, not sustained (unless idle_only), p99 over the bound, or throttled in at least
    `throttled` % of CFS periods; lowest of ties unless highest."""
    ev = [(float(r["rps" if served else "target_rps"]), (not idle_only and r["sustained"] != "true")
           or float(r["idle_pct"]) < SAT or float(r["p99_ms"]) > p99
           or float(r["throttled_pct"] or 0) >= throttled) for r in runs]
    lo, hi, _ = split(ev, highest)
    return math.sqrt(lo * hi) if lo and hi else None


def majority_crossing(runs):
    """The lab's crossing (`events::runout`, since cap14): each offered rate's verdict is the
    majority of its runs (none on a tie), the rates with a verdict split where the fewest
    disagree, lowest of ties; the bracket's geometric midpoint."""
    by = {}
    for r in runs:
        by.setdefault(float(r["target_rps"]), []).append(ran_out(r))
    decided = [(x, 2 * sum(v) > len(v)) for x, v in by.items() if 2 * sum(v) != len(v)]
    if not decided:
        return None
    lo, hi, _ = split(decided, False)
    return math.sqrt(lo * hi) if lo and hi else None


def ran_out(r):
    return r["sustained"] != "true" or float(r["idle_pct"]) < SAT


def vote(runs, r):
    """The majority verdict of every run at r's offered rate, r's own on a tie (the lab's knee
    since 2026-11-28: `capacity::analyze::majority`)."""
    v = [ran_out(x) for x in runs if x["target_rps"] == r["target_rps"]]
    out = sum(v)
    return ran_out(r) if 2 * out == len(v) else 2 * out > len(v)


def grouped(runs, within=0.0):
    """Every run a point unless it repeats an earlier one (`capacity::analyze::offered_order`):
    in time order, a run whose offered rate lies within `within` (the lab: 0, its repeats are
    exact; the tool: 2 %) of an earlier group's first run votes in that group; else it starts a
    group of its own, a point of the line. Returns (points, knee_runs) for `predict`."""
    groups = []
    for r in runs:
        x = float(r["target_rps"])
        g = next((g for g in groups if abs(x - float(g[0]["target_rps"])) <= within * float(g[0]["target_rps"])), None)
        if g is None:
            groups.append([r])
        else:
            g.append(r)
    pts, kr = [], []
    for g in groups:
        v = [ran_out(x) for x in g]
        out = sum(v)
        verdict = v[0] if 2 * out == len(v) else 2 * out > len(v)
        pts.append(point(g[0]))
        kr.append((float(g[0]["target_rps"]), verdict))
    return pts, kr


def mean_point(runs, r):
    """A ladder rate's point as the mean of every run at its offered rate (the ladder's and the
    probes' repeats): (mean served rate, mean idle %)."""
    at = [x for x in runs if x["target_rps"] == r["target_rps"] and x["step"] != "overload"]
    return (sum(float(x["rps"]) for x in at) / len(at), sum(float(x["idle_pct"]) for x in at) / len(at))


def region_crossing(runs):
    """The middle of the rates where runs disagree: the geometric midpoint of the lowest run
    out of CPU and the highest with idle left (the lab's crossing where they do not overlap)."""
    ev = [(float(r["target_rps"]), r["sustained"] != "true" or float(r["idle_pct"]) < SAT)
          for r in runs]
    outs = [x for x, o in ev if o]
    left = [x for x, o in ev if not o]
    if not outs or not left or min(outs) > max(left):
        return crossing(runs)
    return math.sqrt(min(outs) * max(left))


res, names = {}, []
for d in a.dirs:
    rows = list(csv.DictReader(open(os.path.join(d, "raw.csv"))))
    keys = sorted({(r["server"], int(r["cold"]), int(r["rep"])) for r in rows})
    for k in keys:
        g = [r for r in rows if (r["server"], int(r["cold"]), int(r["rep"])) == k]
        over = next((r for r in g if r["step"] == "overload"), None)
        rates = [r for r in g if r["step"] == "rate"]
        probes = [r for r in g if r["step"] == "probe"]
        if over is None or len(rates) < 3:
            continue
        ref = float(over["rps"])
        runs = [over] + rates + probes
        meas = majority_crossing(runs) if a.crossing == "majority" else crossing(runs)
        q = list({id(r): r for r in (min(rates, key=lambda r: abs(float(r["frac"]) - f))
                                      for f in QUICK)}.values())
        P = lambda rs, p99=None, fo=False: [point(r, p99, fo) for r in rs]
        kl = predict(P(q), CUT * ref, highest=False)
        # A run throttled in at least 70 % of its periods counted as out of CPU, in the fit
        # (as saturated) and in the crossing alike.
        thr = [(float(r["rps"]), -1.0 if float(r["throttled_pct"] or 0) >= 70 else
                float(r["idle_pct"])) for r in q]
        est = {
            "quick": (predict(P(q), CUT * ref), meas),
            "quick+probes": (predict(P(q + probes), CUT * ref), meas),
            "quick,knee-all": (predict(P(q), CUT * ref, P(q + probes + [over])), meas),
            "quick,knee-low": (predict(P(q), CUT * ref, highest=False), meas),
            "quick,failed-out": (predict(P(q, fo=True), CUT * ref), meas),
            "quick,failed-out,knee-low": (predict(P(q, fo=True), CUT * ref, highest=False), meas),
            "knee-low/crossing-highest-tie": (kl, crossing(runs, highest=True)),
            "knee-low/crossing-idle-only": (kl, crossing(runs, idle_only=True)),
            "knee-low/crossing-mid-region": (kl, region_crossing(runs)),
            "knee-low,throttled>=70%-out": (predict(thr, CUT * ref, highest=False),
                                            crossing(runs, throttled=70.0)),
            "knee-low/crossing-served": (kl, crossing(runs, served=True)),
            "knee-offered": (predict(P(q), CUT * ref, highest=False, knee_runs=[
                (float(r["target_rps"]), float(r["idle_pct"]) < SAT) for r in q]), meas),
            "knee-offered,ranout": (predict(P(q), CUT * ref, highest=False, knee_runs=[
                (float(r["target_rps"]), r["sustained"] != "true" or float(r["idle_pct"]) < SAT)
                for r in q]), meas),
            "knee-offered,ranout,vote": (predict(P(q), CUT * ref, highest=False, knee_runs=[
                (float(r["target_rps"]), vote(runs, r)) for r in q]), meas),
            "vote+probes": (predict(*grouped(q + probes)[:1], CUT * ref,
                                                      highest=False,
                                                      knee_runs=grouped(q + probes)[1]), meas),
            "vote,mean": (predict([mean_point(runs, r) for r in q], CUT * ref, highest=False,
                                  knee_runs=[(float(r["target_rps"]), vote(runs, r)) for r in q]),
                          meas),
            "all": (predict(P(rates), CUT * ref), meas),
            "all+probes": (predict(P(rates + probes), CUT * ref), meas),
            f"p99<={a.p99:g}": (predict(P(q, a.p99), CUT * ref), crossing(runs, a.p99)),
        }
        name = f"{os.path.basename(d.rstrip('/'))}:{k[0]}@{k[1]}r{k[2]}"
        names.append(name)
        for n, (p, m) in est.items():
            res.setdefault(n, []).append(None if p is None or m is None else (p - m) / m * 100)
        if a.rows:
            print(f"{name:<44} crossing {meas or 0:7.0f} overload/crossing "
                  f"{ref / meas if meas else float('nan'):.2f}  " + "  ".join(
                      f"{n} {'-' if (p is None or m is None) else f'{(p - m) / m * 100:+.1f}%'}"
                      for n, (p, m) in est.items()))
for n, v in res.items():
    got = sorted(abs(e) for e in v if e is not None)
    if not got:
        continue
    pos = sum(1 for e in v if e is not None and e > 0)
    print(f"{n:<30} predicted {len(got):2d}/{len(v):2d}, within 10%: {sum(x <= 10 for x in got):2d}, "
          f"max |error| {got[-1]:5.1f}%, median |error| {got[len(got) // 2]:4.1f}%, above the "
          f"crossing {pos}")
