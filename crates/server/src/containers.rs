//! Resource containers (seed 003) and CPU reservations (seed 000) in the server.
//!
//! The configuration declares a tree of containers as `[[container]]` tables:
//!
//! ```toml
//! [[container]]
//! name = "site-a"          # cgroup-safe name, unique
//! weight = 300             # 1..=10000, default 100: share among siblings when they compete
//! sites = ["a.test"]       # virtual hosts whose server work is charged here
//!
//! [[container]]
//! name = "cgi"
//! parent = "site-a"        # default: the root container
//! cpu_max = 0.3            # optional cap, in CPUs (0.3 = 30% of one CPU), in (0, ncpus]
//! policy = "fifo"          # optional inner ready-queue policy (default: `[policy] name`)
//! ```
//!
//! With containers, the gate's policy is [`policy::share::Share`]: hierarchical weighted fair
//! sharing of the CPU slots between containers, with caps, each container ordering its own
//! workers with the inner policy (the server's `[policy] name` unless the container says
//! otherwise). Site work not mapped to a container is charged to the root container (id 0).
//!
//! At start the server mirrors the tree in cgroups through [`os::CgroupRoot`] (one cgroup per
//! container, path = the chain of names, e.g. `site-a/cgi`, with `cpu.weight`/`cpu.shares` and
//! `cpu.max`/`cfs_quota_us` from the configuration). CGI scripts of a site run in children of
//! the cgroup named by the site's `[site.cgi] container` key; naming a container's path there
//! (`container = "site-a/cgi"`) puts them under that container's weight and cap. Without
//! permission or without a cpu controller the server logs one warning naming what is missing
//! and enforces weights and caps in the gate only.
//!
//! **One budget** (seed 003: a container covers everything done on a principal's behalf): the
//! cap of a container that has sites and a cgroup covers the server's own bursts for its sites
//! and the processes in its cgroup *together*. The server's threads are not moved between
//! cgroups; instead `budget` splits the cap every 100 ms between the gate's cap for the
//! container and its cgroup's `cpu.max`, from what each used (the rule is
//! `policy::budget::split`). A container without sites (only CGI in it) keeps its cap on its
//! cgroup alone, as a container without a cgroup keeps it in the gate alone.
//!
//! Accounting, exposed as `triage_container_cpu_seconds_total{container, source}`:
//! - `source="server"`: thread CPU time (`CLOCK_THREAD_CPUTIME_ID`) measured around every gate
//!   burst, charged to the container of the burst's hints (`gate::CpuAccount`).
//! - `source="cgi"`: the container's cgroup CPU usage (v2 `cpu.stat usage_usec`, v1
//!   `cpuacct.usage`) minus that of its child containers, so that the values of all containers
//!   add up; the root's value is what ran in the server's cgroup tree outside every container.
//!
//! Both are *exclusive* (a container's own work, not its descendants').

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use gate::CpuAccount;
use policy::share::{ContainerSpec, Field, ShareSpec};
use policy::{Nanos, PolicyConfig};
use serde::Deserialize;

/// CFS period used for container caps.
pub const CPU_PERIOD: Duration = Duration::from_millis(100);

fn default_weight() -> u32 {
    policy::share::DEFAULT_WEIGHT
}

/// One `[[container]]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerConfig {
    /// Unique, cgroup-safe name (it names the container's cgroup).
    pub name: String,
    /// Parent container name; none = the root container.
    #[serde(default)]
    pub parent: Option<String>,
    /// Share among siblings when they compete, 1..=10000.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Cap in CPUs.
    #[serde(default)]
    pub cpu_max: Option<f64>,
    /// Sites (by `name`) whose work is charged here.
    #[serde(default)]
    pub sites: Vec<String>,
    /// Inner ready-queue policy; none = the server's `[policy] name`.
    #[serde(default)]
    pub policy: Option<String>,
}

impl ContainerConfig {
    /// A container with defaults (tests, programmatic configuration).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            parent: None,
            weight: default_weight(),
            cpu_max: None,
            sites: Vec::new(),
            policy: None,
        }
    }
}

/// A container configuration problem, naming the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{key}`: {msg}")]
pub struct ContainerError {
    /// The key (`container[2].parent`).
    pub key: String,
    /// What is wrong with its value.
    pub msg: String,
}

