//! The adversarial suite: `triage serve` as a process on loopback, sent what an attacker or a
//! harsh operator would send (the vectors of issue 19, side by side with nginx's answers), each
//! bounded in time, asserting the answer, the memory bound or the absence of leftovers.
//! Every server process is killed when its test ends, and every script process it started
//! (recognised by the `TRIAGE_CGI` mark in its environment) too, also when a test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MARK: &str = "TRIAGE_CGI";

/// A `triage serve` process, killed (with the scripts of its run) when dropped.
struct Serve {
    child: std::process::Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SIGTERM first: a clean stop removes the server's cgroups and state file.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        kill_marked_by(self.child.id());
    }
}

/// Kill the script processes whose mark names server process `pid`'s runs.
fn kill_marked_by(pid: u32) {
    let prefix = format!("{pid}-");
    for (p, _) in os::reaper::marked(MARK, prefix.as_bytes()) {
        os::reaper::kill(p);
    }
}

impl Serve {
    fn start(config: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_triage"))
            .args(["serve", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut url = |what: &str| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.split("http://")
                .nth(1)
                .and_then(|r| r.split('/').next())
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .unwrap_or_else(|| panic!("no {what} address in {line:?}"))
        };
        let addr = url("listen");
        let admin = url("admin");
        Serve { child, addr, admin }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn rss_kib(&self) -> u64 {
        os::procfs::rss_kib(self.pid()).unwrap()
    }
}

/// A temporary site: two virtual hosts, a FIFO, a script directory; the config file.
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new(extra: &str, scripts: &[(&str, &str)], cgroups: bool) -> (Site, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::write(p.join("secret.txt"), "secret").unwrap();
        for name in ["a", "b"] {
            let root = p.join(name);
            std::fs::create_dir_all(root.join("sub")).unwrap();
            std::fs::write(root.join("hello.txt"), format!("hello from {name}\n")).unwrap();
            std::fs::write(root.join("sub/index.html"), "sub").unwrap();
            std::fs::write(root.join("ten.txt"), "0123456789").unwrap();
            std::os::unix::fs::symlink("../secret.txt", root.join("escape.txt")).unwrap();
        }
        assert!(Command::new("mkfifo")
            .arg(p.join("a/fifo"))
            .status()
            .unwrap()
            .success());
        let bin = p.join("cgi-bin");
        std::fs::create_dir_all(&bin).unwrap();
        for (name, text) in scripts {
            let f = bin.join(name);
            std::fs::write(&f, text).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let config = p.join("triage.toml");
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\nslots = 1\nthreads = 2\n\
                 cgi_state = \"{state}\"\n{extra}\n\
                 [[site]]\nname = \"a.test\"\nroot = \"{a}\"\n\
                 [site.cgi]\ndirs = [{{ url = \"/cgi-bin\", dir = \"{bin}\" }}]\n\
                 cgroups = {cgroups}\ntimeout = \"20s\"\nmax_request_body = \"64MiB\"\n\
                 [[site]]\nname = \"b.test\"\nroot = \"{b}\"\n",
                state = p.join("cgi.run").display(),
                a = p.join("a").display(),
                b = p.join("b").display(),
                bin = bin.display(),
            ),
        )
        .unwrap();
        (Site { dir }, config)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The request sent after each one under test: it closes the connection once the first has
/// been answered (a client that half-closes is taken as gone and gets no answer).
const LAST: &[u8] = b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";

/// Send `req` then [`LAST`], read until the server closes (at most 10 s): the answers.
fn exchange(addr: SocketAddr, req: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = c.write_all(req);
    let _ = c.write_all(LAST);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status(text: &str) -> u16 {
    text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn healthy(s: &Serve) -> bool {
    let mut c = TcpStream::connect(s.admin).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out.ends_with("ok\n")
}

#[test]
fn request_heads_get_the_answers_nginx_gives() {
    let (_site, config) = Site::new("", &[], false);
    let s = Serve::start(&config);
    let cases: &[(&str, &[u8], u16)] = &[
        (
            "smuggling: CL and TE together",
            b"POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (
            "smuggling: two lengths",
            b"POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            400,
        ),
        ("no Host", b"GET /hello.txt HTTP/1.1\r\n\r\n", 400),
        (
            "two Hosts",
            b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nHost: evil.example\r\n\r\n",
            400,
        ),
        ("Host with a space", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        ("Host with ..", b"GET / HTTP/1.1\r\nHost: ..\r\n\r\n", 400),
        (
            "userinfo in the target",
            b"GET http://u@b.test/hello.txt HTTP/1.1\r\nHost: b.test\r\n\r\n",
            400,
        ),
        (
            "gzip, chunked",
            b"POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        (
            "identity, chunked",
            b"POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        (
            "TE twice",
            b"POST /hello.txt HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        ("HTTP/2.0", b"GET /hello.txt HTTP/2.0\r\nHost: a.test\r\n\r\n", 505),
        ("HTTP/9.9", b"GET /hello.txt HTTP/9.9\r\nHost: a.test\r\n\r\n", 505),
        ("the h2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        ("HTTP/1.2", b"GET /hello.txt HTTP/1.2\r\nHost: a.test\r\n\r\n", 200),
        ("traversal %2e%2e", b"GET /%2e%2e/secret.txt HTTP/1.1\r\nHost: a.test\r\n\r\n", 403),
        ("traversal %2f", b"GET /..%2fsecret.txt HTTP/1.1\r\nHost: a.test\r\n\r\n", 403),
        ("traversal %5c", b"GET /..%5csecret.txt HTTP/1.1\r\nHost: a.test\r\n\r\n", 403),
        ("NUL", b"GET /hello.txt%00.html HTTP/1.1\r\nHost: a.test\r\n\r\n", 403),
        ("symlink out of the root", b"GET /escape.txt HTTP/1.1\r\nHost: a.test\r\n\r\n", 403),
        ("a file as a directory", b"GET /hello.txt/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 404),
        ("a file as a directory, /.", b"GET /hello.txt/. HTTP/1.1\r\nHost: a.test\r\n\r\n", 404),
        ("range", b"GET /ten.txt HTTP/1.1\r\nHost: a.test\r\nRange: bytes=2-4\r\n\r\n", 206),
        ("suffix range", b"GET /ten.txt HTTP/1.1\r\nHost: a.test\r\nRange: bytes=-3\r\n\r\n", 206),
        ("unsatisfiable range", b"GET /ten.txt HTTP/1.1\r\nHost: a.test\r\nRange: bytes=10-\r\n\r\n", 416),
        ("several ranges: the whole file", b"GET /ten.txt HTTP/1.1\r\nHost: a.test\r\nRange: bytes=0-1,3-4\r\n\r\n", 200),
    ];
    for (what, req, want) in cases {
        let a = exchange(s.addr, req);
        assert_eq!(status(&a), *want, "{what}: {a}");
        assert!(!a.contains("secret"), "{what}: {a}");
    }
    let a = exchange(
        s.addr,
        b"GET http://b.test/hello.txt HTTP/1.1\r\nHost: a.test\r\n\r\n",
    );
    assert!(a.contains("\r\n\r\nhello from b\n"), "absolute form: {a}");
    let a = exchange(s.addr, b"GET //sub HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert!(a.contains("\r\nlocation: /sub/\r\n"), "//sub: {a}");
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: a.test\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(status(&exchange(s.addr, long.as_bytes())), 414);
    assert!(healthy(&s));
}

#[test]
fn fifos_and_slow_clients_block_nothing() {
    let (_site, config) = Site::new("header_timeout = \"1s\"\n", &[], false);
    let s = Serve::start(&config);
    let t0 = Instant::now();
    let fifo = |_| exchange(s.addr, b"GET /fifo HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let (x, y) = std::thread::scope(|sc| {
        let x = sc.spawn(|| fifo(0));
        let y = sc.spawn(|| fifo(1));
        (x.join().unwrap(), y.join().unwrap())
    });
    assert_eq!((status(&x), status(&y)), (404, 404));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(healthy(&s));
    // Slowloris: a head trickled slower than header_timeout is cut off.
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nX-Slow: ")
        .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 64];
    let _ = c.read(&mut buf);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // SIGTERM with a half-sent head: the server stops at once.
    let mut half = TcpStream::connect(s.addr).unwrap();
    half.write_all(b"GET /hello.txt HTTP/1.1\r\nHo").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(s.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let mut s = s;
    let code = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st.code();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "SIGTERM waited for a half-sent head"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
}

#[test]
fn an_idle_socket_flood_does_not_lock_clients_out() {
    let (_site, config) = Site::new("max_conns = 20\nheader_timeout = \"30s\"\n", &[], false);
    let s = Serve::start(&config);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = s.addr;
    let flood: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // 50 sockets per thread that send nothing, replaced as they are closed.
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut socks: Vec<TcpStream> = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline
                {
                    // Drop the sockets the server closed.
                    socks.retain(|c| {
                        let mut b = [0u8; 1];
                        match (&*c).read(&mut b) {
                            Ok(0) => false,
                            Ok(_) => true,
                            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                        }
                    });
                    while socks.len() < 50 {
                        match TcpStream::connect(addr) {
                            Ok(c) => {
                                c.set_nonblocking(true).unwrap();
                                socks.push(c)
                            }
                            Err(_) => break,
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut ok = 0;
    for _ in 0..100 {
        let t0 = Instant::now();
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let _ =
            c.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.starts_with(b"HTTP/1.1 200") && t0.elapsed() < Duration::from_secs(1) {
            ok += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for f in flood {
        f.join().unwrap();
    }
    eprintln!("{ok} of 100 served within 1 s beside 200 idle sockets (max_conns 20)");
    assert!(ok >= 95, "{ok} of 100 served within 1 s");
}

#[test]
fn held_chunked_bodies_cost_little_memory() {
    let (_site, config) = Site::new(
        "",
        &[(
            "sink.sh",
            "#!/bin/sh\nn=$(wc -c)\nprintf 'Content-Type: text/plain\\n\\n%s\\n' \"$n\"\n",
        )],
        false,
    );
    let s = Serve::start(&config);
    let a = exchange(
        s.addr,
        b"POST /cgi-bin/sink.sh HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!(status(&a), 200, "{a}");
    let before = s.rss_kib();
    let chunk = vec![b'x'; 1 << 20];
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(
            b"POST /cgi-bin/sink.sh HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .unwrap();
        for _ in 0..8 {
            c.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .unwrap();
            c.write_all(&chunk).unwrap();
            c.write_all(b"\r\n").unwrap();
        }
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let during = s.rss_kib();
    let each = during.saturating_sub(before) / 20;
    eprintln!(
        "server RSS {before} KiB, {during} KiB with 20 held 8 MiB chunked bodies: {each} KiB each"
    );
    assert!(each <= 2048, "{each} KiB per held body");
    drop(held);
    assert!(healthy(&s));
}

#[test]
fn memory_returns_after_idle_connections_close() {
    let (_site, config) = Site::new("keepalive_timeout = \"60s\"\n", &[], false);
    let s = Serve::start(&config);
    let req = b"GET /hello.txt HTTP/1.1\r\nHost: a.test\r\n\r\n";
    // Warm up, then the baseline.
    for _ in 0..50 {
        let _ = exchange(s.addr, req);
    }
    // The background tasks (trimmer, CGI sweeper) have run once.
    std::thread::sleep(Duration::from_millis(1500));
    let before = s.rss_kib();
    let n = 5000;
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(req).unwrap();
        conns.push(c);
    }
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 512];
        assert!(c.read(&mut b).unwrap() > 0);
    }
    std::thread::sleep(Duration::from_millis(300));
    let during = s.rss_kib();
    drop(conns);
    // The server trims once a second after the connections have gone.
    let t0 = Instant::now();
    let mut after = s.rss_kib();
    let mut series = vec![after];
    while after > before + before / 10 && t0.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(200));
        after = s.rss_kib();
        series.push(after);
    }
    eprintln!("RSS after the close, every 200 ms: {series:?}");
    eprintln!(
        "server RSS {before} KiB, {during} KiB with {n} idle keep-alive connections ({} B each), {after} KiB after they closed",
        (during.saturating_sub(before)) * 1024 / n as u64
    );
    assert!(
        after <= before + before / 10,
        "{before} -> {during} -> {after} KiB"
    );
}

/// Wait until `pid` is gone (or a zombie), at most `limit`.
fn gone_within(pid: i32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if os::task::ended(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn read_pid(file: &Path, limit: Duration) -> i32 {
    let t0 = Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return p;
        }
        assert!(t0.elapsed() < limit, "{} never written", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scripts_left_after_kill_9(cgroups: bool) {
    let scripts = [
        (
            "spin.sh",
            "#!/bin/sh\necho $$ > spin.pid\nwhile :; do :; done\n",
        ),
        (
            "daemon.sh",
            "#!/bin/sh\nsetsid sleep 300 </dev/null >/dev/null 2>&1 &\necho $! > daemon.pid\nprintf 'Content-Type: text/plain\\n\\nok\\n'\n",
        ),
    ];
    let (site, config) = Site::new("", &scripts, cgroups);
    let bin = site.path().join("cgi-bin");
    let first = Serve::start(&config);
    // The spinning script's client stays connected; the daemon's script has answered.
    let mut spin = TcpStream::connect(first.addr).unwrap();
    spin.write_all(b"GET /cgi-bin/spin.sh HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    let a = exchange(
        first.addr,
        b"GET /cgi-bin/daemon.sh HTTP/1.1\r\nHost: a.test\r\n\r\n",
    );
    assert_eq!(status(&a), 200, "{a}");
    let spinner = read_pid(&bin.join("spin.pid"), Duration::from_secs(10));
    let daemon = read_pid(&bin.join("daemon.pid"), Duration::from_secs(10));
    let first_pid = first.child.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first.pid()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut first = first;
    let _ = first.child.wait();
    std::mem::forget(first);
    // Whatever happens below, nothing of the first run stays.
    struct Sweep(u32);
    impl Drop for Sweep {
        fn drop(&mut self) {
            kill_marked_by(self.0);
        }
    }
    let _sweep = Sweep(first_pid);
    drop(spin);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !os::task::ended(spinner),
        "the spinning script was expected to outlive the crashed server (else this test proves nothing)"
    );
    // The restart finds the previous run in the state file and kills its processes.
    let second = Serve::start(&config);
    for (what, pid) in [("spinning script", spinner), ("setsid daemon", daemon)] {
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "the {what} {pid} of the crashed run survived the restart"
        );
    }
    assert!(
        os::reaper::marked(MARK, format!("{first_pid}-").as_bytes()).is_empty(),
        "marked processes of the first run remain"
    );
    assert!(healthy(&second));
}

#[test]
fn no_script_survives_kill_9_and_a_restart_without_cgroups() {
    scripts_left_after_kill_9(false);
}

#[test]
fn no_script_survives_kill_9_and_a_restart_with_cgroups() {
    let why = if !nix::unistd::geteuid().is_root() {
        Some("needs root".to_string())
    } else {
        os::probe().err()
    };
    if let Some(why) = why {
        println!("SKIP no_script_survives_kill_9_and_a_restart_with_cgroups: {why}");
        return;
    }
    scripts_left_after_kill_9(true);
}
