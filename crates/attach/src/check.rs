//! Whether a nice value can do anything for the followed tasks: it orders a task only
//! against the tasks of its own leaf cgroup (EEVDF orders siblings; across sibling cgroups
//! and across autogroups it does nothing). The check names the cgroups and offers the weight
//! lever.

use os::proctrace::Tid;

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// All followed tasks share one cgroup with other tasks (their competitors).
    Shared {
        /// The cgroup.
        cgroup: String,
        /// Tasks in it that are not followed.
        competitors: usize,
    },
    /// The followed tasks are in one cgroup with nothing else: their competitors are in
    /// other cgroups, which a nice value does not reach.
    Alone {
        /// The cgroup.
        cgroup: String,
    },
    /// The followed tasks are spread over several cgroups.
    Spread {
        /// The cgroups.
        cgroups: Vec<String>,
    },
    /// The cgroups could not be read (no cpu controller mounted...).
    Unknown(String),
}

impl Placement {
    /// Whether a nice-based lever can work here.
    pub fn nice_works(&self) -> bool {
        matches!(self, Placement::Shared { .. } | Placement::Unknown(_))
    }

    /// A sentence for the user.
    pub fn explain(&self) -> String {
        match self {
            Placement::Shared {
                cgroup,
                competitors,
            } => format!(
                "the followed tasks share cgroup {cgroup} with {competitors} other task(s): \
                 nice orders them"
            ),
            Placement::Alone { cgroup } => format!(
                "the followed tasks are alone in cgroup {cgroup}: their competitors are in other \
                 cgroups, where a nice value does nothing; use --lever weight (moves a raised \
                 task into a high-weight sibling cgroup), or put the server and its competitors \
                 in one cgroup"
            ),
            Placement::Spread { cgroups } => format!(
                "the followed tasks are in {} cgroups ({}): nice orders tasks only within one \
                 leaf cgroup; use --lever weight",
                cgroups.len(),
                cgroups.join(", ")
            ),
            Placement::Unknown(why) => format!("cgroup placement unknown ({why})"),
        }
    }
}

/// The real-time budget of the cgroups of `tasks`, which the `fifo` lever runs them on, in
/// words; an error naming the cgroup that has none (`cpu.rt_runtime_us` 0: the kernel
/// refuses `SCHED_FIFO` there).
pub fn realtime_budget(tasks: &[Tid]) -> Result<String, String> {
    let m = os::lever::weight::cpu_mount().map_err(|e| e.to_string())?;
    let mut seen: Vec<std::path::PathBuf> = Vec::new();
    let mut out = Vec::new();
    for &t in tasks {
        let Ok(dir) = os::lever::weight::task_dir(&m, t) else {
            continue; // exited
        };
        if seen.contains(&dir) {
            continue;
        }
        match os::lever::realtime::budget(&dir) {
            Ok(Some(b)) if b.runtime == Some(std::time::Duration::ZERO) => {
                return Err(format!(
                    "lever fifo: cgroup {} has no real-time budget (cpu.rt_runtime_us 0), so the \
                     kernel refuses SCHED_FIFO there; grant one (echo N > cpu.rt_runtime_us, \
                     its parents first), or use --lever nice or weight (inside the CPU quota)",
                    dir.display()
                ))
            }
            Ok(Some(b)) => out.push(format!(
                "cgroup {}: {} per {:?}",
                dir.display(),
                b.runtime
                    .map_or("unlimited".to_owned(), |r| format!("{r:?}")),
                b.period
            )),
            Ok(None) => out.push(format!(
                "cgroup {}: no real-time group scheduling, the machine-wide limit",
                dir.display()
            )),
            Err(e) => return Err(format!("lever fifo: {}: {e}", dir.display())),
        }
        seen.push(dir);
    }
    Ok(out.join("; "))
}

/// Where `tasks` are, against the other tasks of their cgroups.
pub fn placement(tasks: &[Tid]) -> Placement {
    let mut cgroups: Vec<(String, Vec<Tid>)> = Vec::new();
    for &t in tasks {
        match os::lever::weight::cgroup_members(t) {
            Ok((dir, members)) => {
                let d = dir.display().to_string();
                if !cgroups.iter().any(|(c, _)| *c == d) {
                    cgroups.push((d, members));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // exited
            Err(e) => return Placement::Unknown(e.to_string()),
        }
    }
    match cgroups.len() {
        0 => Placement::Unknown("no task left".into()),
        1 => {
            let (cgroup, members) = cgroups.pop().unwrap();
            let competitors = members.iter().filter(|m| !tasks.contains(m)).count();
            if competitors == 0 {
                Placement::Alone { cgroup }
            } else {
                Placement::Shared {
                    cgroup,
                    competitors,
                }
            }
        }
        _ => Placement::Spread {
            cgroups: cgroups.into_iter().map(|(c, _)| c).collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explanations_offer_the_weight_lever() {
        let a = Placement::Alone {
            cgroup: "/x".into(),
        };
        assert!(!a.nice_works());
        assert!(a.explain().contains("--lever weight"));
        let s = Placement::Spread {
            cgroups: vec!["/a".into(), "/b".into()],
        };
        assert!(!s.nice_works() && s.explain().contains("2 cgroups"));
        assert!(Placement::Shared {
            cgroup: "/".into(),
            competitors: 3
        }
        .nice_works());
    }

    #[test]
    fn this_test_shares_its_cgroup() {
        // The test process's own threads are followed; whatever else is in its cgroup is a
        // competitor. Only checks that the reading works and is consistent.
        let me = std::process::id() as Tid;
        match placement(&[me]) {
            Placement::Shared { competitors, .. } => assert!(competitors > 0),
            Placement::Alone { .. } | Placement::Unknown(_) => {}
            p => panic!("one task cannot be spread: {p:?}"),
        }
    }
}
