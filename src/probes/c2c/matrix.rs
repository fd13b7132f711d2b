//! The pure half of the core-to-core probe: which CPU pairs to measure, how each pair sits in
//! the topology, and the matrix and per-group figures built from the measurements. No timing
//! here, so all of it is tested on made-up and fixture topologies.
//!
//! Groups follow what sysfs shows (`machine.topology`): SMT siblings share a core's L1 and
//! L2; CPUs with the same last-level cache id hand lines over inside that cache; different
//! last-level caches (another CCX or CCD on AMD, another socket's L3) go over the fabric;
//! another NUMA node usually means another socket. On Zen 4 EPYC these are ~9, ~22, ~100 and
//! ~200 ns apart (design notes, reference figures).

use crate::machine::Topology;
pub use crate::machine::topology::PairGroup;
use crate::schema::Series;
use std::collections::BTreeMap;

/// How CPUs `a` and `b` sit relative to each other. NUMA distance is checked first: two
/// nodes can share nothing below memory, whatever the cache ids say.
pub fn classify(topology: Option<&Topology>, a: usize, b: usize) -> PairGroup {
    let Some((pa, pb)) = topology.and_then(|t| Some((t.place(a)?, t.place(b)?))) else {
        return PairGroup::Unknown;
    };
    if let (Some(na), Some(nb)) = (pa.numa_node, pb.numa_node)
        && na != nb
    {
        return PairGroup::OtherNumaNode;
    }
    if pa.smt_siblings.contains(&b) && pa.smt_siblings.len() > 1 {
        return PairGroup::SmtSibling;
    }
    match (pa.llc_id, pb.llc_id) {
        (Some(x), Some(y)) if x == y => PairGroup::SharedL3,
        (Some(_), Some(_)) => PairGroup::OtherL3,
        _ => PairGroup::Unknown,
    }
}

/// Every unordered pair of distinct CPUs, in row order: (0,1), (0,2), ..., (1,2), ...
pub fn all_pairs(cpus: &[usize]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, &a) in cpus.iter().enumerate() {
        for &b in &cpus[i + 1..] {
            if a != b {
                out.push((a, b));
            }
        }
    }
    out
}

/// Chooses at most `max` pairs when measuring all would not fit the time budget: every group
/// keeps at least one pair (closest groups first when `max` is smaller than the number of
/// groups), the rest is shared in proportion to group size, and within a group the pairs are
/// spread evenly over the list so every row of the matrix gets some. Deterministic, so two
/// runs measure the same pairs. Returns the pairs in their original order.
pub fn select_pairs(
    pairs: &[(usize, usize)],
    group_of: impl Fn(usize, usize) -> PairGroup,
    max: usize,
) -> Vec<(usize, usize)> {
    if max >= pairs.len() {
        return pairs.to_vec();
    }
    let mut by_group: BTreeMap<PairGroup, Vec<usize>> = BTreeMap::new();
    for (i, &(a, b)) in pairs.iter().enumerate() {
        by_group.entry(group_of(a, b)).or_default().push(i);
    }
    let total = pairs.len();
    let mut quota: BTreeMap<PairGroup, usize> = by_group
        .iter()
        .map(|(&g, v)| (g, ((max * v.len()) / total).max(1).min(v.len())))
        .collect();
    // Too many (every group got its one): take back from the largest quotas, farthest groups
    // first, then drop whole groups from the far end if even one each is too many.
    while quota.values().sum::<usize>() > max {
        let biggest = quota
            .iter()
            .max_by_key(|(_, q)| **q)
            .map(|(g, q)| (*g, *q))
            .expect("non-empty");
        if biggest.1 > 1 {
            *quota.get_mut(&biggest.0).expect("present") -= 1;
        } else {
            let last = *quota.keys().next_back().expect("non-empty");
            quota.remove(&last);
        }
    }
    // Too few (rounding down): give the rest to the groups with the most pairs left over.
    while quota.values().sum::<usize>() < max {
        let Some(g) = quota
            .iter()
            .filter(|(g, q)| by_group[g].len() > **q)
            .max_by_key(|(g, q)| by_group[g].len() - **q)
            .map(|(g, _)| *g)
        else {
            break;
        };
        *quota.get_mut(&g).expect("present") += 1;
    }
    let mut chosen: Vec<usize> = quota
        .iter()
        .flat_map(|(g, &q)| {
            let members = &by_group[g];
            (0..q).map(move |k| members[k * members.len() / q])
        })
        .collect();
    chosen.sort_unstable();
    chosen.into_iter().map(|i| pairs[i]).collect()
}

