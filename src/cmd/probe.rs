//! `cpudoctor probe`: the full microbenchmarks, with their knobs.

use super::{BarProgress, OutputArgs, check_output_args, emit_with, seconds_arg, stdout_style};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::machine::meminfo;
use cpudoctor::measure::buffer::{self, PageKind};
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::render::{heatmap, text};
use cpudoctor::schema::Status;
use cpudoctor::session::{self, Host};
use std::io::Write;
use std::time::Duration;

#[derive(Args)]
pub struct ProbeArgs {
    /// Probes to run (default: all). See --list.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// List the probes and exit.
    #[arg(long)]
    pub list: bool,
    /// CPUs to measure on, as a list like 0,2-3 (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Repetitions per measurement (default: by profile).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub repetitions: Option<u32>,
    /// Use the quick profile (what `check` runs) instead of the full one.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// c2c: time budget in seconds for the CPU-pair matrix; when all pairs would not fit,
    /// a sample of pairs covering every topology group is measured (default 60, quick 2).
    #[arg(long, value_name = "SECONDS", value_parser = seconds_arg)]
    pub budget: Option<f64>,
    /// split-lock-neighbour: seconds of bus locking in total (default 0.3, quick 0.15, at
    /// most 10). Where split locks are bus locks (not trapped by the kernel or the host),
    /// they slow every other tenant of a shared host (other VMs and containers on the same
    /// machine), not only this process: keep it short there. The split-lock probe itself
    /// bus-locks for ~10 ms (quick) to ~70 ms (full).
    #[arg(long, value_name = "SECONDS", value_parser = seconds_arg)]
    pub duration: Option<f64>,
    /// Buffer sizes of the mem-latency curve, as a list like 16K,1M,64M,1G (default: 16 KiB
    /// to the larger of 4x the last-level cache and 1 GiB, powers of two and the points
    /// halfway between; with --quick, one point inside each cache and three DRAM points).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Largest buffer the memory probes map, like 256M or 1G (default: mem-latency the larger
    /// of 4x the last-level cache and 1 GiB; bandwidth 16x the last-level cache, or 4x with
    /// --quick). One
    /// buffer per page kind is mapped at once, and together they must fit in the memory
    /// available.
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<String>,
    /// Page kinds the memory probes measure, as a list of 4k, thp, hugetlb-2m, hugetlb-1g
    /// (default: all; hugetlbfs kinds need pages reserved with `sysctl vm.nr_hugepages`).
    #[arg(long, value_name = "LIST")]
    pub pages: Option<String>,
}

/// The memory probes' knobs, parsed.
struct MemoryKnobs {
    sizes: Option<Vec<u64>>,
    max_size: Option<u64>,
    page_kinds: Option<Vec<PageKind>>,
}

