#!/usr/bin/env python3
"""The EEVDF lag of Apache's HTML children against the quota's grants, from a run of
scripts/lag_trace.sh (OUT/lag.txt beside t1_trace.sh's OUT/sched.txt and kept runs).

For every HTML request of VARIANT (default: every Apache variant of the run) it finds, as
scripts/t1_parts.py does, the child that served it, its wake-up and the grants from its
first chance to the grant it finished in, and reads from lag.txt:
- the child at the wake-up: nice, sched_delayed, its lag in real ns of service
  (w * (V - v) / 1024; positive: owed service, eligible), eligible or not;
- the child when it last went to sleep before it (its previous episode): nice, delayed,
  lag, and the daemon's hold on it during that episode (text, head, low) and what it served;
- at each grant's start (the first switch into the server's cfs_rq after the gap, where
  lagtrace takes a snapshot of every queued task): whether the child was eligible, its lag,
  how many queued tasks were eligible, who was picked.
Prints one line per HTML request that lost a grant (missed >= 1) and counts over all the
HTML requests. Usage: scripts/lag_read.py OUT [VARIANT...] [--all]
"""
import bisect
import collections
import importlib.util
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("t1p", os.path.join(here, "t1_parts.py"))
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)

COLS = ("t kind tid nice weight on_rq delayed eligible is_curr throttled key dkey vlag "
        "sum_w sum_weight sum_exec slice rr flags cfs cpu").split()


class Lag:
    """lag.txt by task and the snapshots by time (realtime seconds)."""

    def __init__(self, path, offset):
        self.by_tid = collections.defaultdict(list)  # tid -> [row]
        self.snaps = collections.defaultdict(list)  # t -> [row]
        for line in open(path):
            f = line.split()
            if len(f) != len(COLS):
                continue
            r = dict(zip(COLS, f))
            for k in ("tid", "nice", "weight", "on_rq", "delayed", "eligible", "is_curr",
                      "throttled", "key", "dkey", "vlag", "sum_w", "sum_weight", "sum_exec",
                      "slice", "rr"):
                r[k] = int(r[k])
            r["flags"] = int(r["flags"], 16) if r["flags"].startswith("0x") else int(r["flags"])
            r["t"] = int(r["t"]) / 1e9 + offset
            if r["kind"] == "snap":
                if -20 <= r["nice"] <= 19 and r["weight"] > 0:  # not a stale task pointer
                    self.snaps[r["t"]].append(r)
            else:
                self.by_tid[r["tid"]].append(r)
        self.keys = {k: [r["t"] for r in v] for k, v in self.by_tid.items()}
        self.snap_ts = sorted(self.snaps)

    @staticmethod
    def lag_ns(r):
        """Real lag (ns of service owed; negative: served ahead of its share)."""
        if not r["on_rq"]:
            return r["vlag"] * r["weight"] / 1024
        v = r["sum_w"] / r["sum_weight"] if r["sum_weight"] else r["key"]
        return (v - r["key"]) * r["weight"] / 1024

    @staticmethod
    def wait_ns(r):
        """CPU the others must run before `r` is eligible: its virtual deficit (v - V)
        times the cfs_rq's weight (V advances by 1024 / W per ns of service); 0 if
        eligible."""
        if r["eligible"] or not r["sum_weight"]:
            return 0.0
        v = r["sum_w"] / r["sum_weight"]
        return max(0.0, (r["key"] - v) * r["sum_weight"] / 1024)

    def last_before(self, tid, t, kind=None, pred=None):
        rows, ks = self.by_tid.get(tid, []), self.keys.get(tid, [])
        i = bisect.bisect_right(ks, t) - 1
        while i >= 0:
            r = rows[i]
            if (kind is None or r["kind"] == kind) and (pred is None or pred(r)):
                return r
            i -= 1
        return None

    def first_after(self, tid, t, kind):
        rows, ks = self.by_tid.get(tid, []), self.keys.get(tid, [])
        i = bisect.bisect_left(ks, t)
        while i < len(rows):
            if rows[i]["kind"] == kind:
                return rows[i]
            i += 1
        return None

    def snap_at(self, t, slack=0.0005):
        """The first unthrottled snapshot at or after t - slack (within 2 ms)."""
        i = bisect.bisect_left(self.snap_ts, t - slack)
        while i < len(self.snap_ts) and self.snap_ts[i] <= t + 0.002:
            rows = self.snaps[self.snap_ts[i]]
            if not any(r["throttled"] for r in rows):
                return self.snap_ts[i], rows
            i += 1
        return None, []