/// `pairs` reordered so that any prefix samples every group fairly: first one pair of each
/// group (closest group first), then the rest interleaved in proportion to group size (the
/// `k`-th pair of a group of `n` at position (k + 1/2) / n of the way), each group's pairs
/// in their order. A sweep that has to stop early (its budget ran out) then drops pairs from
/// every group alike, instead of the last rows of the matrix, which hold the high CPU numbers:
/// the other socket.
pub fn interleave_groups(
    pairs: &[(usize, usize)],
    group_of: impl Fn(usize, usize) -> PairGroup,
) -> Vec<(usize, usize)> {
    let mut by_group: BTreeMap<PairGroup, Vec<(usize, usize)>> = BTreeMap::new();
    for &(a, b) in pairs {
        by_group.entry(group_of(a, b)).or_default().push((a, b));
    }
    let mut keyed: Vec<(f64, PairGroup, (usize, usize))> = by_group
        .iter()
        .flat_map(|(&g, members)| {
            let n = members.len() as f64;
            members.iter().enumerate().map(move |(k, &p)| {
                let at = if k == 0 { -1.0 } else { (k as f64 + 0.5) / n };
                (at, g, p)
            })
        })
        .collect();
    keyed.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    keyed.into_iter().map(|(_, _, p)| p).collect()
}

/// One measured pair.
#[derive(Debug, Clone, PartialEq)]
pub struct PairLatency {
    /// The CPU that started the exchange.
    pub a: usize,
    /// The other CPU.
    pub b: usize,
    /// Median one-way latency of the pair, in ns.
    pub ns: f64,
}

/// The symmetric matrix over `cpus` (one row and column each) with measured pairs filled in
/// both directions; the diagonal and unmeasured pairs are null.
pub fn matrix(name: &str, cpus: &[usize], measured: &[PairLatency]) -> Series {
    let index: BTreeMap<usize, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut values = vec![vec![None; cpus.len()]; cpus.len()];
    for p in measured {
        if let (Some(&i), Some(&j)) = (index.get(&p.a), index.get(&p.b)) {
            values[i][j] = Some(p.ns);
            values[j][i] = Some(p.ns);
        }
    }
    let labels: Vec<String> = cpus.iter().map(|c| format!("cpu{c}")).collect();
    Series::Matrix {
        name: name.into(),
        unit: "ns".into(),
        rows: labels.clone(),
        cols: labels,
        values,
    }
}

/// Pair medians collected by group, closest group first.
pub fn by_group(
    topology: Option<&Topology>,
    measured: &[PairLatency],
) -> BTreeMap<PairGroup, Vec<f64>> {
    let mut out: BTreeMap<PairGroup, Vec<f64>> = BTreeMap::new();
    for p in measured {
        out.entry(classify(topology, p.a, p.b))
            .or_default()
            .push(p.ns);
    }
    out
}

/// Samples of one pair split between two vCPU placements: the host moved the two vCPUs
/// during the measurement (on the Zen 3 guest the same pair reads ~10 ns on one core's two
/// hardware threads, ~25 ns inside a CCX and ~110 ns across CCDs).
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementSplit {
    /// The samples of the placement most samples saw.
    pub main: Vec<f64>,
    /// The samples of the other placement.
    pub other: Vec<f64>,
}

/// How far apart (as a ratio) two neighbouring sorted samples must be to belong to two
/// placements: the closest two placements above differ by 2.2x, while one placement's
/// samples on a busy host spread by well under 1.5x.
pub const PLACEMENT_GAP_RATIO: f64 = 1.6;