/// The validated container tree. Id 0 is the root container; configured containers get ids
/// 1.. in configuration order. The tree's own rules (unique names, parents, cycles, weights,
/// caps, inner policies) are checked once, by [`policy::share::Tree`]; this adds what is the
/// server's: cgroup-safe names, parents and sites named in the config file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tree {
    /// The configured containers, parents before children (the root is not listed).
    nodes: Vec<Node>,
    by_site: HashMap<String, u32>,
}

/// One configured container of a [`Tree`].
#[derive(Debug, Clone, PartialEq)]
struct Node {
    /// Weight, cap and inner policy as the `share` policy takes them.
    spec: ContainerSpec,
    /// cgroup path relative to the server's cgroup root (`site-a/cgi`).
    path: String,
}

fn check_name(key: &str, name: &str) -> Result<(), ContainerError> {
    let bad = |msg: &str| {
        Err(ContainerError {
            key: key.to_owned(),
            msg: format!("`{name}` {msg}"),
        })
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name == "root" {
        return bad("is reserved for the root container");
    }
    if name.len() > 100 {
        return bad("is longer than 100 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return bad("may only hold ASCII letters, digits, `-` and `_` (it names a cgroup)");
    }
    if name.starts_with("run-") {
        return bad("may not start with `run-` (reserved for cgroup run directories)");
    }
    if [
        "cgroup", "cpu", "cpuacct", "cpuset", "memory", "io", "pids", "tasks",
    ]
    .contains(&name)
    {
        return bad("collides with cgroup control file names");
    }
    Ok(())
}

impl Tree {
    /// Validate `cfgs` against the configured site names, the CPUs available (`ncpus`, for
    /// caps) and the known policy names.
    pub fn build(
        cfgs: &[ContainerConfig],
        sites: &[&str],
        ncpus: usize,
        policies: &[&str],
    ) -> Result<Tree, ContainerError> {
        let err = |key: String, msg: String| ContainerError { key, msg };
        let mut ids: HashMap<&str, u32> = HashMap::new();
        for (i, c) in cfgs.iter().enumerate() {
            check_name(&format!("container[{i}].name"), &c.name)?;
            ids.entry(&c.name).or_insert(i as u32 + 1);
        }
        let mut by_site: HashMap<String, u32> = HashMap::new();
        let mut specs = Vec::with_capacity(cfgs.len());
        for (i, c) in cfgs.iter().enumerate() {
            let key = format!("container[{i}]");
            let parent = match &c.parent {
                None => 0,
                Some(p) => *ids.get(p.as_str()).ok_or_else(|| {
                    err(
                        format!("{key}.parent"),
                        format!("unknown container `{p}` (container `{}`)", c.name),
                    )
                })?,
            };
            for s in &c.sites {
                if !sites.contains(&s.as_str()) {
                    return Err(err(
                        format!("{key}.sites"),
                        format!(
                            "unknown site `{s}` (container `{}`; sites: {})",
                            c.name,
                            sites.join(", ")
                        ),
                    ));
                }
                if by_site.insert(s.clone(), i as u32 + 1).is_some() {
                    return Err(err(
                        format!("{key}.sites"),
                        format!("site `{s}` is in two containers"),
                    ));
                }
            }
            specs.push(ContainerSpec {
                id: i as u32 + 1,
                name: c.name.clone(),
                parent,
                weight: c.weight,
                cap: c.cpu_max,
                inner: c.policy.clone(),
            });
        }
        let limits = policy::share::Limits {
            max_cap: Some(ncpus as f64),
            inner_names: Some(policies),
        };
        let tree = policy::share::Tree::new(&specs, &limits).map_err(|e| {
            let field = match e.field {
                Field::Id | Field::Name => "name",
                Field::Parent => "parent",
                Field::Weight => "weight",
                Field::Cap => "cpu_max",
                Field::Inner => "policy",
            };
            err(format!("container[{}].{field}", e.index), e.to_string())
        })?;
        let nodes = tree
            .nodes()
            .iter()
            .filter(|n| n.index.is_some())
            .map(|n| Node {
                path: tree.path(n.spec.id).unwrap_or_default(),
                spec: n.spec.clone(),
            })
            .collect();
        Ok(Tree { nodes, by_site })
    }

    /// Whether no container is configured.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Container id of a site's work (0 = root).
    pub fn site_container(&self, site: &str) -> u32 {
        self.by_site.get(site).copied().unwrap_or(0)
    }

    /// Id of a container by name (`root` = 0).
    pub fn id(&self, name: &str) -> Option<u32> {
        if name == "root" {
            return Some(0);
        }
        self.nodes
            .iter()
            .find(|n| n.spec.name == name)
            .map(|n| n.spec.id)
    }

    /// Name of container `id`.
    pub fn name(&self, id: u32) -> Option<&str> {
        if id == 0 {
            return Some("root");
        }
        self.nodes
            .iter()
            .find(|n| n.spec.id == id)
            .map(|n| n.spec.name.as_str())
    }

    /// cgroup path of container `id`, relative to the server's cgroup root.
    pub fn path(&self, id: u32) -> Option<&str> {
        self.nodes
            .iter()
            .find(|n| n.spec.id == id)
            .map(|n| n.path.as_str())
    }

    /// Highest container id (the root is 0).
    pub fn max_id(&self) -> u32 {
        self.nodes.iter().map(|n| n.spec.id).max().unwrap_or(0)
    }

    /// The `share` policy specification: containers with their weights and caps, inner
    /// policy `inner` (the server's `[policy] name`) unless a container names its own.
    pub fn share_spec(&self, inner: &str, cfg: &PolicyConfig, window: Nanos) -> ShareSpec {
        ShareSpec {
            containers: self.nodes.iter().map(|n| n.spec.clone()).collect(),
            inner: if inner == "share" { "fifo" } else { inner }.to_owned(),
            cfg: cfg.clone(),
            window,
        }
    }
}

/// The containers at run time: the tree, the server CPU account and the cgroups mirroring
/// the tree (when usable).
#[derive(Debug)]
pub struct Containers {
    tree: Tree,
    account: Arc<CpuAccount>,
    root: Option<os::CgroupRoot>,
    /// Cgroup per container id (index = id; 0 = the run directory).
    groups: Vec<Option<os::Cgroup>>,
    /// Why cgroups are not (fully) used, if they are not.
    warnings: Vec<String>,
}

impl Containers {
    /// The containers of `tree`, without cgroups yet ([`Containers::attach_cgroups`]).
    pub fn new(tree: Tree) -> Self {
        let account = Arc::new(CpuAccount::new(tree.max_id()));
        Self {
            tree,
            account,
            root: None,
            groups: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The validated tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The server CPU charged to each container (the gate charges every burst here).
    pub fn account(&self) -> &Arc<CpuAccount> {
        &self.account
    }

    /// The server's cgroup root, if cgroups are in use.
    pub fn cgroup_root(&self) -> Option<&os::CgroupRoot> {
        self.root.as_ref()
    }

    /// The cgroup of container `id`, if created.
    pub fn cgroup(&self, id: u32) -> Option<&os::Cgroup> {
        self.groups.get(id as usize).and_then(Option::as_ref)
    }

    /// Warnings logged while creating cgroups (empty when everything was applied).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    fn warn(&mut self, msg: String) {
        tracing::warn!("{msg}");
        self.warnings.push(msg);
    }

    /// Mirror the tree in cgroups under `root` (`Err(reason)`: cgroups are not usable; logged
    /// once, and the gate enforces weights and caps alone). Problems with one container (a
    /// cap the kernel refuses...) are logged and the rest is still applied.
    pub fn attach_cgroups(&mut self, root: Result<os::CgroupRoot, String>) {
        let root = match root {
            Ok(r) => r,
            Err(why) => {
                if !self.tree.is_empty() {
                    self.warn(format!(
                        "containers: no cgroups ({why}); weights and caps apply to the \
                         server's own work only (in the gate), CGI processes are not limited"
                    ));
                }
                return;
            }
        };
        let mut groups: Vec<Option<os::Cgroup>> = vec![None; self.tree.max_id() as usize + 1];
        groups[0] = Some(root.top());
        let nodes = self.tree.nodes.clone();
        for n in &nodes {
            let cg = match root.create(&n.path) {
                Ok(cg) => cg,
                Err(e) => {
                    self.warn(format!(
                        "containers: cgroup for `{}`: {e}; enforced in the gate only",
                        n.spec.name
                    ));
                    continue;
                }
            };
            if let Err(e) = cg.set_weight(n.spec.weight) {
                self.warn(format!("containers: weight of `{}`: {e}", n.spec.name));
            }
            if let Some(f) = n.spec.cap {
                if let Err(e) = cg.set_cpu_max(Some(f), CPU_PERIOD) {
                    self.warn(format!(
                        "containers: cpu_max {f} of `{}`: {e}; CGI in it is not capped",
                        n.spec.name
                    ));
                }
            }
            groups[n.spec.id as usize] = Some(cg);
        }
        self.groups = groups;
        self.root = Some(root);
    }

    /// The containers whose cap is one budget for the server's work and their processes: those
    /// with a cap, a cgroup, and a site whose work is charged to them or to a container below
    /// them. Each with its cap and its subtree's ids (itself first).
    pub fn budgeted(&self) -> Vec<(u32, f64, Vec<u32>, os::Cgroup)> {
        let below = |top: u32, mut id: u32| loop {
            if id == top {
                return true;
            }
            match self.tree.nodes.iter().find(|n| n.spec.id == id) {
                Some(n) if id != 0 => id = n.spec.parent,
                _ => return false,
            }
        };
        let mut out = Vec::new();
        for n in &self.tree.nodes {
            let id = n.spec.id;
            let (Some(cap), Some(cg)) = (n.spec.cap, self.cgroup(id)) else {
                continue;
            };
            if !self.tree.by_site.values().any(|&s| below(id, s)) {
                continue;
            }
            let mut ids = vec![id];
            ids.extend(
                self.tree
                    .nodes
                    .iter()
                    .map(|m| m.spec.id)
                    .filter(|&m| m != id && below(id, m)),
            );
            out.push((id, cap, ids, cg.clone()));
        }
        out
    }

    /// CGI CPU of container `id` (exclusive of child containers), if it has a cgroup.
    pub fn cgi_cpu(&self, id: u32) -> Option<Duration> {
        let own = self.cgroup(id)?.cpu_usage().ok()?;
        let children: Duration = self
            .tree
            .nodes
            .iter()
            .filter(|n| n.spec.parent == id)
            .filter_map(|n| self.cgroup(n.spec.id)?.cpu_usage().ok())
            .sum();
        Some(own.saturating_sub(children))
    }

    /// Every container (root first): (name, server CPU, CGI CPU if measured).
    pub fn cpu(&self) -> Vec<(String, Duration, Option<Duration>)> {
        std::iter::once(0)
            .chain(self.tree.nodes.iter().map(|n| n.spec.id))
            .map(|id| {
                (
                    self.tree.name(id).unwrap_or("?").to_owned(),
                    self.account.get(id),
                    self.cgi_cpu(id),
                )
            })
            .collect()
    }

    /// Prometheus lines: `triage_container_cpu_seconds_total{container,source}` (nothing
    /// without containers).
    pub fn render_metrics(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        if self.tree.is_empty() {
            return o;
        }
        let _ = writeln!(
            o,
            "# HELP triage_container_cpu_seconds_total CPU charged to each resource container \
             (server: thread CPU of gate bursts; cgi: the container's cgroup, child containers \
             excluded).\n# TYPE triage_container_cpu_seconds_total counter"
        );
        for (name, server, cgi) in self.cpu() {
            let _ = writeln!(
                o,
                "triage_container_cpu_seconds_total{{container=\"{name}\",source=\"server\"}} {}",
                server.as_secs_f64()
            );
            if let Some(c) = cgi {
                let _ = writeln!(
                    o,
                    "triage_container_cpu_seconds_total{{container=\"{name}\",source=\"cgi\"}} {}",
                    c.as_secs_f64()
                );
            }
        }
        o
    }

    /// The gate's policy: `share` over this tree, `inner` (the server's `[policy] name`) ordering
    /// each container's workers unless the container names its own.
    pub fn share_policy(
        &self,
        inner: &str,
        cfg: &PolicyConfig,
    ) -> Result<Box<dyn policy::Policy>, policy::PolicyError> {
        let spec = self
            .tree
            .share_spec(inner, cfg, policy::share::DEFAULT_WINDOW);
        Ok(Box::new(policy::share::Share::new(&spec)?))
    }

    /// Remove the server's cgroups (killing what is left in them: CGI stragglers). Also
    /// happens when the last handle on the cgroup root is dropped.
    pub fn cleanup(&self) {
        if let Some(r) = &self.root {
            if let Err(e) = r.cleanup() {
                tracing::warn!("containers: removing cgroups: {e}");
            }
        }
    }
}

/// Unused-container check helper: names never referenced by a site or as a parent (they can
/// still receive work through CGI `container` keys, so this is informational).
pub fn unreferenced(tree: &Tree) -> Vec<&str> {
    let parents: HashSet<u32> = tree.nodes.iter().map(|n| n.spec.parent).collect();
    let sited: HashSet<u32> = tree.by_site.values().copied().collect();
    tree.nodes
        .iter()
        .filter(|n| !parents.contains(&n.spec.id) && !sited.contains(&n.spec.id))
        .map(|n| n.spec.name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICIES: &[&str] = &["fifo", "pos", "share"];

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        container: Vec<ContainerConfig>,
    }

    fn parse(text: &str) -> Vec<ContainerConfig> {
        toml::from_str::<Doc>(text).unwrap().container
    }

    fn tree(text: &str) -> Result<Tree, ContainerError> {
        Tree::build(&parse(text), &["a.test", "b.test"], 2, POLICIES)
    }

    const GOOD: &str = r#"
[[container]]
name = "cgi"
parent = "site-a"
cpu_max = 0.3
policy = "fifo"

[[container]]
name = "site-a"
weight = 300
sites = ["a.test"]

[[container]]
name = "site-b"
sites = ["b.test"]
"#;

    #[test]
    fn parses_and_orders_parents_first() {
        let t = tree(GOOD).unwrap();
        assert_eq!(t.id("cgi"), Some(1));
        assert_eq!(t.id("site-a"), Some(2));
        assert_eq!(t.path(1), Some("site-a/cgi"));
        assert_eq!(t.path(3), Some("site-b"));
        assert_eq!(t.site_container("a.test"), 2);
        assert_eq!(t.site_container("other"), 0);
        assert_eq!(t.name(0), Some("root"));
        let spec = t.share_spec("pos", &PolicyConfig::default(), 100_000_000);
        assert_eq!(spec.inner, "pos");
        // Parents before children, as Share wants them (it also sorts them itself).
        let names: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["site-a", "site-b", "cgi"]);
        let cgi = &spec.containers[2];
        assert_eq!(
            (cgi.parent, cgi.cap, cgi.inner.as_deref()),
            (2, Some(0.3), Some("fifo"))
        );
        policy::share::Share::new(&spec).unwrap();
        assert_eq!(unreferenced(&t), vec!["cgi"]);
        // `policy = "share"` at server level means fifo inside.
        assert_eq!(
            t.share_spec("share", &PolicyConfig::default(), 1).inner,
            "fifo"
        );
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let cases = [
            ("[[container]]\nname = \"a\"\nparent = \"zz\"\n", "container[0].parent", "unknown container `zz`"),
            (
                "[[container]]\nname = \"a\"\nparent = \"b\"\n[[container]]\nname = \"b\"\nparent = \"a\"\n",
                "parent",
                "cycle",
            ),
            ("[[container]]\nname = \"a\"\nparent = \"a\"\n", "container[0].parent", "cycle"),
            ("[[container]]\nname = \"a\"\nweight = 0\n", "container[0].weight", "0 is not in 1..=10000"),
            ("[[container]]\nname = \"a\"\nweight = 10001\n", "container[0].weight", "10001"),
            ("[[container]]\nname = \"a\"\ncpu_max = 0.0\n", "container[0].cpu_max", "not in (0, 2]"),
            ("[[container]]\nname = \"a\"\ncpu_max = 2.5\n", "container[0].cpu_max", "2.5"),
            ("[[container]]\nname = \"a\"\ncpu_max = -1.0\n", "container[0].cpu_max", "-1"),
            ("[[container]]\nname = \"a b\"\n", "container[0].name", "may only hold"),
            ("[[container]]\nname = \"root\"\n", "container[0].name", "reserved"),
            ("[[container]]\nname = \"cpu\"\n", "container[0].name", "collides"),
            ("[[container]]\nname = \"a\"\n[[container]]\nname = \"a\"\n", "container[1].name", "names another container"),
            ("[[container]]\nname = \"a\"\nsites = [\"nope\"]\n", "container[0].sites", "unknown site `nope`"),
            (
                "[[container]]\nname = \"a\"\nsites = [\"a.test\"]\n[[container]]\nname = \"b\"\nsites = [\"a.test\"]\n",
                "container[1].sites",
                "two containers",
            ),
            ("[[container]]\nname = \"a\"\npolicy = \"share\"\n", "container[0].policy", "cannot be nested"),
            ("[[container]]\nname = \"a\"\npolicy = \"lottery\"\n", "container[0].policy", "known: fifo, pos"),
        ];
        for (text, key, msg) in cases {
            let e = tree(text).unwrap_err();
            assert!(
                e.key.contains(key),
                "{text}: key {} should contain {key}",
                e.key
            );
            assert!(
                e.to_string().contains(msg),
                "{text}: {e} should contain {msg}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let r = toml::from_str::<Doc>("[[container]]\nname = \"a\"\ncpu_limit = 1\n");
        let e = r.err().unwrap().to_string();
        assert!(e.contains("cpu_limit"), "{e}");
    }

    #[test]
    fn no_cgroups_warns_once_and_metrics_still_show_server_cpu() {
        let mut c = Containers::new(tree(GOOD).unwrap());
        c.attach_cgroups(Err("no cgroup cpu controller".into()));
        assert_eq!(c.warnings().len(), 1);
        assert!(c.warnings()[0].contains("no cgroup cpu controller"));
        c.account().charge(2, Duration::from_millis(1500));
        let m = c.render_metrics();
        assert!(
            m.contains(
                "triage_container_cpu_seconds_total{container=\"site-a\",source=\"server\"} 1.5"
            ),
            "{m}"
        );
        assert!(!m.contains("source=\"cgi\""), "{m}");
        assert!(m.contains("container=\"root\""), "{m}");
    }

    #[test]
    fn cgroups_mirror_the_tree_on_plain_dirs() {
        // Ordinary directories imitating cgroup v2 (see os::Mounts::plain).
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("cgroup.controllers"), "cpu").unwrap();
        let m = os::Mounts::plain(
            os::Version::V2,
            vec![(vec!["cpu", "cpuacct"], tmp.path().to_owned())],
        );
        let root = os::CgroupRoot::open_in("triage", m).unwrap();
        let mut c = Containers::new(tree(GOOD).unwrap());
        c.attach_cgroups(Ok(root));
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        let cgi = c.cgroup(1).unwrap();
        assert!(cgi.path().ends_with("site-a/cgi"));
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(&cgi.path().join("cpu.max")), "30000 100000");
        assert_eq!(read(&c.cgroup(2).unwrap().path().join("cpu.weight")), "300");
        // CGI accounting: exclusive of child containers.
        let write_usage = |cg: &os::Cgroup, us: u64| {
            std::fs::write(cg.path().join("cpu.stat"), format!("usage_usec {us}\n")).unwrap()
        };
        write_usage(c.cgroup(0).unwrap(), 5_000_000);
        write_usage(c.cgroup(2).unwrap(), 3_000_000);
        write_usage(c.cgroup(1).unwrap(), 1_000_000);
        write_usage(c.cgroup(3).unwrap(), 500_000);
        assert_eq!(c.cgi_cpu(1), Some(Duration::from_secs(1)));
        assert_eq!(c.cgi_cpu(2), Some(Duration::from_secs(2)));
        assert_eq!(c.cgi_cpu(0), Some(Duration::from_millis(1500)));
        let m = c.render_metrics();
        assert!(
            m.contains("triage_container_cpu_seconds_total{container=\"cgi\",source=\"cgi\"} 1\n"),
            "{m}"
        );
        let dir = c.cgroup_root().unwrap().path();
        c.cleanup();
        assert!(!dir.exists());
    }
}
