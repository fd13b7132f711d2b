//! A diagnosis's call stacks in the forms its exporters, flame graphs and comparisons share:
//! the stacks themselves ([`stacks_of`]: a file saved before stacks were recorded gives one
//! leaf-only stack per function of its `functions` table, the 15 hottest, without addresses),
//! their folded names (`root;caller;function`, a kernel frame ending in `_[k]`), and with a
//! wall-clock view ([`Diagnosis::wall`]) the on- and off-CPU stacks in one unit, ns of thread
//! time ([`wall_stacks`]): an on-CPU sample stands for one sampling period of a thread's time on
//! a CPU, an off-CPU stack for the ns the switch records timed, topped by a frame naming its
//! state (`[blocked: futex]`, `[runnable]`).
//!
//! Typed views, no file format: the `--pprof` and `--folded` files are written by
//! `render::export`, the flame graphs drawn by `render::flame`, and `compare::profile` and
//! `compare::flame` compare two diagnoses' stacks.

use super::analyse::hotspots::frame_name;
use crate::diagnose::Diagnosis;
use crate::diagnose::record::wall::OffCpu;
use crate::diagnose::symbolize::kallsyms::KERNEL_MODULE;
use crate::diagnose::symbolize::stack::{StackCount, StackFrame};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The stacks to export, and whether they were rebuilt from the functions table.
pub struct Stacks<'a> {
    /// Leaf first, most samples first.
    pub stacks: Cow<'a, [StackCount]>,
    /// True for a file without `stacks`: leaf-only stacks of its hottest functions.
    pub from_functions: bool,
}

/// The call stacks of `d`: its own, or for a file saved without them, one leaf-only stack per
/// function of its `functions` table (no address: 0).
pub fn stacks_of(d: &Diagnosis) -> Stacks<'_> {
    if !d.stacks.is_empty() || d.functions.is_empty() {
        return Stacks {
            stacks: Cow::Borrowed(&d.stacks),
            from_functions: false,
        };
    }
    let stacks = d
        .functions
        .iter()
        .map(|f| StackCount {
            frames: vec![StackFrame {
                address: 0,
                function: Some(f.symbol.clone()),
                module: f.module.clone(),
                offset: 0,
                file_offset: None,
            }],
            samples: f.samples,
        })
        .collect();
    Stacks {
        stacks: Cow::Owned(stacks),
        from_functions: true,
    }
}

/// Whether the leaf of each folded stack carries its offset (`spin+0x1a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeafOffsets {
    /// `function+0xOFFSET` on the leaf: the hot address survives (the export's form).
    Keep,
    /// Function names only: one box per function (what a flame graph draws).
    Drop,
}

/// A frame's name in a folded line: `;` would split it, so it becomes `:`. A kernel frame
/// ends in `_[k]`, as `stackcollapse-perf.pl --kernel` writes it and `flamegraph.pl` colours
/// it (`tcp_sendmsg_[k]`).
fn folded_name(f: &StackFrame) -> String {
    let name = frame_name(f).replace(';', ":");
    if f.module == KERNEL_MODULE {
        format!("{name}_[k]")
    } else {
        name
    }
}

/// The folded names of a stack, outermost caller first; with [`LeafOffsets::Keep`] a named
/// leaf reads `function+0x1a`. An off-CPU stack gets its state as a last frame.
fn folded_names(frames: &[StackFrame], leaf: LeafOffsets, state: Option<OffCpu>) -> Vec<String> {
    let mut names: Vec<String> = frames.iter().rev().map(folded_name).collect();
    if let Some(first) = frames.first()
        && leaf == LeafOffsets::Keep
        && first.function.is_some()
        && first.address != 0
    {
        let last = names.last_mut().expect("a frame");
        // A kernel leaf keeps its `_[k]` last: `tcp_sendmsg+0x1a_[k]`.
        let at = last.strip_suffix("_[k]").map_or(last.len(), str::len);
        last.insert_str(at, &format!("+{:#x}", first.offset));
    }
    if let Some(state) = state {
        names.push(state_frame(state));
    }
    names
}

