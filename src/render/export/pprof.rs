//! A diagnosis as pprof's `profile.proto`, gzipped: what `go tool pprof`, speedscope and
//! Grafana Pyroscope read (`--pprof`). A pure function of a [`Diagnosis`] returning bytes
//! ([`Pprof`]), so a run and a saved file convert the same way.
//!
//! The input is the diagnosis's sampled call stacks ([`stacks_of`]): a file saved before
//! stacks were recorded converts as one leaf-only stack per function of its `functions` table
//! (the 15 hottest), without addresses, and a comment in the profile says so. With a
//! wall-clock view ([`Diagnosis::wall`]) the profile carries the off-CPU stacks too, in one
//! unit with the on-CPU ones ([`wall_stacks`]): a `wall/nanoseconds` sample type and
//! `state`/`reason` labels. Without a wall view it is what it was.

use super::Export;
use super::profile_proto as pb;
use crate::diagnose::Diagnosis;
use crate::diagnose::analyse::hotspots::frame_name;
use crate::diagnose::record::wall::OffCpu;
use crate::diagnose::stacks::{Stacks, stacks_of, state_frame, wall_stacks};
use crate::diagnose::symbolize::stack::StackFrame;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

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
             (runnable, blocked: {}); -sample_index=wall, -tagfocus state=blocked",
            w.threads.len(),
            w.method.window_s,
            crate::render::diagnosis::timed_by(w.method.source).replace("the kernel's ", "")
        )));
    }
    comment
}

/// The pprof exporter: [`pprof_profile`] encoded and gzipped, the bytes of a `.pb.gz` file.
/// The gzip header carries no time, so the same diagnosis gives the same bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pprof;

impl Export<Diagnosis> for Pprof {
    fn export(&self, d: &Diagnosis) -> Vec<u8> {
        let raw = prost::Message::encode_to_vec(&pprof_profile(d));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&raw).expect("writing to memory");
        gz.finish().expect("writing to memory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::diagnose::test_fixture as fixture;

    /// Decodes a gzipped `profile.proto` (what [`Pprof`] writes).
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
    fn the_pprof_profile_carries_samples_cpu_time_addresses_and_modules() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        let bytes = Pprof.export(&d);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip");
        assert_eq!(
            bytes,
            Pprof.export(&d),
            "the same diagnosis gives the same bytes"
        );
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
        let p = read_pprof(&Pprof.export(&d)).unwrap();
        assert!(
            p.comment
                .iter()
                .any(|c| p.string_table[*c as usize].contains("without call stacks"))
        );
        assert_eq!(p.sample.len(), d.functions.len());
    }

    #[test]
    fn the_pprof_profile_of_a_wall_view_adds_wall_time_with_state_labels() {
        let d = fixture("mutex-wait-4-zen4-kvm.json");
        let wall = d.wall.as_ref().unwrap();
        let p = read_pprof(&Pprof.export(&d)).unwrap();
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
