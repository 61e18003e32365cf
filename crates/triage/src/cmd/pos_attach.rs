//! `triage pos attach`: clap arguments and glue to the `attach` crate's daemon.

use std::net::SocketAddr;
use std::path::PathBuf;

use attach::{AttachConfig, LoggerChoice};
use os::lever::LeverKind;
use os::proctrace::Target;
use units::Dur;

use crate::cmd::UsageError;

/// Arguments of `triage pos attach`.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "cgroup", "exe"])))]
#[command(after_long_help = AFTER)]
pub struct Args {
    /// Follow this process, its threads and every descendant (forks are followed).
    #[arg(long)]
    pid: Option<i32>,
    /// Follow every process in this cgroup directory (looked up again every second).
    #[arg(long)]
    cgroup: Option<PathBuf>,
    /// Follow every process whose command name or executable is NAME (e.g. apache2, php-fpm8.2).
    #[arg(long)]
    exe: Option<String>,
    /// The kernel lever: `nice` (nice -20; orders tasks within one leaf cgroup), `nice+slice`
    /// (also a 0.1 ms EEVDF slice), `weight` (move into a high-weight sibling cgroup), `fifo`
    /// (SCHED_FIFO: a reference only, on a real-time budget outside the CPU quota; the followed
    /// tasks' cgroup must be granted one, cgroup v1 `cpu.rt_runtime_us`).
    #[arg(long, default_value = "nice", value_parser = LeverKind::parse)]
    lever: LeverKind,
    /// Follow and classify only: no priority is changed (measures the daemon's overhead).
    #[arg(long)]
    log_only: bool,
    /// Serve /metrics on this address (SLP, RW, marks, demotions, events/s, own CPU,
    /// wake-up-to-lever latency histogram).
    #[arg(long)]
    admin: Option<SocketAddr>,
    /// The logger: `auto` (BPF, else /proc polling), `bpf`, `poll`.
    #[arg(long, default_value = "auto", value_parser = parse_logger)]
    logger: LoggerChoice,
    /// Interval of the /proc logger.
    #[arg(long, default_value = "2ms")]
    poll_every: Dur,
    /// POS's long-wait threshold: `auto` (predicted every period) or a duration.
    #[arg(long, default_value = "auto", value_parser = policy::config::parse_slp)]
    slp: policy::Tunable<policy::Nanos>,
    /// POS's run/wait change threshold: `auto` or a count.
    #[arg(long, default_value = "3", value_parser = policy::config::parse_rw)]
    rw: policy::Tunable<u32>,
    /// Prediction period.
    #[arg(long, default_value = "500ms")]
    period: Dur,
    /// CPUs the followed processes share (POS's slots); default: this process's CPUs.
    #[arg(long)]
    cpus: Option<usize>,
    /// Mean wake-up-to-run delay of the followed tasks from which the CPU counts as the
    /// bottleneck (below it nothing is raised).
    #[arg(long, default_value = "250us")]
    bottleneck_delay: Dur,
    /// Mean number of followed tasks waiting for the CPU (LRQ) over a period from which the
    /// CPU counts as the bottleneck (either this or --bottleneck-delay suffices).
    #[arg(long, default_value_t = 1.0)]
    bottleneck_lrq: f64,
    /// Raise marked tasks whether or not the CPU is the bottleneck.
    #[arg(long)]
    always: bool,
    /// CPU a raised task may run in one marked episode before it is lowered: `off`, `learn`
    /// (the CPU of a text episode, learnt from the episodes that ended: their longest),
    /// `learn-p<N>` (their N-th percentile) or a duration.
    #[arg(long, default_value = "off", value_parser = policy::kpos::EpisodeBudget::parse)]
    budget: policy::kpos::EpisodeBudget,
    /// Grades of a marked episode below the budget: with N > 1 a raised task steps down from
    /// the text's level toward the floor (or 0) each time its episode's CPU passes another
    /// 1/N of the budget (multi-level feedback: a new episode runs ahead of those that ran
    /// part of the budget already). 1: one level until the budget.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    grades: u32,
    /// Also raise the tail's head, the task whose episode began first among those runnable
    /// and not raised as text, one at a time: `off`, `after-text` (only while no task raised
    /// as text is runnable) or `with-text` (beside them).
    #[arg(long, default_value = "off", value_parser = policy::kpos::TailHead::parse)]
    tail_head: policy::kpos::TailHead,
    /// Companions: a task marked at a wake-up within this long of another such mark is not
    /// raised as text for that episode, nor is the other (a page's objects are asked for
    /// together, its HTML alone; 0: off; e.g. 2ms).
    #[arg(long, default_value = "0ms")]
    companion_window: Dur,
    /// Nice value of the tail's head (default: the lever's, as the text's; e.g. -10 to keep
    /// it below the text).
    #[arg(long, allow_hyphen_values = true)]
    tail_nice: Option<i32>,
    /// Hold every followed task that is not raised at this nice value (from the tail's head's
    /// to 0; e.g. -10): POS's lowered tasks still run ahead of a competitor outside the
    /// followed set (with --lever weight every followed task, the raised ones keeping it in
    /// the boost cgroup). Restored at the end as the raised are.
    #[arg(long, allow_hyphen_values = true)]
    floor_nice: Option<i32>,
    /// While events keep coming, take them in batches at most this often (e.g. 1ms; 0: wake
    /// up for every event): less of the daemon's CPU, decisions that do not come before a
    /// wake-up up to this much later.
    #[arg(long, default_value = "0ms")]
    event_batch: Dur,
    /// Stop after this long (default: until Ctrl-C, SIGTERM, or the processes exit).
    #[arg(long)]
    duration: Option<Dur>,
    /// Print a status line this often.
    #[arg(long, default_value = "5s")]
    report_every: Dur,
    /// With --lever weight or --front-lever weight: mount the cgroup v2 root with `favordynmods` first (remounted with
    /// its other options kept), so that a move between cgroups does not wait for an RCU grace
    /// period (p99 11 ms against 0.35 ms in a probe on a busy 2-CPU machine). It applies to
    /// every hierarchy, costs forks and exits a little, and is not undone: the kernel may
    /// keep it until reboot.
    #[arg(long)]
    favor_dynmods: bool,
    /// Use a nice lever even where the processes are not in one cgroup with their competitors.
    #[arg(long)]
    force: bool,
    /// Directory of the journal of raised tasks (crash recovery).
    #[arg(long, default_value = os::lever::STATE_DIR)]
    state_dir: PathBuf,
    /// Write every decision (`<Unix ns> raise|lower <tid>`, also with --log-only) to FILE, to
    /// match against a server's access log (marking accuracy).
    #[arg(long, value_name = "FILE")]
    actions_log: Option<PathBuf>,
    /// A process in front of the followed ones that every request crosses (nginx before
    /// php-fpm; repeatable): it and its descendants are raised while any followed task is.
    #[arg(long, value_name = "PID")]
    front_pid: Vec<i32>,
    /// How the front is raised (default: by --lever): `weight` beside a nice lever moves it
    /// into the boost cgroup, picked first at every grant of a quota, while the followed tasks
    /// keep nice levels (the front is raised for whole bursts: two moves a burst).
    #[arg(long, value_parser = LeverKind::parse, requires = "front_pid")]
    front_lever: Option<LeverKind>,
    /// `raise` (the marked tasks go to nice -20) or `lower-rest` (the followed tasks POS does
    /// not mark go to --rest-nice; the marked keep their value, nobody else is touched).
    #[arg(long, default_value = "raise", value_parser = attach::Direction::parse)]
    direction: attach::Direction,
    /// Nice value of the unmarked tasks with --direction lower-rest (0 to 19).
    #[arg(long, default_value_t = 19)]
    rest_nice: i32,
}

