//! `content`: explicit priority by content type and RFC 9218 urgency, the modern HTTP answer to
//! the question POS answers from behaviour alone.
//!
//! The queue has eight levels, the RFC 9218 urgencies `u=0..7` (lower is served sooner). A
//! worker's level is its request's urgency when the mechanism supplies one ([`Hints::urgency`],
//! from a `Priority: u=N` header; values above 7 count as 7); otherwise it is derived from the
//! content class: [`ContentClass::Text`] -> 2, [`ContentClass::Unknown`] -> 3 (RFC 9218's default
//! urgency), [`ContentClass::Media`] -> 4. FIFO within a level. The starvation guard is the one
//! POS uses ([`crate::ready::ReadyQueue`]).

use crate::config::PolicyConfig;
use crate::queue::{ContentClass, Ctx, Hints, Policy, PolicyStats};
use crate::ready::ReadyQueue;
use crate::worker::WorkerId;
use crate::Nanos;

/// Number of levels: RFC 9218 urgencies 0..=7.
pub const LEVELS: usize = 8;
/// Level of text without an explicit urgency.
pub const TEXT_LEVEL: u8 = 2;
/// Level of unknown content without an explicit urgency (RFC 9218 default urgency).
pub const UNKNOWN_LEVEL: u8 = 3;
/// Level of media without an explicit urgency.
pub const MEDIA_LEVEL: u8 = 4;

/// The queue level of a request with these hints.
pub fn level(hints: &Hints) -> u8 {
    match hints.urgency {
        Some(u) => u.min(LEVELS as u8 - 1),
        None => match hints.class {
            ContentClass::Text => TEXT_LEVEL,
            ContentClass::Unknown => UNKNOWN_LEVEL,
            ContentClass::Media => MEDIA_LEVEL,
        },
    }
}

/// The content policy. See the module docs.
#[derive(Debug, Clone)]
pub struct Content {
    q: ReadyQueue,
    /// Level of each live worker's latest request (from its latest enqueue).
    last_level: crate::idhash::IdMap<WorkerId, u8>,
    /// Enqueues that overtook at least one queued worker.
    overtakes: u64,
}

impl Content {
    /// An empty queue with the starvation guard at `starvation_bound` (`None`: off).
    pub fn new(starvation_bound: Option<Nanos>) -> Self {
        Self {
            q: ReadyQueue::new(LEVELS, starvation_bound),
            last_level: Default::default(),
            overtakes: 0,
        }
    }

    /// From a configuration (only `starvation_bound` is used).
    pub fn from_config(cfg: &PolicyConfig) -> Self {
        Self::new(cfg.starvation_bound)
    }

    /// Workers the policy holds state for (live workers that were queued at least once).
    pub fn live_workers(&self) -> usize {
        self.last_level.len()
    }
}

impl Policy for Content {
    fn reads_hints(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "content"
    }

    fn enqueue(&mut self, worker: WorkerId, hints: &Hints, ctx: &Ctx) {
        let l = level(hints);
        let lu = usize::from(l);
        if (lu + 1..LEVELS).any(|k| self.q.front(k).is_some()) {
            self.overtakes += 1;
        }
        self.q.push_back(lu, worker, ctx.now);
        self.last_level.insert(worker, l);
    }

    fn dequeue(&mut self, ctx: &Ctx) -> Option<WorkerId> {
        self.q.dequeue(ctx.now)
    }

    fn remove(&mut self, worker: WorkerId) -> bool {
        self.q.remove(worker)
    }

    fn on_exit(&mut self, worker: WorkerId, _ctx: &Ctx) {
        self.q.remove(worker);
        self.last_level.remove(&worker);
    }

    fn len(&self) -> usize {
        self.q.len()
    }

    fn order(&self) -> Vec<WorkerId> {
        self.q.order()
    }

    /// Marked = its latest request is more urgent than the RFC 9218 default (text, or `u<3`).
    fn marked(&self, worker: WorkerId) -> bool {
        self.last_level
            .get(&worker)
            .is_some_and(|&l| l < UNKNOWN_LEVEL)
    }

    fn stats(&self) -> PolicyStats {
        PolicyStats {
            promotions: self.overtakes,
            starvation_rescues: self.q.rescues(),
            ..PolicyStats::default()
        }
    }
}

/// Registry entry.
pub const ENTRY: crate::config::Entry = crate::config::Entry {
    name: "content",
    about: "explicit priority: RFC 9218 urgency if the request has one, else text before \
            unknown before media",
    build: |cfg| Ok(Box::new(Content::from_config(cfg))),
};
