//! From what the user asked (`--pages`, `--neighbour`, `--placement`, `--cpus`) and what the
//! machine has, the arms and comparisons to run, and one line for each variant this machine
//! cannot do. Pure: tested on made-up machines.

use super::placement::{missing_reason, pair_for, split_for_neighbour, spread_order};
use super::run::pages_allowed;
use super::{Family, NeighbourKind, PagesSetting, PlacementClass, Plan, Variant};
use crate::machine::{ThpEnabled, Topology};

/// The variants asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    /// `--pages`.
    pub pages: bool,
    /// `--neighbour KIND`, each kind once.
    pub neighbours: Vec<NeighbourKind>,
    /// `--placement`.
    pub placement: bool,
    /// `--cpus N,M,...` (sorted, distinct, each at least 1).
    pub cpus: Vec<usize>,
}

/// The plan for `asked` on a machine with `topology`, `allowed` CPUs and THP mode `thp`.
/// Notes that are not refusals (what the kernel allows for `--pages`) go in `notes`.
pub fn plan(
    asked: &Asked,
    topology: Option<&Topology>,
    allowed: &[usize],
    thp: Option<ThpEnabled>,
) -> Plan {
    let mut p = Plan::default();
    if asked.pages {
        match pages_allowed(thp) {
            Err(line) => p.not_run.push(line),
            Ok(note) => {
                p.notes.extend(note);
                p.compare(
                    Family::Pages,
                    Variant::Pages {
                        setting: PagesSetting::ThpDisabled,
                    },
                    Variant::Pages {
                        setting: PagesSetting::HugeAsked,
                    },
                );
            }
        }
    }
    for &kind in &asked.neighbours {
        match split_for_neighbour(topology, allowed) {
            None => p.not_run.push(format!(
                "--neighbour {}: needs a second CPU for the neighbour; this process may use \
                 only CPU {}",
                kind.as_str(),
                crate::measure::pin::format_cpu_list(allowed)
            )),
            Some((neighbour_cpu, cpus)) => p.compare(
                Family::Neighbour,
                Variant::Neighbour {
                    kind,
                    cpus: cpus.clone(),
                    neighbour_cpu,
                },
                Variant::Plain { cpus },
            ),
        }
    }
    if asked.placement {
        let mut found = Vec::new();
        for class in PlacementClass::ALL {
            match pair_for(topology, allowed, class) {
                Some((a, b)) => found.push(Variant::Placement {
                    class,
                    cpus: vec![a, b],
                }),
                None => p.not_run.push(format!(
                    "--placement {}: {}",
                    class.label(),
                    missing_reason(topology, class)
                )),
            }
        }
        match found.len() {
            0 => p
                .not_run
                .push("--placement: no two CPUs here to place the command on".into()),
            1 => {
                p.not_run.push(format!(
                    "--placement: only {} here, nothing to compare it with",
                    match &found[0] {
                        Variant::Placement { class, .. } => class.label(),
                        _ => unreachable!(),
                    }
                ));
            }
            _ => {
                let base = found[0].clone();
                for v in found.into_iter().skip(1) {
                    p.compare(Family::Placement, v, base.clone());
                }
            }
        }
    }
    if !asked.cpus.is_empty() {
        let order = spread_order(topology, allowed);
        let (fit, too_many): (Vec<usize>, Vec<usize>) =
            asked.cpus.iter().partition(|&&n| n <= order.len());
        for n in too_many {
            p.not_run.push(format!(
                "--cpus {n}: this process may use {} CPU{} ({})",
                order.len(),
                if order.len() == 1 { "" } else { "s" },
                crate::measure::pin::format_cpu_list(allowed)
            ));
        }
        let arm = |n: usize| Variant::Cpus {
            n,
            cpus: order[..n].to_vec(),
        };
        match fit.as_slice() {
            [] => {}
            [n] => p.not_run.push(format!(
                "--cpus: only {n} of the counts asked fits here, no curve to draw"
            )),
            [n0, rest @ ..] => {
                for &n in rest {
                    p.compare(Family::Cpus, arm(n), arm(*n0));
                }
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cpu_and_thp_never_refuse_in_one_line_each_and_the_rest_still_plans() {
        let asked = Asked {
            pages: true,
            neighbours: vec![NeighbourKind::Memory],
            placement: false,
            cpus: vec![1, 2],
        };
        let p = plan(&asked, None, &[0], Some(ThpEnabled::Never));
        assert_eq!(p.not_run.len(), 4, "{:?}", p.not_run);
        assert!(p.not_run[0].starts_with("--pages: transparent huge pages are 'never'"));
        assert!(p.not_run[1].starts_with("--neighbour memory: needs a second CPU"));
        assert!(p.not_run[2].starts_with("--cpus 2: this process may use 1 CPU (0)"));
        assert!(p.not_run[3].starts_with("--cpus: only 1 of the counts asked fits"));
        assert!(p.comparisons.is_empty());

        let p = plan(&asked, None, &[0, 1], Some(ThpEnabled::Madvise));
        assert!(p.not_run.is_empty(), "{:?}", p.not_run);
        // Pages (2 arms), neighbour (2), cpus (2).
        assert_eq!(p.arms.len(), 6);
        assert_eq!(p.comparisons.len(), 3);
        assert!(p.notes.iter().any(|n| n.contains("glibc.malloc.hugetlb=1")));
    }
}
