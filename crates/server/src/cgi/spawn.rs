//! Starting a script without a shell, in its own session, optionally straight into a cgroup.
//!
//! The child is created with `clone3(2)` (`CLONE_PIDFD`, and `CLONE_INTO_CGROUP` when the caller
//! has a cgroup v2 directory fd), falling back to `fork(2)` + `pidfd_open(2)` where `clone3` is
//! not allowed. Between fork and exec the child only makes async-signal-safe system calls on
//! data prepared by the parent: `setsid()` first (the script and everything it starts form one
//! process group, which killing reaches at once), then, unless `clone3` already placed it in its
//! cgroup, it writes itself into the group's `cgroup.procs` files (fds opened by the parent,
//! [`os::cgroup::JoinHook`]: the way used on cgroup v1), asks for the configured scheduler
//! slice if there is one (`sched_setattr`, best effort), restores the default signal mask and
//! `SIGPIPE`, wires the pipes to fds 0/1/2, changes to the script's directory and `execve`s the
//! script file itself (the kernel reads its shebang; no shell is involved). An exec failure is
//! reported to the parent through a close-on-exec pipe.
//!
//! [`ProcGuard`] owns the process: it reaps it through its pidfd, and when dropped before the
//! script ended it kills the whole process group (`killpg(SIGKILL)` while the leader is still
//! unreaped, so the group id cannot have been reused) and reaps it in the background.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::unix::pipe;

const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
const P_PIDFD: libc::idtype_t = 3;

/// `struct clone_args` of `<linux/sched.h>` up to `cgroup` (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// How the child gets into its request cgroup.
pub enum Placement {
    /// It stays where the server is.
    None,
    /// Into a cgroup: created inside it by `clone3(CLONE_INTO_CGROUP)` when `dir` (a cgroup v2
    /// directory fd) is given and the kernel accepts it; otherwise the child writes itself into
    /// the group's `cgroup.procs` files (`join`) between fork and exec.
    Cgroup {
        /// The cgroup v2 directory, for `clone3(CLONE_INTO_CGROUP)`.
        dir: Option<OwnedFd>,
        /// Joins the group between fork and exec when `clone3` cannot.
        join: os::cgroup::JoinHook,
    },
}

/// How the child was placed, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Not in a cgroup of its own.
    Nowhere,
    /// Created inside the cgroup by `clone3(CLONE_INTO_CGROUP)`.
    Clone3,
    /// Joined it itself between fork and exec.
    Joined,
}

/// What to execute.
pub struct Command<'a> {
    /// The script file, executed directly.
    pub program: &'a Path,
    /// Its working directory.
    pub dir: &'a Path,
    /// `KEY=VALUE` entries; the environment is exactly this.
    pub env: &'a [(String, String)],
    /// Scheduler slice for the script (EEVDF custom slice); `None` = the kernel's default.
    pub slice: Option<std::time::Duration>,
    /// A nice value the child gives itself before exec (the CGI lever: it never runs its
    /// program unraised); `None` = the forking thread's.
    pub nice: Option<os::prio::NiceHook>,
    /// A file to give the script as stdin instead of the pipe (a spooled request body; the
    /// caller keeps it open until `spawn` returns). [`Spawned::stdin`] then leads nowhere.
    pub stdin_file: Option<RawFd>,
}

/// A started script.
pub struct Spawned {
    /// The script's stdin.
    pub stdin: pipe::Sender,
    /// The script's stdout.
    pub stdout: pipe::Receiver,
    /// The script's stderr.
    pub stderr: pipe::Receiver,
    /// Kills the script's process group when dropped.
    pub guard: ProcGuard,
    /// Where it was placed.
    pub placed: Placed,
}

impl Spawned {
    /// A future ready once the script has written to its stdout (or closed it), that does
    /// not borrow the pipe (it waits on a second descriptor of it, nothing is read): the CGI
    /// lever's `output` rule restores a raised script at its first write, not once the relay
    /// has read it (a gate wait later). `None` if the descriptor cannot be duplicated.
    pub fn output_watch(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        use std::os::fd::AsFd;
        // Readable once bytes are in the pipe or its writer is closed.
        readable_watch(self.stdout.as_fd())
    }
}

/// A future ready once `fd` is readable, on a second descriptor of it (nothing is read, the
/// caller's descriptor is not borrowed); `None` if it cannot be duplicated or registered.
fn readable_watch(
    fd: std::os::fd::BorrowedFd<'_>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let fd = fd.try_clone_to_owned().ok()?;
    // SAFETY: the AsyncFd owns its duplicate for as long as it is registered.
    let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()?;
    Some(async move {
        let _ = fd.readable().await;
    })
}

