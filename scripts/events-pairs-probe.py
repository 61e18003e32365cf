#!/usr/bin/env python3
"""The events lab's pairs, alone and taken apart: two `triage serve` processes started as
`triage lab events` starts a server and its twin (one slot, keep-alive and header timeouts of
an hour, the 1 KiB file, an access log, `--gzip-level 6`) on CPU 0, optionally N idle
keep-alive connections held against one of them by a Python holder on the last CPU (each
sends one request and reads its response, then stays idle, as the lab's cold connections
do), then pairs of 1 s wrk runs (one thread, 16 connections, SCHED_FIFO on the last CPU) in
ABBA order. Each run reads every process's own CPU (the sum of its threads'
/proc/PID/task/*/schedstat) as well as both together (what the lab reads from the cgroup
that holds both).

Usage (as root, loopback only, bounded: PAIRS x 2 runs of WINDOW s):
  scripts/events-pairs-probe.py TRIAGE_BIN --cold-on a|b|none [--cold N] [--pairs P]
      [--history] [--perf OUT.data] [--seed S] [--out FILE.json]

--history: A opens N connections that send one request each and closes them, 8 s before the
pairs, so that A has served what the cold connections' first requests cost but holds none.
--perf: `perf record -e cpu-clock -g` on both servers over the pairs (the samples' pid tells
them apart). --stat EVENTS: `perf stat -e EVENTS` on the run's server over each run, each
event's count per request printed per server (for counting calls through uprobes that the
caller set up with `perf probe -x BIN FUNC`; they slow the server, so its CPU readings are not
the lab's then). Prints one line per pair and the ratios A over B: per process and as the lab
reads them (both processes' CPU over the run against the requests of the run's server), each
as the mean of the pairs' ratios and as the lab's estimate (the Hodges-Lehmann estimate of the
log ratios), with seeded bootstrap ci95s.
"""
import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hold_conns.py")


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def wait_port(port, proc, limit=15.0):
    import socket

    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"server on {port} exited ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"server on {port} did not listen within {limit} s")


def hold(work, port, n, close, last, seconds):
    log = open(os.path.join(work, f"hold-{port}.log"), "w+")
    p = subprocess.Popen(
        ["taskset", "-c", str(last), sys.executable, HOLD,
         str(port), str(n), str(seconds), "1" if close else "0"],
        stdout=log, stderr=subprocess.STDOUT)
    want = "closed" if close else "held"
    for _ in range(600):
        log.seek(0)
        text = log.read()
        if want in text:
            break
        if p.poll() is not None:
            sys.exit(f"the holder exited: {text}")
        time.sleep(0.2)
    else:
        sys.exit("the holder did not finish opening its connections")
    if f"held {n}" not in text:
        sys.exit(f"the holder did not open {n} connections: {text}")
    return p


def wrk(port, last, window):
    out = subprocess.run(
        ["chrt", "-f", "1", "taskset", "-c", str(last), "wrk", "-t1", "-c16",
         f"-d{window}s", "--timeout=5s", f"http://127.0.0.1:{port}/file.html"],
        capture_output=True, text=True, check=True).stdout
    m = re.search(r"(\d+) requests in", out)
    if not m or int(m.group(1)) == 0:
        sys.exit(f"wrk served nothing: {out}")
    return int(m.group(1))


def hodges_lehmann(xs):
    return statistics.median((xs[i] + xs[j]) / 2 for i in range(len(xs))
                             for j in range(i, len(xs)))


