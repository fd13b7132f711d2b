//! A diagnosis in the formats other tools read: pprof's `profile.proto` (gzipped; `go tool
//! pprof`, speedscope, Grafana Pyroscope) and folded stacks (`root;caller;function count` per
//! line; flamegraph.pl, inferno, speedscope). Both are pure functions of a [`Diagnosis`]
//! returning bytes, so a run and a saved file convert the same way.
//!
//! The input is the diagnosis's sampled call stacks ([`Diagnosis::stacks`]). A file saved
//! before stacks were recorded has none: it converts as one leaf-only stack per function of its
//! `functions` table (the 15 hottest), without addresses, and [`stacks_of`] says so.
//!
//! With a wall-clock view ([`Diagnosis::wall`]) the exports carry the off-CPU stacks too, in
//! one unit with the on-CPU ones ([`wall_stacks`]): an on-CPU sample stands for one sampling
//! period of a thread's time on a CPU, an off-CPU stack for the ns the switch records timed.
//! Folded stacks then count *microseconds of thread time* instead of samples (the off-CPU
//! stacks end in a frame naming their state, `[blocked: futex]` or `[runnable]`); pprof gains a
//! `wall/nanoseconds` sample type and `state`/`reason` labels. Without a wall view both are
//! what they were.

use super::Diagnosis;
use super::analyse::hotspots::frame_name;
use super::profile_proto as pb;
use super::record::wall::OffCpu;
use super::symbolize::kallsyms::KERNEL_MODULE;
use super::symbolize::stack::{StackCount, StackFrame};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

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

/// Folded stacks, for `--folded`: without a wall-clock view, [`folded_samples`] (counts are
/// samples). With one, on- and off-CPU stacks in one file, counted in microseconds of thread
/// time ([`FOLDED_WALL_UNIT_NS`]): an on-CPU stack its samples times the sampling period, an
/// off-CPU one the time recorded in it, with a last frame that names the state
/// (`[blocked: futex]`, `[runnable]`; alone when the stack was not known). A line under half
/// a microsecond is left out.
pub fn folded(d: &Diagnosis, leaf: LeafOffsets) -> String {
    let Some(lines) = folded_wall_ns(d, leaf) else {
        return folded_samples(d, leaf);
    };
    let mut out = String::new();
    for (names, (_, ns)) in lines {
        let us = (ns / FOLDED_WALL_UNIT_NS).round() as u64;
        if us > 0 {
            out.push_str(&format!("{} {us}\n", names.join(";")));
        }
    }
    out
}

/// Page size mappings are widened to.
const PAGE: u64 = 4096;

/// The sampling period in ns: each sample stands for this much CPU time.
pub fn period_ns(d: &Diagnosis) -> i64 {
    (1e9 / d.sampling.frequency_hz.max(1) as f64).round() as i64
}

/// Builds `profile.proto`'s strings, interning each once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }
    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One sample of the profile before its frames are located.
struct Row<'a> {
    /// Frames, leaf first.
    frames: &'a [StackFrame],
    /// Off the CPU: a frame naming the state goes on top of the stack.
    state: Option<OffCpu>,
    /// One value per sample type.
    values: Vec<i64>,
    /// Labels, key and value.
    labels: Vec<(&'static str, String)>,
}

/// The profile's samples: the on-CPU stacks valued in samples and CPU ns; with a wall view
/// also in wall ns, beside the off-CPU stacks (0 samples, 0 CPU ns), each labelled with its
/// state.
fn rows<'a>(d: &'a Diagnosis, stacks: &'a Stacks<'a>, period: i64) -> Vec<Row<'a>> {
    let Some(wall) = wall_stacks(d, stacks) else {
        return stacks
            .stacks
            .iter()
            .map(|s| {
                let n = s.samples as i64;
                Row {
                    frames: &s.frames,
                    state: None,
                    values: vec![n, n.saturating_mul(period)],
                    labels: Vec::new(),
                }
            })
            .collect();
    };
    wall.into_iter()
        .map(|s| match s.state {
            None => {
                let n = s.samples as i64;
                let ns = n.saturating_mul(period);
                Row {
                    frames: s.frames,
                    state: None,
                    values: vec![n, ns, ns],
                    labels: vec![(LABEL_STATE, "running".into())],
                }
            }
            Some(state) => {
                let mut labels = vec![(LABEL_STATE, state_word(state).into())];
                if let OffCpu::Blocked { reason } = state {
                    labels.push((LABEL_REASON, reason.word().into()));
                }
                if let Some(w) = s.wait {
                    labels.push((LABEL_WAIT, w.kind.word().into()));
                }
                Row {
                    frames: s.frames,
                    state: Some(state),
                    values: vec![0, 0, s.ns.round() as i64],
                    labels,
                }
            }
        })
        .collect()
}

