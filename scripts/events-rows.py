#!/usr/bin/env python3
"""Per row of a `triage lab events` run (server, cold count, repetition): every open-loop run
(the overload run, the ladder's rates, the probes) in rising rate with its idle share,
throttled periods and CPU per request (and, where raw.csv has it, the server CPU's busy share
not the server's: other tenants), and the row's fit and measured saturation from summary.json.

  scripts/events-rows.py results/DIR [results/DIR2 ...] [--server nginx] [--cold 0]
"""
import argparse, csv, json, os, sys

ap = argparse.ArgumentParser()
ap.add_argument("dirs", nargs="+")
ap.add_argument("--server")
ap.add_argument("--cold", type=int)
a = ap.parse_args()
for d in a.dirs:
    rows = list(csv.DictReader(open(os.path.join(d, "raw.csv"))))
    try:
        fits = json.load(open(os.path.join(d, "summary.json")))["fits"]
    except (FileNotFoundError, KeyError):
        fits = []
    keys = sorted({(r["server"], int(r["cold"]), int(r["rep"])) for r in rows},
                  key=lambda k: (k[2], k[0], k[1]))
    for k in keys:
        if a.server and k[0] != a.server or a.cold is not None and k[1] != a.cold:
            continue
        f = next((f for f in fits if (f["server"], f["cold"], f["rep"]) == k), None)
        print(f"== {d} {k[0]} cold={k[1]} rep={k[2]}")
        if f:
            fr = f.get("fitted_rps") or [None, None]
            idle = (f.get("prediction") or {}).get("idle") or {}
            def n(x, p=0):
                return "-" if x is None else f"{x:.{p}f}"
            print(f"   predicted {n(f.get('predicted_rps'))} (r {n(idle.get('r'), 3)}, fitted "
                  f"{n(fr[0])}-{n(fr[1])}, range {f.get('prediction_range')}), cpu out "
                  f"{n(f.get('cpu_out_rps'))} [{n((f.get('cpu_out_bracket') or [None, None])[0])}, "
                  f"{n((f.get('cpu_out_bracket') or [None, None])[1])}] disagree "
                  f"{f.get('cpu_out_disagreeing')}, err {n(f.get('error_pct'), 1)}%, cut "
                  f"{n(f.get('cut_rps'))}")
        pts = [r for r in rows if (r["server"], int(r["cold"]), int(r["rep"])) == k
               and r["step"] in ("overload", "rate", "probe")]
        pts.sort(key=lambda r: float(r["target_rps"]))
        for r in pts:
            print(f"   {r['step']:<8} {float(r['target_rps']):8.0f} served {float(r['rps']):8.0f} "
                  f"idle {float(r['idle_pct']):6.1f} thr {r['throttled_pct']:>5} "
                  f"us/req {float(r['cpu_per_req_us']):5.1f} p99 {float(r['p99_ms']):7.1f} "
                  f"{'ok' if r['sustained'] == 'true' else 'FAIL ' + r['failed_on']}"
                  + (f" others {r['server_cpu_others_pct']}%" if r.get("server_cpu_others_pct") else ""))
