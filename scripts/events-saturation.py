#!/usr/bin/env python3
"""What stops a server at the events lab's saturation: per 100 ms, server side and client side.

One server (triage or nginx) alone on CPU 0 in a cgroup with the events lab's quota (20% of
5 ms, as scripts/lowrate-ab.py starts it), loaded open-loop by `triage load --mode rate` from
CPU 1 at nice -10 (the lab's CLIENT_NICE), for each RATE and each --conns count. A sampler on
CPU 0 (outside the server's cgroup: it takes none of the server's quota) records every 100 ms:
the server cgroup's CPU, its CFS periods and throttled periods and throttled time; CPU 1's
busy share (/proc/stat) and the load generator's own CPU (per thread); how many of the hot
connections hold an unread request at the server (server-side Recv-Q > 0: the server's
backlog) and an unread response at the client (client-side Recv-Q > 0: the client's backlog);
the listen socket's overflows (nstat). From the generator's pages.csv: per second, requests
due (scheduled), served, p99 latency from the scheduled send, and how late the sends were
(a connection whose previous response is not back sends late: its queue is in the client).

  scripts/events-saturation.py --out results/x --server triage --rates 8000,8800 --conns 16,128
Run under `flock /tmp/lab.lock`. Removes its processes and cgroups on exit.
"""
import argparse, csv, importlib.util, json, os, signal, subprocess, sys, threading, time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ab", os.path.join(here, "lowrate-ab.py"))
ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ab)
CG = ab.CG
HZ = os.sysconf("SC_CLK_TCK")


def cpu_stat(cg):
    d = dict(l.split() for l in open(f"{CG}/cpu/{cg}/cpu.stat"))
    return int(d["nr_periods"]), int(d["nr_throttled"]), int(d["throttled_time"])


def cpu1():
    for l in open("/proc/stat"):
        if l.startswith("cpu1 "):
            f = [int(x) for x in l.split()[1:]]
            return sum(f[:8]) - f[3] - f[4], sum(f[:8])  # busy, total (ticks)
    return 0, 1


def task_ticks(pid):
    out = {}
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            try:
                s = open(f"/proc/{pid}/task/{t}/stat").read()
                rest = s[s.rfind(")") + 2:].split()
                comm = s[s.find("(") + 1:s.rfind(")")]
                out[f"{t}:{comm}"] = int(rest[11]) + int(rest[12])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
    except FileNotFoundError:
        pass
    return out


def backlog(port):
    """(server-side sockets with unread bytes, client-side sockets with unread bytes)."""
    r = subprocess.run(["ss", "-tnH", "state", "established"], capture_output=True, text=True)
    srv = cli = 0
    for l in r.stdout.splitlines():
        f = l.split()
        if len(f) < 4:
            continue
        rq, local, peer = int(f[0]), f[2], f[3]
        if rq == 0:
            continue
        if local.endswith(f":{port}"):
            srv += 1
        elif peer.endswith(f":{port}"):
            cli += 1
    return srv, cli


def nstat():
    r = subprocess.run(["nstat", "-az", "TcpExtListenOverflows", "TcpExtListenDrops"],
                       capture_output=True, text=True)
    d = {}
    for l in r.stdout.splitlines():
        f = l.split()
        if len(f) >= 2 and f[0].startswith("TcpExt"):
            d[f[0]] = int(f[1])
    return d


