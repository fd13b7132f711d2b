//! Which CPUs each variant gives the command, from the machine's topology: a pair per
//! placement class (the core-to-core probe's pair groups), the first `n` CPUs for a scaling
//! curve (one per core before any core's second thread, so 2 CPUs means two cores where
//! there are two), and the CPU a neighbour takes. Pure functions, tested on made-up
//! topologies.

use super::PlacementClass;
use crate::machine::Topology;
use crate::machine::topology::PairGroup;
use crate::probes::c2c::matrix::classify;

/// The pair group a placement class asks for.
pub fn group_of(class: PlacementClass) -> PairGroup {
    match class {
        PlacementClass::SmtSiblings => PairGroup::SmtSibling,
        PlacementClass::SameCache => PairGroup::SharedL3,
        PlacementClass::AcrossCache => PairGroup::OtherL3,
        PlacementClass::AcrossNode => PairGroup::OtherNumaNode,
    }
}

/// The first pair of `allowed` CPUs placed as `class` asks; `None` when the machine (or the
/// allowed set) has no such pair.
pub fn pair_for(
    topology: Option<&Topology>,
    allowed: &[usize],
    class: PlacementClass,
) -> Option<(usize, usize)> {
    let want = group_of(class);
    allowed.iter().enumerate().find_map(|(i, &a)| {
        allowed[i + 1..]
            .iter()
            .find(|&&b| classify(topology, a, b) == want)
            .map(|&b| (a, b))
    })
}

/// Why a class has no pair here, in words for the one line the user sees.
pub fn missing_reason(topology: Option<&Topology>, class: PlacementClass) -> String {
    let Some(t) = topology else {
        return "the topology is unknown (sysfs unreadable)".into();
    };
    match class {
        PlacementClass::SmtSiblings if !t.smt => "no core runs two threads here (no SMT)".into(),
        PlacementClass::SameCache => "no two cores share a last-level cache here".into(),
        PlacementClass::AcrossCache => "every core shares one last-level cache here".into(),
        PlacementClass::AcrossNode => "one NUMA node here".into(),
        PlacementClass::SmtSiblings => "no SMT siblings among the CPUs allowed".into(),
    }
}

/// The position of `cpu` among its core's threads that are in `allowed` (0 for the first).
fn thread_rank(topology: Option<&Topology>, allowed: &[usize], cpu: usize) -> usize {
    topology.and_then(|t| t.place(cpu)).map_or(0, |p| {
        p.smt_siblings
            .iter()
            .filter(|s| allowed.contains(s))
            .position(|&s| s == cpu)
            .unwrap_or(0)
    })
}

/// `allowed` reordered so each core's first CPU comes before any core's second: the first
/// `n` of the result are `n` distinct cores where the machine has them.
pub fn spread_order(topology: Option<&Topology>, allowed: &[usize]) -> Vec<usize> {
    let mut out = allowed.to_vec();
    // Stable: within a rank the CPUs keep their order.
    out.sort_by_key(|&c| thread_rank(topology, allowed, c));
    out
}

/// The neighbour's CPU and the command's CPUs: the neighbour takes the last core (a core of
/// its own where there are two), the command the other cores, leaving the neighbour's SMT
/// sibling idle so the neighbour is not also an SMT competitor. `None` with fewer than two
/// CPUs.
pub fn split_for_neighbour(
    topology: Option<&Topology>,
    allowed: &[usize],
) -> Option<(usize, Vec<usize>)> {
    if allowed.len() < 2 {
        return None;
    }
    let firsts: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| thread_rank(topology, allowed, c) == 0)
        .collect();
    let neighbour = if firsts.len() >= 2 {
        firsts[firsts.len() - 1]
    } else {
        allowed[allowed.len() - 1]
    };
    let neighbour_core: Vec<usize> = topology
        .and_then(|t| t.place(neighbour))
        .map_or(vec![neighbour], |p| p.smt_siblings.clone());
    let mut rest: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !neighbour_core.contains(c))
        .collect();
    if rest.is_empty() {
        // One core with two threads: the sibling is all there is.
        rest = allowed
            .iter()
            .copied()
            .filter(|&c| c != neighbour)
            .collect();
    }
    Some((neighbour, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::topology::CpuPlace;

    /// `cores` cores of `threads` threads each; CPU numbering as Linux does on x86 (all first
    /// threads, then all second threads); `per_llc` cores per last-level cache, one node.
    fn topo(cores: usize, threads: usize, per_llc: usize) -> Topology {
        let n = cores * threads;
        let cpus = (0..n)
            .map(|cpu| {
                let core = cpu % cores;
                CpuPlace {
                    cpu,
                    core_id: Some(core as i64),
                    package_id: Some(0),
                    smt_siblings: (0..threads).map(|t| core + t * cores).collect(),
                    llc_id: Some(core / per_llc * per_llc),
                    numa_node: Some(0),
                }
            })
            .collect();
        Topology {
            online_cpus: (0..n).collect(),
            cores,
            packages: 1,
            numa_nodes: 1,
            threads_per_core: threads,
            smt: threads > 1,
            cpus,
            caches: Vec::new(),
        }
    }

    #[test]
    fn pairs_follow_the_topology_and_missing_classes_are_none() {
        // 4 cores, 2 threads, 2 cores per L3: CPUs 0..3 first threads, 4..7 second.
        let t = topo(4, 2, 2);
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(
            pair_for(Some(&t), &all, PlacementClass::SmtSiblings),
            Some((0, 4))
        );
        assert_eq!(
            pair_for(Some(&t), &all, PlacementClass::SameCache),
            Some((0, 1))
        );
        assert_eq!(
            pair_for(Some(&t), &all, PlacementClass::AcrossCache),
            Some((0, 2))
        );
        assert_eq!(pair_for(Some(&t), &all, PlacementClass::AcrossNode), None);
        assert_eq!(
            missing_reason(Some(&t), PlacementClass::AcrossNode),
            "one NUMA node here"
        );
    }

    #[test]
    fn spread_order_takes_every_core_before_a_second_thread() {
        let t = topo(2, 2, 2);
        // CPUs 0,1 are cores 0,1; 2,3 their siblings.
        assert_eq!(spread_order(Some(&t), &[0, 2, 1, 3]), vec![0, 1, 2, 3]);
        assert_eq!(spread_order(None, &[3, 1]), vec![3, 1]);
    }

    #[test]
    fn the_neighbour_takes_a_core_of_its_own() {
        // Two cores without SMT: the neighbour takes the second, the command the first.
        let t = topo(2, 1, 2);
        assert_eq!(split_for_neighbour(Some(&t), &[0, 1]), Some((1, vec![0])));
        // Two cores with SMT: the neighbour takes core 1 (CPU 1), and the command keeps
        // core 0's two threads, leaving CPU 3 (core 1's sibling) idle.
        let t = topo(2, 2, 2);
        assert_eq!(
            split_for_neighbour(Some(&t), &[0, 1, 2, 3]),
            Some((1, vec![0, 2]))
        );
        // One core with two threads: the sibling is all there is.
        let t = topo(1, 2, 1);
        assert_eq!(split_for_neighbour(Some(&t), &[0, 1]), Some((1, vec![0])));
        assert_eq!(split_for_neighbour(Some(&t), &[0]), None);
    }
}
