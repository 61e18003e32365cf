#!/usr/bin/env python3
"""How steady this machine's CPUs are: 64 KiB of seeded words (work like the events lab's gzip
page) compressed at zlib level 6 in a loop pinned to each CPU given, timed in chunks of CPU
time. Nothing else should run (run it under the lab lock).

    scripts/host-speed.py [--seconds 60] [--chunk 0.5] [--cpus 0] [--gap 0]

Prints each CPU's series (us per compression per chunk), its sd over the mean, its range and
the lag-1 autocorrelation of the chunks (near 1: the speed moves in spells longer than a chunk),
the same over chunks of 3 s (the lab's window), and with two CPUs the correlation of their
series. With --gap G the loop sleeps G s between 3 s chunks and times 0.3 s before and after
each, as the lab times its reference in the wait before a run: how well such a short reference
tracks the run beside it.
"""
import argparse
import os
import random
import statistics as st
import sys
import time
import zlib
from multiprocessing import Process, Queue


def page(n=65536, seed=2):
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(3000)]
    return (" ".join(rnd.choice(words) for _ in range(n // 4))).encode()[:n]


def chunk(text, secs):
    """us of this thread's CPU per compression, over at least `secs` of CPU time."""
    c0 = time.thread_time()
    n = 0
    while time.thread_time() - c0 < secs:
        zlib.compress(text, 6)
        n += 1
    return (time.thread_time() - c0) / n * 1e6


def corr(a, b):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    ma, mb = st.mean(a), st.mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return num / den if den else float("nan")


def describe(series):
    m = st.mean(series)
    return "sd %.1f%%  range %.0f-%.0f us  lag-1 %.2f" % (
        100 * st.pstdev(series) / m, min(series), max(series), corr(series[:-1], series[1:]))


def loop(cpu, seconds, secs, q):
    os.sched_setaffinity(0, {cpu})
    text = page()
    out = []
    end = time.time() + seconds
    while time.time() < end:
        out.append(chunk(text, secs))
    q.put((cpu, out))


def gapped(cpu, runs, gap):
    os.sched_setaffinity(0, {cpu})
    text = page()
    pre = chunk(text, 0.3)
    P, R, Q = [], [], []
    for _ in range(runs):
        r = chunk(text, 3.0)
        post = chunk(text, 0.3)
        P.append(pre), R.append(r), Q.append(post)
        pre = post
        time.sleep(gap)
    A = [(p + q) / 2 for p, q in zip(P, Q)]
    print("cpu %d, %d runs of 3 s: run %s" % (cpu, runs, describe(R)))
    print("  reference before the run: corr %.2f; after: %.2f; their mean: %.2f" %
          (corr(P, R), corr(Q, R), corr(A, R)))
    adj = [r / p for r, p in zip(R, P)]
    print("  the run over the reference before it: sd %.1f%%" %
          (100 * st.pstdev(adj) / st.mean(adj)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--chunk", type=float, default=0.5)
    ap.add_argument("--cpus", default="0", help="comma-separated CPUs, timed at once")
    ap.add_argument("--gap", type=float, default=None,
                    help="time 3 s runs with 0.3 s references around them, G s apart")
    a = ap.parse_args()
    cpus = [int(c) for c in a.cpus.split(",")]
    if a.gap is not None:
        gapped(cpus[0], max(2, int(a.seconds / (3.6 + a.gap))), a.gap)
        return
    q = Queue()
    ps = [Process(target=loop, args=(c, a.seconds, a.chunk, q)) for c in cpus]
    for p in ps:
        p.start()
    got = dict(q.get() for _ in ps)
    for p in ps:
        p.join()
    per3 = max(1, int(round(3.0 / a.chunk)))
    for c in cpus:
        s = got[c]
        print("cpu %d: %d chunks of %.1f s: %s" % (c, len(s), a.chunk, describe(s)))
        threes = [st.mean(s[i:i + per3]) for i in range(0, len(s) - per3 + 1, per3)]
        if len(threes) >= 3:
            print("  over 3 s: %s" % describe(threes))
        print("  " + " ".join("%.0f" % x for x in s))
    if len(cpus) == 2:
        print("cpu %d against cpu %d: corr %.2f" % (cpus[0], cpus[1], corr(got[cpus[0]], got[cpus[1]])))


if __name__ == "__main__":
    sys.exit(main())
