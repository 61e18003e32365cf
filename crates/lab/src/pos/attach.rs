//! The `+pos` variants of `triage lab pos`: unmodified servers with `triage pos attach`
//! following them (docs/kpos.md). They run only when `--variants` names them:
//! - `apache+pos`: Apache prefork with the daemon, lever nice, the run's SLP and first RW;
//! - `apache+pos-slice`: the same with nice + a 0.1 ms slice;
//! - `apache+pos-log`: the daemon logging and classifying only (its overhead);
//! - `apache+all20`: every child raised all the time (SLP 0, RW never reached): the bound;
//! - `php-fpm+pos`, `php-fpm+pos-slice`, `php-fpm+pos-log`, `php-fpm+all20`: the same four
//!   with nginx + php-fpm ([`super::php`]), the daemon following the php-fpm master and its
//!   pool's children (nginx, a front, is not followed).
//!
//! The daemon runs on the client side (its CPU is not the server's); the server, its
//! children and the hog share the server side's one CPU budget (one leaf cgroup, no RT).

use super::plan::Params;
use crate::peers::Peer;
use crate::runner::Variant;

/// The `+pos` variants named in `only`, in the order named, for a run with `params`.
pub fn variants(only: &[String], p: &Params) -> Vec<Variant> {
    let slp = p.slp_s.map_or("auto".to_owned(), |s| {
        format!("{}ms", (s * 1e3).round() as u64)
    });
    let rw = p.rw.first().copied().unwrap_or(1).to_string();
    let mut out = Vec::new();
    for name in only {
        let Some((peer, kind)) = [Peer::Apache, Peer::PhpFpm].into_iter().find_map(|peer| {
            let kind = name.strip_prefix(peer.name())?.strip_prefix('+')?;
            Some((peer, kind))
        }) else {
            continue;
        };
        let flags: Vec<&str> = match kind {
            "pos" => vec!["--lever", "nice", "--slp", &slp, "--rw", &rw],
            "pos-slice" => vec!["--lever", "nice+slice", "--slp", &slp, "--rw", &rw],
            "pos-log" => vec!["--log-only", "--slp", &slp, "--rw", &rw],
            "all20" => vec![
                "--lever", "nice", "--slp", "0ms", "--rw", "100000", "--always",
            ],
            _ => continue,
        };
        let mut f = flags;
        f.extend(["--cpus", "1"]);
        out.push(Variant::peer(peer, p.hog).with_attach(name, &f));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_attach_variants_follow_the_server() {
        let o = crate::pos::opts::PosOpts::new(1, std::path::PathBuf::from("/bin/false"));
        let p = crate::pos::plan::resolve(&o).unwrap();
        let only: Vec<String> = ["fifo", "apache+pos", "apache+pos-log"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let v = variants(&only, &p);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].name, "apache+pos");
        let flags = v[0].attach.as_ref().unwrap();
        assert!(flags.windows(2).any(|w| w == ["--lever", "nice"]));
        assert!(v[1].attach.as_ref().unwrap().contains(&"--log-only".into()));
        assert_eq!(v[0].peer_kind(), Some(Peer::Apache));
        let php: Vec<String> = ["php-fpm+pos", "php-fpm+all20", "php-fpm+nothing"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let v = variants(&php, &p);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].name, "php-fpm+pos");
        assert_eq!(v[0].peer_kind(), Some(Peer::PhpFpm));
        assert!(v[1].attach.as_ref().unwrap().contains(&"--always".into()));
    }
}
