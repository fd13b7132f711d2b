//! A diagnosis in the formats other tools read: pprof's `profile.proto` (gzipped; `go tool
//! pprof`, speedscope, Grafana Pyroscope) and folded stacks (`root;caller;function count` per
//! line; flamegraph.pl, inferno, speedscope). Both are pure functions of a [`Diagnosis`]
//! returning bytes, so a run and a saved file convert the same way.
//!
//! The input is the diagnosis's sampled call stacks ([`Diagnosis::stacks`]). A file saved
//! before stacks were recorded has none: it converts as one leaf-only stack per function of its
//! `functions` table (the 15 hottest), without addresses, and [`stacks_of`] says so.

use super::hotspots::frame_name;
use super::profile_proto as pb;
use super::{Diagnosis, StackCount, StackFrame};
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

/// A frame's name in a folded line: `;` would split it, so it becomes `:`.
fn folded_name(f: &StackFrame) -> String {
    frame_name(f).replace(';', ":")
}

/// Folded stacks: one line per distinct stack, outermost caller first, `;`-separated, a space
/// and the sample count; lines sorted. With [`LeafOffsets::Keep`] a named leaf reads
/// `function+0x1a` (an unnamed one is `module+0x...` either way).
pub fn folded(d: &Diagnosis, leaf: LeafOffsets) -> String {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks_of(d).stacks.iter() {
        let Some(first) = s.frames.first() else {
            continue;
        };
        let mut names: Vec<String> = s.frames.iter().rev().map(folded_name).collect();
        if leaf == LeafOffsets::Keep && first.function.is_some() && first.address != 0 {
            let last = names.last_mut().expect("a frame");
            last.push_str(&format!("+{:#x}", first.offset));
        }
        *lines.entry(names.join(";")).or_default() += s.samples;
    }
    let mut out = String::new();
    for (stack, n) in lines {
        out.push_str(&format!("{stack} {n}\n"));
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

/// The pprof profile of `d`, before encoding: sample types `samples/count` and
/// `cpu/nanoseconds` (samples times the sampling period, the default), one location per
/// sampled address with the function it lies in, one mapping per module covering the pages
/// sampled in it (with, for file-backed code, the file offset that lets `pprof -disasm` find
/// the instructions in the binary). Functions are named already (`has_functions`), so `-top`
/// and `-diff_base` never look a binary up.
pub fn pprof_profile(d: &Diagnosis) -> pb::Profile {
    // The string table is filled in the order of these calls: kept so the bytes stay the same.
    let mut st = Strings::new();
    let period = period_ns(d);
    let sample_type = vec![
        pb::ValueType {
            r#type: st.get("samples"),
            unit: st.get("count"),
        },
        pb::ValueType {
            r#type: st.get("cpu"),
            unit: st.get("nanoseconds"),
        },
    ];
    let stacks = stacks_of(d);
    // Mappings first: their address ranges come from every frame.
    let (mapping, mapping_id) = mappings(&stacks, &mut st);
    let located = locate_samples(&stacks, &mapping_id, period, &mut st);
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
fn mappings<'a>(stacks: &'a Stacks, st: &mut Strings) -> (Vec<pb::Mapping>, HashMap<&'a str, u64>) {
    let mut modules: BTreeMap<&str, (u64, u64, Option<u64>)> = BTreeMap::new();
    for f in stacks.stacks.iter().flat_map(|s| &s.frames) {
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
/// function per name and module), valued in samples and nanoseconds.
fn locate_samples(
    stacks: &Stacks,
    mapping_id: &HashMap<&str, u64>,
    period: i64,
    st: &mut Strings,
) -> Located {
    let mut function = Vec::new();
    let mut function_id: HashMap<(String, &str), u64> = HashMap::new();
    let mut location = Vec::new();
    let mut location_id: HashMap<(u64, &str, String), u64> = HashMap::new();
    let mut sample = Vec::new();
    for s in stacks.stacks.iter() {
        let mut ids = Vec::with_capacity(s.frames.len());
        for f in &s.frames {
            let name = frame_name(f);
            let fid = *function_id
                .entry((name.clone(), f.module.as_str()))
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
            let lid = *location_id
                .entry((f.address, f.module.as_str(), name))
                .or_insert_with(|| {
                    let id = location.len() as u64 + 1;
                    location.push(pb::Location {
                        id,
                        mapping_id: mapping_id[f.module.as_str()],
                        address: f.address,
                        line: vec![pb::Line {
                            function_id: fid,
                            ..Default::default()
                        }],
                        is_folded: false,
                    });
                    id
                });
            ids.push(lid);
        }
        let n = s.samples as i64;
        sample.push(pb::Sample {
            location_id: ids,
            value: vec![n, n.saturating_mul(period)],
            label: Vec::new(),
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
            o.push_str(&format!("{:?} {}\n", smp.value, names.join(" <- ")));
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
}