/// Why a script could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The kernel refused to execute the file (`errno` of `execve`).
    #[error("exec {program}: {source}")]
    Exec {
        /// The script file.
        program: String,
        #[source]
        /// Why.
        source: io::Error,
    },
    /// Resources (pipes, fork) or the cgroup move failed.
    #[error("{what}: {source}")]
    Os {
        /// What failed.
        what: &'static str,
        #[source]
        /// Why.
        source: io::Error,
    },
    /// A path or variable holds a NUL byte.
    #[error("NUL byte in {0}")]
    Nul(&'static str),
}

fn os(what: &'static str) -> impl FnOnce(io::Error) -> SpawnError {
    move |source| SpawnError::Os { what, source }
}

fn pipe2() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Everything the child touches, prepared before the fork (no allocation after it).
struct ChildPlan {
    program: CString,
    dir: CString,
    argv: [*const libc::c_char; 2],
    envp: Vec<*const libc::c_char>,
    stdio: [RawFd; 3],
    join: Option<os::cgroup::JoinHook>,
    /// The wanted slice at the server's nice, when a slice is wanted.
    sched: Option<os::prio::SliceHook>,
    /// The raised nice value, applied after the slice (which sets the thread's nice).
    nice: Option<os::prio::NiceHook>,
    err: RawFd,
}

