#!/usr/bin/env python3
"""Interleaved A/B of servers' CPU per request at fixed open-loop rates (the events lab's setup).

Each variant runs alone on CPU 0 in its own cgroup with the events lab's quota (20% of 5 ms);
all are started at once and loaded in turn (ABBA order per repetition) by
`triage load --mode rate` from CPU 1, 16 connections, the lab's 1 KiB file. Per run: CPU per
request from the variant's cpuacct.usage, the server's voluntary context switches per request,
the share of CFS periods throttled. Prints per rate and variant the mean, and per variant
against the first the mean of the paired ratios with a seeded bootstrap ci95.

  scripts/lowrate-ab.py --out results/x --rates 1000,3000,6000 --reps 4 \
      'A=triage:target/ci/triage.old' 'B=triage:target/ci/triage' 'N=nginx'
  a variant: NAME=triage:BINARY[:extra serve args] or NAME=nginx
Run under `flock /tmp/lab.lock`. Removes its processes and cgroups on exit.
"""
import argparse, json, os, random, signal, socket, statistics, subprocess, sys, time

CG = "/sys/fs/cgroup"


def cg_make(name, quota_us, period_us):
    for c in ("cpu", "cpuacct"):
        os.makedirs(f"{CG}/{c}/{name}", exist_ok=True)
    open(f"{CG}/cpu/{name}/cpu.cfs_period_us", "w").write(str(period_us))
    open(f"{CG}/cpu/{name}/cpu.cfs_quota_us", "w").write(str(quota_us))


def cg_usage(name):
    return int(open(f"{CG}/cpuacct/{name}/cpuacct.usage").read())


def cg_stat(name):
    d = dict(l.split() for l in open(f"{CG}/cpu/{name}/cpu.stat"))
    return int(d["nr_periods"]), int(d["nr_throttled"])


def switches(pid):
    v = n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for l in open(f"/proc/{pid}/task/{t}/status"):
                if l.startswith("voluntary_ctxt_switches"):
                    v += int(l.split()[1])
                elif l.startswith("nonvoluntary_ctxt_switches"):
                    n += int(l.split()[1])
        except FileNotFoundError:
            pass
    return v, n


NGINX = """worker_processes 1;
daemon off;
master_process off;
worker_rlimit_nofile 30000;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 20000; }}
http {{
  default_type text/html;
  sendfile on;
  keepalive_timeout 3600s;
  keepalive_requests 100000000;
  client_body_temp_path {d}/tmp;
  gzip off;
  access_log {d}/access.log combined;
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
"""


