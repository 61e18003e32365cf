//! The CGI lever's modes (`cgi_lever`, `--cgi-lever`): `off`, or `nice` followed by
//! `+`-joined flags, each turning on one rule of `server::cgi::lever` (docs/kpos.md
//! "triage's own CGI children"). One parser for the config file, the command line and the
//! lab's variant names.

use serde::Deserialize;

/// Whether a CGI script started for a worker the policy marks starts raised in the kernel,
/// and which of the lever's further rules apply. Parsed from `off` or `nice[+FLAG]...`
/// ([`CgiLever::FLAGS`]); written back in the same form by `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub struct CgiLever {
    /// Scripts of marked workers start at nice -20, restored when their worker loses POS's
    /// mark (`nice`; without it the scripts run at the server's nice value: `off`).
    raise: bool,
    /// A raised script is also restored once its own CPU time passes the text budget the
    /// policy learns from the scripts' CPU times (`budget`, `policy::script_budget`).
    budget: bool,
    /// The oldest running script not raised as text is raised too, one at a time: the kernel
    /// runs the rest in about POS's tail order (`tail`).
    tail: bool,
    /// The tail's head is raised only while no script is raised as text: POS's head strictly
    /// before its tail (`tailyield`, which implies `tail`).
    tail_yields: bool,
    /// The scripts raised as text run one after the other in the order their requests began,
    /// the others behind at `BEHIND_NICE` (`order`).
    head_order: bool,
    /// With the head's order, the newest raised script first (seed 001 moves a marked process
    /// to the head of the ready queue, before those marked earlier) (`newest`, implies
    /// `order`).
    head_newest: bool,
    /// Every raised script at `BELOW_THREADS_NICE`, the server's raised threads at -20 above
    /// them (`threads`).
    threads_first: bool,
    /// With `threads`, the tail's head stays at -20: only the scripts raised as text run
    /// below the threads (`textbelow`, implies `threads`).
    tail_head_top: bool,
    /// Scripts not raised (started for unmarked workers, or restored) run at `BACK_NICE`,
    /// below the hog and everything else in the cgroup: the back of the ready queue, where
    /// seed 001 moves a process that lost characteristic 2; the tail's head is lifted from
    /// there one at a time (`back`, needs `tail` or `tailyield`).
    back: bool,
    /// A raised script is restored once its first output has been read (its worker's wake-up
    /// for output): a page script prints its HTML when it has computed it, so this costs it
    /// nothing; an image script printing as it computes stops running raised at its first
    /// band, not one relay burst (and a gate wait) later (`output`).
    output: bool,
    /// The server's threads that start scripts and relay their output ask for the shortest
    /// slice: woken, they take the CPU from a running script at once instead of after the
    /// script's slice (`preempt`).
    preempt: bool,
    /// A script of a marked worker starts unraised when its program's last execution ran
    /// past the learnt text budget: POS's prediction from a program's previous executions
    /// (`program`, needs `budget`).
    program: bool,
}

impl CgiLever {
    /// The flags that may follow `nice`, each with what it turns on.
    pub const FLAGS: [(&'static str, &'static str); 11] = [
        (
            "budget",
            "restore a raised script past the learnt text budget",
        ),
        ("tail", "raise the oldest script of POS's tail too"),
        (
            "tailyield",
            "tail, raised only while no script is raised as text",
        ),
        (
            "order",
            "raised scripts one after the other, oldest request first",
        ),
        ("newest", "order, the newest raised script first"),
        (
            "threads",
            "raised scripts below the server's raised threads",
        ),
        ("textbelow", "threads, the tail's head above them"),
        (
            "back",
            "scripts not raised at the back of the ready queue (nice 19)",
        ),
        ("output", "restore a raised script at its first output"),
        (
            "preempt",
            "the server's threads preempt a running script when they wake",
        ),
        (
            "program",
            "a program whose last run passed the text budget starts unraised",
        ),
    ];

    /// The lever off: scripts run at the server's nice value.
    pub const OFF: CgiLever = CgiLever {
        raise: false,
        budget: false,
        tail: false,
        tail_yields: false,
        head_order: false,
        head_newest: false,
        threads_first: false,
        tail_head_top: false,
        back: false,
        output: false,
        preempt: false,
        program: false,
    };

    /// Whether scripts of marked workers start raised.
    pub fn raises(self) -> bool {
        self.raise
    }

    /// Whether a raised script is also lowered by its own CPU time.
    pub fn budget(self) -> bool {
        self.budget
    }