const AFTER: &str = "\
Examples:
  triage pos attach --exe apache2 --admin 127.0.0.1:9100
  triage pos attach --pid $(pgrep -o php-fpm) --lever nice+slice
  triage pos attach --cgroup /sys/fs/cgroup/cpu/web --lever weight
Needs root (BPF logger, priorities). Nice orders a task only against tasks of its own leaf
cgroup: the command refuses a nice lever when the processes' competitors are elsewhere and
offers --lever weight. See docs/kpos.md.";

fn parse_logger(s: &str) -> Result<LoggerChoice, String> {
    match s {
        "auto" => Ok(LoggerChoice::Auto),
        "bpf" => Ok(LoggerChoice::Bpf),
        "poll" => Ok(LoggerChoice::Poll),
        _ => Err(format!("unknown logger {s:?} (auto, bpf, poll)")),
    }
}

/// Run `triage pos attach`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let target = match (a.pid, a.cgroup, a.exe) {
        (Some(p), None, None) => Target::Pid(p),
        (None, Some(c), None) => Target::Cgroup(c),
        (None, None, Some(e)) => Target::Exe(e),
        _ => return Err(UsageError("give one of --pid, --cgroup, --exe".into()).into()),
    };
    let mut cfg = AttachConfig::new(target);
    cfg.lever = (!a.log_only).then_some(a.lever);
    cfg.logger = a.logger;
    cfg.poll_every = a.poll_every.0;
    cfg.kpos.policy.slp = a.slp;
    cfg.kpos.policy.rw = a.rw;
    cfg.kpos.policy.period = a.period.0.as_nanos() as u64;
    cfg.kpos.cpus = a
        .cpus
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cfg.kpos.bottleneck_delay = a.bottleneck_delay.0.as_nanos() as u64;
    cfg.kpos.bottleneck_lrq = a.bottleneck_lrq;
    cfg.kpos.always = a.always;
    cfg.kpos.budget = a.budget;
    cfg.kpos.tail_head = a.tail_head;
    cfg.kpos.grades = a.grades;
    cfg.kpos.companion_window = a.companion_window.0.as_nanos() as u64;
    cfg.tail_nice = a.tail_nice;
    cfg.floor_nice = a.floor_nice;
    cfg.event_batch = a.event_batch.0;
    cfg.admin = a.admin;
    cfg.duration = a.duration.map(|d| d.0);
    cfg.report_every = Some(a.report_every.0);
    cfg.force = a.force;
    cfg.favor_dynmods = a.favor_dynmods;
    cfg.state_dir = a.state_dir;
    cfg.actions_log = a.actions_log;
    cfg.front = a.front_pid;
    cfg.front_lever = a.front_lever;
    cfg.direction = a.direction;
    cfg.rest_nice = a.rest_nice;
    attach::signals::install()?;
    let mut out = std::io::stdout();
    attach::run(&cfg, &mut out, &attach::signals::stopped)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_target_is_required_and_levers_parse() {
        assert!(crate::cmd::parse_args::<Args>(&[]).is_err());
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--exe", "x"]).is_err());
        let a =
            crate::cmd::parse_args::<Args>(&["--exe", "apache2", "--lever", "nice+slice"]).unwrap();
        assert_eq!(a.lever, LeverKind::NiceSlice);
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--lever", "rr"]).is_err());
        let a = crate::cmd::parse_args::<Args>(&["--pid", "1", "--lever", "fifo"]).unwrap();
        assert_eq!(a.lever, LeverKind::Fifo);
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--poll-every", "2"]).is_err());
        let a = crate::cmd::parse_args::<Args>(&[
            "--pid",
            "1",
            "--front-pid",
            "2",
            "--front-pid",
            "3",
            "--direction",
            "lower-rest",
        ])
        .unwrap();
        assert_eq!(a.front_pid, vec![2, 3]);
        assert_eq!(a.direction, attach::Direction::LowerRest);
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--direction", "up"]).is_err());
        let a = crate::cmd::parse_args::<Args>(&[
            "--pid",
            "1",
            "--budget",
            "learn",
            "--tail-head",
            "with-text",
        ])
        .unwrap();
        assert_eq!(a.budget, policy::kpos::EpisodeBudget::Learn);
        assert_eq!(a.tail_head, policy::kpos::TailHead::WithText);
        let a = crate::cmd::parse_args::<Args>(&["--pid", "1", "--tail-nice", "-10"]).unwrap();
        assert_eq!(a.tail_nice, Some(-10));
        assert_eq!(a.floor_nice, None);
        let a = crate::cmd::parse_args::<Args>(&["--pid", "1", "--floor-nice", "-5"]).unwrap();
        assert_eq!(a.floor_nice, Some(-5));
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--budget", "x"]).is_err());
        assert_eq!(a.grades, 1, "one level until the budget unless asked");
        let a = crate::cmd::parse_args::<Args>(&[
            "--pid",
            "1",
            "--budget",
            "learn-p50",
            "--grades",
            "4",
        ])
        .unwrap();
        assert_eq!(a.budget, policy::kpos::EpisodeBudget::LearnPercentile(50));
        assert_eq!(a.grades, 4);
        assert!(crate::cmd::parse_args::<Args>(&["--pid", "1", "--grades", "0"]).is_err());
    }
}