/// The child side between fork and exec. Only async-signal-safe calls; never returns.
///
/// # Safety
/// Must only be called in a freshly forked child; every pointer in `plan` must be valid.
unsafe fn child(plan: &ChildPlan) -> ! {
    /// Report `errno` and the failed step on `err`, then exit.
    ///
    /// # Safety
    /// Same as `child`: only in the forked child (async-signal-safe calls only).
    unsafe fn fail(err: RawFd, step: u8) -> ! {
        let errno = *libc::__errno_location();
        let mut msg = [0u8; 5];
        msg[..4].copy_from_slice(&errno.to_ne_bytes());
        msg[4] = step;
        libc::write(err, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
    // Its own session and process group first, so that killing the group reaches it from the
    // start (joining a capped cgroup may make it wait for CPU).
    if libc::setsid() < 0 {
        fail(plan.err, 2);
    }
    if let Some(j) = &plan.join {
        if j.join().is_err() {
            fail(plan.err, 1);
        }
    }
    // The slice is a request: a kernel without custom slices ignores `sched_runtime` or
    // refuses it, and the script runs with the default slice either way.
    if let Some(hook) = &plan.sched {
        hook.apply();
    }
    // Refused without CAP_SYS_NICE: the parent sees the nice value and holds nothing.
    if let Some(hook) = &plan.nice {
        hook.apply();
    }
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    // The Rust runtime ignores SIGPIPE; an exec'd program expects the default.
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    for (target, &fd) in plan.stdio.iter().enumerate() {
        let target = target as RawFd;
        if fd == target {
            let fl = libc::fcntl(fd, libc::F_GETFD);
            libc::fcntl(fd, libc::F_SETFD, fl & !libc::FD_CLOEXEC);
        } else if libc::dup2(fd, target) < 0 {
            fail(plan.err, 3);
        }
    }
    if libc::chdir(plan.dir.as_ptr()) != 0 {
        fail(plan.err, 4);
    }
    libc::execve(
        plan.program.as_ptr(),
        plan.argv.as_ptr(),
        plan.envp.as_ptr(),
    );
    fail(plan.err, 5)
}

/// Fork a child running `plan`; returns (pid, pidfd, whether clone3 placed it in the cgroup).
fn fork_child(plan: &ChildPlan, cgroup: Option<RawFd>) -> io::Result<(i32, OwnedFd, bool)> {
    let mut pidfd: RawFd = -1;
    let mut args = CloneArgs {
        flags: CLONE_PIDFD,
        pidfd: &mut pidfd as *mut RawFd as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..Default::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    // SAFETY: clone3 without CLONE_VM behaves like fork; the child only runs `child`, which
    // makes async-signal-safe calls on memory prepared before the fork.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if r == 0 {
        // SAFETY: we are the child.
        unsafe { child(plan) }
    }
    if r > 0 {
        // SAFETY: the kernel stored a new pidfd that we own.
        return Ok((
            r as i32,
            unsafe { OwnedFd::from_raw_fd(pidfd) },
            cgroup.is_some(),
        ));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // clone3 unknown or filtered (seccomp): plain fork.
        Some(libc::ENOSYS) | Some(libc::EPERM) if cgroup.is_none() => {}
        _ => return Err(e),
    }
    // SAFETY: as above; the child only runs `child`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe { child(plan) }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain syscall; the child is ours and unreaped, so the pid is stable.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: killing and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(e);
    }
    // SAFETY: a fresh pidfd we own.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(fd as RawFd) }, false))
}

fn cstring(s: &[u8], what: &'static str) -> Result<CString, SpawnError> {
    CString::new(s).map_err(|_| SpawnError::Nul(what))
}

/// The parent's side right after the fork.
struct Forked {
    pid: i32,
    pidfd: OwnedFd,
    placed: Placed,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    status: OwnedFd,
}

/// Fork the child (synchronous: the raw pointers of the plan never cross an await).
fn fork_script(cmd: &Command<'_>, placement: Placement) -> Result<Forked, SpawnError> {
    use std::os::unix::ffi::OsStrExt;
    let program = cstring(cmd.program.as_os_str().as_bytes(), "script path")?;
    let dir = cstring(cmd.dir.as_os_str().as_bytes(), "script directory")?;
    let env: Vec<CString> = cmd
        .env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes(), "environment"))
        .collect::<Result<_, _>>()?;
    let (in_r, in_w) = pipe2().map_err(os("pipe"))?;
    let (out_r, out_w) = pipe2().map_err(os("pipe"))?;
    let (errp_r, errp_w) = pipe2().map_err(os("pipe"))?;
    let (st_r, st_w) = pipe2().map_err(os("pipe"))?;
    let (into, join) = match placement {
        Placement::None => (None, None),
        Placement::Cgroup { dir, join } => (dir, Some(join)),
    };
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let mut plan = ChildPlan {
        argv: [program.as_ptr(), std::ptr::null()],
        program,
        dir,
        envp,
        stdio: [
            cmd.stdin_file.unwrap_or(in_r.as_raw_fd()),
            out_w.as_raw_fd(),
            errp_w.as_raw_fd(),
        ],
        join: None,
        sched: cmd.slice.map(os::prio::SliceHook::new),
        nice: cmd.nice,
        err: st_w.as_raw_fd(),
    };
    let mut forked = None;
    if let Some(d) = &into {
        match fork_child(&plan, Some(d.as_raw_fd())) {
            Ok(x) => forked = Some(x),
            // CLONE_INTO_CGROUP refused (old kernel, seccomp, cgroup not usable): the child
            // joins the group itself instead.
            Err(e) => tracing::debug!("clone3(CLONE_INTO_CGROUP) failed ({e}); joining instead"),
        }
    }
    let (pid, pidfd, in_cgroup) = match forked {
        Some(x) => x,
        None => {
            plan.join = join;
            fork_child(&plan, None).map_err(os("clone3/fork"))?
        }
    };
    let placed = match (in_cgroup, plan.join.is_some()) {
        (true, _) => Placed::Clone3,
        (false, true) => Placed::Joined,
        (false, false) => Placed::Nowhere,
    };
    // The child's ends belong to the child now (dropped here).
    drop((in_r, out_w, errp_w, st_w));
    Ok(Forked {
        pid,
        pidfd,
        placed,
        stdin: in_w,
        stdout: out_r,
        stderr: errp_r,
        status: st_r,
    })
}

/// Start `cmd` with fresh pipes on 0/1/2, placed as `placement` says.
pub async fn spawn(cmd: Command<'_>, placement: Placement) -> Result<Spawned, SpawnError> {
    let f = fork_script(&cmd, placement)?;
    let placed = f.placed;
    let (in_w, out_r, errp_r, st_r) = (f.stdin, f.stdout, f.stderr, f.status);
    let mut guard = ProcGuard::new(f.pid, f.pidfd).map_err(os("pidfd"))?;
    // Wait for exec (the status pipe closes) or its failure (5 bytes: errno, step).
    let status = read_status(st_r).await.map_err(os("exec status pipe"))?;
    if let Some((errno, step)) = status {
        guard.kill();
        let _ = guard.wait().await;
        let source = io::Error::from_raw_os_error(errno);
        return Err(match step {
            5 => SpawnError::Exec {
                program: cmd.program.display().to_string(),
                source,
            },
            1 => os("joining the request cgroup")(source),
            2 => os("setsid")(source),
            3 => os("dup2")(source),
            _ => os("chdir to the script directory")(source),
        });
    }
    Ok(Spawned {
        stdin: pipe::Sender::from_owned_fd(in_w).map_err(os("stdin pipe"))?,
        stdout: pipe::Receiver::from_owned_fd(out_r).map_err(os("stdout pipe"))?,
        stderr: pipe::Receiver::from_owned_fd(errp_r).map_err(os("stderr pipe"))?,
        guard,
        placed,
    })
}

