//! Trial knobs for the CPU-per-request A/B (scripts/front-ab.sh with FRONT_AB_ENV_B): read
//! once from the environment at start. Temporary: what helps becomes a configuration key.

/// The knobs; `None`: the default.
#[derive(Debug, Clone, Default)]
pub struct Trial {
    /// tokio `event_interval` of the front end's runtime.
    pub event_interval: Option<u32>,
    /// tokio `global_queue_interval`.
    pub global_queue_interval: Option<u32>,
    /// tokio `max_io_events_per_tick`.
    pub max_io_events: Option<usize>,
    /// `PeerOptions::tcp_recv_buf` of back-end connections.
    pub upstream_recv_buf: Option<usize>,
    /// TCP_NODELAY on the listening socket (inherited by accepted connections).
    pub downstream_nodelay: bool,
}

fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

impl Trial {
    /// The knobs set in the environment (`TRIAGE_TRIAL_*`).
    pub fn from_env() -> Self {
        let t = Self {
            event_interval: var("TRIAGE_TRIAL_EVENT_INTERVAL"),
            global_queue_interval: var("TRIAGE_TRIAL_GLOBAL_QUEUE_INTERVAL"),
            max_io_events: var("TRIAGE_TRIAL_MAX_IO_EVENTS"),
            upstream_recv_buf: var("TRIAGE_TRIAL_UPSTREAM_RECV_BUF"),
            downstream_nodelay: var::<u8>("TRIAGE_TRIAL_DOWNSTREAM_NODELAY") == Some(1),
        };
        tracing::info!(trial = ?t, "front end trial knobs");
        t
    }
}
