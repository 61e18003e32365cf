#!/usr/bin/env python3
"""Where an HTML request's t1 goes, per variant, from a run of scripts/t1_trace.sh.

Reads OUT/clock.txt, OUT/sched.txt or sched.txt.gz (perf's sched_switch/sched_wakeup,
CLOCK_MONOTONIC) and
OUT/runs/<run>/ (`triage lab pos --keep-runs`): the load's html.csv (each HTML request's
begin, connect, send, first and last byte, its page's start as Unix time), Apache's
access.log (`%P %{usec}t %D ...`), or nginx's access.log (`$msec $request_time
$upstream_connect_time $upstream_header_time $upstream_response_time ...`) and php-fpm's
(`%p %{REQUEST_START}e %{milli}d ...`).

Every HTML request's t1 (the page's start to the HTML's last byte) is cut into disjoint
parts that add up to it:

- client: the page's start to the browser's first step (the load generator late);
- connect: a new connection's connect (zero on a kept-alive connection);
- Apache: from the browser's send (or connect) to the end of the child's service (the access
  log's start + %D), the serving child's state at each instant:
  asleep before its request was read (`net`: the request on its way, the accept),
  running (`run`), runnable while its CPU runs nothing: before its first chance
  (`throttled`: the quota's own wait, which no order can shorten; the first chance is its
  wake-up when it woke inside a grant of the quota with at least its own CPU left in it, else
  the next refill) or after it (`throttled_after`: the quota spent on others while it waited:
  the order's part), runnable behind the hog (`behind_hog`), behind another server process
  (`behind_server`: another child, nginx, php-fpm), behind anything else (`behind_other`),
  asleep after its request was read (`blocked`: a full socket, a lock);
- php-fpm: the same states, of nginx's worker until it hands the request over (nginx's
  `$msec` passed as REQUEST_START), `queue` until the php-fpm child that served it wakes
  (no free child, or the accept), the child's states until it sleeps again, nginx's states
  until its access log's `$msec` (the response written);
- link: the end of the server's writing to the last byte at the browser (the tbf queue, the
  HTML's own bytes at the link's rate, TCP). nginx logs the time its event loop last woke
  (a cached clock, stale while it is starved of CPU): its writing ends at the end of its last
  run before the HTML's first byte arrived, when that is later.

Prints a table per variant (mean ms and share of mean t1); who had the CPU while the HTML
waited, by what they served and by the daemon's hold on them then (from each run's
actions.log: `text` raised, `head` the tail's head, `low` lowered or never raised: the floor
or the task's own value); what no order can remove (t1 less the CPU others got while the
HTML was runnable and the idle after its first chance) and so the most any order could win;
for Apache, the HTML's child against the quota's grants (whether it woke inside one, the
grants spent on others from its first chance to the grant it finished in, how far into that
grant it first ran, the daemon's hold on it at its wake-up and at that run); the quota's
refills during the bursts. Writes OUT/t1_parts.json.
Usage: scripts/t1_parts.py OUT [--csv FILE]  (one line per HTML request into FILE)
"""
import bisect
import collections
import csv
import glob
import gzip
import json
import os
import re
import sys

SERVER_COMMS = {"apache2", "php-fpm8.2", "php-fpm", "nginx"}
HOG_COMMS = {"sh"}
SW = re.compile(
    r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:\s+prev_comm=(.*?) prev_pid=(\d+) "
    r"prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)"
)
WK = re.compile(
    r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_wakeup:\s+comm=(.*?) pid=(\d+) prio=\d+ target_cpu=(\d+)"
)
PARTS = [
    "client", "connect", "net", "queue", "run", "throttled", "throttled_after", "behind_hog",
    "behind_server", "behind_other", "blocked", "link",
]