async fn read_status(fd: OwnedFd) -> io::Result<Option<(i32, u8)>> {
    let rx = pipe::Receiver::from_owned_fd(fd)?;
    let mut buf = [0u8; 5];
    let mut got = 0;
    loop {
        rx.readable().await?;
        match rx.try_read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got == buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    if got == buf.len() {
        let errno = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        Ok(Some((errno, buf[4])))
    } else {
        Ok(None)
    }
}

/// How a script ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit code {c}"),
            Exit::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// Owns a started script's process: reaps it, and kills its process group if dropped early.
pub struct ProcGuard {
    pid: i32,
    pidfd: Option<AsyncFd<OwnedFd>>,
    exit: Option<Exit>,
    /// Run after the process is reaped (cgroup removal), also when dropped; given the
    /// kernel's accounting of the leader, read after it exited and before it was reaped.
    on_reaped: Option<OnReaped>,
}

/// What runs once a script's leader has been reaped: given its `/proc/<pid>/schedstat` read
/// while it was a zombie (`None` if that could not be read).
pub type OnReaped = Box<dyn FnOnce(Option<os::procfs::SchedStat>) + Send>;

impl std::fmt::Debug for ProcGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcGuard")
            .field("pid", &self.pid)
            .field("exit", &self.exit)
            .finish()
    }
}

impl ProcGuard {
    fn new(pid: i32, pidfd: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            pid,
            // SAFETY: the AsyncFd owns the pidfd for as long as it is registered.
            pidfd: Some(
                unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }
                    .map_err(|e| e.into_parts().1)?,
            ),
            exit: None,
            on_reaped: None,
        })
    }

    /// The script's pid (also its process group and session id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Run `f` once the process has been reaped (or right away, without its accounting, if it
    /// has been).
    pub fn on_reaped(&mut self, f: OnReaped) {
        if self.exit.is_some() {
            f(None);
        } else {
            self.on_reaped = Some(f);
        }
    }

    /// SIGKILL the script's whole process group, and the leader itself (in case it has not
    /// reached `setsid` yet). Safe against pid reuse: the leader is not reaped yet, so its pid
    /// (the group id) cannot belong to anyone else.
    pub fn kill(&self) {
        if self.exit.is_none() {
            // SAFETY: plain syscalls on our own unreaped child and its process group.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
    }

    /// If the leader has exited: kill what is left of its process group (the zombie leader
    /// still holds the group id), reap it and return how it ended.
    fn try_reap(&mut self) -> io::Result<Option<Exit>> {
        let Some(fd) = &self.pidfd else {
            return Ok(self.exit);
        };
        let raw = fd.get_ref().as_raw_fd() as libc::id_t;
        // SAFETY: zeroed siginfo is a valid out-parameter; waitid on our own pidfd.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                P_PIDFD,
                raw,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ECHILD) {
                // Reaped by someone else (SIGCHLD ignored): treat as gone.
                return Ok(Some(self.finish(Exit::Code(-1), None)));
            }
            return Err(e);
        }
        // SAFETY: reading the union fields waitid filled in.
        let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        // The leader is a zombie: its pid cannot be reused yet, so the group id is still ours,
        // and the kernel's accounting of it is final and still readable.
        let sched = os::procfs::schedstat(self.pid).ok();
        // SAFETY: plain syscalls on our own child.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::waitid(P_PIDFD, raw, &mut info, libc::WEXITED | libc::WNOHANG);
        }
        let exit = if code == libc::CLD_EXITED {
            Exit::Code(status)
        } else {
            Exit::Signal(status)
        };
        Ok(Some(self.finish(exit, sched)))
    }

    fn finish(&mut self, exit: Exit, sched: Option<os::procfs::SchedStat>) -> Exit {
        self.exit = Some(exit);
        self.pidfd = None;
        if let Some(f) = self.on_reaped.take() {
            f(sched);
        }
        exit
    }

    /// Wait for the script (the group leader) to exit, kill what it left running in its process
    /// group, and reap it.
    pub async fn wait(&mut self) -> io::Result<Exit> {
        loop {
            if let Some(e) = self.try_reap()? {
                return Ok(e);
            }
            let fd = self.pidfd.as_ref().expect("unreaped child has a pidfd");
            let mut g = fd.readable().await?;
            g.clear_ready();
        }
    }

    /// Ready once the script (the group leader) has exited, reaped or not; it stays ready.
    pub fn poll_exited(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match &self.pidfd {
            None => std::task::Poll::Ready(()),
            // A pidfd becomes readable when its process exits.
            Some(fd) => fd.poll_read_ready(cx).map(|_| ()),
        }
    }

    /// A future ready once the script (the group leader) has exited, reaped or not, that
    /// does not borrow the guard (it waits on a second descriptor of the pidfd): the lever
    /// learns of the exit when it happens, not when the relay has sent the output and reaps.
    /// `None` if already reaped or the descriptor cannot be duplicated.
    pub fn exit_watch(&self) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
        use std::os::fd::AsFd;
        // A pidfd becomes readable when its process exits, and stays so.
        readable_watch(self.pidfd.as_ref()?.get_ref().as_fd())
    }

    /// The exit status if already reaped.
    pub fn exit(&self) -> Option<Exit> {
        self.exit
    }
}

