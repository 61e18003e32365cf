#!/usr/bin/env python3
"""How late an attach daemon lets go of Apache's HTML children, from kept runs
(`triage lab pos ... --keep-runs`: each run's apache/access.log `%P %{usec}t %D ...` and the
daemon's actions.log `<Unix ns> raise|head|lower <tid>`).

For each run directory matched by a PATTERN (e.g. 'results/x/runs/apache+pos-b9-r*'), prints
over all its runs:
- text episodes: the delay from the end of an HTML request's service (the access log's start
  + %D) to the daemon's next `lower` of that child (p10, p50, p90, p99 in ms);
- image episodes that start while their child is still held as text (its last decision
  before the request's start a `raise`), of all image episodes.

A slow lever (the weight lever's cgroup writes) holds up the daemon's loop: its decisions
come late, and image requests start on children still held as text.
Usage: scripts/lower_lag.py PATTERN...
"""
import bisect
import collections
import glob
import os
import sys


def load(d):
    eps = []
    for line in open(os.path.join(d, "apache", "access.log")):
        f = line.split()
        if len(f) < 6:
            continue
        st = int(f[1]) * 1000
        eps.append((int(f[0]), st, st + int(f[2]) * 1000, f[4].endswith(".html")))
    acts = collections.defaultdict(list)
    for line in open(os.path.join(d, "actions.log")):
        f = line.split()
        if len(f) == 3:
            acts[int(f[2])].append((int(f[0]), f[1]))
    return eps, acts


def main(patterns):
    for pat in patterns:
        lags, held, images = [], 0, 0
        for d in sorted(glob.glob(pat)):
            eps, acts = load(d)
            for pid, start, end, html in eps:
                a = acts.get(pid, [])
                i = bisect.bisect_right([t for t, _ in a], start)
                if html:
                    later = [t for t, k in a[i:] if k == "lower"]
                    if later:
                        lags.append((later[0] - end) / 1e6)
                else:
                    images += 1
                    held += i > 0 and a[i - 1][1] == "raise"
        lags.sort()
        if not lags:
            print(f"{pat}: no text episode with a later lower")
            continue
        q = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
        print(f"{pat}: {len(lags)} text episodes, end to lower ms p10 {q(.1):.2f} p50 "
              f"{q(.5):.2f} p90 {q(.9):.2f} p99 {q(.99):.2f}; image episodes starting on a "
              f"child held as text: {held} of {images}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