class Trace:
    """Per-task state transitions and per-CPU occupants, on the realtime clock (s)."""

    def __init__(self, path, offset):
        self.tr = collections.defaultdict(list)  # tid -> [(t, state, cpu)]
        self.comm = {}
        self.occ = collections.defaultdict(list)  # cpu -> [(t, pid, comm)]
        self.refills = {}
        # What a server-side task was doing at an instant (set per run): html, image, ...
        self.who = lambda pid, comm, t: "hog" if comm in HOG_COMMS else comm
        # The daemon's hold on a task at an instant (set per run, `held`): text, head, low.
        self.level = lambda pid, t: "-"
        if not os.path.exists(path) and os.path.exists(path + ".gz"):
            path += ".gz"
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            for line in f:
                m = SW.search(line)
                if m:
                    cpu, t = int(m.group(1)), float(m.group(2)) + offset
                    pc, pp, ps, nc, np_ = m.group(3), int(m.group(4)), m.group(5), m.group(6), int(m.group(7))
                    self.occ[cpu].append((t, np_, nc))
                    if pc in SERVER_COMMS:
                        self.comm[pp] = pc
                        self.tr[pp].append((t, "R" if ps.startswith("R") else "S", cpu))
                    if nc in SERVER_COMMS:
                        self.comm[np_] = nc
                        self.tr[np_].append((t, "X", cpu))
                    continue
                m = WK.search(line)
                if m and m.group(3) in SERVER_COMMS:
                    t, pid = float(m.group(2)) + offset, int(m.group(4))
                    self.comm[pid] = m.group(3)
                    if self.tr[pid] and self.tr[pid][-1][1] == "X":
                        continue  # woken before it had gone to sleep: still running
                    self.tr[pid].append((t, "R", int(m.group(5))))
        self.keys = {k: [x[0] for x in v] for k, v in self.tr.items()}
        self.okeys = {c: [x[0] for x in v] for c, v in self.occ.items()}

    def state_at(self, tid, t):
        """(state, cpu) of `tid` at `t`: X running, R runnable, S asleep, None unknown."""
        ks = self.keys.get(tid)
        if not ks:
            return None, None
        i = bisect.bisect_right(ks, t) - 1
        if i < 0:
            return None, None
        _, s, c = self.tr[tid][i]
        return s, c

    def pieces(self, tid, a, b):
        """[(x, y, state, cpu)] covering [a, b] for `tid`."""
        out = []
        s, c = self.state_at(tid, a)
        x = a
        ks = self.keys.get(tid, [])
        i = bisect.bisect_right(ks, a)
        while i < len(ks) and ks[i] < b:
            t, s2, c2 = self.tr[tid][i]
            out.append((x, t, s, c))
            x, s, c = t, s2, c2
            i += 1
        out.append((x, b, s, c))
        return out

    def refill_spans(self, cpu, bridge=0.0005, least=0.0002):
        """[(start, end)] of the stretches in which the server side runs on `cpu` for at
        least `least` after at least `bridge` without running there (cached): with the hog
        always runnable, one grant of the quota each (a task run for a few microseconds while
        the cgroup is throttled, and picked only to be throttled again, is no grant). At a
        100 ms period with a 10% quota a grant is about 10 ms every 100 ms; at 10 ms about
        1 ms (charged at the 4 ms tick: longer stretches, longer gaps)."""
        if cpu not in self.refills:
            spans = []
            occ, ks = self.occ.get(cpu, []), self.okeys.get(cpu, [])
            for i, (t, pid, comm) in enumerate(occ):
                if comm in SERVER_COMMS or comm in HOG_COMMS:
                    end = ks[i + 1] if i + 1 < len(ks) else t
                    if spans and t - spans[-1][1] < bridge:
                        spans[-1][1] = end
                        spans[-1][2] += end - t
                    else:
                        spans.append([t, end, end - t])
            kept = [(sp[0], sp[1]) for sp in spans if sp[2] >= least]
            self.refills[cpu] = (kept, [sp[0] for sp in kept])
        return self.refills[cpu]

    def refill_starts(self, cpu):
        """The starts of [`refill_spans`]: the quota's refills on `cpu`."""
        return self.refill_spans(cpu)[1]

    def grant_at(self, cpu, t):
        """The grant (start, end) of the quota running on `cpu` at `t`, or None (throttled)."""
        spans, starts = self.refill_spans(cpu)
        j = bisect.bisect_right(starts, t) - 1
        if j >= 0 and spans[j][0] <= t < spans[j][1]:
            return spans[j]
        return None

    def ran(self, tid, a, b):
        """CPU `tid` ran in [a, b] (s)."""
        return sum(y - x for x, y, s, _ in self.pieces(tid, a, b) if s == "X")

    def first_chance(self, cpu, t, need=0.0):
        """The first moment after `t` at which the quota lets a task that woke at `t` and
        needs `need` of CPU run on `cpu` to its end: `t` itself when it woke inside a grant
        with at least that much of it left (and at least 0.2 ms: an order that put it first
        would run it at once; the rest of that grant spent on others is the order's part),
        else the next refill (the wait until then is the quota's own, whatever the order)."""
        g = self.grant_at(cpu, t)
        if g is not None and g[1] - t >= max(0.0002, need):
            return t
        rs = self.refill_starts(cpu)
        j = bisect.bisect_right(rs, t)
        return rs[j] if j < len(rs) else float("inf")

    def waiting(self, cpu, a, b, acc, first_refill):
        """Add [a, b] of a runnable task on `cpu` to acc by what that CPU ran meanwhile; the
        CPU idle before `first_refill` (the task's first chance to run since its service
        began) is `throttled` (the quota's own wait), idle after it `throttled_after` (the
        quota spent on others while it waited)."""
        occ, ks = self.occ.get(cpu, []), self.okeys.get(cpu, [])
        i = bisect.bisect_right(ks, a) - 1
        x = a
        while True:
            cur = occ[i] if i >= 0 else (a, -1, "?")
            nxt = ks[i + 1] if i + 1 < len(ks) else float("inf")
            y = min(b, nxt)
            pid, comm = cur[1], cur[2]
            if pid == 0 and x < first_refill < y:
                acc["throttled"] += first_refill - x
                acc["throttled_after"] += y - first_refill
                k = None
            elif pid == 0:
                k = "throttled" if y <= first_refill else "throttled_after"
            elif comm in HOG_COMMS:
                k = "behind_hog"
            elif comm in SERVER_COMMS:
                k = "behind_server"
            else:
                k = "behind_other"
            if k:
                acc[k] += max(0.0, y - x)
            if k and k.startswith("behind") and y > x:
                acc["to_" + self.who(pid, comm, x)] += y - x
                acc["at_" + self.tag(pid, comm, x)] += y - x
            elif pid == 0 and y > max(x, first_refill):
                self.blame(cpu, max(x, first_refill), y, acc)
            if y >= b:
                return
            x, i = y, i + 1

    def blame(self, cpu, x, y, acc):
        """Share the idle [x, y] among the server-side tasks that ran in the stretch of the
        quota before it (their runtime left the cgroup throttled), by what they served."""
        rs = self.refill_starts(cpu)
        j = bisect.bisect_right(rs, x) - 1
        if j < 0:
            acc["to_unknown"] += y - x
            return
        occ, ks = self.occ.get(cpu, []), self.okeys.get(cpu, [])
        i = bisect.bisect_left(ks, rs[j])
        ran = collections.Counter()
        while i < len(ks) and ks[i] < x:
            t, pid, comm = occ[i]
            end = min(x, ks[i + 1] if i + 1 < len(ks) else x)
            if comm in SERVER_COMMS or comm in HOG_COMMS:
                ran["to_" + self.who(pid, comm, t)] += end - t
                ran["at_" + self.tag(pid, comm, t)] += end - t
            i += 1
        total = sum(d for k, d in ran.items() if k.startswith("to_"))
        if total <= 0:
            acc["to_unknown"] += y - x
            acc["at_unknown"] += y - x
            return
        for k, d in ran.items():
            acc[k] += (y - x) * d / total

    def tag(self, pid, comm, t):
        """What a task served at `t` and the daemon's hold on it then: `image@head`, ..."""
        w = self.who(pid, comm, t)
        return w if w in ("hog", "nginx") else f"{w}@{self.level(pid, t)}"

    def account(self, tid, a, b, acc, served_from=None):
        """Add `tid`'s states over [a, b] to acc: asleep before `served_from` is `net`."""
        if b <= a:
            return
        woke = self.first_wake(tid, a, b)
        need = self.ran(tid, a, b)
        chance = None
        for x, y, s, c in self.pieces(tid, a, b):
            d = y - x
            if d <= 0:
                continue
            if s == "X":
                acc["run"] += d
            elif s == "R":
                cpu = c if c is not None else 0
                if chance is None:
                    chance = self.first_chance(cpu, woke if woke is not None else x, need)
                self.waiting(cpu, x, y, acc, chance)
            elif served_from is not None and y <= served_from:
                acc["net"] += d
            elif served_from is not None and x < served_from:
                acc["net"] += served_from - x
                acc["blocked"] += y - served_from
            else:
                acc["blocked"] += d

    def first_wake(self, tid, a, b):
        """First instant in [a, b] at which `tid` is runnable or running (None: never)."""
        s, _ = self.state_at(tid, a)
        if s in ("R", "X"):
            return a
        ks = self.keys.get(tid, [])
        i = bisect.bisect_right(ks, a)
        while i < len(ks) and ks[i] <= b:
            if self.tr[tid][i][1] in ("R", "X"):
                return ks[i]
            i += 1
        return None

    def next_sleep(self, tid, a, b):
        """First instant in [a, b] at which `tid` goes to sleep (None: not before b)."""
        ks = self.keys.get(tid, [])
        i = bisect.bisect_right(ks, a)
        while i < len(ks) and ks[i] <= b:
            if self.tr[tid][i][1] == "S":
                return ks[i]
            i += 1
        return None


