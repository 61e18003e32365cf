//! `--cores LIST`: which CPUs each server and the load generator get, and the layouts that are
//! refused ([`layouts`], pure and tested).
//!
//! For every core count N of the list, the server under test is pinned to the first N CPUs this
//! process may use (CPUs `0..N-1` on an unrestricted machine) and runs N workers/slots; the load
//! generator gets every CPU left after the *largest* N of the list, the same CPUs for every N,
//! with one wrk thread per CPU. wrk does less per request than a server, but not much less on a
//! 1 KB file: it needs about one CPU per two server CPUs to saturate one ([`client_cpus_needed`]).
//! A layout that leaves it fewer, or a core count above the CPUs there are, is refused with the
//! reason.

use std::fmt;

/// The core counts of `--cores` (`1,2,4,8`): strictly positive, no repeats, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreList(pub Vec<usize>);

impl fmt::Display for CoreList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&s.join(","))
    }
}

/// Parse `--cores` (`1,2,4,8`).
pub fn parse_cores(s: &str) -> Result<CoreList, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let n: usize = part
            .trim()
            .parse()
            .map_err(|_| format!("`{part}` is not a core count (write e.g. 1,2,4,8)"))?;
        if n == 0 {
            return Err("a core count must be at least 1".into());
        }
        if out.contains(&n) {
            return Err(format!("core count {n} is listed twice"));
        }
        out.push(n);
    }
    Ok(CoreList(out))
}

/// Where one core count runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// N: server CPUs, nginx workers, triage slots and runtime threads.
    pub cores: usize,
    /// The CPUs the servers are pinned to.
    pub server: Vec<usize>,
    /// The CPUs wrk is pinned to (one thread each).
    pub client: Vec<usize>,
}

/// CPUs wrk needs to load a server of `server_cores` CPUs (one per two, at least one).
pub fn client_cpus_needed(server_cores: usize) -> usize {
    server_cores.div_ceil(2).max(1)
}

/// The layouts of `list` on a process allowed to run on `allowed` (increasing CPU ids), or why
/// one is impossible.
pub fn layouts(list: &CoreList, allowed: &[usize]) -> Result<Vec<Layout>, String> {
    let max = *list.0.iter().max().ok_or("--cores lists no core count")?;
    if max > allowed.len() {
        return Err(format!(
            "--cores {list}: {max} server cores asked for, but this process may use only {} CPU(s) ({:?})",
            allowed.len(),
            allowed
        ));
    }
    let client: Vec<usize> = allowed[max..].to_vec();
    let need = client_cpus_needed(max);
    if client.len() < need {
        return Err(format!(
            "--cores {list}: the load generator would get {} CPU(s) ({client:?}) after the {max} \
             server cores, and it needs at least {need} to load {max} server cores (one per two); \
             list fewer cores or use a bigger machine",
            client.len()
        ));
    }
    Ok(list
        .0
        .iter()
        .map(|&n| Layout {
            cores: n,
            server: allowed[..n].to_vec(),
            client: client.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_parsed_and_checked() {
        assert_eq!(parse_cores("1,2, 4,8").unwrap(), CoreList(vec![1, 2, 4, 8]));
        assert_eq!(parse_cores("1,2,4,8").unwrap().to_string(), "1,2,4,8");
        assert!(parse_cores("0").unwrap_err().contains("at least 1"));
        assert!(parse_cores("2,2").unwrap_err().contains("twice"));
        assert!(parse_cores("x").unwrap_err().contains("not a core count"));
        assert!(parse_cores("").is_err());
    }

    #[test]
    fn servers_take_a_prefix_and_wrk_what_is_left_after_the_largest() {
        let all: Vec<usize> = (0..16).collect();
        let l = layouts(&CoreList(vec![1, 2, 4, 8]), &all).unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l[0].server, vec![0]);
        assert_eq!(l[2].server, vec![0, 1, 2, 3]);
        for x in &l {
            assert_eq!(
                x.client,
                (8..16).collect::<Vec<_>>(),
                "same wrk CPUs for every N"
            );
        }
        // This 2-CPU machine: only one core for the servers.
        let two = layouts(&CoreList(vec![1]), &[0, 1]).unwrap();
        assert_eq!(
            (two[0].server.clone(), two[0].client.clone()),
            (vec![0], vec![1])
        );
        // A restricted affinity: the allowed CPUs, not 0..N-1.
        let odd = layouts(&CoreList(vec![2]), &[3, 5, 7]).unwrap();
        assert_eq!(
            (odd[0].server.clone(), odd[0].client.clone()),
            (vec![3, 5], vec![7])
        );
    }

    #[test]
    fn layouts_that_starve_wrk_or_lack_cores_are_refused() {
        let e = layouts(&CoreList(vec![1, 2]), &[0, 1]).unwrap_err();
        assert!(e.contains("load generator would get 0 CPU"), "{e}");
        let e = layouts(&CoreList(vec![4]), &[0, 1]).unwrap_err();
        assert!(e.contains("may use only 2 CPU"), "{e}");
        let e = layouts(&CoreList(vec![12]), &(0..16).collect::<Vec<_>>()).unwrap_err();
        assert!(e.contains("needs at least 6"), "{e}");
        assert_eq!(client_cpus_needed(1), 1);
        assert_eq!(client_cpus_needed(8), 4);
    }
}