impl Drop for ProcGuard {
    fn drop(&mut self) {
        if self.exit.is_some() {
            return;
        }
        self.kill();
        if let Ok(Some(_)) = self.try_reap() {
            return;
        }
        // Still dying: the reaper thread waits for it. Not a task of the runtime: a task
        // dropped unpolled (runtime shutting down) would drop a guard again, and again.
        if let Some(fd) = self.pidfd.take() {
            reaper().send(Reaper {
                pid: self.pid,
                pidfd: fd.into_inner(),
                on_reaped: self.on_reaped.take(),
            });
        }
    }
}

/// A killed script waiting to be reaped by the reaper thread.
struct Reaper {
    pid: i32,
    pidfd: OwnedFd,
    on_reaped: Option<OnReaped>,
}

impl Reaper {
    /// Block until the leader exits, kill what is left of its group, reap it.
    fn reap(mut self) {
        let raw = self.pidfd.as_raw_fd() as libc::id_t;
        // SAFETY: zeroed siginfo is a valid out-parameter; waitid/kill on our own child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            loop {
                let r = libc::waitid(P_PIDFD, raw, &mut info, libc::WEXITED | libc::WNOWAIT);
                if r == 0 || *libc::__errno_location() != libc::EINTR {
                    break;
                }
            }
        }
        let sched = os::procfs::schedstat(self.pid).ok();
        // SAFETY: kill/waitid on our own unreaped child and its group.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::kill(-self.pid, libc::SIGKILL);
            libc::waitid(P_PIDFD, raw, &mut info, libc::WEXITED | libc::WNOHANG);
        }
        if let Some(f) = self.on_reaped.take() {
            f(sched);
        }
    }
}

struct ReaperHandle(std::sync::Mutex<std::sync::mpsc::Sender<Reaper>>);

impl ReaperHandle {
    fn send(&self, r: Reaper) {
        let tx = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(std::sync::mpsc::SendError(r)) = tx.send(r) {
            // The thread could not be started: reap here (the process was SIGKILLed).
            r.reap();
        }
    }
}