def stretches(tr, cpu, a, b, bridge=0.0005, least=0.0002):
    """The server side's busy stretches on its CPU that begin in [a, b]: [(start, length s,
    gap before it s, comm of the first task)]; spells of other tasks (kernel threads) shorter
    than `bridge` inside a stretch are bridged, stretches shorter than `least` left out. In exp 1 the hog never sleeps, so a gap is a
    throttled cgroup and a stretch is what one refill of the quota ran."""
    occ, ks = tr.occ.get(cpu, []), tr.okeys.get(cpu, [])
    i = max(0, bisect.bisect_left(ks, a) - 1)
    spans = []  # [start, end, first comm] of server-side occupancy
    while i < len(ks) and ks[i] <= b:
        t, pid, comm = occ[i]
        end = ks[i + 1] if i + 1 < len(ks) else t
        if comm in SERVER_COMMS or comm in HOG_COMMS:
            if spans and t - spans[-1][1] < bridge:
                spans[-1][1] = end
            else:
                spans.append([t, end, comm])
        i += 1
    # A task picked for a few microseconds while the cgroup is throttled (to be throttled
    # on its way back to user space) is no stretch.
    spans = [sp for sp in spans if sp[1] - sp[0] >= least]
    out = []
    for k in range(1, len(spans)):
        st, en, comm = spans[k]
        if st >= a:
            out.append((st, en - st, st - spans[k - 1][1], comm))
    return out


