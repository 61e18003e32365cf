//! Config file parsing: every key, the `[policy]` table, units, and errors that name the key
//! and line.

use super::*;
use policy::registry::{PosTail, RwRule};
use policy::Tunable;

#[test]
fn event_interval_follows_rounds_unless_set() {
    let mut c = Config::default();
    c.policy.name = "pos".into();
    c.slots = Some(1);
    assert!(c.rounds_on());
    assert_eq!(
        c.event_interval_under(Some(0.1)),
        1,
        "a 10% quota: every tick"
    );
    assert_eq!(c.event_interval_under(None), ROUNDS_EVENT_INTERVAL);
    assert_eq!(c.event_interval_under(Some(1.0)), ROUNDS_EVENT_INTERVAL);
    c.slots = Some(4);
    assert_eq!(
        c.event_interval_under(Some(3.5)),
        1,
        "less than a CPU per slot"
    );
    c.policy.name = "fifo".into();
    assert!(!c.rounds_on());
    assert_eq!(c.event_interval_under(Some(0.1)), TOKIO_EVENT_INTERVAL);
    c.rounds = Rounds::On;
    assert_eq!(c.event_interval_under(Some(0.1)), 1);
    c.event_interval = Some(16);
    assert_eq!(c.event_interval_under(Some(0.1)), 16);
    assert_eq!(c.effective_event_interval(), 16);
    c.event_interval = Some(0);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("event_interval"), "{e}");
}