class Sampler(threading.Thread):
    def __init__(self, cg, port, interval=0.1):
        super().__init__(daemon=True)
        self.cg, self.port, self.iv = cg, port, interval
        self.stop = threading.Event()
        self.load_pid = None
        self.rows = []

    def run(self):
        os.sched_setaffinity(0, {0})
        prev = None
        t0 = time.time()
        while not self.stop.is_set():
            now = time.time()
            cur = dict(t=now - t0, usage=ab.cg_usage(self.cg), stat=cpu_stat(self.cg), cpu1=cpu1(),
                       load=task_ticks(self.load_pid) if self.load_pid else {},
                       backlog=backlog(self.port))
            if prev:
                dt = cur["t"] - prev["t"]
                dp = cur["stat"][0] - prev["stat"][0]
                lt = {k: (v - prev["load"].get(k, 0)) / HZ / dt for k, v in cur["load"].items()}
                b1 = cur["cpu1"][0] - prev["cpu1"][0]
                t1 = cur["cpu1"][1] - prev["cpu1"][1]
                self.rows.append(dict(
                    t=round(cur["t"], 3),
                    server_cpu_pct_of_quota=(cur["usage"] - prev["usage"]) / 1e9 / dt / QUOTA * 100,
                    throttled_pct=100 * (cur["stat"][1] - prev["stat"][1]) / dp if dp else None,
                    throttled_ms=(cur["stat"][2] - prev["stat"][2]) / 1e6,
                    cpu1_busy_pct=100 * b1 / t1 if t1 else None,
                    loadgen_cpu_pct=100 * sum(lt.values()),
                    loadgen_threads={k.split(":", 1)[1]: round(100 * v, 1) for k, v in lt.items() if v > 0},
                    server_backlog=cur["backlog"][0], client_backlog=cur["backlog"][1]))
            prev = cur
            self.stop.wait(max(0.0, self.iv - (time.time() - now)))


def per_second(pages_csv, dur_s):
    rows = list(csv.DictReader(open(pages_csv)))
    secs = {}
    for r in rows:
        s = float(r["start"]) / 1e3
        k = int(s)
        d = secs.setdefault(k, dict(due=0, done=0, failed=0, lat=[], done_at=0))
        d["due"] += 1
        if r.get("t1_ms") and not r.get("error"):
            d["lat"].append(float(r["t1_ms"]))
            d["done"] += 1
            end = int(s + float(r["t1_ms"]) / 1e3)
            secs.setdefault(end, dict(due=0, done=0, failed=0, lat=[], done_at=0))["done_at"] += 1
        else:
            d["failed"] += 1
    out = []
    for k in sorted(secs):
        d = secs[k]
        lat = sorted(d["lat"])
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
        out.append(dict(second=k, due=d["due"], completed_in_second=d["done_at"], failed=d["failed"],
                        p50_ms=p(0.5), p99_ms=p(0.99), max_ms=lat[-1] if lat else None))
    return out


QUOTA = 0.2