/// Parses `--sizes`, `--max-size` and `--pages`, and refuses sizes beyond the memory
/// available before anything is measured.
fn memory_knobs(args: &ProbeArgs) -> Result<MemoryKnobs, InputError> {
    let size = |what: &'static str, text: &str| {
        cpudoctor::format::parse_size(text).ok_or_else(|| InputError::BadSize {
            what,
            value: text.to_string(),
        })
    };
    let sizes = args
        .sizes
        .as_deref()
        .map(|list| {
            list.split(',')
                .map(|s| size("--sizes", s))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    // Below two cache lines nothing can be walked: refused here, not skipped for a wrong
    // reason after the other probes ran.
    let min = cpudoctor::probes::mem_latency::MIN_BUFFER_BYTES;
    for (list, value) in sizes
        .iter()
        .flatten()
        .zip(args.sizes.iter().flat_map(|l| l.split(',')))
    {
        if *list < min {
            return Err(InputError::SizeTooSmall {
                what: "--sizes",
                value: value.to_string(),
                min: cpudoctor::format::human_bytes(min),
            });
        }
    }
    let max_size = args
        .max_size
        .as_deref()
        .map(|s| size("--max-size", s))
        .transpose()?;
    let pages = args
        .pages
        .as_deref()
        .map(|list| {
            list.split(',')
                .map(|k| PageKind::parse(k).ok_or_else(|| InputError::BadPageKind(k.to_string())))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    if let Some(room) = meminfo::read_memory_room() {
        let available = room.room_bytes;
        let largest = [
            ("--max-size", max_size),
            (
                "--sizes",
                sizes.as_ref().and_then(|v| v.iter().max().copied()),
            ),
        ];
        let kinds = pages.clone().unwrap_or_else(|| PageKind::ALL.to_vec());
        for (what, bytes) in largest {
            if let Some(bytes) = bytes
                && let Some(requested) = more_than_available(bytes, &kinds, available)
            {
                return Err(InputError::MoreThanAvailableMemory {
                    what,
                    requested,
                    available: cpudoctor::words::machine::room_words(&room),
                });
            }
        }
    }
    Ok(MemoryKnobs {
        sizes,
        max_size,
        page_kinds: pages,
    })
}

/// `None` when a buffer of `bytes` for each of `kinds` fits in `available` bytes; otherwise
/// what was asked for, in words. The memory probes map one buffer per kind at once; hugetlbfs
/// kinds draw on their reserved pool, not on `MemAvailable`.
fn more_than_available(bytes: u64, kinds: &[PageKind], available: u64) -> Option<String> {
    let n = buffer::kinds_using_mem_available(kinds) as u64;
    if n == 0 {
        // Only hugetlbfs pages: their pool decides, when the buffer is made.
        return None;
    }
    let total = bytes.saturating_mul(n);
    if total <= available {
        return None;
    }
    Some(if n == 1 {
        cpudoctor::format::human_bytes(bytes)
    } else {
        format!(
            "{} per page kind ({} for the {n} kinds mapped at once)",
            cpudoctor::format::human_bytes(bytes),
            cpudoctor::format::human_bytes(total)
        )
    })
}

pub fn run(args: ProbeArgs) -> Result<()> {
    if args.list {
        // One line a probe, its name first, so a script can read the names.
        let mut t = text::columns(u16::MAX, &[]);
        for p in probes::all() {
            t.add_row(vec![p.name(), p.about()]);
        }
        let mut out = std::io::stdout().lock();
        write!(out, "{}", text::lines(t, 0))?;
        return Ok(());
    }
    let selected = session::select_probes(&args.names)?;
    let knobs = memory_knobs(&args)?;
    check_output_args(&args.output)?;
    let cpus = args
        .cpus
        .as_deref()
        .map(|s| {
            cpudoctor::machine::topology::parse_cpu_list(s)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| InputError::BadCpuList(s.to_string()))
        })
        .transpose()?;
    let host = Host::detect();
    if let Some(c) = &cpus {
        session::validate_cpus(c, &host.machine)?;
    }
    let options = ProbeOptions {
        profile: if args.quick {
            Profile::Quick
        } else {
            Profile::Full
        },
        cpus,
        repetitions: args.repetitions.map(|r| r as usize),
        budget: args.budget.map(Duration::from_secs_f64),
        duration: bus_locking_seconds(args.duration)?,
        sizes: knobs.sizes,
        max_size: knobs.max_size,
        page_kinds: knobs.page_kinds,
    };
    let command = format!(
        "probe {}",
        selected
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let fp = session::run_repeated(
        &host,
        &command,
        &selected,
        &options,
        &BarProgress::new(),
        args.output.runs as usize,
    );
    let emitted = emit_with(&fp, &args.output, true);
    // The heatmaps belong to the screen, which goes where the summary went.
    let to_stderr =
        super::stdout_is_an_output(&[args.output.save.as_deref(), args.output.prom.as_deref()]);
    if !args.output.json {
        let mut out = super::screen(to_stderr);
        let style = stdout_style();
        for p in &fp.probes {
            if let Some(map) = heatmap::render_c2c(p, style) {
                write!(out, "\n{map}")?;
            }
        }
    }
    emitted?;
    if !fp.probes.iter().any(|p| p.status == Status::Ok) {
        return Err(super::NothingMeasured.into());
    }
    Ok(())
}

/// Longest `--duration` accepted: seconds of bus locking, which slow every tenant of a shared
/// host. Ten seconds is thirty times the default, plenty for a steadier figure.
pub const MAX_DURATION_S: u32 = 10;

/// `--duration` (already above 0 and at most a day): at most [`MAX_DURATION_S`].
fn bus_locking_seconds(value: Option<f64>) -> Result<Option<Duration>, InputError> {
    let d = value.map(Duration::from_secs_f64);
    match value {
        Some(v) if v > MAX_DURATION_S as f64 => Err(InputError::TooLong {
            what: "--duration",
            value: v.to_string(),
            max: MAX_DURATION_S,
            why: "bus locks slow every tenant of a shared host",
        }),
        _ => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_size_16g_on_a_24g_machine_counts_every_kind() {
        // Regression: the check counted one buffer; the 4 KiB one then took 16 GiB and the
        // THP one failed for lack of memory.
        let kinds = [PageKind::Base4k, PageKind::Thp];
        let avail = 23 << 30;
        let msg = more_than_available(16 << 30, &kinds, avail).unwrap();
        assert_eq!(
            msg,
            "16 GiB per page kind (32 GiB for the 2 kinds mapped at once)"
        );
        assert_eq!(more_than_available(16 << 30, &kinds[..1], avail), None);
        assert_eq!(more_than_available(8 << 30, &kinds, avail), None);
        // hugetlbfs kinds do not draw on MemAvailable.
        assert_eq!(
            more_than_available(16 << 30, &[PageKind::Base4k, PageKind::Hugetlb1g], avail),
            None
        );
        assert_eq!(
            more_than_available(32 << 30, &[PageKind::Hugetlb2m], avail),
            None
        );
        assert_eq!(
            more_than_available(32 << 30, &[PageKind::Thp], avail).as_deref(),
            Some("32 GiB")
        );
    }
}