def serving(path, t_scale, d_scale):
    """who(pid, comm, t) for the tasks of a run: `html` or `image` while the access log has
    the task serving one, `idle_child` otherwise (between requests, a kept-alive connection's
    turn), `hog`, `nginx`."""
    iv = collections.defaultdict(list)
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            f = line.split()
            if len(f) < 3:
                continue
            try:
                pid, st, d = int(f[0]), float(f[1]) / t_scale, float(f[2]) / d_scale
            except ValueError:
                continue
            kind = "html" if ("text/html" in line or "index.html" in line) else "image"
            iv[pid].append((st, st + d, kind))
    for v in iv.values():
        v.sort()
    starts = {p: [x[0] for x in v] for p, v in iv.items()}

    def who(pid, comm, t):
        if comm in HOG_COMMS:
            return "hog"
        if comm == "nginx":
            return "nginx"
        v = iv.get(pid)
        if v:
            i = bisect.bisect_right(starts[pid], t + 0.001) - 1
            if i >= 0 and v[i][0] - 0.001 <= t <= v[i][1] + 0.001:
                return v[i][2]
        return "idle_child"

    return who


def held(path, variant):
    """level(pid, t) for a run, from the daemon's actions log (`<Unix ns> raise|head|lower
    <tid>`): `text` after a raise, `head` after a head, `low` after a lower or before the
    first action (the floor where the variant has one, else the task's own value); `all20`
    in `+all20` variants, `-` without a daemon."""
    if "+all20" in variant:
        return lambda pid, t: "all20"
    if not os.path.exists(path):
        return lambda pid, t: "-"
    ev = collections.defaultdict(list)
    name = {"raise": "text", "head": "head", "lower": "low"}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 3 and f[1] in name:
            ev[int(f[2])].append((int(f[0]) / 1e9, name[f[1]]))
    keys = {p: [x[0] for x in v] for p, v in ev.items()}

    def level(pid, t):
        i = bisect.bisect_right(keys.get(pid, []), t) - 1
        return ev[pid][i][1] if i >= 0 else "low"

    level.events = ev
    return level