def main():
    global QUOTA
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--server", default="triage")
    ap.add_argument("--bin", default="target/ci/triage")
    ap.add_argument("--rates", required=True)
    ap.add_argument("--conns", default="16")
    ap.add_argument("--dur", default="3s")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quota", type=float, default=0.2)
    ap.add_argument("--period-us", type=int, default=5000)
    ap.add_argument("--client", default="nice",
                    help="the generator's scheduling, comma-separated to run each: nice (nice -10, "
                         "the lab's CLIENT_NICE) or fifo (SCHED_FIFO 1: preempts every fair task)")
    ap.add_argument("--burners", default="0",
                    help="counts of nice-10 CPU burners on CPU 1 during each run (as the "
                         "helpers' builds), e.g. 0,3: every rate and conns at each")
    a = ap.parse_args()
    QUOTA = a.quota
    out = os.path.abspath(a.out)
    root = f"{out}/root"
    os.makedirs(root, exist_ok=True)
    open(f"{root}/file.html", "w").write("a" * 1024)
    v = {"name": a.server, "kind": a.server}
    if a.server == "triage":
        v.update(bin=os.path.abspath(a.bin), args=[])
    cg = f"cap5sat{os.getpid()}"
    ab.cg_make(cg, int(a.quota * a.period_us), a.period_us)
    port = 23000 + os.getpid() % 1000
    proc = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    summary = []
    try:
        proc = ab.start(v, out, root, port, cg)
        url = f"http://127.0.0.1:{port}/file.html"
        subprocess.run(["taskset", "-c", "1", a.bin, "load", "--mode", "rate", "--rate", "500",
                        "--connections", "16", "--duration", "1s", "--plain", url],
                       capture_output=True)
        for rate in [float(r) for r in a.rates.split(",")]:
            for conns, nb, cl in [(int(c), int(b), cl) for c in a.conns.split(",")
                                  for b in a.burners.split(",") for cl in a.client.split(",")]:
                burn = [subprocess.Popen(["nice", "-n", "10", "taskset", "-c", "1", "sh", "-c",
                                          "while :; do :; done"]) for _ in range(nb)]
                tag = f"r{int(rate)}-c{conns}-b{nb}-{cl}"
                d = f"{out}/{tag}"
                n0 = nstat()
                s = Sampler(cg, port)
                s.start()
                time.sleep(0.25)
                u0, st0 = ab.cg_usage(cg), cpu_stat(cg)
                t0 = time.time()
                sched = ["nice", "-n", "-10"] if cl == "nice" else ["chrt", "-f", "1"]
                lp = subprocess.Popen(sched + ["taskset", "-c", "1", a.bin, "load",
                                       "--mode", "rate", "--rate", str(rate), "--connections",
                                       str(conns), "--duration", a.dur, "--plain", "--json",
                                       "--drain", "2s", "--threads", str(a.threads), "--out", d,
                                       "--seed", "2", url],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                time.sleep(0.05)
                # nice -> taskset -> triage: the same pid after the execs.
                s.load_pid = lp.pid
                so, _ = lp.communicate()
                dt = time.time() - t0
                for b in burn:
                    b.kill()
                    b.wait()
                u1, st1 = ab.cg_usage(cg), cpu_stat(cg)
                time.sleep(0.15)
                s.stop.set()
                s.join()
                n1 = nstat()
                j = json.loads(so)
                rows = s.rows
                busy = [r for r in rows if r["loadgen_cpu_pct"] > 1]
                mean = lambda k: sum(r[k] for r in busy) / len(busy) if busy else None
                res = dict(
                    server=a.server, rate=rate, conns=conns, burners=nb, client=cl, requests=j["requests"],
                    errors=j["request_errors"], served_per_offered=j["requests"] / (rate * float(a.dur.rstrip("s"))),
                    served_rps_over_window=j["requests"] / dt,
                    p50_ms=j["t1"]["median_ms"], p99_ms=j["t1"]["p99_ms"],
                    server_idle_pct=100 - (u1 - u0) / 1e9 / dt / a.quota * 100,
                    throttled_pct=100 * (st1[1] - st0[1]) / max(1, st1[0] - st0[0]),
                    throttled_ms_per_s=(st1[2] - st0[2]) / 1e6 / dt,
                    cpu1_busy_pct_mean=mean("cpu1_busy_pct"),
                    cpu1_busy_pct_max=max((r["cpu1_busy_pct"] for r in busy), default=None),
                    loadgen_cpu_pct_mean=mean("loadgen_cpu_pct"),
                    loadgen_cpu_pct_max=max((r["loadgen_cpu_pct"] for r in busy), default=None),
                    server_backlog_mean=mean("server_backlog"),
                    client_backlog_mean=mean("client_backlog"),
                    client_backlog_max=max((r["client_backlog"] for r in busy), default=None),
                    listen_overflows=n1.get("TcpExtListenOverflows", 0) - n0.get("TcpExtListenOverflows", 0),
                    listen_drops=n1.get("TcpExtListenDrops", 0) - n0.get("TcpExtListenDrops", 0),
                    per_second=per_second(f"{d}/pages.csv", dt))
                json.dump(dict(result=res, samples=rows), open(f"{d}/probe.json", "w"), indent=1)
                summary.append(res)
                print(json.dumps({k: (round(x, 2) if isinstance(x, float) else x)
                                  for k, x in res.items() if k != "per_second"}), flush=True)
                for p in res["per_second"]:
                    print("   ", json.dumps(p), flush=True)
                time.sleep(0.5)
    finally:
        if proc:
            proc.terminate()
            try:
                proc.wait(5)
            except Exception:
                proc.kill()
        time.sleep(0.3)
        for c in ("cpu", "cpuacct"):
            try:
                os.rmdir(f"{CG}/{c}/{cg}")
            except OSError:
                pass
        json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)


if __name__ == "__main__":
    main()