    /// Whether the oldest script of POS's tail is raised too.
    pub fn tail(self) -> bool {
        self.tail
    }

    /// Whether the tail's head yields to the scripts raised as text.
    pub fn tail_yields(self) -> bool {
        self.tail_yields
    }

    /// Whether the scripts raised as text run in the order their requests began.
    pub fn head_order(self) -> bool {
        self.head_order
    }

    /// Whether every raised script runs below the server's raised threads.
    pub fn threads_first(self) -> bool {
        self.threads_first
    }

    /// With [`CgiLever::threads_first`]: the tail's head stays at -20.
    pub fn tail_head_top(self) -> bool {
        self.tail_head_top
    }

    /// With [`CgiLever::head_order`]: the newest raised script first, not the oldest.
    pub fn head_newest(self) -> bool {
        self.head_newest
    }

    /// Whether the scripts not raised run at the back of the ready queue.
    pub fn back(self) -> bool {
        self.back
    }

    /// Whether a raised script is restored at its first output.
    pub fn output(self) -> bool {
        self.output
    }

    /// Whether the server's threads ask for the shortest slice.
    pub fn preempt(self) -> bool {
        self.preempt
    }

    /// Whether a program's last execution can keep its next script unraised.
    pub fn program(self) -> bool {
        self.program
    }

    /// Turn on flag `f` (a name of [`CgiLever::FLAGS`]); `false` if unknown.
    fn set(&mut self, f: &str) -> bool {
        match f {
            "budget" => self.budget = true,
            "tail" => self.tail = true,
            "tailyield" => (self.tail, self.tail_yields) = (true, true),
            "order" => self.head_order = true,
            "newest" => (self.head_order, self.head_newest) = (true, true),
            "threads" => self.threads_first = true,
            "textbelow" => (self.threads_first, self.tail_head_top) = (true, true),
            "back" => self.back = true,
            "output" => self.output = true,
            "preempt" => self.preempt = true,
            "program" => self.program = true,
            _ => return false,
        }
        true
    }

    /// The flags turned on, in [`CgiLever::FLAGS`]'s order (a flag implied by a later one is
    /// left out).
    fn names(self) -> Vec<&'static str> {
        let on = [
            self.budget,
            self.tail && !self.tail_yields,
            self.tail_yields,
            self.head_order && !self.head_newest,
            self.head_newest,
            self.threads_first && !self.tail_head_top,
            self.tail_head_top,
            self.back,
            self.output,
            self.preempt,
            self.program,
        ];
        Self::FLAGS
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|((n, _), _)| *n)
            .collect()
    }
}

impl std::fmt::Display for CgiLever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.raise {
            return f.write_str("off");
        }
        f.write_str("nice")?;
        for n in self.names() {
            write!(f, "+{n}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for CgiLever {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let known = || {
            let flags: Vec<&str> = Self::FLAGS.iter().map(|(n, _)| *n).collect();
            format!(
                "a cgi lever is `off`, or `nice` followed by `+`-joined flags: {}",
                flags.join(", ")
            )
        };
        if s == "off" {
            return Ok(Self::OFF);
        }
        let mut parts = s.split('+');
        if parts.next() != Some("nice") {
            return Err(format!("unknown cgi lever `{s}` ({})", known()));
        }
        let mut l = CgiLever {
            raise: true,
            ..Self::OFF
        };
        for f in parts {
            if !l.set(f) {
                return Err(format!(
                    "unknown flag `{f}` in cgi lever `{s}` ({})",
                    known()
                ));
            }
        }
        if l.head_order && l.threads_first {
            return Err(format!(
                "cgi lever `{s}`: `order`/`newest` and `threads`/`textbelow` both set the \
                 raised scripts' levels; pick one"
            ));
        }
        if l.tail_head_top && !l.tail {
            return Err(format!(
                "cgi lever `{s}`: `textbelow` places the tail's head; add `tail` or `tailyield`"
            ));
        }
        if l.program && !l.budget {
            return Err(format!(
                "cgi lever `{s}`: `program` compares a program's last execution with the text \
                 budget; add `budget`"
            ));
        }
        if l.back && !l.tail {
            return Err(format!(
                "cgi lever `{s}`: `back` puts the scripts not raised below the cgroup's other \
                 tasks, and only the tail's head lifts them; add `tail` or `tailyield`"
            ));
        }
        Ok(l)
    }
}

impl TryFrom<String> for CgiLever {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