def grant_view(tr, pid, x, end, level):
    """Where the HTML's serving child met the quota: whether it woke inside a grant (or in
    the gap), the grants that came and went from its first chance until the one it finished
    in (`missed`: whole grants spent on others), how far into that grant it first ran, and
    the daemon's hold on it at its wake and at that run (`lowered`: a lower in between, the
    companion rule or the tail's head passing on)."""
    woke = tr.first_wake(pid, x, end)
    if woke is None:
        return None
    # The CPU it woke on: its state at the wake-up (a wake-up names its target CPU).
    cpu = tr.state_at(pid, woke)[1] or 0
    chance = tr.first_chance(cpu, woke, tr.ran(pid, woke, end))
    # The grant it finished in (its service's end), and its first real run in it: a task
    # runnable when the grant runs out is picked for a few microseconds to be throttled
    # (it returns to user space), which is no run.
    spans, starts = tr.refill_spans(cpu)
    j = bisect.bisect_right(starts, end) - 1
    if j < 0:
        return None
    g_end = spans[j]
    ks = tr.keys.get(pid, [])
    i = bisect.bisect_left(ks, max(woke, g_end[0]) - 1e-6)
    first_run = None
    while i < len(ks) and ks[i] <= end:
        t, st, _ = tr.tr[pid][i]
        nxt = tr.tr[pid][i + 1] if i + 1 < len(ks) else None
        if st == "X" and (nxt is None or nxt[0] - t >= 0.00008 or nxt[1] == "S"):
            first_run = t
            break
        i += 1
    if first_run is None:
        first_run = max(woke, g_end[0])
    in_grant = chance == woke
    # Grants that began at or after its first chance and before the one it finished in, and
    # the one it woke in if it did not finish there: whole grants spent on others.
    missed = max(0, bisect.bisect_left(starts, g_end[0]) - bisect.bisect_left(starts, chance))
    if in_grant and tr.grant_at(cpu, woke) != g_end:
        missed += 1
    done_in_grant = missed == 0
    ev = getattr(level, "events", {}).get(pid, [])
    lowered = any(a == "low" and woke - 0.0005 <= t <= first_run for t, a in ev)
    return {"woke_in_grant": in_grant, "missed": missed, "finished_in_grant": done_in_grant,
            "into_grant_ms": 1e3 * (first_run - max(g_end[0], woke)),
            "wait_ms": 1e3 * (first_run - woke), "chance_ms": 1e3 * (chance - woke),
            "at_wake": level(pid, woke), "at_run": level(pid, first_run), "lowered": lowered}


def read_html(run):
    rows = []
    with open(os.path.join(run, "load", "html.csv")) as f:
        for r in csv.DictReader(f):
            o = {"browser": int(r["browser"]), "start": float(r["start_unix_us"]) / 1e6}
            for k in ("begin_ms", "connect_ms", "connected_ms", "sent_ms", "first_ms", "done_ms"):
                o[k] = float(r[k]) / 1e3 if r[k] else None
            rows.append(o)
    return rows


def kept_runs(out, names):
    """Every kept run of the lab under OUT with its directory's name, its variant's name (a
    run named `variant<N>` takes the summary's N-th name) and its HTML rows; runs without a
    load's html.csv are left out."""
    for run in sorted(glob.glob(os.path.join(out, "runs", "*"))):
        base = os.path.basename(run)
        variant = base.rsplit("-b", 1)[0]
        if variant.startswith("variant") and variant[7:].isdigit():
            variant = names[int(variant[7:])]
        try:
            rows = read_html(run)
        except OSError:
            continue
        yield run, base, variant, rows


def html_lines(path, t_scale, d_scale):
    """[(pid, start s, duration s, browser)] of the HTML lines of an access log (browser -1:
    php-fpm's, which names the script, not the page: matched by time)."""
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        f = line.split()
        m = re.search(r"/b(\d+)/index\.html", line)
        if not m and "text/html" in line:
            m = re.match(r"(-1)", "-1")
        if not m or len(f) < 3:
            continue
        try:
            out.append((int(f[0]), float(f[1]) / t_scale, float(f[2]) / d_scale, int(m.group(1))))
        except ValueError:
            continue
    return out


def nginx_lines(path):
    """[(end s, request_time, connect, header, response, browser)] of nginx's HTML lines."""
    out = []
    if not os.path.exists(path):
        return out
    for line in open(path, errors="replace"):
        f = line.split()
        m = re.search(r"/b(\d+)/index\.html", line)
        if not m or len(f) < 5:
            continue
        num = lambda x: float(x) if x not in ("-", "") else None
        out.append((float(f[0]), float(f[1]), num(f[2]), num(f[3]), num(f[4]), int(m.group(1))))
    return out


def nearest(cands, t, lo, hi):
    best = None
    for c in cands:
        if lo <= c[0] <= hi and (best is None or abs(c[0] - t) < abs(best[0] - t)):
            best = c
    return best


