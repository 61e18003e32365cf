//! The container tree of [`super::Share`], validated in one place: [`Tree::new`] checks a list
//! of [`ContainerSpec`]s and orders it parents first, or names the first bad container (its
//! position in the list, the field and the value) in a [`TreeError`], so that a caller reading
//! the tree from a config file can point at the key (`container[2].parent`).
//!
//! The rules:
//! - ids and names are unique; the root container (id 0, named `root` unless the list gives it
//!   another name) is always there, and may be listed to cap it (its `parent` is ignored);
//! - every parent is a container of the tree, and following parents always ends at the root
//!   (no cycle);
//! - a weight is in `1..=`[`MAX_WEIGHT`];
//! - a cap is a positive, finite number of CPUs, at most [`Limits::max_cap`] if given;
//! - an inner policy is not `share` itself, and is one of [`Limits::inner_names`] if given
//!   (otherwise the builder that makes the inner policies judges the name).

use std::collections::{BTreeMap, BTreeSet};

use super::{ContainerSpec, MAX_WEIGHT};

/// The field of a container a [`TreeError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// [`ContainerSpec::id`].
    Id,
    /// [`ContainerSpec::name`].
    Name,
    /// [`ContainerSpec::parent`].
    Parent,
    /// [`ContainerSpec::weight`].
    Weight,
    /// [`ContainerSpec::cap`].
    Cap,
    /// [`ContainerSpec::inner`].
    Inner,
}

impl Field {
    /// The field as the messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Id => "id",
            Field::Name => "name",
            Field::Parent => "parent",
            Field::Weight => "weight",
            Field::Cap => "cap",
            Field::Inner => "inner policy",
        }
    }
}

/// A container tree that cannot be built: which container (`index` in the list given to
/// [`Tree::new`], and its name), which field, and what is wrong with its value. Displays as
/// ``container `a`: weight 0 is not in 1..=10000``.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container `{name}`: {} {msg}", field.as_str())]
pub struct TreeError {
    /// Position of the container in the list.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// The field at fault.
    pub field: Field,
    /// The value and what is wrong with it, without the container or field name
    /// (`0 is not in 1..=10000`).
    pub msg: String,
}

/// What a tree is checked against beyond its own consistency.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits<'a> {
    /// Largest cap, in CPUs (a server passes its CPU count); `None`: any positive cap.
    pub max_cap: Option<f64>,
    /// The names an inner policy may take; `None`: not checked here.
    pub inner_names: Option<&'a [&'a str]>,
}

/// One container of a validated [`Tree`].
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    /// The container as given (the root's: as listed, or the default root).
    pub spec: ContainerSpec,
    /// Position in the list given to [`Tree::new`]; `None` for a root that was not listed.
    pub index: Option<usize>,
    /// Position of the parent in [`Tree::nodes`]; `None` for the root.
    pub parent: Option<usize>,
}

/// A validated container tree: the root first, every parent before its children, otherwise in
/// the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    nodes: Vec<TreeNode>,
}

impl Tree {
    /// Check `containers` (see the module docs for the rules) and order them parents first.
    /// The first bad container in list order is reported; a container's own fields are checked
    /// before any parent, and parents before cycles.
    pub fn new(containers: &[ContainerSpec], limits: &Limits) -> Result<Tree, TreeError> {
        let bad = |index: usize, field: Field, msg: String| TreeError {
            index,
            name: containers[index].name.clone(),
            field,
            msg,
        };
        let root_listed = containers.iter().any(|c| c.id == 0);
        let mut ids = BTreeSet::new();
        let mut names = BTreeSet::new();
        if !root_listed {
            names.insert("root");
        }
        for (i, c) in containers.iter().enumerate() {
            if !ids.insert(c.id) {
                return Err(bad(
                    i,
                    Field::Id,
                    format!("{} is used by another container", c.id),
                ));
            }
            if !names.insert(c.name.as_str()) {
                return Err(bad(
                    i,
                    Field::Name,
                    format!("`{}` names another container", c.name),
                ));
            }
            check_fields(c, limits).map_err(|(field, msg)| bad(i, field, msg))?;
        }
        ids.insert(0);
        for (i, c) in containers.iter().enumerate() {
            if c.id != 0 && !ids.contains(&c.parent) {
                return Err(bad(
                    i,
                    Field::Parent,
                    format!("{} is not the id of a container", c.parent),
                ));
            }
        }
        Self::order(containers).map_err(|i| {
            let cycle = cycle_from(containers, i);
            bad(
                cycle[0],
                Field::Parent,
                format!(
                    "{} closes a cycle: {}",
                    containers[cycle[0]].parent,
                    cycle
                        .iter()
                        .chain(&cycle[..1])
                        .map(|&j| containers[j].name.as_str())
                        .collect::<Vec<_>>()
                        .join(" -> ")
                ),
            )
        })
    }