/// pprof label keys of the wall view: `-tagfocus state=blocked`, `-tagfocus reason=futex`,
/// `-tagfocus wait=lock`.
const LABEL_STATE: &str = "state";
const LABEL_REASON: &str = "reason";
const LABEL_WAIT: &str = "wait";

/// The `state` label's value: `running`, `runnable` or `blocked`.
pub fn state_word(state: OffCpu) -> &'static str {
    match state {
        OffCpu::Runnable => "runnable",
        OffCpu::Blocked { .. } => "blocked",
    }
}

/// The pprof profile of `d`, before encoding: sample types `samples/count` and
/// `cpu/nanoseconds` (samples times the sampling period, the default), one location per
/// sampled address with the function it lies in, one mapping per module covering the pages
/// sampled in it (with, for file-backed code, the file offset that lets `pprof -disasm` find
/// the instructions in the binary). Functions are named already (`has_functions`), so `-top`
/// and `-diff_base` never look a binary up.
///
/// With a wall-clock view, a third sample type `wall/nanoseconds`: every thread's time, an
/// on-CPU stack its samples times the period, an off-CPU stack the time recorded in it (0 in
/// the other two types), topped by a frame naming its state (`[blocked: futex]`) so that
/// `-top -sample_index=wall` lists the waits beside the functions; labels `state`
/// (`running`, `runnable`, `blocked`), `reason` and, for a wait recognised, `wait` (`lock`,
/// `condition`...). Two profiles compare with `-diff_base` only when both have the view or
/// neither has (pprof merges profiles of the same sample types).
pub fn pprof_profile(d: &Diagnosis) -> pb::Profile {
    // The string table is filled in the order of these calls: kept so the bytes stay the same.
    let mut st = Strings::new();
    let period = period_ns(d);
    let mut sample_type = vec![
        pb::ValueType {
            r#type: st.get("samples"),
            unit: st.get("count"),
        },
        pb::ValueType {
            r#type: st.get("cpu"),
            unit: st.get("nanoseconds"),
        },
    ];
    if d.wall.is_some() {
        sample_type.push(pb::ValueType {
            r#type: st.get("wall"),
            unit: st.get("nanoseconds"),
        });
    }
    let stacks = stacks_of(d);
    let rows = rows(d, &stacks, period);
    // Mappings first: their address ranges come from every frame.
    let (mapping, mapping_id) = mappings(&rows, &mut st);
    let located = locate_samples(&rows, &mapping_id, &mut st);
    let comment = comments(d, stacks.from_functions, &mut st);
    let period_type = Some(pb::ValueType {
        r#type: st.get("cpu"),
        unit: st.get("nanoseconds"),
    });
    let default_sample_type = st.get("cpu");
    pb::Profile {
        sample_type,
        sample: located.sample,
        mapping,
        location: located.location,
        function: located.function,
        string_table: st.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: 0,
        duration_nanos: (d.sampling.wall_s * 1e9).round() as i64,
        period_type,
        period,
        comment,
        default_sample_type,
    }
}

