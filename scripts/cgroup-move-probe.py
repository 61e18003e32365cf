#!/usr/bin/env python3
"""How long a move between cgroups takes on this machine (cgroup v1 cpu hierarchy or v2).

Moves one sleeping process back and forth between a probe cgroup and its parent N times,
20 ms apart, while two CPU-bound processes keep the CPUs busy (a loaded server, where an RCU
grace period is long on a non-preemptible kernel), and prints the write's latency quantiles.
Run it before and after `triage pos attach --favor-dynmods` (or `mount -o
remount,favordynmods` on the cgroup2 mount) to see what the option changes; since 6.18 the
kernel keeps the faster mode until reboot once it was on, so the "before" needs a fresh boot.

Usage (root): scripts/cgroup-move-probe.py [N]   (default 200 round trips)
"""
import os
import subprocess
import sys
import time


def cpu_dir():
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        point = left.split()[4]
        fstype, _, opts = right.split()[:3]
        if fstype == "cgroup" and "cpu" in opts.split(","):
            return point, "tasks"
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        if right.split()[0] == "cgroup2":
            return left.split()[4], "cgroup.procs"
    sys.exit("no cgroup cpu hierarchy mounted")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    base, file = cpu_dir()
    own = open("/proc/self/cgroup").read()
    probe = os.path.join(base, f"triage-move-probe-{os.getpid()}")
    os.mkdir(probe)
    sleeper = subprocess.Popen(["sleep", "600"])
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 2)]
    home = None
    for line in open(f"/proc/{sleeper.pid}/cgroup"):
        f = line.strip().split(":", 2)
        if (file == "tasks" and "cpu" in f[1].split(",")) or (file == "cgroup.procs" and f[0] == "0"):
            home = os.path.join(base, f[2].lstrip("/"))
    ts = []
    try:
        for _ in range(n):
            for d in (probe, home):
                t = time.perf_counter()
                with open(os.path.join(d, file), "w") as w:
                    w.write(str(sleeper.pid))
                ts.append(time.perf_counter() - t)
            time.sleep(0.02)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        sleeper.kill()
        sleeper.wait()
        os.rmdir(probe)
    ts.sort()
    q = lambda p: ts[min(len(ts) - 1, int(len(ts) * p))] * 1e3
    fav = any("favordynmods" in l.split(" - ")[1] for l in open("/proc/self/mountinfo") if "cgroup" in l)
    print(f"{len(ts)} moves ({file} under {base}), favordynmods shown: {fav}: "
          f"p50 {q(0.5):.3f} ms, p90 {q(0.9):.3f}, p99 {q(0.99):.3f}, max {ts[-1]*1e3:.3f}")


if __name__ == "__main__":
    main()