#[test]
fn parses_every_key() {
    let text = r#"
listen = "127.0.0.1:0"
admin = "127.0.0.1:0"
root = "/srv"
index = ["a.html"]
gate = false
slots = 2
threads = 1
workers = 8
chunk = "8KiB"
first_chunk = "2KiB"
sndbuf = 65536
boost = "nice"
boost_nice = -5
boost_slice = "1ms"
rounds = "off"
event_interval = 7
max_conns = 100
max_header_size = "16KiB"
header_timeout = "5s"
keepalive_timeout = "3000ms"
send_timeout = "1m"
shutdown_timeout = "10s"
cache_max_file = 0
cache_budget = "1MiB"
cache_policy = "gds"
pfs_log = "pfs.jsonl"
access_log = "-"
[disk]
model = "lard"
scale = 0.5
first = "10ms"
per_block = "100us"
block = "8KiB"
cluster = "64KiB"
reposition = "5ms"
[forward]
from = ["127.0.0.1"]
peers = ["127.0.0.1:8081", "127.0.0.1:8082"]
timeout = "2s"
pool = 4
[policy]
name = "fifo"
slp = "200ms"
rw = 4
rw_rule = "split"
pos_tail = "episode"
period = "1s"
starvation_bound = "off"
[gzip]
enabled = true
level = 1
types = ["text/html"]
min_size = 0
[[site]]
name = "a.test"
aliases = ["www.a.test"]
root = "/srv/a"
index = ["home.html"]
"#;
    let c = Config::from_toml(text, "t.toml").unwrap();
    let p = &c.policy.config;
    assert_eq!(c.policy.name, "fifo");
    assert_eq!(p.slp, Tunable::Fixed(200_000_000));
    assert_eq!(p.rw, Tunable::Fixed(4));
    assert_eq!(p.rw_rule, RwRule::Split);
    assert_eq!(p.pos_tail, PosTail::Episode);
    assert_eq!(p.period, 1_000_000_000);
    assert_eq!(p.starvation_bound, None);
    assert_eq!(Config::default().policy.config, PolicyConfig::default());
    assert_eq!(c.first_chunk(), 2048);
    assert_eq!(Config::default().first_chunk(), DEFAULT_FIRST_CHUNK);
    let small = Config::from_toml("chunk = 1024\n", "t.toml").unwrap();
    assert_eq!(small.first_chunk(), 1024, "capped at the chunk");
    let e = Config::from_toml("chunk = 1024\nfirst_chunk = 2048\n", "t.toml").unwrap_err();
    assert!(e.to_string().contains("first_chunk"), "{e}");
    assert_eq!(c.chunk, 8192);
    assert_eq!(c.first_chunk, Some(2048));
    assert_eq!(c.sndbuf, Some(65536));
    assert_eq!(c.keepalive_timeout, Duration::from_secs(3));
    assert_eq!(c.send_timeout, Duration::from_secs(60));
    assert_eq!(c.max_header_size, 16384);
    assert_eq!(c.boost, Boost::Nice);
    assert_eq!(c.raise(), Some(gate::Raise::Nice(-5)));
    assert_eq!(c.boost_slice, Duration::from_millis(1));
    assert_eq!("slice".parse::<Boost>(), Ok(Boost::Slice));
    assert_eq!("rest".parse::<Boost>(), Ok(Boost::Rest));
    assert_eq!(c.rounds, Rounds::Off);
    assert_eq!(c.event_interval, Some(7));
    assert_eq!(c.effective_event_interval(), 7);
    assert_eq!(Config::default().rounds, Rounds::Auto);
    assert!("sometimes"
        .parse::<Rounds>()
        .unwrap_err()
        .contains("auto, on, off"));
    assert!(c.gzip.enabled);
    assert_eq!(c.sites[0].aliases, vec!["www.a.test"]);
    assert!(!c.gate);
    assert_eq!(c.cache_policy, crate::body_cache::Eviction::Gds);
    assert_eq!(c.disk.model, crate::disk::DiskKind::Lard);
    assert_eq!(
        (c.disk.scale, c.disk.block, c.disk.cluster),
        (0.5, 8192, 65536)
    );
    assert_eq!(c.disk.first, Duration::from_millis(10));
    assert_eq!(c.disk.per_block, Duration::from_micros(100));
    assert_eq!(c.disk.reposition, Duration::from_millis(5));
    assert_eq!(c.forward.peers.len(), 2);
    assert_eq!(
        c.forward.from,
        vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(
        (c.forward.timeout, c.forward.pool),
        (Duration::from_secs(2), 4)
    );
}

#[test]
fn disk_and_forward_values_are_checked() {
    for (text, key) in [
        ("[disk]\nscale = 0\n", "disk.scale"),
        ("[disk]\nfirst = 28\n", "write"),
        ("[disk]\nmodel = \"ssd\"\n", "model"),
        ("cache_policy = \"lfu\"\n", "cache_policy"),
        ("[forward]\npeers = [\"nowhere\"]\n", "peers"),
    ] {
        let e = Config::from_toml(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains(key), "{text}: {e}");
    }
}

#[test]
fn an_empty_file_is_the_defaults() {
    assert_eq!(Config::from_toml("", "t.toml").unwrap(), Config::default());
    let c = Config::from_toml("[policy]\nname = \"pos\"\n", "t.toml").unwrap();
    assert_eq!(c.policy.name, "pos");
    assert_eq!(c.policy.config, PolicyConfig::default(), "tuning defaults");
    let c = Config::from_toml("[policy]\nrw = \"auto\"\n", "t.toml").unwrap();
    assert_eq!(c.policy.name, "fifo", "the name defaults");
    assert_eq!(c.policy.config.rw, Tunable::Auto);
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let err = Config::from_toml("listen = \"127.0.0.1:1\"\nchunck = 5\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("chunck"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("x.toml"), "{err}");
    let err = Config::from_toml("[policy]\nname = \"pos\"\nslpp = \"1s\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("slpp") && err.contains("[policy]"), "{err}");
    assert!(err.contains("slp, rw"), "the known keys are listed: {err}");
}

#[test]
fn bad_value_is_named_with_its_line() {
    let err = Config::from_toml("\n\nsend_timeout = \"5 parsecs\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("parsecs"), "{err}");
    let err = Config::from_toml("\n[policy]\nperiod = \"5 parsecs\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2"), "the [policy] table: {err}");
    assert!(err.contains("period") && err.contains("parsecs"), "{err}");
}

#[test]
fn a_duration_needs_its_unit() {
    for (text, fix) in [
        ("keepalive_timeout = 3000\n", "3000ms"),
        ("[policy]\nperiod = 500\n", "500ms"),
        ("[policy]\nslp = 200\n", "200ms"),
        ("boost_slice = 1\n", "1ms"),
    ] {
        let err = Config::from_toml(text, "x.toml").unwrap_err().to_string();
        assert!(err.contains(fix), "{text}: {err}");
    }
    // A size is bytes when bare; a bare k is ambiguous.
    assert_eq!(
        Config::from_toml("chunk = 4096\n", "x").unwrap().chunk,
        4096
    );
    assert_eq!(
        Config::from_toml("chunk = \"16KB\"\n", "x").unwrap().chunk,
        16_000
    );
    let err = Config::from_toml("chunk = \"16k\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("16KiB") || err.contains("KiB"), "{err}");
}

#[test]
fn zero_timeouts_are_refused() {
    for key in [
        "header_timeout",
        "keepalive_timeout",
        "send_timeout",
        "shutdown_timeout",
    ] {
        let err = Config::from_toml(&format!("{key} = \"0s\"\n"), "x.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains(key) && err.contains("zero"), "{err}");
    }
    let err = Config::from_toml("[policy]\nperiod = \"0s\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("policy.period"), "{err}");
}

#[test]
fn the_old_policy_spelling_says_what_to_write() {
    let err = Config::from_toml(
        "listen = \"127.0.0.1:1\"\npolicy = \"pos\"\nslp = \"200ms\"\n",
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("line 2") && err.contains("[policy]"), "{err}");
    assert!(
        err.contains("name = \"pos\"") && err.contains("slp = \"200ms\""),
        "{err}"
    );
    let err = Config::from_toml("rw = 2\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("[policy]") && err.contains("rw = 2"), "{err}");
}

#[test]
fn unknown_policy_lists_known_ones() {
    let err = Config::from_toml("[policy]\nname = \"lottery\"\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("lottery") && err.contains("fifo"), "{err}");
}

#[test]
fn two_sites_with_one_name_are_an_error() {
    let text =
        "[[site]]\nname = \"a.test\"\nroot = \"/\"\n[[site]]\nname = \"A.test\"\nroot = \"/tmp\"\n";
    let err = Config::from_toml(text, "t.toml").unwrap_err().to_string();
    assert!(
        err.contains("site[1].name") && err.contains("site[0]"),
        "{err}"
    );
}

#[test]
fn cgi_lever_names_and_what_each_turns_on() {
    let l = |s: &str| s.parse::<CgiLever>().unwrap();
    assert!(!l("off").raises());
    let t = l("nice+budget+tailyield+threads");
    assert!(t.budget() && t.tail() && t.tail_yields() && t.threads_first());
    assert!(!t.tail_head_top() && !t.head_order());
    let b = l("nice+budget+tailyield+textbelow");
    assert!(b.threads_first() && b.tail_head_top() && b.tail_yields());
    let o = l("nice+budget+tailyield+order");
    assert!(o.head_order() && !o.head_newest() && !o.threads_first());
    assert!(l("nice+budget+tailyield+newest").head_newest());
    assert!(!l("nice+budget+tailyield").threads_first());
    let out = l("nice+budget+tailyield+threads+back+output");
    assert!(out.output() && out.back() && !t.output());
    let p = l("nice+budget+tailyield+threads+back+preempt+program");
    assert!(p.preempt() && p.program() && !t.preempt() && !t.program());
    let e = "nice+tailyield+program".parse::<CgiLever>().unwrap_err();
    assert!(e.contains("add `budget`"), "{e}");
    let e = "nice+fast".parse::<CgiLever>().unwrap_err();
    assert!(e.contains("`fast`") && e.contains("textbelow"), "{e}");
    assert!("nice+order+threads".parse::<CgiLever>().is_err());
    assert!("nice+textbelow".parse::<CgiLever>().is_err());
    assert!("budget+nice".parse::<CgiLever>().is_err());
    // Every name the lab and the tests use reads back as itself; flags in any order.
    for name in [
        "off",
        "nice",
        "nice+budget",
        "nice+tail",
        "nice+budget+tail",
        "nice+budget+tailyield",
        "nice+budget+tailyield+order",
        "nice+budget+tailyield+newest",
        "nice+budget+tailyield+threads",
        "nice+budget+tailyield+textbelow",
        "nice+budget+tailyield+threads+back",
        "nice+budget+tailyield+threads+back+output",
        "nice+budget+tailyield+threads+back+program",
        "nice+budget+tailyield+threads+back+preempt+program",
        "nice+threads+preempt",
    ] {
        assert_eq!(l(name).to_string(), name);
    }
    assert_eq!(l("nice+threads+tailyield+budget"), t);
    assert_eq!(CgiLever::default(), l("off"));
}
