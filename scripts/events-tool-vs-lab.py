#!/usr/bin/env python3
"""Offline: `triage capacity` (a given binary) on the access logs and CPU samples a `triage lab
events` run saved, as the lab runs it (`--steps 2s`, the row's cut), against the lab's own
prediction in that run's summary.json: the run's `tool_vs_lab_pct` again, with another tool.
Prints each row's steps found, both predictions and their difference, then each run's largest.

  scripts/events-tool-vs-lab.py target/ci/triage results/DIR [results/DIR2 ...] [--all]
"""
import argparse, json, os, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("triage")
ap.add_argument("dirs", nargs="+")
ap.add_argument("--all", action="store_true", help="print every row, not only those over 1%")
a = ap.parse_args()
for d in a.dirs:
    worst = None
    for f in json.load(open(os.path.join(d, "summary.json")))["fits"]:
        srv, cold, rep = f["server"], f["cold"], f["rep"]
        log = os.path.join(d, "logs", f"{srv}-r{rep}.access.log")
        cpu = os.path.join(d, "cpu", f"{srv}-r{rep}-cold{cold}.csv")
        if not (os.path.exists(log) and os.path.exists(cpu)):
            continue
        r = subprocess.run([a.triage, "capacity", "--log", log, "--cpu", cpu, "--steps", "2s",
                            "--low-rate-cut", str(f["cut_rps"]), "--json"],
                           capture_output=True, text=True)
        t = json.loads(r.stdout) if r.returncode == 0 else None
        tool = t and t["predicted_peak_rps"]
        lab = f.get("predicted_rps")
        diff = abs(tool - lab) / lab * 100 if tool and lab else None
        if diff is not None:
            worst = diff if worst is None else max(worst, diff)
        if a.all or (diff or 0) > 1:
            print(f"{os.path.basename(d.rstrip('/')):<18} {srv:<15} {cold:>6} lab {lab or 0:7.0f} "
                  f"tool {tool or 0:7.0f} ({len(t['buckets']) if t else 0} steps) diff "
                  f"{'-' if diff is None else f'{diff:.2f}%'} (the run's own: "
                  f"{f.get('tool_vs_lab_pct') and round(f['tool_vs_lab_pct'], 2)})")
    print(f"{d}: largest {'-' if worst is None else f'{worst:.2f}%'}")
