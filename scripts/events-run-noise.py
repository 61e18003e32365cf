#!/usr/bin/env python3
"""How far one open-loop run's CPU per request lies from its neighbours near the knee.

For every row (server, cold count) of the given `triage lab events` runs (raw.csv), the
sustained open-loop runs (ladder rates, probes, the overload run when sustained) at or above
half the ladder's reference are the neighbourhood; each run's CPU per request is compared with
a straight line (cost against rate) through the *other* runs of that neighbourhood (leave one
out). Prints each run's residual (%) and the distribution: how often one 3 s run is off by
5% or 10% or more, and what its idle would have read had it cost what its neighbours did.
lighttpd on poll with cold connections (its cost falls 4x through the ladder) is left out.

With --probes: per row, the mean CPU per request of the probes (the runs placed around the
crossing to find it) over the mean of the ladder's top rates (85% of the reference and above):
how far the cost at the crossing lies from the cost the line ends on.

usage: scripts/events-run-noise.py RUN_DIR... [--list] [--probes]
"""
import csv
import statistics
import sys


def rows(run):
    out = {}
    for r in csv.DictReader(open(f"{run}/raw.csv")):
        if r["step"] not in ("overload", "rate", "probe"):
            continue
        out.setdefault((r["server"], int(r["cold"])), []).append(r)
    return out


def line(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def probes_vs_ladder(runs):
    qs = []
    for run in runs:
        got = []
        for (server, cold), rs in rows(run).items():
            if server == "lighttpd-poll" and cold > 0:
                continue
            top = [float(r["cpu_per_req_us"]) for r in rs if r["step"] == "rate" and float(r["frac"]) >= 0.85]
            probes = [float(r["cpu_per_req_us"]) for r in rs if r["step"] == "probe"]
            if top and probes:
                q = statistics.mean(probes) / statistics.mean(top)
                qs.append(q)
                got.append(f"{server}@{cold} {q:.2f}")
        print(run.rstrip("/").split("/")[-1] + ": " + ", ".join(got))
    n = len(qs)
    print(f"probes over the ladder's top, {n} rows: median {statistics.median(qs):.3f}, "
          f"{sum(1 for q in qs if q > 1)} above 1, sd {100 * statistics.pstdev(qs):.1f}%, "
          f"{min(qs):.2f}-{max(qs):.2f}, outside 0.90-1.10: {sum(1 for q in qs if q < 0.9 or q > 1.1)}")


def main(argv):
    listing = "--list" in argv
    runs = [a for a in argv if not a.startswith("--")]
    if "--probes" in argv:
        probes_vs_ladder(runs)
        return
    res = []
    for run in runs:
        for (server, cold), rs in rows(run).items():
            if server == "lighttpd-poll" and cold > 0:
                continue
            ref = float(next(r for r in rs if r["step"] == "overload")["rps"])
            pts = []
            for r in rs:
                rate, served = float(r["target_rps"]), float(r["rps"])
                if r["sustained"] != "true" or rate < 0.5 * ref:
                    continue
                pts.append((rate, float(r["cpu_per_req_us"]), float(r["idle_pct"]), r["step"], r["frac"]))
            for i, (rate, cost, idle, step, frac) in enumerate(pts):
                others = [p for j, p in enumerate(pts) if j != i]
                if len(others) < 3:
                    continue
                a, b = line([p[0] for p in others], [p[1] for p in others])
                fit = a + b * rate
                resid = 100.0 * (cost / fit - 1.0)
                # idle had the run cost what the line says
                idle_fit = 100.0 - (100.0 - idle) * fit / cost
                res.append((run.rstrip("/").split("/")[-1], server, cold, step, frac, rate, cost, fit, resid, idle, idle_fit))
    if listing:
        for r in res:
            print("%-18s %-15s %5d %-8s %5s %7.1f cost %6.0f fit %6.0f resid %+6.1f%% idle %5.1f (at fit %5.1f)" % r)
    rs = [r[8] for r in res]
    n = len(rs)
    print(f"runs: {n} (sustained, at or above half the reference; {len(runs)} lab runs)")
    med = statistics.median(rs)
    q = statistics.quantiles(rs, n=4)
    print(f"residual: median {med:+.2f}%, IQR/1.349 {(q[2]-q[0])/1.349:.2f}%, mean {statistics.mean(rs):+.2f}%, sd {statistics.pstdev(rs):.2f}%")
    for t in (3, 5, 7.5, 10, 15):
        hi = sum(1 for x in rs if x >= t)
        lo = sum(1 for x in rs if x <= -t)
        print(f"  >= +{t:>4}%: {hi:3d} ({100*hi/n:4.1f}%)   <= -{t:>4}%: {lo:3d} ({100*lo/n:4.1f}%)")
    near = [r for r in res if r[10] < 20.0]
    rn = [r[8] for r in near]
    print(f"near the knee (idle at the fit under 20%): {len(rn)} runs; >= +5%: {sum(1 for x in rn if x >= 5)}, >= +10%: {sum(1 for x in rn if x >= 10)}; "
          f"read out of CPU (idle < 3%) with idle >= 3% at the fit: {sum(1 for r in near if r[9] < 3 and r[10] >= 3)}")
    print("largest positive residuals:")
    for r in sorted(res, key=lambda r: -r[8])[:12]:
        print("  %-18s %-15s %5d %-8s %5s %7.1f cost %6.0f fit %6.0f resid %+6.1f%% idle %5.1f (at fit %5.1f)" % r)


if __name__ == "__main__":
    main(sys.argv[1:])
