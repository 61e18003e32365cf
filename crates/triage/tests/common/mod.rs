//! Helpers shared by the binary's end-to-end tests (`lab_pos`, `lab_containers`,
//! `lab_reservations`, `lab_cluster`, `capacity`, `front_cli`, `front_failover`, `load_gzip`,
//! `serve_shutdown`): a child process killed when dropped, starting one that prints its
//! address, running a lab to success, a temporary directory, the check that a lab left nothing
//! behind, and why a cgroup lab cannot run here. Each test crate uses only some of them.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The `triage` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_triage");

/// A child process killed and reaped when the test lets go of it, pass or panic.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `cmd` with its stdout piped and return it with the address it prints after `http://`
/// on its first line (`triage serve` and `triage front` announce where they listen so).
pub fn spawn_printing_address(cmd: &mut Command) -> (Child, String) {
    use std::io::{BufRead, BufReader};
    let mut c = Child(cmd.stdout(Stdio::piped()).spawn().unwrap());
    let mut line = String::new();
    BufReader::new(c.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .split('/')
        .next()
        .unwrap()
        .trim()
        .to_owned();
    (c, addr)
}

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("triage-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Why a lab that needs cgroups cannot run here, if it cannot.
pub fn cannot_run_cgroup_lab() -> Option<String> {
    if !is_root() {
        return Some("needs root (cgroups, network namespaces)".into());
    }
    os::probe().err()
}

/// Kernel objects named after the lab process `pid` that still exist.
pub fn leftovers(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(o) = Command::new("ip").args(["netns", "list"]).output() {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            if l.starts_with(&format!("triage-lab-{pid}-")) {
                out.push(format!("netns {l}"));
            }
        }
    }
    if let Ok(m) = os::Mounts::detect() {
        for d in m.run_dirs_of("triage-lab", pid as i32) {
            out.push(format!("cgroup {}", d.display()));
        }
    }
    out
}

/// Runs the lab `cmd` to its end with its output captured and asserts that it succeeded
/// (the failure shows both outputs); returns its pid (for [`leftovers`]) and its stdout.
pub fn run_lab_to_success(cmd: &mut Command) -> (u32, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "lab failed: {}\n{stdout}\n{stderr}",
        o.status
    );
    (pid, stdout)
}

/// `v` as a finite number (`what` names it in the failure).
pub fn finite(v: &serde_json::Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite(), "{what} = {x}");
    x
}