/// One mapping per module, spanning the whole pages of every frame sampled in it, and each
/// module's mapping id.
fn mappings<'a>(rows: &[Row<'a>], st: &mut Strings) -> (Vec<pb::Mapping>, HashMap<&'a str, u64>) {
    let mut modules: BTreeMap<&str, (u64, u64, Option<u64>)> = BTreeMap::new();
    for f in rows.iter().flat_map(|s| s.frames) {
        let e = modules
            .entry(f.module.as_str())
            .or_insert((u64::MAX, 0, None));
        if f.address != 0 && f.address < e.0 {
            e.0 = f.address;
            e.2 = f.file_offset;
        }
        e.1 = e.1.max(f.address.saturating_add(1));
    }
    let mut mapping = Vec::new();
    let mut mapping_id: HashMap<&str, u64> = HashMap::new();
    for (module, (start, limit, file_offset)) in &modules {
        let id = mapping.len() as u64 + 1;
        mapping_id.insert(module, id);
        // Widened to whole pages, as the kernel maps files: pprof's tools find the ELF
        // segment of a mapping from its page-aligned start and file offset.
        let (start, limit, file_offset) = match (*start, file_offset) {
            (u64::MAX, _) => (0, 0, 0),
            (s, Some(off)) if s & (PAGE - 1) <= *off => {
                let back = s & (PAGE - 1);
                // Saturating: a saved file's address may sit at the top of the address space.
                (
                    s - back,
                    limit.checked_next_multiple_of(PAGE).unwrap_or(u64::MAX),
                    off - back,
                )
            }
            (s, _) => (s, (*limit).max(s), 0),
        };
        mapping.push(pb::Mapping {
            id,
            memory_start: start,
            memory_limit: limit,
            file_offset,
            filename: st.get(module),
            has_functions: true,
            ..Default::default()
        });
    }
    (mapping, mapping_id)
}

/// The samples with their locations and the functions those lie in.
struct Located {
    function: Vec<pb::Function>,
    location: Vec<pb::Location>,
    sample: Vec<pb::Sample>,
}

/// Each stack as a sample of location ids (one location per address and function, one
/// function per name and module; an off-CPU stack's state frame has neither address nor
/// mapping), with its values and labels.
fn locate_samples(rows: &[Row], mapping_id: &HashMap<&str, u64>, st: &mut Strings) -> Located {
    let mut function = Vec::new();
    let mut function_id: HashMap<(String, String), u64> = HashMap::new();
    let mut location = Vec::new();
    let mut location_id: HashMap<(u64, String, String), u64> = HashMap::new();
    let mut sample = Vec::new();
    let mut locate = |name: String, module: &str, address: u64, st: &mut Strings| -> u64 {
        let fid = *function_id
            .entry((name.clone(), module.to_string()))
            .or_insert_with(|| {
                let id = function.len() as u64 + 1;
                let n = st.get(&name);
                function.push(pb::Function {
                    id,
                    name: n,
                    system_name: n,
                    ..Default::default()
                });
                id
            });
        *location_id
            .entry((address, module.to_string(), name))
            .or_insert_with(|| {
                let id = location.len() as u64 + 1;
                location.push(pb::Location {
                    id,
                    mapping_id: mapping_id.get(module).copied().unwrap_or(0),
                    address,
                    line: vec![pb::Line {
                        function_id: fid,
                        ..Default::default()
                    }],
                    is_folded: false,
                });
                id
            })
    };
    for r in rows {
        let mut ids = Vec::with_capacity(r.frames.len() + 1);
        if let Some(state) = r.state {
            ids.push(locate(state_frame(state), "", 0, st));
        }
        for f in r.frames {
            ids.push(locate(frame_name(f), &f.module, f.address, st));
        }
        let label = r
            .labels
            .iter()
            .map(|(k, v)| pb::Label {
                key: st.get(k),
                str: st.get(v),
                ..Default::default()
            })
            .collect();
        sample.push(pb::Sample {
            location_id: ids,
            value: r.values.clone(),
            label,
        });
    }
    Located {
        function,
        location,
        sample,
    }
}

