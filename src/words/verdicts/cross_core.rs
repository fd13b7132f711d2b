//! The cross-core latency verdict's words: what one cache-line handoff costs here, by
//! topology, and what the Zen 4 EPYC reference figures are.

use super::with_interval;
use crate::format::human_ns;
use crate::reference::{
    ZEN4_C2C_OTHER_CCD_NS, ZEN4_C2C_OTHER_SOCKET_NS, ZEN4_C2C_SAME_CCX_NS, ZEN4_C2C_SMT_SIBLING_NS,
};
use crate::schema::Metric;

/// The topology groups the `c2c` probe times, in the order the explanation names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Two hardware threads of one core.
    SmtSiblings,
    /// Two cores sharing an L3.
    SharedL3,
    /// Two cores on different L3s.
    OtherL3,
    /// Two cores on different NUMA nodes.
    OtherNumaNode,
}

impl Group {
    fn label(self) -> &'static str {
        match self {
            Group::SmtSiblings => "SMT siblings",
            Group::SharedL3 => "cores sharing an L3",
            Group::OtherL3 => "cores on different L3s",
            Group::OtherNumaNode => "different NUMA nodes",
        }
    }
}

/// A vCPU pair whose placement the host changed during the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// The pair, as the probe names it (`cpu0-cpu1`).
    pub pair: String,
    /// What the minority placement read, one way.
    pub other_ns: f64,
    /// The fraction of samples (0-1) that read it.
    pub other_share: f64,
}

/// What the cross-core verdict rests on.
pub struct Facts<'a> {
    /// One-way handoff latency, the figure judged.
    pub latency_ns: f64,
    /// Its metric, for the interval beside the figure.
    pub latency_metric: &'a Metric,
    /// The same in core cycles, when the clock is known.
    pub latency_cycles: Option<f64>,
    /// A plain flag's per-direction latency (store on one line, spin on another).
    pub flag_ns: Option<f64>,
    /// The groups measured, with their one-way latency.
    pub groups: Vec<(Group, f64)>,
    /// The guest's topology hides where its vCPUs are: it says one L3, the figure says more.
    pub hidden_topology: bool,
    /// Pairs the host moved during the run.
    pub moves: Vec<Move>,
}

/// The figure: one-way latency with its interval, and cycles when known.
pub fn figure(f: &Facts<'_>) -> String {
    let one_way = with_interval(
        format!("{:.1} ns one way", f.latency_ns),
        Some(f.latency_metric),
    );
    match f.latency_cycles {
        Some(c) => format!("{one_way} = {c:.0} cycles"),
        None => one_way,
    }
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    format!(
        "a lock passed between two cores costs {} a round trip",
        human_ns(2.0 * f.latency_ns)
    )
}

/// The published figures the verdict is read against.
pub fn reference() -> String {
    format!(
        "Zen 4 EPYC: SMT sibling ~{ZEN4_C2C_SMT_SIBLING_NS} ns, same CCX ~{ZEN4_C2C_SAME_CCX_NS} ns, \
         other CCD ~{ZEN4_C2C_OTHER_CCD_NS} ns, other socket ~{ZEN4_C2C_OTHER_SOCKET_NS} ns \
         (chipsandcheese, AnandTech core-to-core tests)"
    )
}

/// What a handoff costs here, by topology, and what to do.
pub fn explanation(f: &Facts<'_>) -> String {
    let ns = f.latency_ns;
    let per_second = 1e3 / (2.0 * ns);
    let mut explanation = format!(
        "Handing a cache line from one core to another takes {} here, so a lock or \
         queue slot passed back and forth between two threads costs at least {} per round \
         trip and tops out near {per_second:.1} million handoffs per second, whatever the \
         code around it does.",
        human_ns(ns),
        human_ns(2.0 * ns)
    );
    if f.groups.len() > 1 {
        let parts: Vec<String> = f
            .groups
            .iter()
            .map(|(g, v)| format!("{} {}", g.label(), human_ns(*v)))
            .collect();
        explanation.push_str(&format!(
            " By topology: {}; threads that talk to each other belong on the closest \
             group (thread affinity, cpusets).",
            parts.join(", ")
        ));
    }
    if f.hidden_topology {
        explanation.push_str(&format!(
            " The guest's topology says these vCPUs share an L3, but {} is what a hop \
             between L3s costs (~{ZEN4_C2C_OTHER_CCD_NS} ns between Zen 4 CCDs, \
             ~{ZEN4_C2C_SAME_CCX_NS} ns inside one): the hypervisor placed them on cores the \
             guest cannot see apart.",
            human_ns(ns)
        ));
    }
    if !f.moves.is_empty() {
        let moves: Vec<String> = f
            .moves
            .iter()
            .map(|m| {
                format!(
                    "{} read {} in {} of its samples",
                    m.pair,
                    human_ns(m.other_ns),
                    crate::format::pct(m.other_share, 0)
                )
            })
            .collect();
        explanation.push_str(&format!(
            " The host moved the vCPUs during the run ({}): the figure is the placement \
             most samples saw. On a VM, which cores the vCPUs share changes at the host's \
             will; `check --runs 5` shows how often.",
            moves.join("; ")
        ));
    }
    if let Some(flag) = f.flag_ns {
        explanation.push_str(&format!(
            " A plain flag (store on one line, spin on another) takes {} per direction: \
             a store's ownership request plus the reader's miss, with no lock involved.",
            human_ns(flag)
        ));
    }
    explanation
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "locks and queues handed between threads on different cores",
    "producer/consumer handoffs and work stealing",
    "reference counts and statistics counters updated from many cores",
];

/// The hazard's title.
pub const TITLE: &str = "Cross-core latency";
