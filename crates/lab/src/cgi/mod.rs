//! What the two CGI labs share (`containers`, seed 003; `reservations`,
//! seed 000): their CGI scripts ([`scripts`]), the servers under test (triage and Apache with
//! mod_cgi, [`servers`]), closed-loop CGI clients ([`clients`]) and CPU accounting of the
//! server side's processes ([`cpu`]). Their static load is [`crate::wrk`].
//!
//! The scripts are Perl (run by triage and by Apache alike, no shell):
//! - `burn.pl` burns about 2 s of CPU (`?s=SECONDS`), measured with `times()`, then answers
//!   with the CPU time it used (seed 003's "CGI request process consumed about 2 seconds of CPU
//!   time");
//! - `rand.pl` computes half a million random numbers with `rand()` and returns 1 KB (seed
//!   000); the lab measures its CPU per request and reports it.

pub mod clients;
pub mod cpu;
pub mod figure;
pub mod scripts;
pub mod servers;

pub use clients::{window_stats, ClosedLoop, Sample, WindowStats};
pub use cpu::{kill_strays, CpuSnap, CpuTicks};
pub use figure::{Bound, Figure};
pub use scripts::install;
pub use servers::{Running, Servers, TriageSite};
