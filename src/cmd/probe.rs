//! `cpudoctor probe`: the full microbenchmarks, with their knobs.

use super::{BarProgress, OutputArgs, check_save_target, emit, terminal_width};
use anyhow::Result;
use clap::Args;
use cpudoctor::error::InputError;
use cpudoctor::machine::meminfo;
use cpudoctor::measure::buffer::{self, PageKind};
use cpudoctor::probes::{self, ProbeOptions, Profile};
use cpudoctor::report::heatmap;
use cpudoctor::session::{self, Host};
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
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repetitions: Option<u32>,
    /// Use the quick profile (what `check` runs) instead of the full one.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub output: OutputArgs,
    /// c2c: time budget in seconds for the CPU-pair matrix; when all pairs would not fit,
    /// a sample of pairs covering every topology group is measured (default 60, quick 2).
    #[arg(long, value_name = "SECONDS")]
    pub budget: Option<f64>,
    /// split-lock-neighbour: seconds of bus locking in total (default 0.3, quick 0.15).
    /// Bus locks slow every other tenant of a shared host (other VMs and containers on the
    /// same machine), not only this process: keep it short there.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Buffer sizes of the mem-latency curve, as a list like 16K,1M,64M,1G (default: 16 KiB
    /// to 1 GiB, powers of two and the points halfway between).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Largest buffer the memory probes map, like 256M or 1G (default: 1 GiB, or 256 MiB with
    /// --quick); must fit in the memory available.
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
        buffer::parse_size(text).ok_or_else(|| InputError::BadSize {
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
    if let Some(available) = meminfo::read_mem_available_bytes() {
        let largest = [
            ("--max-size", max_size),
            (
                "--sizes",
                sizes.as_ref().and_then(|v| v.iter().max().copied()),
            ),
        ];
        for (what, bytes) in largest {
            if let Some(bytes) = bytes.filter(|&b| b > available) {
                return Err(InputError::MoreThanAvailableMemory {
                    what,
                    requested: buffer::format_size(bytes),
                    available: buffer::format_size(available),
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

pub fn run(args: ProbeArgs) -> Result<()> {
    if args.list {
        for p in probes::all() {
            println!("{:<22} {}", p.name(), p.about());
        }
        return Ok(());
    }
    let selected = session::select_probes(&args.names)?;
    let knobs = memory_knobs(&args)?;
    check_save_target(&args.output)?;
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
        budget: seconds("--budget", args.budget)?,
        duration: seconds("--duration", args.duration)?,
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
    let fp = session::run(&host, &command, &selected, &options, &BarProgress::new());
    emit(&fp, &args.output)?;
    if !args.output.json {
        for p in &fp.probes {
            if let Some(map) = heatmap::render_c2c(p, terminal_width()) {
                print!("\n{map}");
            }
        }
    }
    Ok(())
}

/// A seconds option: absent, or a positive finite number (at most a day).
fn seconds(what: &'static str, value: Option<f64>) -> Result<Option<Duration>, InputError> {
    value
        .map(|v| {
            Duration::try_from_secs_f64(v)
                .ok()
                .filter(|d| !d.is_zero() && v <= 86_400.0)
                .ok_or(InputError::NotPositive {
                    what,
                    value: v.to_string(),
                })
        })
        .transpose()
}
