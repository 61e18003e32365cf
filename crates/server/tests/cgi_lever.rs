//! The CGI lever end to end (root): behind a real server with `pos`, a script started for a
//! request of a marked worker runs at nice -20 from its start, and a script that prints while
//! it computes is restored at its worker's first burst without the mark; under `fifo` nothing
//! is raised; nothing stays raised or journaled afterwards. The scripts report their own nice
//! value (Perl's `getpriority`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use policy::{PolicyConfig, Tunable, MS};
use server::cgi::CgiConfig;
use server::config::{CgiLever, Config, PolicySection, SiteConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;

/// Prints its nice value once, with the headers (a page: computes, then prints).
const TEXT: &str = "#!/usr/bin/perl\nmy $n = getpriority(0, 0);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nnice=$n\\n\";\n";
/// Prints as it goes (an image produced in pieces): its nice value at the start, then again
/// after its first output was relayed.
const STREAM: &str = "#!/usr/bin/perl\n$| = 1;\n\
    print \"Content-Type: image/bmp\\r\\n\\r\\nfirst=\" . getpriority(0, 0) . \"\\n\";\n\
    select(undef, undef, undef, 0.4);\n\
    print \"later=\" . getpriority(0, 0) . \"\\n\";\n";
/// Computes (sleeps) before printing anything: held raised meanwhile.
const SLOW: &str = "#!/usr/bin/perl\nselect(undef, undef, undef, 0.5);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nnice=\" . getpriority(0, 0) . \"\\n\";\n";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether the test `name` must skip (it needs root for nice -20 and the lever's journal);
/// says so.
fn skip_unless_root(name: &str) -> bool {
    if is_root() {
        return false;
    }
    eprintln!("SKIP {name}: needs root (nice -20, /run/triage/lever)");
    true
}

/// Write executable scripts `(name, text)` into `dir`.
fn install(dir: &Path, scripts: &[(&str, &str)]) {
    for (name, text) in scripts {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn site(dir: &Path) -> CgiConfig {
    let bin = dir.join("cgi-bin");
    std::fs::create_dir_all(&bin).unwrap();
    install(
        &bin,
        &[("text.pl", TEXT), ("stream.pl", STREAM), ("slow.pl", SLOW)],
    );
    let mut c = CgiConfig::new("/cgi-bin", bin);
    // The lever orders a script against its siblings: scripts stay in the server's cgroup.
    c.cgroups = false;
    c
}

async fn get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .expect("response in time")
        .unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

/// The `key=` value in a response's body.
fn value(resp: &str, key: &str) -> i32 {
    resp.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {resp}"))
        .trim()
        .parse()
        .unwrap()
}

/// A running server of one site whose scripts are `cgi`'s, with `policy` (SLP and RW fixed)
/// and the CGI lever `lever`; stopped by [`stop_restored`].
async fn start(
    root: &Path,
    cgi: CgiConfig,
    policy: &str,
    slp_rw: (u64, u32),
    lever: CgiLever,
) -> common::Running {
    common::start(config(root, cgi, policy, slp_rw, lever)).await
}

/// The configuration [`start`] runs.
fn config(
    root: &Path,
    cgi: CgiConfig,
    policy: &str,
    (slp, rw): (u64, u32),
    lever: CgiLever,
) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        sites: vec![SiteConfig {
            name: "t".into(),
            aliases: Vec::new(),
            root: root.to_owned(),
            index: None,
            cgi: Some(cgi),
        }],
        policy: PolicySection {
            name: policy.into(),
            config: PolicyConfig {
                slp: Tunable::Fixed(slp),
                rw: Tunable::Fixed(rw),
                ..PolicyConfig::default()
            },
        },
        cgi_lever: lever,
        shutdown_timeout: Duration::from_secs(1),
        ..Config::default()
    }
}

/// A `pos` server (SLP and RW fixed) over a fresh test site with `scripts` added and the CGI
/// lever named `lever`; the site's directory lives as long as the returned guard.
async fn start_pos(
    scripts: &[(&str, &str)],
    slp_rw: (u64, u32),
    lever: &str,
) -> (tempfile::TempDir, common::Running) {
    let tmp = tempfile::tempdir().unwrap();
    let cgi = site(tmp.path());
    install(&cgi.dirs[0].dir, scripts);
    let run = start(tmp.path(), cgi, "pos", slp_rw, mode(lever)).await;
    (tmp, run)
}

/// The CGI lever named `s` (as `--cgi-lever` reads it).
fn mode(s: &str) -> CgiLever {
    s.parse().unwrap()
}

/// The site's CGI handler (its lever and counters).
fn handler(run: &common::Running) -> &server::cgi::Cgi {
    run.ctx.sites().iter().find_map(|s| s.cgi.as_ref()).unwrap()
}

/// Check that no lever error happened and nothing stays raised (scripts, nor the server's
/// threads: up to 5 s for the last scripts to be reaped), then stop the server.
async fn stop_restored(run: common::Running) {
    let c = handler(&run);
    let lever = c.lever().expect("a CGI lever").clone();
    let errors = c
        .stats()
        .lever_errors
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(errors, 0, "lever errors");
    let end = Instant::now() + Duration::from_secs(5);
    while (lever.raised() > 0 || lever.raised_tasks() > 0) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(lever.raised(), 0, "scripts restored");
    assert_eq!(lever.raised_tasks(), 0, "the server's threads restored too");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn scripts_of_marked_workers_start_raised_and_images_are_restored() {
    if skip_unless_root("scripts_of_marked_workers_start_raised_and_images_are_restored") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let cgi = site(tmp.path());
    for policy in ["pos", "fifo"] {
        // Workers idle since the start are past SLP; RW 1: the end of the burst that starts a
        // script demotes its worker.
        let run = start(tmp.path(), cgi.clone(), policy, (50 * MS, 1), mode("nice")).await;
        let addr = run.addr;
        let cgi = handler(&run);
        let lever = cgi.lever().expect("cgi_lever = nice").clone();
        let stats = cgi.stats().clone();
        // The scripts inherit the forking thread's nice: this runtime's.
        let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let text = get(addr, "/cgi-bin/text.pl").await;
        let stream = get(addr, "/cgi-bin/stream.pl").await;
        if policy == "pos" {
            assert_eq!(
                value(&text, "nice"),
                -20,
                "a marked worker's script starts raised"
            );
            assert_eq!(value(&stream, "first"), -20, "{stream}");
            assert_eq!(
                value(&stream, "later"),
                base,
                "restored once its worker relayed output without the mark: {stream}"
            );
            // While a script is held raised, so is the thread that relays its output
            // (priority inheritance); the last restore puts the thread back.
            let slow = tokio::spawn(get(addr, "/cgi-bin/slow.pl"));
            tokio::time::sleep(Duration::from_millis(250)).await;
            assert_eq!(lever.raised(), 1, "the slow script is held");
            assert!(
                lever.raised_tasks() >= 2,
                "the script and the server's thread"
            );
            assert_eq!(value(&slow.await.unwrap(), "nice"), -20);
            assert!(stats.raised.load(std::sync::atomic::Ordering::Relaxed) >= 3);
            assert!(stats.lowered.load(std::sync::atomic::Ordering::Relaxed) >= 1);
        } else {
            assert_eq!(value(&text, "nice"), base, "fifo marks nobody");
            assert_eq!(value(&stream, "first"), base);
            assert_eq!(stats.raised.load(std::sync::atomic::Ordering::Relaxed), 0);
        }
        // Every script was reaped: nothing is held raised.
        stop_restored(run).await;
    }
}

/// A script that burns the CPU time its query names (ms, its start included), printing nothing
/// until the end: its nice value at the start and at the end.
fn burn_script() -> String {
    let (nr, clock) = os::cputime::process_clock_syscall();
    format!(
        "#!/usr/bin/perl\n\
         my $first = getpriority(0, 0);\n\
         my $ts = \"\\0\" x 16;\n\
         sub cpu {{ syscall({nr}, {clock}, $ts) == 0 or die \"clock_gettime: $!\"; \
         my ($s, $ns) = unpack(\"q q\", $ts); $s + $ns / 1e9 }}\n\
         my $until = ($ENV{{QUERY_STRING}} || 1) / 1000; my $x = 0;\n\
         while (cpu() < $until) {{ $x += $_ * 0.5 for 1 .. 100 }}\n\
         print \"Content-Type: text/html\\r\\n\\r\\nfirst=$first\\nlast=\" . getpriority(0, 0) . \"\\n\";\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_raised_script_running_past_the_text_budget_is_lowered_a_short_one_never() {
    if skip_unless_root("a_raised_script_running_past_the_text_budget_is_lowered_a_short_one_never")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cgi = site(tmp.path());
    let p = cgi.dirs[0].dir.join("burn.pl");
    std::fs::write(&p, burn_script()).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    cgi.timeout = Duration::from_secs(20);
    // Every request comes on a worker idle past SLP (marked); RW high enough that no worker is
    // demoted while its script computes without printing: only the script's own CPU time can
    // lower it.
    let run = start(tmp.path(), cgi, "pos", (30 * MS, 50), mode("nice+budget")).await;
    let addr = run.addr;
    let cgi = handler(&run);
    let lever = cgi.lever().expect("cgi_lever = nice+budget").clone();
    let stats = cgi.stats().clone();
    let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
    let budget_lowered = || {
        stats
            .lowered_budget
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    // Learning: scripts of about 8 ms and of 80 ms of CPU; no budget before both show.
    assert_eq!(lever.budget(), None);
    for q in [8, 80, 8, 80, 8, 80] {
        tokio::time::sleep(Duration::from_millis(60)).await;
        get(addr, &format!("/cgi-bin/burn.pl?{q}")).await;
    }
    let budget = lever.budget().expect("two separated classes learnt");
    assert!(
        budget >= Duration::from_millis(8) && budget < Duration::from_millis(40),
        "the short class's longest: {budget:?}"
    );
    let before = budget_lowered();
    // A short script (within the budget) is never touched: raised to its end.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let short = get(addr, "/cgi-bin/burn.pl?2").await;
    assert_eq!(value(&short, "first"), -20, "{short}");
    assert_eq!(value(&short, "last"), -20, "never lowered: {short}");
    assert_eq!(budget_lowered(), before);
    // A long one started raised is lowered once past the budget, by its own CPU time.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let long = get(addr, "/cgi-bin/burn.pl?120").await;
    assert_eq!(value(&long, "first"), -20, "{long}");
    assert_eq!(
        value(&long, "last"),
        base,
        "lowered past the budget: {long}"
    );
    assert_eq!(budget_lowered(), before + 1);
    stop_restored(run).await;
}

/// Reports its nice value after 0.2 s and again after 0.9 s.
const TAIL: &str = "#!/usr/bin/perl\n$| = 1;\nselect(undef, undef, undef, 0.2);\n\
    my $x = getpriority(0, 0);\nselect(undef, undef, undef, 0.7);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nfirst=$x\\nlater=\" . getpriority(0, 0) . \"\\n\";\n";
/// Reports its nice value after 0.6 s, then exits.
const SHORT_TAIL: &str = "#!/usr/bin/perl\nselect(undef, undef, undef, 0.6);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nfirst=\" . getpriority(0, 0) . \"\\n\";\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_oldest_unraised_script_is_raised_one_at_a_time_and_nothing_is_left() {
    if skip_unless_root("the_oldest_unraised_script_is_raised_one_at_a_time_and_nothing_is_left") {
        return;
    }
    // Nobody waits past SLP: no script is raised as text, all are in the tail.
    let (_tmp, run) = start_pos(
        &[("tail.pl", TAIL), ("short.pl", SHORT_TAIL)],
        (60_000 * MS, 3),
        "nice+tail",
    )
    .await;
    let addr = run.addr;
    let cgi = handler(&run);
    assert!(cgi.lever().is_some(), "cgi_lever = nice+tail");
    let stats = cgi.stats().clone();
    let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
    // The oldest (short.pl) is raised; the younger (tail.pl) waits at its base value until
    // the oldest has exited, then it is the oldest and raised in turn.
    let older = tokio::spawn(get(addr, "/cgi-bin/short.pl"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let younger = tokio::spawn(get(addr, "/cgi-bin/tail.pl"));
    let older = older.await.unwrap();
    let younger = younger.await.unwrap();
    assert_eq!(value(&older, "first"), -20, "the oldest is raised: {older}");
    assert_eq!(value(&younger, "first"), base, "one at a time: {younger}");
    assert_eq!(value(&younger, "later"), -20, "its turn came: {younger}");
    assert_eq!(
        stats.raised.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "none raised as text"
    );
    assert!(stats.tail_heads.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    stop_restored(run).await;
}

/// The head's order: the older of two scripts raised as text (computes 0.5 s, then prints its
/// nice value).
const HEAD_OLD: &str = "#!/usr/bin/perl\nselect(undef, undef, undef, 0.5);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nnice=\" . getpriority(0, 0) . \"\\n\";\n";
/// ... and the younger: its nice value while the older runs, then after the older exited.
const HEAD_YOUNG: &str = "#!/usr/bin/perl\n$| = 1;\nselect(undef, undef, undef, 0.2);\n\
    print \"Content-Type: text/html\\r\\n\\r\\nfirst=\" . getpriority(0, 0) . \"\\n\";\n\
    select(undef, undef, undef, 0.7);\n\
    print \"later=\" . getpriority(0, 0) . \"\\n\";\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn raised_scripts_run_in_their_requests_order_and_nothing_is_left() {
    if skip_unless_root("raised_scripts_run_in_their_requests_order_and_nothing_is_left") {
        return;
    }
    // Workers idle past SLP (30 ms) are marked; RW 50: their output does not demote them.
    let (_tmp, run) = start_pos(
        &[("old.pl", HEAD_OLD), ("young.pl", HEAD_YOUNG)],
        (30 * MS, 50),
        "nice+budget+tailyield+order",
    )
    .await;
    let addr = run.addr;
    let cgi = handler(&run);
    let lever = cgi.lever().expect("a CGI lever").clone();
    let stats = cgi.stats().clone();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let older = tokio::spawn(get(addr, "/cgi-bin/old.pl"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let younger = tokio::spawn(get(addr, "/cgi-bin/young.pl"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(lever.raised(), 2, "both held raised as text");
    let older = older.await.unwrap();
    let younger = younger.await.unwrap();
    assert_eq!(value(&older, "nice"), -20, "the oldest at -20: {older}");
    assert_eq!(
        value(&younger, "first"),
        server::cgi::lever::BEHIND_NICE,
        "behind the older one: {younger}"
    );
    assert_eq!(
        value(&younger, "later"),
        -20,
        "the head once the older exited: {younger}"
    );
    assert_eq!(
        stats.raised.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "both started raised"
    );
    stop_restored(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn with_threads_first_raised_scripts_run_below_the_servers_threads() {
    if skip_unless_root("with_threads_first_raised_scripts_run_below_the_servers_threads") {
        return;
    }
    // Workers idle past SLP (30 ms) are marked; RW 50: their output does not demote them.
    let (_tmp, run) = start_pos(&[], (30 * MS, 50), "nice+budget+tailyield+threads").await;
    let addr = run.addr;
    let cgi = handler(&run);
    let lever = cgi.lever().expect("a CGI lever").clone();
    let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let slow = tokio::spawn(get(addr, "/cgi-bin/slow.pl"));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(lever.raised(), 1, "the slow script is held");
    let threads = lever.thread_nices();
    assert!(
        !threads.is_empty() && threads.iter().all(|&n| n == -20),
        "the server's threads at -20 while a script is held: {threads:?}"
    );
    let slow = slow.await.unwrap();
    assert_eq!(
        value(&slow, "nice"),
        server::cgi::lever::BELOW_THREADS_NICE,
        "the script below them: {slow}"
    );
    stop_restored(run).await;
    let threads = lever.thread_nices();
    assert!(
        threads.iter().all(|&n| n == base),
        "threads restored: {threads:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn with_back_scripts_not_raised_wait_at_nice_19_until_the_tails_head_lifts_them() {
    if skip_unless_root(
        "with_back_scripts_not_raised_wait_at_nice_19_until_the_tails_head_lifts_them",
    ) {
        return;
    }
    // Nobody waits past SLP: no script is raised as text, all are in the tail.
    let (_tmp, run) = start_pos(
        &[("tail.pl", TAIL), ("short.pl", SHORT_TAIL)],
        (60_000 * MS, 3),
        "nice+tail+back",
    )
    .await;
    let addr = run.addr;
    let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
    // The oldest is lifted from the back at once; the younger waits at the back (not at the
    // server's nice value) until the oldest exited, then it is lifted in turn.
    let older = tokio::spawn(get(addr, "/cgi-bin/short.pl"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let younger = tokio::spawn(get(addr, "/cgi-bin/tail.pl"));
    let older = older.await.unwrap();
    let younger = younger.await.unwrap();
    assert_eq!(value(&older, "first"), -20, "the tail's head: {older}");
    assert_eq!(
        value(&younger, "first"),
        server::cgi::lever::BACK_NICE,
        "at the back: {younger}"
    );
    assert_eq!(value(&younger, "later"), -20, "its turn came: {younger}");
    let lever = handler(&run).lever().expect("a CGI lever").clone();
    stop_restored(run).await;
    let threads = lever.thread_nices();
    assert!(
        threads.iter().all(|&n| n == base),
        "the server's threads are not sent to the back: {threads:?}"
    );
}

/// Writes 60,000 bytes at once (they fit in the pipe) and exits: done long before a slow
/// client has taken its output.
const BULK: &str = "#!/usr/bin/perl\n\
    print \"Content-Type: image/bmp\\r\\n\\r\\n\" . (\"x\" x 60000);\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_script_that_exited_leaves_the_tail_before_its_output_is_relayed() {
    if skip_unless_root("a_script_that_exited_leaves_the_tail_before_its_output_is_relayed") {
        return;
    }
    // Nobody waits past SLP: both scripts are in the tail. The server's send buffer and the
    // client's receive buffer are small and the client of the older script does not read, so
    // its relay cannot reach the end of the output (nor reap the script) until the client
    // reads, while the script itself has exited at once.
    let tmp = tempfile::tempdir().unwrap();
    let cgi = site(tmp.path());
    install(&cgi.dirs[0].dir, &[("bulk.pl", BULK), ("tail.pl", TAIL)]);
    let mut cfg = config(tmp.path(), cgi, "pos", (60_000 * MS, 3), mode("nice+tail"));
    cfg.sndbuf = Some(4096);
    let run = common::start(cfg).await;
    let addr = run.addr;
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut slow = sock.connect(addr).await.unwrap();
    slow.write_all(b"GET /cgi-bin/bulk.pl HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The younger script is the oldest in the tail once the older has exited: raised at once,
    // without waiting for the older one's output to cross the slow connection.
    let younger = get(addr, "/cgi-bin/tail.pl").await;
    assert_eq!(value(&younger, "first"), -20, "the tail's head: {younger}");
    assert_eq!(value(&younger, "later"), -20, "{younger}");
    // Nothing lost on the slow connection.
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut out))
        .await
        .expect("the slow response in time")
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{text:.200}");
    assert_eq!(out.iter().filter(|&&b| b == b'x').count(), 60_000);
    stop_restored(run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn with_output_a_raised_script_is_restored_at_its_first_output() {
    if skip_unless_root("with_output_a_raised_script_is_restored_at_its_first_output") {
        return;
    }
    // Workers idle past SLP (30 ms) are marked; RW 50: their bursts never demote them, so
    // only the lever's own rule can restore a script here.
    for (lever, later_base) in [("nice+output", true), ("nice", false)] {
        let (_tmp, run) = start_pos(&[], (30 * MS, 50), lever).await;
        let addr = run.addr;
        let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stream = get(addr, "/cgi-bin/stream.pl").await;
        assert_eq!(
            value(&stream, "first"),
            -20,
            "{lever}: starts raised: {stream}"
        );
        let later = value(&stream, "later");
        if later_base {
            assert_eq!(later, base, "{lever}: restored once it printed: {stream}");
        } else {
            assert_eq!(later, -20, "{lever}: the worker keeps its mark: {stream}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let text = get(addr, "/cgi-bin/text.pl").await;
        assert_eq!(
            value(&text, "nice"),
            -20,
            "{lever}: a page runs raised: {text}"
        );
        stop_restored(run).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn with_preempt_the_servers_threads_ask_for_the_shortest_slice_until_the_lever_goes() {
    if skip_unless_root(
        "with_preempt_the_servers_threads_ask_for_the_shortest_slice_until_the_lever_goes",
    ) {
        return;
    }
    let short = server::cgi::lever::THREAD_SLICE.as_nanos() as u64;
    for (lever, preempt) in [("nice+threads+preempt", true), ("nice+threads", false)] {
        let (_tmp, run) = start_pos(&[], (30 * MS, 50), lever).await;
        let addr = run.addr;
        let cgi = handler(&run);
        let held = cgi.lever().expect("a CGI lever").clone();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let text = get(addr, "/cgi-bin/text.pl").await;
        assert_eq!(
            value(&text, "nice"),
            -15,
            "{lever}: a page runs raised: {text}"
        );
        let threads = held.threads();
        assert!(!threads.is_empty(), "{lever}: a thread started the script");
        let slices: Vec<u64> = threads
            .iter()
            .map(|&t| os::prio::thread_slice_ns(t).unwrap())
            .collect();
        assert_eq!(
            slices.iter().all(|&s| s == short),
            preempt,
            "{lever}: the threads' slices {slices:?} (short: {short}; lever errors {})",
            cgi.stats()
                .lever_errors
                .load(std::sync::atomic::Ordering::Relaxed)
        );
        stop_restored(run).await;
        drop(held);
        let after: Vec<u64> = threads
            .iter()
            .filter_map(|&t| os::prio::thread_slice_ns(t).ok())
            .collect();
        assert!(
            after.iter().all(|&s| s != short),
            "{lever}: the default slice once the lever is gone: {after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn with_program_a_script_whose_last_run_passed_the_budget_starts_unraised() {
    if skip_unless_root("with_program_a_script_whose_last_run_passed_the_budget_starts_unraised") {
        return;
    }
    for (lever, predicts) in [("nice+budget+program", true), ("nice+budget", false)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut cgi = site(tmp.path());
        // Two programs (files) running the same code; the query names the CPU each burns.
        for name in ["short.pl", "long.pl"] {
            let p = cgi.dirs[0].dir.join(name);
            std::fs::write(&p, burn_script()).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        cgi.timeout = Duration::from_secs(20);
        // Every request on a worker idle past SLP (marked); RW 50: no worker is demoted.
        let run = start(tmp.path(), cgi, "pos", (30 * MS, 50), mode(lever)).await;
        let addr = run.addr;
        let cgi = handler(&run);
        let held = cgi.lever().expect("a CGI lever").clone();
        let stats = cgi.stats().clone();
        let predicted = || {
            stats
                .predicted_long
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let base = os::prio::thread_nice(os::prio::current_tid()).unwrap();
        let first = |path: &'static str| async move {
            tokio::time::sleep(Duration::from_millis(60)).await;
            value(&get(addr, path).await, "first")
        };
        // Learning: the short program about 8 ms, the long one 80 ms.
        for _ in 0..3 {
            first("/cgi-bin/short.pl?8").await;
            first("/cgi-bin/long.pl?80").await;
        }
        assert!(held.budget().is_some(), "{lever}: a budget learnt");
        let n = predicted();
        assert_eq!(
            first("/cgi-bin/short.pl?2").await,
            -20,
            "{lever}: a program within the budget starts raised"
        );
        let long = first("/cgi-bin/long.pl?2").await;
        if predicts {
            assert_eq!(long, base, "{lever}: its last run passed the budget");
            assert_eq!(predicted(), n + 1);
            // That run was short: the next one is predicted from it.
            assert_eq!(first("/cgi-bin/long.pl?2").await, -20, "{lever}: corrected");
        } else {
            assert_eq!(long, -20, "{lever}: no prediction");
            assert_eq!(predicted(), n);
        }
        stop_restored(run).await;
    }
}