/// The profile's comments: the workload, the machine, the sampling, PAUSE, and whether the
/// stacks were saved.
fn comments(d: &Diagnosis, from_functions: bool, st: &mut Strings) -> Vec<i64> {
    let what = match &d.target.command {
        Some(c) => c.join(" "),
        None => format!("process {} (attached)", d.target.pid),
    };
    let mut comment = vec![
        st.get(&format!("cpudoctor diagnose: {what}")),
        st.get(&format!(
            "machine: {}, {} logical CPUs",
            d.machine.cpu, d.machine.logical_cpus
        )),
        st.get(&format!(
            "sampling: {} at {} Hz, {} samples over {:.2} s",
            d.sampling.event.event_name(),
            d.sampling.frequency_hz,
            d.sampling.samples,
            d.sampling.wall_s
        )),
    ];
    if let Some(p) = d.machine.pause {
        comment.push(st.get(&format!(
            "PAUSE: {:.1} ns{}",
            p.ns,
            p.cycles
                .map(|c| format!(" = {c:.0} cycles"))
                .unwrap_or_default()
        )));
    }
    if from_functions {
        comment.push(st.get(&format!(
            "saved without call stacks: leaf-only samples of the {} hottest functions, no \
             addresses",
            d.functions.len()
        )));
    }
    if let Some(w) = &d.wall {
        comment.push(st.get(&format!(
            "wall: {} threads' time over {:.2} s, on the CPU (samples x period) and off it \
             (runnable, blocked: timed by context-switch records); -sample_index=wall, \
             -tagfocus state=blocked",
            w.threads.len(),
            w.method.window_s
        )));
    }
    comment
}