def boot_ci(xs, seed, stat=statistics.fmean, n=2000):
    rng = random.Random(seed)
    draws = sorted(stat(rng.choices(xs, k=len(xs))) for _ in range(n))
    return draws[int(0.025 * n)], draws[int(0.975 * n) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin")
    ap.add_argument("--cold-on", choices=["a", "b", "none"], required=True)
    ap.add_argument("--cold", type=int, default=10000)
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--window", type=int, default=1)
    ap.add_argument("--history", action="store_true")
    ap.add_argument("--gzip-history", type=int, default=0,
                    help="seconds of wrk on a 64 KiB page compressed per request, against A, "
                    "before and after its cold connections open (what the lab's capacity runs "
                    "do to the held server and not to its twin)")
    ap.add_argument("--gzip-both", action="store_true",
                    help="the gzip history against B as well")
    ap.add_argument("--perf")
    ap.add_argument("--stat", help="comma-separated perf events counted on each run's server")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args()
    last = os.cpu_count() - 1
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    work = tempfile.mkdtemp(prefix="pairs-probe.")
    procs = []
    try:
        with open(os.path.join(work, "file.html"), "w") as f:
            f.write("<html><body>" + "a" * (1024 - 26) + "</body></html>")
        rng = random.Random(2)
        words = ["lorem", "ipsum", "server", "request", "idle", "connection", "kernel",
                 "epoll", "rate", "capacity", "regression", "the", "of", "and", "a", "to"]
        body = []
        while sum(map(len, body)) < 65536:
            body.append("<p>" + " ".join(rng.choice(words) for _ in range(60)) + "</p>\n")
        with open(os.path.join(work, "page.html"), "w") as f:
            f.write("".join(body)[:65536])
        servers = {}
        for name, port in (("a", 18521), ("b", 18522)):
            args = ["taskset", "-c", "0", a.bin, "serve", "--root", work, "--listen",
                    f"127.0.0.1:{port}", "--slots", "1", "--keepalive-timeout", "1h",
                    "--header-timeout", "1h", "--max-conns", str(a.cold + 116),
                    "--access-log", os.path.join(work, f"{name}.access.log"),
                    "--gzip-level", "6"]
            p = subprocess.Popen(args, stdout=open(os.path.join(work, f"{name}.log"), "w"),
                                 stderr=subprocess.STDOUT)
            procs.append(p)
            wait_port(port, p)
            servers[name] = (p.pid, port)
        if a.history:
            h = hold(work, servers["a"][1], a.cold, True, last, 1)
            h.wait()
            time.sleep(8)
        gz = ["a", "b"] if a.gzip_both else ["a"]

        def gzip_load():
            for k in gz:
                if a.gzip_history:
                    subprocess.run(
                        ["chrt", "-f", "1", "taskset", "-c", str(last), "wrk", "-t1", "-c16",
                         f"-d{a.gzip_history}s", "-H", "Accept-Encoding: gzip",
                         f"http://127.0.0.1:{servers[k][1]}/page.html"],
                        capture_output=True, check=True)

        gzip_load()
        if a.cold_on != "none":
            procs.append(hold(work, servers[a.cold_on][1], a.cold, False, last,
                              a.pairs * 2 * (a.window + 2) + 60))
            time.sleep(3.5)
        gzip_load()
        if a.gzip_history:
            time.sleep(3.5)
        rss = {k: rss_kib(v[0]) for k, v in servers.items()}
        perf = None
        if a.perf:
            perf = subprocess.Popen(
                ["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-g", "-o", a.perf,
                 "-p", f"{servers['a'][0]},{servers['b'][0]}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        rows = []
        for i in range(a.pairs):
            got = {}
            for k in ("a", "b") if i % 2 == 0 else ("b", "a"):
                pid, port = servers[k]
                stat = None
                if a.stat:
                    stat = subprocess.Popen(
                        ["perf", "stat", "-x", ",", "-e", a.stat, "-p", str(pid)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    time.sleep(0.3)
                c0 = {n: cpu_ns(v[0]) for n, v in servers.items()}
                reqs = wrk(port, last, a.window)
                c1 = {n: cpu_ns(v[0]) for n, v in servers.items()}
                counts = {}
                if stat:
                    stat.send_signal(signal.SIGINT)
                    for line in stat.communicate()[1].splitlines():
                        f = line.split(",")
                        if len(f) > 2 and f[0].strip().isdigit():
                            counts[f[2]] = int(f[0]) / reqs
                own = (c1[k] - c0[k]) / reqs / 1e3
                both = sum(c1[n] - c0[n] for n in servers) / reqs / 1e3
                other = [n for n in servers if n != k][0]
                got[k] = {"reqs": reqs, "own_us": own, "both_us": both,
                          "other_ms": (c1[other] - c0[other]) / 1e6, "per_req": counts}
            rows.append(got)
            print(f"pair {i}: a {got['a']['own_us']:.2f} us ({got['a']['reqs']} req, b idle "
                  f"{got['a']['other_ms']:.2f} ms)  b {got['b']['own_us']:.2f} us "
                  f"({got['b']['reqs']} req, a idle {got['b']['other_ms']:.2f} ms)  "
                  f"own x{got['a']['own_us'] / got['b']['own_us']:.3f}", flush=True)
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        res = {"cold_on": a.cold_on, "cold": a.cold, "pairs": a.pairs, "history": a.history,
               "gzip_history": a.gzip_history, "gzip_both": a.gzip_both,
               "seed": a.seed, "rss_kib": rss, "pids": {k: v[0] for k, v in servers.items()},
               "rows": rows}
        for kind in ("own_us", "both_us"):
            r = [g["a"][kind] / g["b"][kind] for g in rows]
            lo, hi = boot_ci(r, a.seed)
            res[f"ratio_{kind}"] = {"mean": statistics.fmean(r), "ci95": [lo, hi],
                                    "sd": statistics.stdev(r)}
            lr = [math.log(x) for x in r]
            hl = math.exp(hodges_lehmann(lr))
            hlo, hhi = (math.exp(x) for x in boot_ci(lr, a.seed, hodges_lehmann))
            res[f"ratio_{kind}"]["hodges_lehmann"] = {"ratio": hl, "ci95": [hlo, hhi]}
            print(f"A over B, {kind}: mean x{statistics.fmean(r):.3f} [{lo:.3f}, {hi:.3f}] "
                  f"sd {statistics.stdev(r):.3f}; Hodges-Lehmann of the log ratios x{hl:.3f} "
                  f"[{hlo:.3f}, {hhi:.3f}]")
        for k in ("a", "b"):
            print(f"{k}: {statistics.fmean(g[k]['own_us'] for g in rows):.2f} us/req own, "
                  f"{statistics.fmean(g[k]['reqs'] for g in rows):.0f} req/run, idle twin "
                  f"{statistics.fmean(g[k]['other_ms'] for g in rows):.2f} ms/run, "
                  f"rss {rss[k]} KiB")
            for ev in sorted({e for g in rows for e in g[k]["per_req"]}):
                per = [g[k]["per_req"].get(ev, 0.0) for g in rows]
                print(f"{k}: {ev} {statistics.median(per):.3f} per request (median of runs)")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