def fmt_lag(x):
    return f"{x / 1e6:+.2f}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_all = "--all" in sys.argv
    out, want = args[0], set(args[1:])
    offs = [float(l) for l in open(os.path.join(out, "clock.txt")) if l.strip()]
    tr = m.Trace(os.path.join(out, "sched.txt"), offs[0])
    lag = Lag(os.path.join(out, "lag.txt"), offs[0])
    names = [v["name"] for v in json.load(open(os.path.join(out, "summary.json")))["variants"]]
    tot = collections.defaultdict(collections.Counter)
    prev_lags = collections.defaultdict(list)
    gapstats = collections.defaultdict(lambda: collections.defaultdict(list))
    for run, base, v, rows in m.kept_runs(out, names):
        if not v.startswith("apache") or (want and v not in want):
            continue
        alog = os.path.join(run, "apache", "access.log")
        log = m.html_lines(alog, 1e6, 1e6)
        tr.who = m.serving(alog, 1e6, 1e6)
        tr.level = m.held(os.path.join(run, "actions.log"), v)
        for h in rows:
            acc = m.apache_parts(tr, h, log)
            if not acc or not acc.get("grant"):
                continue
            g = acc["grant"]
            _, t0, begin, x, done = m.way_in(h)
            cands = [(s, pid, d) for pid, s, d, b in log if b == h["browser"]]
            s0, pid, d = m.nearest(cands, t0 + h["sent_ms"], begin - 0.005, done)
            woke = tr.first_wake(pid, x, s0 + d)
            c = tot[v]
            c["html"] += 1
            missed = g["missed"] >= 1
            c["missed"] += missed
            # The wake-up row and the sleep before it.
            wk = lag.first_after(pid, woke - 0.0002, "wake")
            sl = lag.last_before(pid, woke - 0.00001, "prev", lambda r: (r["flags"] & 0xff) != 0)
            # Its previous episode: from the wake-up before that sleep to the sleep.
            pw = lag.last_before(pid, sl["t"] - 0.00001, "wake") if sl else None
            hold_prev = "-"
            served_prev = "-"
            if sl:
                a = pw["t"] if pw else sl["t"] - 0.05
                holds = {tr.level(pid, a)}
                for t, act in getattr(tr.level, "events", {}).get(pid, []):
                    if a <= t <= sl["t"]:
                        holds.add(act)
                hold_prev = "+".join(sorted(holds))
                served_prev = tr.who(pid, "apache2", sl["t"] - 0.0002)
            # The grants from its wake-up to its first run.
            spans, starts = tr.refill_spans(0)
            j = bisect.bisect_right(starts, woke)
            gs = []
            while j < len(spans) and spans[j][0] <= s0 + d:
                ts, snap = lag.snap_at(spans[j][0])
                me = [r for r in snap if r["tid"] == pid]
                if me:
                    r = me[0]
                    elig = sum(1 for q in snap if q["eligible"])
                    picked = snap[0]["flags"]
                    gs.append((round((spans[j][0] - woke) * 1e3, 1), r["nice"], r["eligible"],
                               r["delayed"], fmt_lag(lag.lag_ns(r)), f"{elig}/{len(snap)}",
                               "me" if picked == pid else tr.level(picked, spans[j][0])))
                j += 1
                if len(gs) >= 3:
                    break
            gap = not g["woke_in_grant"]
            if gap and woke is not None:
                j0 = bisect.bisect_right(starts, woke)
                if j0 < len(spans):
                    ts, snap = lag.snap_at(spans[j0][0])
                    me = [r for r in snap if r["tid"] == pid]
                    if me:
                        r = me[0]
                        run = lag.first_after(pid, ts + 1e-7, "next")
                        others = [q for q in snap if q["tid"] != pid]
                        st = gapstats[(v, g["at_wake"] + "/" + g["at_run"])]
                        st["n"].append(1)
                        st["wake_elig"].append(wk["eligible"] if wk else None)
                        st["wake_lag"].append(lag.lag_ns(wk) if wk else 0)
                        st["elig"].append(r["eligible"])
                        st["lag"].append(lag.lag_ns(r))
                        st["wait"].append(lag.wait_ns(r))
                        st["others_pos"].append(sum(max(0.0, lag.lag_ns(q)) for q in others))
                        for q in others:
                            if lag.lag_ns(q) > 0:
                                who = "hog" if q["nice"] == 0 and tr.comm.get(q["tid"]) != "apache2" else tr.level(q["tid"], ts)
                                st["pos_by"].append((who, q["nice"], lag.lag_ns(q)))
                        st["first_run"].append((run["t"] - ts) if run else float("nan"))
                        st["missed"].append(g["missed"])
            held20 = g["at_wake"] == "text" and g["at_run"] == "text"
            first = gs[0] if gs else None
            if gap and held20 and first:
                c["gap_text"] += 1
                c["gap_text_inelig"] += first[2] == 0
                if missed:
                    c["gap_text_missed"] += 1
                    c["gap_text_missed_inelig"] += first[2] == 0
                key = "missed" if missed else "kept"
                prev_lags[(v, key)].append((hold_prev, served_prev,
                                            lag.lag_ns(sl) if sl else None, first[2]))
            if missed or show_all:
                slr = (f"slept nice {sl['nice']} delayed {sl['delayed']} lag {fmt_lag(lag.lag_ns(sl))}"
                       if sl else "slept ?")
                wkr = (f"woke nice {wk['nice']} delayed-before {wk['delayed']} elig {wk['eligible']} "
                       f"lag {fmt_lag(lag.lag_ns(wk))}" if wk else "woke ?")
                print(f"{v} {base} b{h['browser']} pid {pid} t1 {h['done_ms'] * 1e3:.0f} missed "
                      f"{g['missed']} {'gap' if gap else 'grant'} hold {g['at_wake']}/{g['at_run']} | "
                      f"prev episode {served_prev} held {hold_prev}, {slr} | {wkr} | grants "
                      f"(ms after wake, nice, eligible, delayed, lag ms, eligible/queued, picked): {gs}")
    print()
    for v, c in tot.items():
        print(f"{v}: {c['html']} HTML, {c['missed']} lost a grant; woke in the gap and held as "
              f"text to their run: {c['gap_text']}, of which ineligible at the next grant's start "
              f"{c['gap_text_inelig']}; of those that lost a grant {c['gap_text_missed']}, "
              f"ineligible {c['gap_text_missed_inelig']}")
    print()
    print("HTML woken in the throttled gap, at the next grant's start (lagtrace's snapshot): "
          "hold at wake/run, n, eligible at the wake-up, eligible at the grant's start, mean lag "
          "there (ms), mean CPU the others must run before it is eligible (ms), mean positive "
          "lag of the others queued (ms, summed), mean first run after the grant's start (ms), "
          "lost a grant")
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
    for (v, hold), st in sorted(gapstats.items()):
        n = len(st["n"])
        print(f"  {v:>32} {hold:>10}: {n:3d}  wake-eligible {sum(1 for e in st['wake_elig'] if e)}"
              f"  grant-eligible {sum(st['elig'])}  lag {mean(st['lag']) / 1e6:+.2f}"
              f"  wait {mean(st['wait']) / 1e6:.2f}  others+ {mean(st['others_pos']) / 1e6:.2f}"
              f"  first run {1e3 * mean([x for x in st['first_run'] if x == x]):.2f}"
              f"  missed {sum(1 for x in st['missed'] if x)}")
        by = collections.defaultdict(float)
        cnt = collections.Counter()
        for who, nice, l in st["pos_by"]:
            by[(who, nice)] += l / n
            cnt[(who, nice)] += 1
        print(f"  {'':>32} {'':>10}   others' positive lag by hold/nice (ms per HTML, tasks per HTML): "
              + ", ".join(f"{w}/{ni} {x / 1e6:.2f} ({cnt[(w, ni)] / n:.1f})" for (w, ni), x in sorted(by.items(), key=lambda kv: -kv[1])))
        el = [fr for fr, e in zip(st["first_run"], st["elig"]) if e and fr == fr]
        ie = [fr for fr, e in zip(st["first_run"], st["elig"]) if not e and fr == fr]
        print(f"  {'':>32} {'':>10}   first run into the grant: eligible {1e3 * mean(el):.2f} ms (n {len(el)}),"
              f" ineligible {1e3 * mean(ie):.2f} ms (n {len(ie)})")
    for (v, key), lst in sorted(prev_lags.items()):
        by = collections.defaultdict(list)
        for hold, served, l, el in lst:
            by[(hold, served)].append((l, el))
        print(f"{v} {key} (woke in the gap, held as text): previous episode held/served -> n, "
              f"mean lag at its sleep (ms), ineligible at the grant's start")
        for k, xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
            ls = [l for l, _ in xs if l is not None]
            mean = sum(ls) / len(ls) / 1e6 if ls else float("nan")
            print(f"   {k[0]:>14} {k[1]:>10}: {len(xs):3d}  {mean:+.2f}  {sum(1 for _, e in xs if e == 0)}")


if __name__ == "__main__":
    main()