def way_in(h):
    """An HTML request's start: its parts so far (the client's own delay, the connect), the
    page's start t0, the request's begin, the moment it could be sent (x) and its end."""
    t0 = h["start"]
    acc = collections.Counter()
    begin = t0 + h["begin_ms"]
    acc["client"] += h["begin_ms"]
    x = begin
    if h["connect_ms"] is not None:
        acc["connect"] += h["connected_ms"] - h["begin_ms"]
        x = t0 + h["connected_ms"]
    return acc, t0, begin, x, t0 + h["done_ms"]


def apache_parts(tr, h, log):
    acc, t0, begin, x, done = way_in(h)
    cands = [(s, pid, d) for pid, s, d, b in log if b == h["browser"]]
    m = nearest(cands, t0 + h["sent_ms"], begin - 0.005, done)
    if m is None:
        return None
    start, pid, d = m
    end = min(start + d, done)
    if not tr.keys.get(pid):
        return None
    tr.account(pid, x, max(x, end), acc, served_from=start)
    acc["link"] += done - max(x, end)
    acc["grant"] = grant_view(tr, pid, x, max(x, end), tr.level)
    return acc


def php_parts(tr, h, ngx, fpm, nginx_tids):
    acc, t0, begin, x, done = way_in(h)
    n = nearest([(e, rt, c, hd, rs, b) for e, rt, c, hd, rs, b in ngx if b == h["browser"]],
                done, begin, done + 0.002)
    if n is None:
        return None
    # php-fpm's line: the HTML handed over (nginx's $msec, ms) closest after nginx read it.
    n_start = n[0] - n[1]
    f = nearest([(s, pid, d) for pid, s, d, b in fpm if b in (-1, h["browser"])],
                n_start, n_start - 0.002, n[0])
    if f is None:
        return None
    n_end = min(n[0], done)
    handoff, pid = f[0], f[1]
    # nginx's worker: the nginx task that ran most in this request's time.
    ntid = max(nginx_tids, key=lambda k: sum(
        1 for t in tr.keys[k][bisect.bisect_left(tr.keys[k], begin):bisect.bisect_right(tr.keys[k], n_end)]))
    # nginx stamps its log with the time its event loop last woke (a cached clock): when it
    # stays runnable past it (starved of CPU), the HTML's bytes left in one of its later
    # runs. The end of its last run before the HTML's first byte bounds that write.
    first = t0 + h["first_ms"]
    ks = tr.keys.get(ntid, [])
    i = bisect.bisect_right(ks, first) - 1
    while i >= 0 and ks[i] > n_end:
        if tr.tr[ntid][i][1] != "X" and i > 0 and tr.tr[ntid][i - 1][1] == "X":
            n_end = ks[i]
            break
        i -= 1
    handoff = min(max(handoff, x), n_end)
    tr.account(ntid, x, handoff, acc)
    woke = tr.first_wake(pid, handoff, n_end)
    if woke is None:
        woke = handoff
    acc["queue"] += woke - handoff
    slept = tr.next_sleep(pid, woke, n_end) or n_end
    tr.account(pid, woke, slept, acc)
    tr.account(ntid, slept, n_end, acc)
    acc["link"] += done - n_end
    return acc


