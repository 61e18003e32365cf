#!/usr/bin/env python3
"""Where two servers' samples differ, by call path: reads `perf script` of a recording with
call stacks (frame pointers, or `--call-graph dwarf`) over both servers of
scripts/events-pairs-probe.py (its `--perf`), and prints, per server, samples per million
requests (the requests from the probe's `--out` JSON): by leaf function, by the first caller
outside the allocator for samples in the allocator (mimalloc's `mi_*`/`_mi_*`, Rust's
`alloc::`/`__rust_*`/`__rdl_*`), and by every function on the stack (inclusive), each sorted
by the difference A - B.

Usage: scripts/events-perf-callers.py PERF.data PROBE.json [--top N] [--focus SYMBOL]
--focus SYMBOL: also print the callers (first frame outside the allocator, then the next
three) of samples whose stack holds SYMBOL.
"""
import argparse
import collections
import json
import subprocess


def is_alloc(sym):
    return (sym.startswith("mi_") or sym.startswith("_mi_") or sym.startswith("__rust_")
            or sym.startswith("__rdl_") or sym.startswith("alloc::alloc::")
            or "RawVec" in sym or sym.startswith("<alloc::raw_vec")
            or sym.startswith("<mimalloc::") or sym.startswith("mimalloc::")
            or sym in ("malloc", "free", "realloc", "calloc", "[unknown]"))


def short(sym, width=110):
    return sym if len(sym) <= width else sym[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("probe")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--focus", action="append", default=[])
    a = ap.parse_args()
    probe = json.load(open(a.probe))
    pids = {str(v): k for k, v in probe["pids"].items()}
    reqs = {k: sum(r[k]["reqs"] for r in probe["rows"]) for k in ("a", "b")}
    leaf = {k: collections.Counter() for k in "ab"}
    caller = {k: collections.Counter() for k in "ab"}
    incl = {k: collections.Counter() for k in "ab"}
    focus = {f: {k: collections.Counter() for k in "ab"} for f in a.focus}
    total = collections.Counter()
    p = subprocess.Popen(["perf", "script", "-i", a.data, "-F", "pid,ip,sym"], stdout=subprocess.PIPE, text=True,
                         errors="replace", bufsize=1 << 20)
    server, stack = None, []

    def flush():
        if server is None or not stack:
            return
        total[server] += 1
        leaf[server][stack[0]] += 1
        if is_alloc(stack[0]):
            out = next((s for s in stack if not is_alloc(s)), "?")
            caller[server][out] += 1
        for s in set(stack):
            incl[server][s] += 1
        for f in a.focus:
            if any(f in s for s in stack):
                outer = [s for s in stack if not is_alloc(s) and f not in s][:4]
                focus[f][server][" <- ".join(short(s, 60) for s in outer)] += 1

    for line in p.stdout:
        if not line.strip():
            flush()
            server, stack = None, []
            continue
        if not line.startswith("\t"):
            flush()
            pid = line.split()[0]
            server, stack = pids.get(pid), []
            continue
        parts = line.split(None, 1)
        sym = parts[1].strip() if len(parts) > 1 else "[unknown]"
        if sym.endswith(")") and " (" in sym:
            sym = sym[: sym.rindex(" (")]
        if "+0x" in sym:
            sym = sym[: sym.rindex("+0x")]
        stack.append(sym)
    flush()
    p.wait()

    def per_m(k, n):
        return n * 1e6 / reqs[k]

    print(f"requests a {reqs['a']} b {reqs['b']}; samples per million requests: "
          f"a {per_m('a', total['a']):.0f} b {per_m('b', total['b']):.0f} "
          f"(x{per_m('a', total['a']) / per_m('b', total['b']):.4f})")
    for title, table in (("leaf", leaf), ("allocator samples by first caller outside it",
                                          caller), ("inclusive", incl)):
        print(f"\n== {title}: samples per million requests, a / b / a-b")
        keys = set(table["a"]) | set(table["b"])
        rows = sorted(keys, key=lambda s: per_m("a", table["a"][s]) - per_m("b", table["b"][s]),
                      reverse=True)
        tot = (sum(per_m("a", table["a"][s]) for s in keys),
               sum(per_m("b", table["b"][s]) for s in keys))
        print(f"{'(all)':>0} {tot[0]:8.0f} {tot[1]:8.0f} {tot[0] - tot[1]:+8.0f}"
              if title != "inclusive" else "")
        for s in rows[: a.top] + ["..."] + rows[-5:]:
            if s == "...":
                print("   ...")
                continue
            x, y = per_m("a", table["a"][s]), per_m("b", table["b"][s])
            print(f"{x:8.0f} {y:8.0f} {x - y:+8.0f}  {short(s)}")
    for f, table in focus.items():
        print(f"\n== stacks holding {f}: callers outside the allocator, a / b / a-b")
        keys = set(table["a"]) | set(table["b"])
        rows = sorted(keys, key=lambda s: per_m("a", table["a"][s]) - per_m("b", table["b"][s]),
                      reverse=True)
        for s in rows[: a.top]:
            x, y = per_m("a", table["a"][s]), per_m("b", table["b"][s])
            print(f"{x:8.0f} {y:8.0f} {x - y:+8.0f}  {s}")


if __name__ == "__main__":
    main()
