#!/usr/bin/env python3
"""Offline: (superseded for the method as it is by `triage lab events --reread DIR ...`, which
runs the lab's fit and the tool on a saved run with today's code; kept for its --drain-share
and --knee-out trials, which re-implement the rules of 2026-11-27) `triage capacity` (a given
binary) on the access logs and CPU samples a `triage lab
events` run saved, as the lab runs it (`--steps 2s`, the row's cut), against the lab's own
prediction in that run's summary.json: the run's `tool_vs_lab_pct` again, with another tool.
Prints each row's steps found, both predictions and their difference, then each run's largest.
With --refit the lab's prediction is not the one the run made but the one its rates in raw.csv
give on the current method (`events::summary::fit_row`: the knee split by the rate offered,
a run out of CPU when idle < 3 % or not sustained, the lowest of equal splits; the busy range
at or above the cut, else every unsaturated rate; no prediction with |r| < 0.8), with its error
against the run's measured crossing (cpu_out_rps).

With --drain-share P the tool's prediction is recomputed from the steps it printed (`--json`) as
`capacity::analyze` makes it, a step out of CPU for the knee when its drain is more than P% of
its requests (`capacity::steps::fell_behind`; the binary's own threshold is DRAIN_SHARE_MAX), so
that thresholds can be compared without a build per value; --cache DIR keeps the tool's output
per row so that a second pass does not run it again.

  scripts/events-tool-vs-lab.py target/ci/triage results/DIR [results/DIR2 ...] [--all] [--refit]
      [--knee-out ranout|idle|served|served-behind|main] [--drain-share P] [--cache DIR]
"""
import argparse, csv, json, math, os, subprocess

from events_fitlib import SAT, fit_inputs, split

MIN_R = 0.8


def split_above(runs):
    """The lowest (key, out) above the fewest-disagreeing split, the lowest of ties."""
    above = split(runs)[1]
    return math.inf if above is None else above


def line(pts):
    """OLS of idle on rate: (X-intercept or None, r), or None under 3 points or no spread."""
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
    return ((-(my - m * mx) / m) if m < 0 else None, sxy / math.sqrt(sxx * syy) if syy > 0 else 0.0)


def lab_refit(rates, cut, knee_out="ranout"):
    """The lab's prediction from its raw.csv rows of step "rate" on the current method; with
    knee_out "idle" the knee counts a rate out of CPU on idle alone, with "served" on idle or
    served under 97 % of offered (what a log can show, p99 left out); with "main" the knee
    splits by the rate served, out on idle alone (the method until cap10); with
    "served-behind" on idle, served under 97 %, or served less than a lower rate offered did
    (what a log's steps show: `triage capacity`'s time order)."""
    served_before = []
    for r in rates:
        served_before.append(max([float(q["rps"]) for q in rates
                                  if float(q["target_rps"]) < float(r["target_rps"])],
                                 default=-math.inf))
    out = lambda r, hi: (not float(r["idle_pct"]) >= SAT or {
        "ranout": r["sustained"] != "true",
        "idle": False,
        "main": False,
        "served": float(r["rps"]) < 0.97 * float(r["target_rps"]),
        "served-behind": float(r["rps"]) < 0.97 * float(r["target_rps"])
        or float(r["rps"]) < hi}[knee_out])
    key = "rps" if knee_out == "main" else "target_rps"
    knee = split_above([(float(r[key]), out(r, hi)) for r, hi in zip(rates, served_before)])
    keep = [(float(r["rps"]), float(r["idle_pct"])) for r in rates
            if float(r[key]) < knee and float(r["idle_pct"]) >= SAT]
    f = line([p for p in keep if p[0] >= cut]) or line(keep)
    return f[0] if f and f[0] is not None and abs(f[1]) >= MIN_R else None


def tool_refit(buckets, cut, share):
    """The tool's prediction (`predicted_peak_rps`, not filtered on r) from its steps in time
    order, a step out of CPU when its idle is under 3 %, it served less than an earlier step,
    or its drain is more than `share` % of its requests; and whether it is trusted (a busy-range
    or unsaturated fit with |r| >= 0.8)."""
    hi, order = -math.inf, []
    for i, b in enumerate(buckets):
        behind = b["rate"] < hi or b.get("drain_requests", 0) > share / 100 * b["requests"]
        hi = max(hi, b["rate"])
        order.append((i, behind or not b["idle_pct"] >= SAT))
    knee = split_above(order)
    pts = [(b["rate"], b["idle_pct"]) for b in buckets]
    keep = [p for i, p in enumerate(pts) if i < knee and p[1] >= SAT]
    f = line([p for p in keep if p[0] >= cut]) or line(keep)
    if f:
        return f[0], abs(f[1]) >= MIN_R
    f = line(pts)
    return f and f[0], False

