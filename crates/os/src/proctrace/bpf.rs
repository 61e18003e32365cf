//! The BPF logger: loads `bpf/proctrace.bpf.c` (built by build.rs), attaches its five
//! tracepoint programs, and reads the ring buffer. Everything is owned by file descriptors of
//! this process: dropping the tracer (or the process dying) unloads programs and maps.

use std::io;
use std::time::Duration;

use super::{TaskEvent, Tid, TraceError};

#[cfg(all(feature = "bpf", proctrace_bpf_obj))]
mod real {
    use std::cell::RefCell;
    use std::rc::Rc;

    use libbpf_rs::{MapCore, MapFlags, MapHandle, ObjectBuilder, RingBuffer, RingBufferBuilder};

    use super::*;
    use crate::proctrace::Kind;

    /// The compiled BPF object.
    static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/proctrace.bpf.o"));

    /// Size of `struct event` in the BPF source.
    const EVENT_SIZE: usize = 24;

    /// A loaded, attached BPF logger.
    pub struct BpfTracer {
        // Field order is drop order: the ring buffer before the links, the links before the
        // object (programs and maps).
        ring: RingBuffer<'static>,
        /// Events the ring buffer callback decoded, taken by `poll`.
        inbox: Rc<RefCell<Vec<TaskEvent>>>,
        follow: MapHandle,
        dropped: MapHandle,
        _links: Vec<libbpf_rs::Link>,
        _obj: libbpf_rs::Object,
    }

    impl BpfTracer {
        pub fn open() -> Result<Self, TraceError> {
            let load = |e: libbpf_rs::Error| TraceError::Load(e.to_string());
            let open = ObjectBuilder::default().open_memory(OBJECT).map_err(load)?;
            let obj = open.load().map_err(load)?;
            let mut links = Vec::new();
            for prog in obj.progs_mut() {
                links.push(prog.attach().map_err(load)?);
            }
            let map = |name: &str| -> Result<MapHandle, TraceError> {
                let m = obj
                    .maps()
                    .find(|m| m.name() == name)
                    .ok_or_else(|| TraceError::Load(format!("map {name} missing")))?;
                MapHandle::try_from(&m).map_err(load)
            };
            let follow = map("follow")?;
            let dropped = map("dropped")?;
            let events = map("events")?;
            let inbox: Rc<RefCell<Vec<TaskEvent>>> = Rc::default();
            let sink = inbox.clone();
            let mut b = RingBufferBuilder::new();
            b.add(&events, move |data: &[u8]| {
                if let Some(ev) = decode(data) {
                    sink.borrow_mut().push(ev);
                }
                0
            })
            .map_err(load)?;
            let ring = b.build().map_err(load)?;
            Ok(Self {
                ring,
                inbox,
                follow,
                dropped,
                _links: links,
                _obj: obj,
            })
        }

        pub fn follow(&mut self, tid: Tid) -> io::Result<()> {
            self.follow
                .update(&(tid as u32).to_ne_bytes(), &[1u8], MapFlags::ANY)
                .map_err(|e| io::Error::other(e.to_string()))
        }

        pub fn unfollow(&mut self, tid: Tid) {
            let _ = self.follow.delete(&(tid as u32).to_ne_bytes());
        }

        pub fn poll(&mut self, timeout: Duration, out: &mut Vec<TaskEvent>) -> io::Result<()> {
            if self.inbox.borrow().is_empty() {
                // An error here is EINTR (a signal): the caller's loop checks its flags.
                let _ = self.ring.poll(timeout);
            } else {
                let _ = self.ring.consume();
            }
            out.append(&mut self.inbox.borrow_mut());
            Ok(())
        }

        pub fn dropped(&self) -> u64 {
            self.dropped
                .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| {
                    v.get(..8)
                        .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
                })
                .unwrap_or(0)
        }
    }

    /// One `struct event` of the ring buffer.
    fn decode(d: &[u8]) -> Option<TaskEvent> {
        if d.len() < EVENT_SIZE {
            return None;
        }
        let u32_at = |i: usize| u32::from_ne_bytes(d[i..i + 4].try_into().unwrap());
        let t_ns = u64::from_ne_bytes(d[0..8].try_into().unwrap());
        let (tid, tgid, kind, aux) = (u32_at(8), u32_at(12), u32_at(16), u32_at(20));
        let kind = match kind {
            0 => Kind::Ready,
            1 => Kind::Run,
            2 => Kind::Wait,
            3 => Kind::Preempt,
            4 => Kind::Fork { parent: aux as Tid },
            5 => Kind::Exit,
            _ => return None,
        };
        Some(TaskEvent {
            t_ns,
            tid: tid as Tid,
            tgid: tgid as Tid,
            kind,
        })
    }
}

#[cfg(all(feature = "bpf", proctrace_bpf_obj))]
pub use real::BpfTracer;

/// Stand-in when this build has no BPF object: [`BpfTracer::open`] says why.
#[cfg(not(all(feature = "bpf", proctrace_bpf_obj)))]
pub enum BpfTracer {}

#[cfg(not(all(feature = "bpf", proctrace_bpf_obj)))]
impl BpfTracer {
    pub fn open() -> Result<Self, TraceError> {
        Err(TraceError::NotBuilt(if cfg!(feature = "bpf") {
            "clang, bpftool or the kernel's BTF was missing at build time"
        } else {
            "built without the `bpf` feature"
        }))
    }
    pub fn follow(&mut self, _tid: Tid) -> io::Result<()> {
        match *self {}
    }
    pub fn unfollow(&mut self, _tid: Tid) {
        match *self {}
    }
    pub fn poll(&mut self, _timeout: Duration, _out: &mut Vec<TaskEvent>) -> io::Result<()> {
        match *self {}
    }
    pub fn dropped(&self) -> u64 {
        match *self {}
    }
}