/// The frame an off-CPU stack ends in, naming its state: `[blocked: futex]`, `[runnable]`.
pub fn state_frame(state: OffCpu) -> String {
    match state {
        OffCpu::Runnable => "[runnable]".to_string(),
        OffCpu::Blocked { reason } => format!("[blocked: {}]", reason.word()),
    }
}

/// Folded stacks of the on-CPU samples only: one line per distinct stack, outermost caller
/// first, `;`-separated, a space and the sample count; lines sorted. With
/// [`LeafOffsets::Keep`] a named leaf reads `function+0x1a` (an unnamed one is
/// `module+0x...` either way). What a CPU flame graph and a differential one draw.
pub fn folded_samples(d: &Diagnosis, leaf: LeafOffsets) -> String {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks_of(d).stacks.iter() {
        if s.frames.is_empty() {
            continue;
        }
        // Saturating: a loaded file's counts are outside input.
        let n = lines
            .entry(folded_names(&s.frames, leaf, None).join(";"))
            .or_default();
        *n = n.saturating_add(s.samples);
    }
    let mut out = String::new();
    for (stack, n) in lines {
        out.push_str(&format!("{stack} {n}\n"));
    }
    out
}

/// Nanoseconds in one unit of the wall-time folded stacks: microseconds, fine enough that a
/// sampling period (2,004 us at 499 Hz) and a short wait both keep their size, coarse enough
/// that a line reads (`1,387,869` is 1.39 s), and an integer, which inferno needs.
pub const FOLDED_WALL_UNIT_NS: f64 = 1_000.0;

/// One stack of the wall-time view, weighted in ns of thread time.
#[derive(Debug, Clone, PartialEq)]
pub struct WallStack<'a> {
    /// Frames, leaf first (empty for an off-CPU stack whose frames were not known).
    pub frames: &'a [StackFrame],
    /// `None` on the CPU; else runnable or blocked and why.
    pub state: Option<OffCpu>,
    /// Thread time, ns: on-CPU samples times the sampling period, off-CPU the recorded ns.
    pub ns: f64,
    /// Samples (on-CPU stacks only).
    pub samples: u64,
    /// The off-CPU stack's recognised wait, when known.
    pub wait: Option<&'a super::runtimes::WaitInStack>,
}

/// The on-CPU stacks ([`stacks_of`]) and the off-CPU ones of the wall-clock view in one unit,
/// ns of thread time; `None` without a wall view.
pub fn wall_stacks<'a>(d: &'a Diagnosis, on_cpu: &'a Stacks<'a>) -> Option<Vec<WallStack<'a>>> {
    let wall = d.wall.as_ref()?;
    let per_sample_ns = 1e9 / d.sampling.frequency_hz.max(1) as f64;
    let mut v: Vec<WallStack> = on_cpu
        .stacks
        .iter()
        .map(|s| WallStack {
            frames: &s.frames,
            state: None,
            ns: s.samples as f64 * per_sample_ns,
            samples: s.samples,
            wait: None,
        })
        .collect();
    v.extend(wall.stacks.iter().map(|s| WallStack {
        frames: &s.frames,
        state: Some(s.state),
        ns: s.ns as f64,
        samples: 0,
        wait: s.wait.as_ref(),
    }));
    Some(v)
}

/// The wall-time folded lines before rounding: each distinct stack, outermost caller first
/// (an off-CPU one ending in its state frame), with its state (`None`: on the CPU) and its
/// thread time in ns.
pub type WallLines = BTreeMap<Vec<String>, (Option<OffCpu>, f64)>;

/// [`WallLines`] of `d`; `None` without a wall view.
pub fn folded_wall_ns(d: &Diagnosis, leaf: LeafOffsets) -> Option<WallLines> {
    let on_cpu = stacks_of(d);
    let stacks = wall_stacks(d, &on_cpu)?;
    let mut lines = WallLines::new();
    for s in &stacks {
        if s.frames.is_empty() && s.state.is_none() {
            continue;
        }
        lines
            .entry(folded_names(s.frames, leaf, s.state))
            .or_insert((s.state, 0.0))
            .1 += s.ns;
    }
    Some(lines)
}
