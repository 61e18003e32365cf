#!/usr/bin/env python3
"""Where php-fpm's requests spent their time, by the daemon's level.

    scripts/fpm_levels.py 'results/RUN/runs/VARIANT-b9-r*' [...]

For each glob of kept run directories (`triage lab pos --keep-runs`) of a php-fpm attach
variant, reads php-fpm's access log (`%p %{%s.%f}t %{mili}d ...`: the child, the request's
start, its duration) and the daemon's actions log (`<Unix ns> raise|head|lower <tid>`), and
sums, over the requests that served HTML and those that served an image, the wall time each
request spent inside php-fpm while its child was held raised as text (`raise`), as the
tail's head (`head`) or at the floor / its own value (`lower`). A child's level at a
request's start is the last action on it before. Wall time, not CPU: a request held at a
level while its cgroup is throttled counts the wait too.
"""

import collections
import glob
import sys


def run(d):
    acts = collections.defaultdict(list)
    for line in open(f"{d}/actions.log"):
        f = line.split()
        if len(f) >= 3:
            acts[int(f[2])].append((int(f[0]) / 1e9, f[1]))
    tot = collections.defaultdict(collections.Counter)
    for line in open(f"{d}/php-fpm/php-fpm.access.log"):
        f = line.split()
        try:
            pid, st, dur = int(f[0]), float(f[1]), float(f[2]) / 1e3
        except (ValueError, IndexError):
            continue
        en = st + dur
        kind = "html" if "text/html" in line else "image"
        level = "lower"
        for t, a in acts[pid]:
            if t < st:
                level = a
        prev = st
        for t, a in acts[pid]:
            if st <= t <= en:
                tot[kind][level] += t - prev
                prev, level = t, a
        tot[kind][level] += en - prev
    return tot


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for pat in sys.argv[1:]:
        dirs = sorted(glob.glob(pat))
        if not dirs:
            sys.exit(f"no run directory matches {pat}")
        agg = collections.defaultdict(collections.Counter)
        for d in dirs:
            for k, c in run(d).items():
                agg[k].update(c)
        parts = []
        for kind in ("html", "image"):
            c = agg[kind]
            parts.append(
                f"{kind}: "
                + ", ".join(f"{lv} {c[lv]:.1f} s" for lv in ("raise", "head", "lower"))
            )
        print(f"{pat} ({len(dirs)} runs): " + "; ".join(parts))


if __name__ == "__main__":
    main()