/// The one thread that reaps scripts whose guard was dropped before they ended.
fn reaper() -> &'static ReaperHandle {
    static R: std::sync::OnceLock<ReaperHandle> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Reaper>();
        let spawned = std::thread::Builder::new()
            .name("cgi-reaper".into())
            .spawn(move || {
                for r in rx {
                    r.reap();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cgi: cannot start the reaper thread ({e}); reaping inline");
        }
        ReaperHandle(std::sync::Mutex::new(tx))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd<'a>(program: &'a Path, env: &'a [(String, String)]) -> Command<'a> {
        Command {
            program,
            dir: Path::new("/"),
            env,
            slice: None,
            nice: None,
            stdin_file: None,
        }
    }

    #[tokio::test]
    async fn the_script_gets_the_configured_slice() {
        let tmp = tempfile::tempdir().unwrap();
        let script = tmp.path().join("wait.sh");
        std::fs::write(&script, "#!/bin/sh\nsleep 5\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut slices = Vec::new();
        for slice in [Some(std::time::Duration::from_millis(30)), None] {
            let mut c = cmd(&script, &[]);
            c.slice = slice;
            let sp = spawn(c, Placement::None).await.unwrap();
            slices.push(os::prio::thread_slice_ns(sp.guard.pid()).unwrap());
            drop(sp); // kills the script
        }
        let (with, without) = (slices[0], slices[1]);
        if with == 0 {
            eprintln!("SKIP the_script_gets_the_configured_slice: kernel without custom slices");
            return;
        }
        assert_eq!(with, 30_000_000, "the slice asked for");
        assert_ne!(
            without, 30_000_000,
            "no slice asked for: the kernel's default"
        );
    }

    #[tokio::test]
    async fn a_raised_script_starts_at_its_nice_value_slice_or_not() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP a_raised_script_starts_at_its_nice_value_slice_or_not: needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let script = tmp.path().join("wait.sh");
        std::fs::write(&script, "#!/bin/sh\nsleep 5\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let own = os::prio::thread_nice(os::prio::current_tid()).unwrap();
        for (slice, nice) in [
            (None, Some(-20)),
            (Some(std::time::Duration::from_millis(30)), Some(-20)),
            (None, None),
        ] {
            let mut c = cmd(&script, &[]);
            c.slice = slice;
            c.nice = nice.map(|n| os::prio::NiceHook::new(n).unwrap());
            let sp = spawn(c, Placement::None).await.unwrap();
            let got = os::prio::thread_nice(sp.guard.pid()).unwrap();
            assert_eq!(got, nice.unwrap_or(own), "slice {slice:?}");
            drop(sp);
        }
    }

    #[tokio::test]
    async fn exit_status_and_exec_errors() {
        let sp = spawn(cmd(Path::new("/bin/false"), &[]), Placement::None)
            .await
            .unwrap();
        assert_eq!(sp.placed, Placed::Nowhere);
        let mut g = sp.guard;
        assert_eq!(g.wait().await.unwrap(), Exit::Code(1));
        match spawn(cmd(Path::new("/nonexistent/prog"), &[]), Placement::None).await {
            Err(SpawnError::Exec { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::ENOENT))
            }
            other => panic!("{:?}", other.map(|s| s.guard)),
        }
    }

    #[tokio::test]
    async fn refused_clone_into_cgroup_falls_back_to_joining() {
        // A plain directory imitating cgroupfs: clone3(CLONE_INTO_CGROUP) refuses its fd, so
        // the child must write itself into `cgroup.procs` between fork and exec.
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("cg");
        std::fs::create_dir(&base).unwrap();
        let mounts = os::Mounts::plain(os::Version::V2, vec![(vec!["cpu"], base)]);
        let root = os::CgroupRoot::open_in("t", mounts).unwrap();
        let cg = root.create("req-0").unwrap();
        let join = cg.join_hook().unwrap();
        let not_a_cgroup = OwnedFd::from(std::fs::File::open(tmp.path()).unwrap());
        let sp = spawn(
            cmd(Path::new("/bin/true"), &[]),
            Placement::Cgroup {
                dir: Some(not_a_cgroup),
                join,
            },
        )
        .await
        .unwrap();
        assert_eq!(sp.placed, Placed::Joined);
        let mut g = sp.guard;
        assert_eq!(g.wait().await.unwrap(), Exit::Code(0));
        let procs = std::fs::read_to_string(cg.path().join("cgroup.procs")).unwrap();
        assert_eq!(
            procs, "0",
            "the child wrote itself (pid 0 = the writer) into the group"
        );
    }

    #[tokio::test]
    async fn dropping_the_guard_kills_the_process_group() {
        // sh starts a grandchild in the same group, prints its pid, and waits.
        let sp = spawn(
            Command {
                program: Path::new("/bin/sh"),
                dir: Path::new("/"),
                env: &[],
                slice: None,
                nice: None,
                stdin_file: None,
            },
            Placement::None,
        )
        .await;
        // /bin/sh without arguments reads commands from stdin.
        let mut sp = sp.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        sp.stdin
            .write_all(b"sleep 300 & echo $! ; wait\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 64];
        let n = sp.stdout.read(&mut buf).await.unwrap();
        let grandchild: i32 = String::from_utf8_lossy(&buf[..n]).trim().parse().unwrap();
        let leader = sp.guard.pid();
        drop(sp.guard);
        for _ in 0..500 {
            if os::task::ended(leader) && os::task::ended(grandchild) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("leader {leader} or grandchild {grandchild} survived the guard");
    }
}
