#!/usr/bin/env python3
"""Offline: the drain `triage capacity --steps` reads after each step of a `triage lab events`
run's ladder (the requests logged in the second after the step, beyond its own partial last
second: `drain_requests` in `--json`), beside what the lab measured of the same rate (raw.csv:
sustained or not, and on what). Matches the tool's steps to the lab's rates in time order by
rate. Prints every rate not sustained or with a drain over 1% of its requests, then how a
threshold on the drain share separates the rates the lab counted "not sustained" on the rate
served (its window ran on past the schedule: served < 97%) from the sustained ones.

  scripts/events-drain.py target/ci/triage results/DIR [results/DIR2 ...]
"""
import csv, json, os, subprocess, sys

from events_fitlib import fit_inputs

binary, dirs = sys.argv[1], sys.argv[2:]
res = []
for d in dirs:
    name = os.path.basename(d.rstrip("/"))
    raw = list(csv.DictReader(open(os.path.join(d, "raw.csv"))))
    for f, log, cpu in fit_inputs(d):
        srv, cold, rep = f["server"], f["cold"], f["rep"]
        r = subprocess.run([binary, "capacity", "--log", log, "--cpu", cpu, "--steps", "2s",
                            "--low-rate-cut", str(f["cut_rps"]), "--json"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            continue
        steps = json.loads(r.stdout)["buckets"]
        rates = [x for x in raw if (x["server"], int(x["cold"]), int(x["rep"]), x["step"])
                 == (srv, cold, rep, "rate")]
        j = 0
        for b in steps:
            # The next lab rate (in order) within 15% of the step's rate, looking 2 ahead.
            best = None
            for k in range(j, min(j + 3, len(rates))):
                e = abs(b["rate"] - float(rates[k]["rps"])) / float(rates[k]["rps"])
                if e < 0.15 and (best is None or e < best[1]):
                    best = (k, e)
            if best is None:
                continue
            x = rates[best[0]]
            j = best[0] + 1
            share = 100.0 * b["drain_requests"] / b["requests"]
            res.append(dict(run=name, srv=srv, cold=cold, frac=x["frac"],
                            target=float(x["target_rps"]), rps=float(x["rps"]),
                            idle=float(x["idle_pct"]), window=float(x["window_s"]),
                            sustained=x["sustained"] == "true", failed=x["failed_on"],
                            trate=b["rate"], tidle=b["idle_pct"], share=share,
                            drain=b["drain_requests"], reqs=b["requests"]))
print("run srv cold frac target served lab_idle window sustained failed_on | tool_rate tool_idle "
      "drain drain%")
for x in res:
    if not x["sustained"] or x["share"] > 1.0:
        print(f"{x['run']} {x['srv']} {x['cold']} {x['frac']} {x['target']:.0f} {x['rps']:.0f} "
              f"{x['idle']:.2f} {x['window']:.3f} {x['sustained']} {x['failed'] or '-'} | "
              f"{x['trate']:.0f} {x['tidle']:.2f} {x['drain']} {x['share']:.2f}")
served = [x for x in res if "served" in x["failed"]]
p99 = [x for x in res if x["failed"] == "p99"]
ok = [x for x in res if x["sustained"]]
# Those the knee cares about: with idle left (>= 3%) in the lab, where "not sustained" alone
# puts the rate out of CPU.
served_idle = [x for x in served if x["idle"] >= 3.0]
ok_idle = [x for x in ok if x["idle"] >= 3.0]
print(f"matched {len(res)} rates: {len(ok)} sustained, {len(served)} failed on served "
      f"({len(served_idle)} with idle >= 3%), {len(p99)} on p99 alone")
for thr in [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0]:
    c = lambda v: sum(x["share"] > thr for x in v)
    print(f"drain > {thr:.1f}%: served-failed caught {c(served)}/{len(served)} "
          f"(idle >= 3%: {c(served_idle)}/{len(served_idle)}), sustained flagged "
          f"{c(ok)}/{len(ok)} (idle >= 3%: {c(ok_idle)}/{len(ok_idle)}), p99-only flagged "
          f"{c(p99)}/{len(p99)}")