ap = argparse.ArgumentParser()
ap.add_argument("triage")
ap.add_argument("dirs", nargs="+")
ap.add_argument("--all", action="store_true", help="print every row, not only those over 1%")
ap.add_argument("--refit", action="store_true", help="the lab's prediction on the current method")
ap.add_argument("--drain-share", type=float, help="recompute the tool's prediction with this "
                "threshold (%%) on a step's drain")
ap.add_argument("--cache", help="a directory keeping the tool's --json output per row")
ap.add_argument("--knee-out", default="ranout",
                choices=["ranout", "idle", "served", "served-behind", "main"],
                help="with --refit: what counts a rate out of CPU for the knee (the lab: ranout)")
a = ap.parse_args()
errs, allw, terrs = [], [], []
for d in a.dirs:
    worst = None
    raw = list(csv.DictReader(open(os.path.join(d, "raw.csv")))) if a.refit else []
    for f, log, cpu in fit_inputs(d):
        srv, cold, rep = f["server"], f["cold"], f["rep"]
        cached = a.cache and os.path.join(
            a.cache, f"{os.path.basename(d.rstrip('/'))}-{srv}-r{rep}-cold{cold}.json")
        if cached and os.path.exists(cached):
            t = json.load(open(cached))
        else:
            r = subprocess.run([a.triage, "capacity", "--log", log, "--cpu", cpu, "--steps",
                                "2s", "--low-rate-cut", str(f["cut_rps"]), "--json"],
                               capture_output=True, text=True)
            t = json.loads(r.stdout) if r.returncode == 0 else None
            if cached:
                os.makedirs(a.cache, exist_ok=True)
                json.dump(t, open(cached, "w"))
        tool = t and t["predicted_peak_rps"]
        if t and a.drain_share is not None:
            tool, trusted = tool_refit(t["buckets"], f["cut_rps"], a.drain_share)
        lab = f.get("predicted_rps")
        m = f.get("cpu_out_rps")
        if a.refit:
            rates = [r for r in raw if (r["server"], int(r["cold"]), int(r["rep"]), r["step"])
                     == (srv, cold, rep, "rate")]
            lab = lab_refit(rates, f["cut_rps"], a.knee_out)
            errs.append(None if lab is None or not m else (lab - m) / m * 100)
        # The tool's own error: its prediction where it is trusted as the lab trusts its own
        # (a busy-range or unsaturated fit, |r| >= 0.8: no "too weak" warning).
        if not (t and a.drain_share is not None):
            trusted = t and t["prediction_range"] != "all" and not any(
                "too weak" in w for w in t["warnings"])
        terrs.append(None if not (tool and trusted) or not m else (tool - m) / m * 100)
        diff = abs(tool - lab) / lab * 100 if tool and lab else None
        if diff is not None:
            worst = diff if worst is None else max(worst, diff)
        if a.all or (diff or 0) > 1:
            print(f"{os.path.basename(d.rstrip('/')):<18} {srv:<15} {cold:>6} lab {lab or 0:7.0f} "
                  f"tool {tool or 0:7.0f} ({len(t['buckets']) if t else 0} steps) diff "
                  f"{'-' if diff is None else f'{diff:.2f}%'} (the run's own: "
                  f"{f.get('tool_vs_lab_pct') and round(f['tool_vs_lab_pct'], 2)})")
    print(f"{d}: largest {'-' if worst is None else f'{worst:.2f}%'}")
    allw.append(worst)
w = sorted(x for x in allw if x is not None)
print(f"tool vs lab, each run's largest: {' '.join(f'{x:.2f}' for x in allw if x is not None)}; "
      f"runs within 5%: {sum(x <= 5 for x in w)} of {len(w)}")
got = sorted(abs(e) for e in terrs if e is not None)
print(f"the tool: predicted {len(got)}/{len(terrs)}, within 10% of the crossing: "
      f"{sum(x <= 10 for x in got)}, largest {got[-1] if got else 0:.1f}%")
if a.refit:
    got = sorted(abs(e) for e in errs if e is not None)
    print(f"the lab refitted: predicted {len(got)}/{len(errs)}, within 10% of the crossing: "
          f"{sum(x <= 10 for x in got)}, largest {got[-1] if got else 0:.1f}%")