def main():
    out = sys.argv[1]
    csv_out = sys.argv[sys.argv.index("--csv") + 1] if "--csv" in sys.argv else None
    offs = [float(l) for l in open(os.path.join(out, "clock.txt")) if l.strip()]
    tr = Trace(os.path.join(out, "sched.txt"), offs[0])
    summary = json.load(open(os.path.join(out, "summary.json")))
    names = [v["name"] for v in summary["variants"]]
    per = collections.defaultdict(list)
    lines = []
    for run, base, variant, rows in kept_runs(out, names):
        if os.path.isdir(os.path.join(run, "apache")):
            log = html_lines(os.path.join(run, "apache", "access.log"), 1e6, 1e6)
            tr.who = serving(os.path.join(run, "apache", "access.log"), 1e6, 1e6)
            f = lambda h: apache_parts(tr, h, log)
        elif os.path.isdir(os.path.join(run, "php-fpm")):
            ngx = nginx_lines(os.path.join(run, "php-fpm", "nginx", "access.log"))
            fpm = html_lines(os.path.join(run, "php-fpm", "php-fpm.access.log"), 1.0, 1e3)
            tr.who = serving(os.path.join(run, "php-fpm", "php-fpm.access.log"), 1.0, 1e3)
            nts = [k for k, c in tr.comm.items() if c == "nginx"]
            f = lambda h: php_parts(tr, h, ngx, fpm, nts)
        else:
            continue
        tr.level = held(os.path.join(run, "actions.log"), variant)
        for h in rows:
            acc = f(h)
            if acc is None:
                per[variant].append(None)
                continue
            grant = acc.pop("grant", None)
            acc = {k: acc.get(k, 0.0) * 1e3
                   for k in PARTS + [k for k in acc if k.startswith(("to_", "at_"))]}
            acc["t1"] = h["done_ms"] * 1e3
            acc["reused"] = h["connect_ms"] is None
            # What no order of the server side's tasks can remove: t1 less the CPU others
            # got while the HTML was runnable and the idle after its first chance.
            acc["unorderable"] = acc["t1"] - acc["throttled_after"] - sum(
                acc[k] for k in PARTS if k.startswith("behind"))
            per[variant].append(acc)
            if grant:
                acc["grant"] = grant
            flat = {k: v for k, v in acc.items() if k != "grant"}
            flat.update({"g_" + k: v for k, v in (grant or {}).items()})
            lines.append(dict(run_dir=base, variant=variant, browser=h["browser"], **flat))
    # The server CPU's refills of the quota during each variant's bursts.
    cpus = collections.Counter(c for v in tr.tr.values() for _, st, c in v if st == "X")
    server_cpu = cpus.most_common(1)[0][0] if cpus else 0
    refills = collections.defaultdict(list)
    for run, base, variant, rows in kept_runs(out, names):
        by_start = collections.defaultdict(list)
        for h in rows:
            by_start[round(h["start"] - h["browser"] * 0.04, 1)].append(h)
        for burst in by_start.values():
            a = min(h["start"] for h in burst)
            b = max(h["start"] + h["done_ms"] for h in burst)
            refills[variant].extend(stretches(tr, server_cpu, a, b))
    result = {}
    for v in [n for n in names if n in per]:
        got = [a for a in per[v] if a]
        if not got:
            continue
        t1 = sum(a["t1"] for a in got) / len(got)
        parts = {k: sum(a[k] for a in got) / len(got) for k in PARTS}
        tos = sorted({k for a in got for k in a if k.startswith("to_")})
        lost = {k: sum(a.get(k, 0.0) for a in got) / len(got) for k in tos}
        ats = sorted({k for a in got for k in a if k.startswith("at_")})
        held_by = {k: sum(a.get(k, 0.0) for a in got) / len(got) for k in ats}
        unorderable = sum(a["unorderable"] for a in got) / len(got)
        gs = [a["grant"] for a in got if "grant" in a]
        grants = None
        if gs:
            miss = collections.Counter(min(g["missed"], 3) for g in gs)
            t1_by_miss = collections.defaultdict(list)
            for a in got:
                if "grant" in a:
                    t1_by_miss[min(a["grant"]["missed"], 3)].append(a["t1"])
            grants = {
                "n": len(gs),
                "woke_in_grant": sum(g["woke_in_grant"] for g in gs) / len(gs),
                "missed_mean": sum(g["missed"] for g in gs) / len(gs),
                "missed_share": {str(k): miss[k] / len(gs) for k in sorted(miss)},
                "t1_ms_by_missed": {str(k): sum(x) / len(x) for k, x in sorted(t1_by_miss.items())},
                "into_grant_ms_mean": sum(g["into_grant_ms"] for g in gs) / len(gs),
                "wait_ms_mean": sum(g["wait_ms"] for g in gs) / len(gs),
                "chance_ms_mean": sum(g["chance_ms"] for g in gs) / len(gs),
                "at_wake": dict(collections.Counter(g["at_wake"] for g in gs)),
                "at_run": dict(collections.Counter(g["at_run"] for g in gs)),
                "lowered_before_run": sum(g["lowered"] for g in gs),
                "finished_in_grant": sum(g["finished_in_grant"] for g in gs) / len(gs),
            }
        result[v] = {"n": len(got), "unmatched": len(per[v]) - len(got), "t1_ms": t1,
                     "unorderable_ms": unorderable, "held_by_ms": held_by, "grants": grants,
                     "lost_to_ms": lost,
                     "parts_ms": parts,
                     "share": {k: (parts[k] / t1 if t1 else 0.0) for k in PARTS},
                     "sum_ms": sum(parts.values())}
        st = refills.get(v, [])
        if st:
            first = collections.Counter(
                "hog" if c in HOG_COMMS else (c if c in SERVER_COMMS else "other") for *_, c in st)
            result[v]["refills"] = {
                "n": len(st),
                "run_ms_mean": 1e3 * sum(x[1] for x in st) / len(st),
                "gap_ms_mean": 1e3 * sum(x[2] for x in st) / len(st),
                "gap_ms_p90": 1e3 * sorted(x[2] for x in st)[int(0.9 * (len(st) - 1))],
                "run_ms_p90": 1e3 * sorted(x[1] for x in st)[int(0.9 * (len(st) - 1))],
                "idle_share_in_gaps_over_15ms": sum(x[2] for x in st if x[2] > 0.015)
                / max(1e-9, sum(x[2] for x in st)),
                "first_task_share": {k: n / len(st) for k, n in first.items()},
            }
    head = "variant".ljust(20) + "".join(k[:9].rjust(10) for k in ["t1", "n"] + PARTS)
    print(head)
    for v, r in result.items():
        print(v[:20].ljust(20) + f"{r['t1_ms']:10.1f}{r['n']:10d}" +
              "".join(f"{r['parts_ms'][k]:10.1f}" for k in PARTS))
        print("  share".ljust(30) + "".join(f"{100 * r['share'][k]:9.1f}%" for k in PARTS))
    print("who had the CPU (in the stretch, or the stretch before an idle spell) while the HTML waited, ms:")
    for v, r in result.items():
        print(f"  {v}: " + ", ".join(f"{k[3:]} {x:.1f}" for k, x in sorted(r["lost_to_ms"].items())))
    print("the same, by what the daemon held each of them at (text, head, low: the floor or its"
          " own value; all20; - without a daemon), ms:")
    for v, r in result.items():
        print(f"  {v}: " + ", ".join(f"{k[3:]} {x:.1f}" for k, x in sorted(r["held_by_ms"].items())
                                     if x >= 0.05))
    base = next(iter(result.values()), None)
    print("what no order can remove (t1 less the CPU others got while the HTML was runnable and"
          " the idle after its first chance), ms, and the most an order could win against the"
          " first variant:")
    for v, r in result.items():
        win = 1 - r["unorderable_ms"] / base["t1_ms"] if base and base["t1_ms"] else 0.0
        print(f"  {v}: t1 {r['t1_ms']:.1f}, unorderable {r['unorderable_ms']:.1f}"
              f" (most an order wins against {next(iter(result))}: {100 * win:+.1f}%)")
    print("the HTML's child and the quota's grants (grants missed: from its first chance to the"
          " grant it finished in; its first run in that grant):")
    for v, r in result.items():
        g = r.get("grants")
        if not g:
            continue
        miss = ", ".join(f"{k}{'+' if k == '3' else ''}: {100 * x:.0f}% (t1 {g['t1_ms_by_missed'][k]:.0f})"
                         for k, x in g["missed_share"].items())
        print(f"  {v}: woke inside a grant {100 * g['woke_in_grant']:.0f}%; grants missed mean "
              f"{g['missed_mean']:.2f} [{miss}]; wake to first run {g['wait_ms_mean']:.1f} ms "
              f"(of which to its first chance {g['chance_ms_mean']:.1f}); first run "
              f"{g['into_grant_ms_mean']:.2f} ms into its grant; held at wake {g['at_wake']}, at "
              f"first run {g['at_run']}, lowered in between {g['lowered_before_run']}")
    print("refills of the quota on the server CPU during the HTML requests of each burst:")
    for v, r in result.items():
        f = r.get("refills")
        if f:
            firsts = ", ".join(f"{k} {100 * x:.0f}%" for k, x in sorted(f["first_task_share"].items()))
            print(f"  {v}: {f['n']} stretches, run {f['run_ms_mean']:.2f} ms (p90 "
                  f"{f['run_ms_p90']:.2f}) after idle {f['gap_ms_mean']:.2f} ms (p90 "
                  f"{f['gap_ms_p90']:.2f}; {100 * f['idle_share_in_gaps_over_15ms']:.0f}% of the "
                  f"idle time in gaps over 15 ms); first to run: {firsts}")
    json.dump(result, open(os.path.join(out, "t1_parts.json"), "w"), indent=1)
    if csv_out:
        with open(csv_out, "w", newline="") as fh:
            tos = sorted({k for l in lines for k in l if k.startswith(("to_", "at_", "g_"))})
            w = csv.DictWriter(fh, fieldnames=["run_dir", "variant", "browser", "t1", "reused",
                                               "unorderable"] + PARTS + tos,
                               restval=0.0)
            w.writeheader()
            for l in lines:
                w.writerow(l)


if __name__ == "__main__":
    main()