def start(v, out, root, port, cg):
    d = f"{out}/{v['name']}"
    os.makedirs(d, exist_ok=True)
    if v["kind"] == "nginx":
        os.makedirs(f"{d}/tmp", exist_ok=True)
        open(f"{d}/nginx.conf", "w").write(NGINX.format(d=d, port=port, root=root))
        cmd = ["nginx", "-c", f"{d}/nginx.conf", "-p", d]
    else:
        cmd = [v["bin"], "serve", "--root", root, "--listen", f"127.0.0.1:{port}",
               "--slots", "1", "--keepalive-timeout", "1h", "--header-timeout", "1h",
               "--max-conns", "10100", "--access-log", f"{d}/access.log"] + v["args"]

    def pre():
        for c in ("cpu", "cpuacct"):
            open(f"{CG}/{c}/{cg}/cgroup.procs", "w").write(str(os.getpid()))
        os.sched_setaffinity(0, {0})

    p = subprocess.Popen(cmd, preexec_fn=pre, stdout=open(f"{d}/server.log", "w"),
                         stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{v['name']} did not listen: {open(d + '/server.log').read()}")


def load(triage, url, rate, dur, seed):
    r = subprocess.run(["taskset", "-c", "1", triage, "load", "--mode", "rate", "--rate", str(rate),
                        "--connections", "16", "--duration", dur, "--plain", "--json",
                        "--seed", str(seed), url], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def boot(xs, n=2000, seed=1):
    rng = random.Random(seed)
    ms = sorted(statistics.mean(rng.choice(xs) for _ in xs) for _ in range(n))
    return ms[int(0.025 * n)], ms[int(0.975 * n) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rates", default="1000,3000,6000")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--dur", default="3s")
    ap.add_argument("--quota", type=float, default=0.2)
    ap.add_argument("--period-us", type=int, default=5000)
    ap.add_argument("--loader", default="target/ci/triage")
    ap.add_argument("variants", nargs="+")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    root = f"{out}/root"
    os.makedirs(root, exist_ok=True)
    open(f"{root}/file.html", "w").write("a" * 1024)
    vs = []
    for s in a.variants:
        name, spec = s.split("=", 1)
        parts = spec.split(":")
        v = {"name": name, "kind": parts[0]}
        if parts[0] == "triage":
            v["bin"] = os.path.abspath(parts[1])
            v["args"] = parts[2].split() if len(parts) > 2 else []
        vs.append(v)
    procs, cgs = [], []
    def cleanup(*_):
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(5)
            except Exception:
                p.kill()
        time.sleep(0.3)
        for cg in cgs:
            for c in ("cpu", "cpuacct"):
                try:
                    os.rmdir(f"{CG}/{c}/{cg}")
                except OSError:
                    pass
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    rows = []
    try:
        for i, v in enumerate(vs):
            cg = f"cap4ab{os.getpid()}-{v['name']}"
            cg_make(cg, int(a.quota * a.period_us), a.period_us)
            cgs.append(cg)
            port = 21000 + (os.getpid() % 1000) * 10 + i
            procs.append(start(v, out, root, port, cg))
            v.update(cg=cg, port=port, pid=procs[-1].pid)
        for v in vs:  # warm up
            load(a.loader, f"http://127.0.0.1:{v['port']}/file.html", 500, "1s", 1)
        rates = [float(r) for r in a.rates.split(",")]
        for rep in range(a.reps):
            order = vs if rep % 2 == 0 else vs[::-1]
            for rate in rates:
                for v in order:
                    u0, (p0, t0), (s0, n0) = cg_usage(v["cg"]), cg_stat(v["cg"]), switches(v["pid"])
                    t = time.time()
                    j = load(a.loader, f"http://127.0.0.1:{v['port']}/file.html", rate, a.dur, rep + 2)
                    u1, (p1, t1), (s1, n1) = cg_usage(v["cg"]), cg_stat(v["cg"]), switches(v["pid"])
                    req = j["requests"]
                    row = dict(rep=rep, rate=rate, variant=v["name"], requests=req,
                               errors=j["request_errors"], cpu_us=(u1 - u0) / 1e3 / max(req, 1),
                               vol=(s1 - s0) / max(req, 1), invol=(n1 - n0) / max(req, 1),
                               throttled=(t1 - t0) / max(p1 - p0, 1),
                               p99=j["t1"]["p99_ms"], t=t)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    time.sleep(0.3)
    finally:
        cleanup()
        json.dump(rows, open(f"{out}/rows.json", "w"), indent=1)
    base = vs[0]["name"]
    print(f"\n{'rate':>7} {'variant':>8} {'cpu_us/req':>10} {'vol/req':>8} {'thr%':>6} {'p99ms':>7}  x {base} [ci95] (paired by rep)")
    for rate in rates:
        b = {r["rep"]: r["cpu_us"] for r in rows if r["rate"] == rate and r["variant"] == base}
        for v in vs:
            rs = [r for r in rows if r["rate"] == rate and r["variant"] == v["name"]]
            m = lambda k: statistics.mean(r[k] for r in rs)
            ratios = [r["cpu_us"] / b[r["rep"]] for r in rs if r["rep"] in b]
            lo, hi = boot(ratios)
            print(f"{rate:7.0f} {v['name']:>8} {m('cpu_us'):10.2f} {m('vol'):8.3f} {100*m('throttled'):6.1f} {m('p99'):7.2f}  x{statistics.mean(ratios):.3f} [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
