"""What the offline events scripts (events-fits.py, events-window.py, events-tool-vs-lab.py,
events-drain.py) share: the lab's saturation reading of a raw.csv row, the fewest-disagreeing
split of runs by rate and the measured crossing over the rates' majorities (as `events::runout`), the (weighted) least-squares line of idle on
rate, and where a run keeps each fit's access log and CPU samples."""
import json, math, os

SAT = 3.0


def ranout(r):
    """A raw.csv row out of CPU: not sustained, or idle under the 3% threshold."""
    return r["sustained"] != "true" or float(r["idle_pct"]) < SAT


def split(runs):
    """(rate, out) -> (highest rate below, lowest above): fewest disagreeing, lowest of ties."""
    v = sorted(runs, key=lambda r: (r[0], r[1]))
    out_below, left_above = 0, sum(1 for r in v if not r[1])
    best = (left_above, 0)
    for i, r in enumerate(v):
        out_below += r[1]
        left_above -= not r[1]
        if out_below + left_above < best[0]:
            best = (out_below + left_above, i + 1)
    i = best[1]
    return (v[i - 1][0] if i > 0 else None, v[i][0] if i < len(v) else None)


def crossing(runs):
    """The measured crossing's bracket, as `events::runout` takes it since cap14: (rate, out)
    runs grouped by rate (a probe repeats a rate exactly), each rate's verdict the majority of
    its runs, rates with as many runs each way left out, then `split`. On runs with one run per
    rate (every run before cap14) it is `split`."""
    votes = {}
    for rate, out in runs:
        v = votes.setdefault(rate, [0, 0])
        v[bool(out)] += 1
    return split([(rate, v[1] > v[0]) for rate, v in votes.items() if v[0] != v[1]])


def fit(pts, w=None):
    """Weighted OLS of idle on rate: (X-intercept or None, Pearson r) or None."""
    if len(pts) < 3:
        return None
    w = w or [1.0] * len(pts)
    W = sum(w)
    mx = sum(wi * p[0] for wi, p in zip(w, pts)) / W
    my = sum(wi * p[1] for wi, p in zip(w, pts)) / W
    sxx = sum(wi * (p[0] - mx) ** 2 for wi, p in zip(w, pts))
    syy = sum(wi * (p[1] - my) ** 2 for wi, p in zip(w, pts))
    sxy = sum(wi * (p[0] - mx) * (p[1] - my) for wi, p in zip(w, pts))
    if sxx <= 0:
        return None
    m = sxy / sxx
    return ((-(my - m * mx) / m) if m < 0 else None, sxy / math.sqrt(sxx * syy) if syy > 0 else 0.0)


def fit_inputs(d):
    """(fit, access log, CPU samples) for every fit in DIR's summary.json whose server's log
    and CPU samples the run kept: what `triage capacity` reads for that row."""
    for f in json.load(open(os.path.join(d, "summary.json")))["fits"]:
        srv, cold, rep = f["server"], f["cold"], f["rep"]
        log = os.path.join(d, "logs", f"{srv}-r{rep}.access.log")
        cpu = os.path.join(d, "cpu", f"{srv}-r{rep}-cold{cold}.csv")
        if os.path.exists(log) and os.path.exists(cpu):
            yield f, log, cpu