    /// Parents first: repeated passes over the list, each placing (in list order) every
    /// container whose parent is placed. `Err(i)`: container `i` is never placed (a cycle is
    /// above it; every parent is known to exist).
    fn order(containers: &[ContainerSpec]) -> Result<Tree, usize> {
        let root = containers.iter().position(|c| c.id == 0).map_or_else(
            || TreeNode {
                spec: ContainerSpec::new(0, "root", 0),
                index: None,
                parent: None,
            },
            |i| TreeNode {
                spec: containers[i].clone(),
                index: Some(i),
                parent: None,
            },
        );
        let mut nodes = vec![root];
        let mut placed: BTreeMap<u32, usize> = BTreeMap::from([(0, 0)]);
        let mut rest: Vec<usize> = (0..containers.len())
            .filter(|&i| containers[i].id != 0)
            .collect();
        while !rest.is_empty() {
            let before = rest.len();
            rest.retain(|&i| {
                let c = &containers[i];
                let Some(&parent) = placed.get(&c.parent) else {
                    return true;
                };
                placed.insert(c.id, nodes.len());
                nodes.push(TreeNode {
                    spec: c.clone(),
                    index: Some(i),
                    parent: Some(parent),
                });
                false
            });
            if rest.len() == before {
                return Err(rest[0]);
            }
        }
        Ok(Tree { nodes })
    }

    /// Every container, the root first, parents before children.
    pub fn nodes(&self) -> &[TreeNode] {
        &self.nodes
    }

    /// The container with id `id`.
    pub fn get(&self, id: u32) -> Option<&TreeNode> {
        self.nodes.iter().find(|n| n.spec.id == id)
    }

    /// The container named `name` (the root's name included).
    pub fn by_name(&self, name: &str) -> Option<&TreeNode> {
        self.nodes.iter().find(|n| n.spec.name == name)
    }

    /// The names from the root's child down to container `id`, joined by `/` (`site-a/cgi`),
    /// as a cgroup path below the root's; empty for the root.
    pub fn path(&self, id: u32) -> Option<String> {
        let mut n = self.nodes.iter().position(|n| n.spec.id == id)?;
        let mut names = Vec::new();
        while let Some(p) = self.nodes[n].parent {
            names.push(self.nodes[n].spec.name.as_str());
            n = p;
        }
        names.reverse();
        Some(names.join("/"))
    }
}

/// Check the fields of one container that need no other container.
fn check_fields(c: &ContainerSpec, limits: &Limits) -> Result<(), (Field, String)> {
    if !(1..=MAX_WEIGHT).contains(&c.weight) {
        return Err((
            Field::Weight,
            format!("{} is not in 1..={MAX_WEIGHT}", c.weight),
        ));
    }
    if let Some(cap) = c.cap {
        let max = limits.max_cap.unwrap_or(f64::INFINITY);
        if !(cap.is_finite() && cap > 0.0 && cap <= max) {
            let range = match limits.max_cap {
                Some(m) => format!("(0, {m}]"),
                None => "(0, inf)".into(),
            };
            return Err((
                Field::Cap,
                format!("{cap} is not in {range} CPUs (0.3 = 30% of one CPU)"),
            ));
        }
    }
    if let Some(inner) = &c.inner {
        if inner == "share" {
            return Err((Field::Inner, "`share` cannot be nested in itself".into()));
        }
        if let Some(names) = limits.inner_names {
            if !names.contains(&inner.as_str()) {
                let known: Vec<&str> = names.iter().copied().filter(|&x| x != "share").collect();
                return Err((
                    Field::Inner,
                    format!("`{inner}` is not a policy (known: {})", known.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// The positions of the containers of the cycle above container `start` (following parents),
/// starting with the one that comes first in the list.
fn cycle_from(containers: &[ContainerSpec], start: usize) -> Vec<usize> {
    let pos = |id: u32| containers.iter().position(|c| c.id == id && id != 0);
    let mut seen = Vec::new();
    let mut i = start;
    while !seen.contains(&i) {
        seen.push(i);
        match pos(containers[i].parent) {
            Some(p) => i = p,
            None => return vec![start],
        }
    }
    let mut cycle: Vec<usize> = seen[seen.iter().position(|&j| j == i).unwrap_or(0)..].to_vec();
    let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
    cycle.rotate_left(first);
    cycle
}