/// The pprof profile of `d`, encoded and gzipped: the bytes of a `.pb.gz` file. The gzip
/// header carries no time, so the same diagnosis gives the same bytes.
pub fn pprof(d: &Diagnosis) -> Vec<u8> {
    let raw = prost::Message::encode_to_vec(&pprof_profile(d));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::diagnose::test_fixture as fixture;

    /// Decodes a gzipped `profile.proto` (what [`pprof`] writes).
    fn read_pprof(bytes: &[u8]) -> Result<pb::Profile, std::io::Error> {
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut raw)?;
        prost::Message::decode(raw.as_slice())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// A readable account of a decoded profile: what `go tool pprof -raw` would show.
    fn describe(p: &pb::Profile) -> String {
        let s = |i: i64| p.string_table[i as usize].as_str();
        let mut o = String::new();
        let vt = |v: &pb::ValueType| format!("{}/{}", s(v.r#type), s(v.unit));
        o.push_str(&format!(
            "sample types: {}; default {}; period {} {}; duration {} ns\n",
            p.sample_type.iter().map(vt).collect::<Vec<_>>().join(", "),
            s(p.default_sample_type),
            p.period,
            p.period_type.as_ref().map(vt).unwrap_or_default(),
            p.duration_nanos
        ));
        for c in &p.comment {
            o.push_str(&format!("comment: {}\n", s(*c)));
        }
        for m in &p.mapping {
            o.push_str(&format!(
                "mapping {}: {} span {:#x} file offset {:#x}, functions {}\n",
                m.id,
                s(m.filename),
                m.memory_limit - m.memory_start,
                m.file_offset,
                m.has_functions
            ));
        }
        for smp in &p.sample {
            let names: Vec<String> = smp
                .location_id
                .iter()
                .map(|id| {
                    let loc = &p.location[*id as usize - 1];
                    assert_eq!(loc.id, *id);
                    let f = &p.function[loc.line[0].function_id as usize - 1];
                    format!("{}@m{}", s(f.name), loc.mapping_id)
                })
                .collect();
            let labels: Vec<String> = smp
                .label
                .iter()
                .map(|l| format!("{}={}", s(l.key), s(l.str)))
                .collect();
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!(" {{{}}}", labels.join(" "))
            };
            o.push_str(&format!("{:?} {}{labels}\n", smp.value, names.join(" <- ")));
        }
        o
    }

    #[test]
    fn folded_stacks_put_each_function_under_its_callers() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        let text = folded(&d, LeafOffsets::Keep);
        insta::assert_snapshot!("folded_spin_phases_4000", text);
        let total: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, d.sampling.samples, "every sample in one line");
        // Without offsets, one line per call path.
        let plain = folded(&d, LeafOffsets::Drop);
        assert!(
            plain
                .lines()
                .any(|l| l.contains(";main;serve;wait_for_item ")),
            "{plain}"
        );
        assert!(plain.lines().count() <= text.lines().count());
    }

    /// The Redis case: a sample in tcp_sendmsg under write(2) under the server's own code.
    #[test]
    fn kernel_frames_fold_with_the_flame_graph_kernel_suffix() {
        let mut d = fixture("spin-phases-4000-zen3-kvm.json");
        let frame = |function: &str, module: &str, offset| StackFrame {
            address: 0xffff_ffff_8100_0000 + offset,
            function: Some(function.into()),
            module: module.into(),
            offset,
            file_offset: None,
        };
        d.stacks = vec![StackCount {
            frames: vec![
                frame("tcp_sendmsg", KERNEL_MODULE, 0x1a),
                frame("__x64_sys_write", KERNEL_MODULE, 0x10),
                frame("write", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x14),
                frame("main", "/usr/bin/redis-check-rdb", 0x30),
            ],
            samples: 7,
        }];
        d.wall = None;
        assert_eq!(
            folded(&d, LeafOffsets::Keep),
            "main;write;__x64_sys_write_[k];tcp_sendmsg+0x1a_[k] 7\n"
        );
        assert_eq!(
            folded(&d, LeafOffsets::Drop),
            "main;write;__x64_sys_write_[k];tcp_sendmsg_[k] 7\n"
        );
    }

    #[test]
    fn the_pprof_profile_carries_samples_cpu_time_addresses_and_modules() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        let bytes = pprof(&d);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip");
        assert_eq!(bytes, pprof(&d), "the same diagnosis gives the same bytes");
        let p = read_pprof(&bytes).unwrap();
        assert_eq!(p, pprof_profile(&d));
        assert_eq!(p.string_table[0], "");
        let samples: i64 = p.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(samples as u64, d.sampling.samples);
        // 499 Hz: each sample stands for 2,004,008 ns of CPU.
        assert_eq!(p.period, 2_004_008);
        assert!(p.sample.iter().all(|s| s.value[1] == s.value[0] * p.period));
        // Every location has its address and a mapping that covers it.
        for l in &p.location {
            let m = &p.mapping[l.mapping_id as usize - 1];
            assert!(
                (m.memory_start..m.memory_limit).contains(&l.address),
                "{l:?}"
            );
        }
        insta::assert_snapshot!("pprof_spin_phases_4000", describe(&p));
    }

    #[test]
    fn a_file_saved_without_stacks_exports_its_hottest_functions_as_leaves() {
        let d = fixture("pause-spin-zen4-kvm.json");
        assert!(d.stacks.is_empty());
        let st = stacks_of(&d);
        assert!(st.from_functions);
        let text = folded(&d, LeafOffsets::Keep);
        assert!(!text.contains("+0x"), "no address, no offset: {text}");
        let p = read_pprof(&pprof(&d)).unwrap();
        assert!(
            p.comment
                .iter()
                .any(|c| p.string_table[*c as usize].contains("without call stacks"))
        );
        assert_eq!(p.sample.len(), d.functions.len());
    }

    /// (frames, count) of each folded line.
    fn lines_of(text: &str) -> Vec<(Vec<&str>, u64)> {
        text.lines()
            .map(|l| {
                let (stack, n) = l.rsplit_once(' ').unwrap();
                (stack.split(';').collect(), n.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn wall_folded_stacks_count_microseconds_of_thread_time_with_the_state_on_top() {
        let d = fixture("mutex-wait-4-zen4-kvm.json");
        let wall = d.wall.as_ref().unwrap();
        let text = folded(&d, LeafOffsets::Keep);
        insta::assert_snapshot!("folded_wall_mutex_wait_4", text);
        let lines = lines_of(&text);
        // A state frame is always the last, and only off-CPU stacks have one.
        for (frames, _) in &lines {
            for (i, f) in frames.iter().enumerate() {
                if f.starts_with('[') {
                    assert_eq!(i, frames.len() - 1, "{frames:?}");
                }
            }
        }
        let count = |last: &str, with: &str| -> u64 {
            lines
                .iter()
                .filter(|(f, _)| {
                    *f.last().unwrap() == last && f.iter().any(|x| x.starts_with(with))
                })
                .map(|(_, n)| n)
                .sum()
        };
        // Asleep on the mutex: the stack's ns, in us.
        let lock = wall
            .stacks
            .iter()
            .find(|s| {
                s.wait
                    .as_ref()
                    .is_some_and(|w| w.waiter.as_deref() == Some("take_lock_and_work"))
            })
            .unwrap();
        assert_eq!(
            count("[blocked: futex]", "__lll_lock_wait"),
            (lock.ns as f64 / 1e3).round() as u64
        );
        // On the CPU: samples x 1e6 / 499 us each.
        let computing: u64 = d
            .stacks
            .iter()
            .filter(|s| s.frames[0].function.as_deref() == Some("compute_under_lock"))
            .map(|s| s.samples)
            .sum();
        let on: u64 = lines
            .iter()
            .filter(|(f, _)| f.last().unwrap().starts_with("compute_under_lock+0x"))
            .map(|(_, n)| n)
            .sum();
        let expected = computing as f64 * 1e6 / 499.0;
        assert!((on as f64 - expected).abs() <= 1.0, "{on} vs {expected}");
        assert!(count("[runnable]", "compute_under_lock") > 0);
        // All of it: the on-CPU samples' time and every off-CPU stack's, each line rounded to
        // the microsecond.
        let total: u64 = lines.iter().map(|(_, n)| n).sum();
        let want = d.sampling.samples as f64 * 1e6 / 499.0
            + wall.stacks.iter().map(|s| s.ns as f64 / 1e3).sum::<f64>();
        assert!(
            (total as f64 - want).abs() <= lines.len() as f64,
            "{total} vs {want}"
        );
    }

    #[test]
    fn without_a_wall_view_the_folded_stacks_count_samples_as_before() {
        let mut d = fixture("mutex-wait-4-zen4-kvm.json");
        d.wall = None;
        let text = folded(&d, LeafOffsets::Keep);
        assert_eq!(text, folded_samples(&d, LeafOffsets::Keep));
        assert!(!text.contains('['), "{text}");
        let total: u64 = lines_of(&text).iter().map(|(_, n)| n).sum();
        assert_eq!(total, d.sampling.samples);
    }

    #[test]
    fn the_pprof_profile_of_a_wall_view_adds_wall_time_with_state_labels() {
        let d = fixture("mutex-wait-4-zen4-kvm.json");
        let wall = d.wall.as_ref().unwrap();
        let p = read_pprof(&pprof(&d)).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<String> = p
            .sample_type
            .iter()
            .map(|t| format!("{}/{}", s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(
            types,
            ["samples/count", "cpu/nanoseconds", "wall/nanoseconds"]
        );
        assert_eq!(
            s(p.default_sample_type),
            "cpu",
            "CPU stays the default view"
        );
        let sum = |i: usize| p.sample.iter().map(|x| x.value[i]).sum::<i64>();
        // Samples and CPU as without the view; wall: the samples' time and every off-CPU ns.
        assert_eq!(sum(0) as u64, d.sampling.samples);
        assert_eq!(sum(1), d.sampling.samples as i64 * p.period);
        let off: u64 = wall.stacks.iter().map(|s| s.ns).sum();
        assert_eq!(sum(2), sum(1) + off as i64);
        let label = |x: &pb::Sample, k: &str| {
            x.label
                .iter()
                .find(|l| s(l.key) == k)
                .map(|l| s(l.str).to_string())
        };
        for x in &p.sample {
            let leaf = &p.location[x.location_id[0] as usize - 1];
            let leaf_name = s(p.function[leaf.line[0].function_id as usize - 1].name);
            match label(x, "state").as_deref() {
                Some("running") => {
                    assert_eq!(x.value[2], x.value[1]);
                    assert!(!leaf_name.starts_with('['));
                }
                Some("blocked") => {
                    assert_eq!(&x.value[..2], &[0, 0]);
                    assert_eq!(label(x, "reason").as_deref(), Some("futex"));
                    assert_eq!(leaf_name, "[blocked: futex]");
                    assert_eq!((leaf.mapping_id, leaf.address), (0, 0));
                }
                Some("runnable") => {
                    assert_eq!(&x.value[..2], &[0, 0]);
                    assert_eq!(label(x, "reason"), None);
                    assert_eq!(leaf_name, "[runnable]");
                }
                other => panic!("state {other:?}"),
            }
        }
        let lock_ns: i64 = p
            .sample
            .iter()
            .filter(|x| label(x, "wait").as_deref() == Some("lock"))
            .map(|x| x.value[2])
            .sum();
        assert!(lock_ns > 3_000_000_000, "{lock_ns}");
        insta::assert_snapshot!("pprof_wall_mutex_wait_4", describe(&p));
    }
}