/// Splits one pair's samples at the widest ratio gap between sorted neighbours when that gap
/// is at least [`PLACEMENT_GAP_RATIO`] and each side has at least two samples (one stray
/// sample is an interrupt, not a placement). `None`: one placement.
pub fn placement_split(samples: &[f64]) -> Option<PlacementSplit> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| *x > 0.0).collect();
    sorted.sort_by(f64::total_cmp);
    let (at, gap) = sorted
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i + 1, w[1] / w[0]))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if gap < PLACEMENT_GAP_RATIO || at < 2 || sorted.len() - at < 2 {
        return None;
    }
    let (low, high) = (sorted[..at].to_vec(), sorted[at..].to_vec());
    let low_is_main = low.len() >= high.len();
    let keep_order =
        |v: Vec<f64>| -> Vec<f64> { samples.iter().copied().filter(|x| v.contains(x)).collect() };
    let (main, other) = if low_is_main {
        (low, high)
    } else {
        (high, low)
    };
    Some(PlacementSplit {
        main: keep_order(main),
        other: keep_order(other),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::machine::{CpuPlace, topology::read_topology};
    use std::path::Path;

    /// A made-up machine numbered the way Linux numbers x86 servers: `sockets` sockets (one
    /// NUMA node each) of `llcs` last-level caches of `cores` cores, with SMT siblings
    /// `c` and `c + physical_cores`.
    pub(crate) fn topology(sockets: usize, llcs: usize, cores: usize, smt: bool) -> Topology {
        let physical = sockets * llcs * cores;
        let logical = if smt { 2 * physical } else { physical };
        let cpus = (0..logical)
            .map(|cpu| {
                let core = cpu % physical;
                let llc_first = core / cores * cores;
                CpuPlace {
                    cpu,
                    core_id: Some(core as i64),
                    package_id: Some((core / (llcs * cores)) as i64),
                    smt_siblings: if smt {
                        vec![core, core + physical]
                    } else {
                        vec![cpu]
                    },
                    llc_id: Some(llc_first),
                    numa_node: Some(core / (llcs * cores)),
                }
            })
            .collect();
        Topology {
            online_cpus: (0..logical).collect(),
            cores: physical,
            packages: sockets,
            numa_nodes: sockets,
            threads_per_core: if smt { 2 } else { 1 },
            smt,
            cpus,
            caches: Vec::new(),
        }
    }

    #[test]
    fn groups_on_a_two_socket_smt_machine() {
        // 2 sockets x 2 L3 x 2 cores, SMT: CPUs 0-7 physical, 8-15 their siblings.
        let t = topology(2, 2, 2, true);
        assert_eq!(classify(Some(&t), 0, 8), PairGroup::SmtSibling);
        assert_eq!(classify(Some(&t), 0, 1), PairGroup::SharedL3);
        assert_eq!(classify(Some(&t), 0, 9), PairGroup::SharedL3);
        assert_eq!(classify(Some(&t), 0, 2), PairGroup::OtherL3);
        assert_eq!(classify(Some(&t), 1, 3), PairGroup::OtherL3);
        assert_eq!(classify(Some(&t), 0, 4), PairGroup::OtherNumaNode);
        assert_eq!(classify(Some(&t), 7, 8), PairGroup::OtherNumaNode);
        assert_eq!(classify(None, 0, 1), PairGroup::Unknown);
        assert_eq!(classify(Some(&t), 0, 99), PairGroup::Unknown);
    }

    #[test]
    fn this_machines_fixture_is_one_shared_l3() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/amd-zen4-kvm-2cpu");
        let t = read_topology(&root).unwrap();
        assert_eq!(classify(Some(&t), 0, 1), PairGroup::SharedL3);
    }

    #[test]
    fn group_counts_on_the_two_socket_machine() {
        let t = topology(2, 2, 2, true);
        let cpus: Vec<usize> = (0..16).collect();
        let pairs = all_pairs(&cpus);
        assert_eq!(pairs.len(), 120);
        let measured: Vec<PairLatency> = pairs
            .iter()
            .map(|&(a, b)| PairLatency { a, b, ns: 1.0 })
            .collect();
        let groups = by_group(Some(&t), &measured);
        let count = |g| groups.get(&g).map_or(0, Vec::len);
        // 8 cores with one sibling each; per L3 4 CPUs -> C(4,2) = 6 pairs minus 2 sibling
        // pairs = 4, times 4 L3s; same socket other L3: 4 x 4 = 16 per socket; the rest cross.
        assert_eq!(count(PairGroup::SmtSibling), 8);
        assert_eq!(count(PairGroup::SharedL3), 16);
        assert_eq!(count(PairGroup::OtherL3), 32);
        assert_eq!(count(PairGroup::OtherNumaNode), 64);
    }

    #[test]
    fn sampling_keeps_every_group_and_the_budget() {
        let t = topology(2, 2, 2, true);
        let pairs = all_pairs(&(0..16).collect::<Vec<_>>());
        let group = |a, b| classify(Some(&t), a, b);
        for max in [4, 5, 12, 30, 119] {
            let chosen = select_pairs(&pairs, group, max);
            assert_eq!(chosen.len(), max, "max {max}");
            let mut groups: Vec<PairGroup> = chosen.iter().map(|&(a, b)| group(a, b)).collect();
            groups.dedup();
            groups.sort();
            groups.dedup();
            assert_eq!(groups.len(), 4, "max {max}: {groups:?}");
            assert!(chosen.iter().all(|p| pairs.contains(p)));
            assert!(chosen.windows(2).all(|w| w[0] != w[1]), "no duplicates");
            // Deterministic.
            assert_eq!(chosen, select_pairs(&pairs, group, max));
        }
        // Fewer slots than groups: the closest groups win.
        let two = select_pairs(&pairs, group, 2);
        let g: Vec<PairGroup> = two.iter().map(|&(a, b)| group(a, b)).collect();
        assert_eq!(g, vec![PairGroup::SharedL3, PairGroup::SmtSibling]);
        // Enough room: everything, unchanged.
        assert_eq!(select_pairs(&pairs, group, 500), pairs);
    }

    #[test]
    fn a_budget_stop_keeps_far_groups() {
        // Regression: pairs ran in row order, so a sweep stopped at its budget dropped the
        // high CPU numbers, the whole other socket. Interleaved, any prefix holds every group.
        let t = topology(2, 2, 2, true);
        let pairs = all_pairs(&(0..16).collect::<Vec<_>>());
        let group = |a, b| classify(Some(&t), a, b);
        let order = interleave_groups(&pairs, group);
        assert_eq!(order.len(), pairs.len());
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, pairs, "same pairs, each once");
        let first4: Vec<PairGroup> = order[..4].iter().map(|&(a, b)| group(a, b)).collect();
        assert_eq!(
            first4,
            [
                PairGroup::SmtSibling,
                PairGroup::SharedL3,
                PairGroup::OtherL3,
                PairGroup::OtherNumaNode
            ]
        );
        // Any prefix holds each group in proportion to its size (8, 16, 32, 64 of 120), to
        // within a pair or two.
        for cut in [20, 60, 90] {
            let count = |g| {
                order[..cut]
                    .iter()
                    .filter(|&&(a, b)| group(a, b) == g)
                    .count()
            };
            for (g, size) in [
                (PairGroup::SmtSibling, 8),
                (PairGroup::SharedL3, 16),
                (PairGroup::OtherL3, 32),
                (PairGroup::OtherNumaNode, 64),
            ] {
                let fair = (cut * size) as f64 / 120.0;
                assert!(
                    (count(g) as f64 - fair).abs() <= 2.0,
                    "cut {cut}: {g:?} has {} pairs, fair share {fair}",
                    count(g)
                );
            }
        }
    }

    #[test]
    fn group_keys_round_trip() {
        for g in [
            PairGroup::SmtSibling,
            PairGroup::OtherNumaNode,
            PairGroup::Unknown,
        ] {
            assert_eq!(PairGroup::from_key(g.key()), Some(g));
        }
        assert_eq!(
            PairGroup::from_key("shared_l3").map(PairGroup::label),
            Some("shared L3")
        );
        assert_eq!(PairGroup::from_key("nonsense"), None);
    }

    #[test]
    fn sampling_spreads_over_rows() {
        // 64 CPUs, one L3: 2016 pairs, one group; 64 chosen should touch most CPUs.
        let t = topology(1, 1, 64, false);
        let pairs = all_pairs(&(0..64).collect::<Vec<_>>());
        let chosen = select_pairs(&pairs, |a, b| classify(Some(&t), a, b), 64);
        let firsts: std::collections::BTreeSet<usize> = chosen.iter().map(|p| p.0).collect();
        assert!(firsts.len() >= 30, "rows touched: {}", firsts.len());
    }

    #[test]
    fn matrix_is_symmetric_with_null_diagonal_and_gaps() {
        let m = matrix(
            "c2c_latency_ns",
            &[0, 1, 2],
            &[
                PairLatency {
                    a: 0,
                    b: 1,
                    ns: 100.0,
                },
                PairLatency {
                    a: 1,
                    b: 2,
                    ns: 50.0,
                },
            ],
        );
        let Series::Matrix { rows, values, .. } = m else {
            panic!("not a matrix")
        };
        assert_eq!(rows, vec!["cpu0", "cpu1", "cpu2"]);
        assert_eq!(
            values,
            vec![
                vec![None, Some(100.0), None],
                vec![Some(100.0), None, Some(50.0)],
                vec![None, Some(50.0), None],
            ]
        );
    }

    #[test]
    fn a_vcpu_move_during_a_run_splits_the_samples_into_two_placements() {
        // Run 4 of the Zen 3 guest's stability bench: 26 ns, then the host moved a vCPU.
        let s = [26.3, 26.1, 26.4, 92.2, 91.0, 26.2, 26.5, 93.1, 26.3];
        let split = placement_split(&s).unwrap();
        assert_eq!(split.main, vec![26.3, 26.1, 26.4, 26.2, 26.5, 26.3]);
        assert_eq!(split.other, vec![92.2, 91.0, 93.1]);
    }

    #[test]
    fn one_placement_with_noise_or_one_stray_sample_is_not_split() {
        assert_eq!(placement_split(&[25.0, 26.0, 27.5, 31.0, 24.8, 29.0]), None);
        // One interrupt-length sample is noise, not a placement.
        assert_eq!(placement_split(&[25.0, 26.0, 25.5, 400.0, 25.2]), None);
        assert_eq!(placement_split(&[]), None);
    }
}
