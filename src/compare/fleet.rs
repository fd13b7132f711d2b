//! Bands across a fleet: many hosts' saved fingerprints, grouped by what should make them
//! alike (the CPU by CPUID vendor, family, model and stepping, microcode, kernel, hypervisor),
//! and for each figure the question the
//! Netflix JVM case asked of its fleet: do identical hosts split into a fast and a slow band?
//!
//! Each figure's values in a group are clustered in one dimension with exact k-means
//! (Wang and Song, "Ckmeans.1d.dp: optimal k-means clustering in one dimension by dynamic
//! programming", The R Journal 3(2), 2011), k = 1..=[`MAX_BANDS`], and k is chosen by the
//! Bayesian information criterion of the Gaussian mixture each partition implies (Schwarz
//! 1978; the selection Ckmeans.1d.dp makes). A split is reported only when it is also
//! clearly separated and large enough to matter (see [`MIN_SEPARATION`], [`MIN_EMPTY_GAP`],
//! [`MIN_RELATIVE_GAP`] and [`MIN_GROUP_HOSTS`]): unimodal noise does not become bands. Pure: hosts in, bands out.
//!
//! Means and standard deviations appear only inside the clustering, because the method is
//! theirs (k-means minimises squared deviations; the BIC is of a Gaussian mixture); every
//! figure a band shows is a median, as everywhere else.

use crate::machine::CpuId;
use crate::stats::ckmeans::{ckmeans, partition_bic};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most bands looked for in one figure.
pub const MAX_BANDS: usize = 3;
/// Adjacent bands' centres must be this many standard deviations of the widest band apart.
/// Splitting a normal sample in two gives about 2.7 pooled deviations, and small samples
/// split by chance much further: at 4 (pooled), 5.5% of groups of 6 to 30 normal values made
/// false bands; at 6 (widest band) with 20 hosts or more, none of 12,300 did (the tests). A
/// real split such as the Netflix case's, where the fast band ran at a third of the slow
/// band's CPI, is tens of deviations apart.
pub const MIN_SEPARATION: f64 = 6.0;
/// Adjacent bands' centres must also differ by this fraction: a split of figures quantised
/// to whole cycles can be "well separated" by a tenth of a cycle. The same 10% `diff` uses.
pub const MIN_RELATIVE_GAP: f64 = crate::hazards::THRESHOLD_GUARD;
/// The stretch without a host between adjacent bands, in the widest band's standard
/// deviations: a tail of one population has neighbours all the way out.
pub const MIN_EMPTY_GAP: f64 = 3.0;
/// Fewest hosts in a band.
pub const MIN_BAND_HOSTS: usize = 2;
/// Fewest hosts in a group before its figures are banded at all: below 20, samples of pure
/// noise (10 normal values) fell into two clean-looking halves 5 apart in 1 of 2,000 tries.
pub const MIN_GROUP_HOSTS: usize = 20;

/// What `fleet` needs of a fingerprint; the rest of the file (samples, series) is skipped
/// while parsing, which is what makes thousands of files quick to read.
#[derive(Debug, Clone, Deserialize)]
pub struct HostFingerprint {
    /// Layout version.
    pub schema_version: u32,
    /// Host facts.
    pub machine: HostMachine,
    /// Probe results.
    #[serde(default)]
    pub probes: Vec<HostProbe>,
    /// Stored verdicts.
    #[serde(default)]
    pub verdicts: Vec<HostVerdict>,
}

/// The machine facts a fleet groups by.
#[derive(Debug, Clone, Deserialize)]
pub struct HostMachine {
    /// Host name, when recorded.
    #[serde(default)]
    pub hostname: Option<String>,
    /// CPU identity.
    pub cpu: HostCpu,
    /// Kernel release.
    #[serde(default)]
    pub kernel_release: Option<String>,
    /// Hypervisor, absent on bare metal.
    #[serde(default)]
    pub hypervisor: Option<HostHypervisor>,
}

/// CPU identity and microcode.
#[derive(Debug, Clone, Deserialize)]
pub struct HostCpu {
    /// CPUID vendor (`GenuineIntel`, `AuthenticAMD`).
    #[serde(default)]
    pub vendor: String,
    /// CPUID family.
    #[serde(default)]
    pub family: u32,
    /// CPUID model.
    #[serde(default)]
    pub model: u32,
    /// CPUID stepping.
    #[serde(default)]
    pub stepping: u32,
    /// Microarchitecture as this build's writer named it.
    #[serde(default)]
    pub microarchitecture: String,
    /// Brand string.
    pub model_name: String,
    /// Microcode revision.
    #[serde(default)]
    pub microcode: Option<String>,
}

/// Hypervisor vendor.
#[derive(Debug, Clone, Deserialize)]
pub struct HostHypervisor {
    /// `KVM`, `Hyper-V`, ...
    pub vendor: String,
}

/// One probe's figures.
#[derive(Debug, Clone, Deserialize)]
pub struct HostProbe {
    /// Probe name.
    pub name: String,
    /// `ok`, `skipped` or `failed`.
    pub status: crate::schema::Status,
    /// Its figures.
    #[serde(default)]
    pub metrics: Vec<HostMetric>,
}

/// One figure.
#[derive(Debug, Clone, Deserialize)]
pub struct HostMetric {
    /// Metric name.
    pub name: String,
    /// The figure.
    pub value: f64,
    /// Its unit.
    pub unit: String,
}

/// One stored verdict.
#[derive(Debug, Clone, Deserialize)]
pub struct HostVerdict {
    /// Hazard id.
    pub hazard: String,
    /// Its level.
    pub level: crate::schema::Level,
}

/// One host of the fleet: its label (the file's name) and what its file says.
#[derive(Debug, Clone)]
pub struct Host {
    /// How the report names it.
    pub label: String,
    /// Its fingerprint.
    pub fp: HostFingerprint,
}

/// Everything `cpudoctor fleet` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetReport {
    /// Hosts read.
    pub hosts: usize,
    /// One entry per group of alike hosts, largest first.
    pub groups: Vec<Group>,
}

/// Hosts that should be alike: same CPU (by CPUID), microcode, kernel and hypervisor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The CPU by CPUID: vendor, family, model, stepping. A guest's brand string ("AMD EPYC")
    /// is shared by several designs, so it cannot be the key.
    pub cpu: CpuId,
    /// Microarchitecture (`Zen 3`, `Emerald Rapids`, `unknown`).
    pub microarchitecture: String,
    /// Brand string of the group's first host.
    pub cpu_model: String,
    /// Microcode revision (empty when not recorded).
    pub microcode: String,
    /// Kernel release.
    pub kernel: String,
    /// Hypervisor vendor, `none` on bare metal.
    pub hypervisor: String,
    /// Its hosts.
    pub hosts: usize,
    /// Figures whose hosts split into bands.
    pub banded: Vec<BandedFigure>,
    /// Figures measured on enough hosts that show one band.
    pub unbanded: Vec<String>,
    /// Why the group was not banded (too few hosts), when it was not.
    pub not_banded: Option<String>,
}

/// A figure that splits the group's hosts into bands.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandedFigure {
    /// Probe.
    pub probe: String,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Bands from the lowest centre up.
    pub bands: Vec<Band>,
    /// Smallest distance between adjacent bands' centres, in pooled within-band standard
    /// deviations.
    pub separation_sd: f64,
    /// Hazards whose most common level differs between the bands.
    pub verdicts_differ: Vec<VerdictSplit>,
}

/// One band of a figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Band {
    /// Median of the band's values.
    pub centre: f64,
    /// Lowest and highest value in it.
    pub low: f64,
    /// Highest value.
    pub high: f64,
    /// Hosts in it.
    pub hosts: usize,
    /// Share of the group's hosts with the figure.
    pub share: f64,
    /// Their labels, for every band but the largest.
    pub host_labels: Vec<String>,
    /// Every host's figure in the band (for the strip plot; not in the JSON).
    #[serde(skip)]
    pub values: Vec<f64>,
}

/// A hazard read differently by the bands of a figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictSplit {
    /// Hazard id.
    pub hazard: String,
    /// The most common level in each band, in band order.
    pub levels: Vec<crate::schema::Level>,
}

/// The bands of one figure's values (sorted ascending), or `None` when they form one band:
/// the BIC-best k of 1..=[`MAX_BANDS`], kept only when every band has [`MIN_BAND_HOSTS`] and
/// adjacent bands are [`MIN_SEPARATION`] standard deviations of the widest band and
/// [`MIN_RELATIVE_GAP`] apart, with [`MIN_EMPTY_GAP`] of them empty between. Returns the cluster ends and the smallest separation.
pub fn find_bands(sorted: &[f64]) -> Option<(Vec<usize>, f64)> {
    let n = sorted.len();
    if n < 2 * MIN_BAND_HOSTS {
        return None;
    }
    let mut best: Option<(Vec<usize>, f64)> = None;
    let mut best_bic = partition_bic(sorted, &[n]);
    for k in 2..=MAX_BANDS.min(n / MIN_BAND_HOSTS) {
        let ends = ckmeans(sorted, k);
        let bic = partition_bic(sorted, &ends);
        if bic >= best_bic {
            continue;
        }
        if let Some(sep) = separation(sorted, &ends) {
            best_bic = bic;
            best = Some((ends, sep));
        }
    }
    best
}

/// The smallest separation between adjacent clusters, or `None` when a cluster is too small or
/// two adjacent ones are too close (see [`find_bands`]).
fn separation(x: &[f64], ends: &[usize]) -> Option<f64> {
    let mut start = 0;
    let mut stats = Vec::new();
    let mut widest = 0.0_f64;
    let mut empty_gap = f64::INFINITY;
    for &end in ends {
        let c = &x[start..end];
        if start > 0 {
            empty_gap = empty_gap.min(c[0] - x[start - 1]);
        }
        if c.len() < MIN_BAND_HOSTS {
            return None;
        }
        let mean = c.iter().sum::<f64>() / c.len() as f64;
        let sd = (c.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (c.len() - 1) as f64).sqrt();
        widest = widest.max(sd);
        stats.push(mean);
        start = end;
    }
    // The widest band's spread, not the pooled one: a band of two or three hosts drawn from
    // one noisy population can sit unusually tight and make any gap look wide. A floor of 1%
    // of the figure's scale keeps figures quantised to a few values (powers of two, whole
    // cycles) from being "infinitely" separated.
    let scale = stats.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let sd = widest.max(scale * 0.01);
    // No host between the bands for a stretch of several spreads: two groups, not one
    // stretched population whose tail k-means cut off.
    if empty_gap < MIN_EMPTY_GAP * sd {
        return None;
    }
    let mut min_sep = f64::INFINITY;
    for w in stats.windows(2) {
        let gap = w[1] - w[0];
        let rel = gap / w[0].abs().min(w[1].abs()).max(f64::MIN_POSITIVE);
        if gap / sd < MIN_SEPARATION || rel < MIN_RELATIVE_GAP {
            return None;
        }
        min_sep = min_sep.min(gap / sd);
    }
    Some(min_sep)
}

/// The fleet's bands, group by group.
pub fn analyse(hosts: &[Host]) -> FleetReport {
    let mut groups: BTreeMap<(CpuId, String, String, String), Vec<&Host>> = BTreeMap::new();
    for h in hosts {
        let m = &h.fp.machine;
        let c = &m.cpu;
        groups
            .entry((
                CpuId {
                    vendor: c.vendor.clone(),
                    family: c.family,
                    model: c.model,
                    stepping: c.stepping,
                },
                c.microcode.clone().unwrap_or_default(),
                m.kernel_release.clone().unwrap_or_default(),
                m.hypervisor
                    .as_ref()
                    .map_or("none".to_string(), |h| h.vendor.clone()),
            ))
            .or_default()
            .push(h);
    }
    let mut out: Vec<Group> = groups
        .into_iter()
        .map(|((cpu, microcode, kernel, hypervisor), members)| {
            let first = &members[0].fp.machine.cpu;
            let mut g = Group {
                cpu,
                microarchitecture: first.microarchitecture.clone(),
                cpu_model: first.model_name.clone(),
                microcode,
                kernel,
                hypervisor,
                hosts: members.len(),
                banded: Vec::new(),
                unbanded: Vec::new(),
                not_banded: None,
            };
            if members.len() < MIN_GROUP_HOSTS {
                g.not_banded = Some(crate::words::compare::too_few_hosts(
                    members.len(),
                    MIN_GROUP_HOSTS,
                ));
            } else {
                band_group(&members, &mut g);
            }
            g
        })
        .collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.hosts));
    FleetReport {
        hosts: hosts.len(),
        groups: out,
    }
}

fn band_group(members: &[&Host], g: &mut Group) {
    // Every (probe, metric) an ok probe reports, in first-seen order.
    let mut figures: Vec<(String, String, String)> = Vec::new();
    for h in members {
        for p in
            h.fp.probes
                .iter()
                .filter(|p| p.status == crate::schema::Status::Ok)
        {
            for m in &p.metrics {
                if !figures
                    .iter()
                    .any(|(pp, mm, _)| *pp == p.name && *mm == m.name)
                {
                    figures.push((p.name.clone(), m.name.clone(), m.unit.clone()));
                }
            }
        }
    }
    for (probe, metric, unit) in figures {
        let mut values: Vec<(f64, usize)> = members
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                let p =
                    h.fp.probes
                        .iter()
                        .find(|p| p.name == probe && p.status == crate::schema::Status::Ok)?;
                let m = p.metrics.iter().find(|m| m.name == metric)?;
                m.value.is_finite().then_some((m.value, i))
            })
            .collect();
        // A figure most hosts lack says more about the runs than the hosts.
        if values.len() * 2 < members.len() {
            continue;
        }
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let sorted: Vec<f64> = values.iter().map(|v| v.0).collect();
        let Some((ends, separation_sd)) = find_bands(&sorted) else {
            g.unbanded.push(metric);
            continue;
        };
        let largest = {
            let mut start = 0;
            let mut sizes = Vec::new();
            for &e in &ends {
                sizes.push(e - start);
                start = e;
            }
            sizes
                .iter()
                .enumerate()
                .max_by_key(|(_, s)| **s)
                .map_or(0, |(i, _)| i)
        };
        let mut bands = Vec::new();
        let mut band_levels: Vec<BTreeMap<String, crate::schema::Level>> = Vec::new();
        let mut start = 0;
        for (bi, &end) in ends.iter().enumerate() {
            let slice = &values[start..end];
            let vals: Vec<f64> = slice.iter().map(|v| v.0).collect();
            let mut labels: Vec<String> = Vec::new();
            if bi != largest {
                labels = slice.iter().map(|v| members[v.1].label.clone()).collect();
                labels.sort();
            }
            bands.push(Band {
                centre: crate::stats::median(&vals).unwrap_or(f64::NAN),
                low: vals[0],
                high: vals[vals.len() - 1],
                hosts: vals.len(),
                share: vals.len() as f64 / sorted.len() as f64,
                host_labels: labels,
                values: vals.clone(),
            });
            band_levels.push(most_common_levels(slice.iter().map(|v| members[v.1])));
            start = end;
        }
        let mut hazards: Vec<&String> = band_levels.iter().flat_map(|b| b.keys()).collect();
        hazards.sort();
        hazards.dedup();
        let verdicts_differ = hazards
            .into_iter()
            .filter_map(|h| {
                let levels: Option<Vec<_>> =
                    band_levels.iter().map(|b| b.get(h).copied()).collect();
                let levels = levels?;
                levels
                    .windows(2)
                    .any(|w| w[0] != w[1])
                    .then(|| VerdictSplit {
                        hazard: h.clone(),
                        levels,
                    })
            })
            .collect();
        g.banded.push(BandedFigure {
            probe,
            metric,
            unit,
            bands,
            separation_sd,
            verdicts_differ,
        });
    }
}

/// Each hazard's most common level among `hosts`.
fn most_common_levels<'a>(
    hosts: impl Iterator<Item = &'a Host>,
) -> BTreeMap<String, crate::schema::Level> {
    let mut counts: BTreeMap<String, BTreeMap<crate::schema::Level, usize>> = BTreeMap::new();
    for h in hosts {
        for v in &h.fp.verdicts {
            *counts
                .entry(v.hazard.clone())
                .or_default()
                .entry(v.level)
                .or_default() += 1;
        }
    }
    counts
        .into_iter()
        .filter_map(|(h, c)| Some((h, c.into_iter().max_by_key(|(_, n)| *n)?.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic PRNG (SplitMix64) and Box-Muller normals, so tests need no crate.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        pub(crate) fn normal(&mut self) -> f64 {
            let (u, v) = (self.next().max(1e-12), self.next());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    /// Brute force over every split, for checking the DP.
    fn brute(x: &[f64], k: usize) -> f64 {
        fn ssq(c: &[f64]) -> f64 {
            let m = c.iter().sum::<f64>() / c.len() as f64;
            c.iter().map(|v| (v - m).powi(2)).sum()
        }
        fn go(x: &[f64], k: usize) -> f64 {
            if k == 1 {
                return ssq(x);
            }
            (1..=x.len() - (k - 1))
                .map(|i| ssq(&x[..i]) + go(&x[i..], k - 1))
                .fold(f64::INFINITY, f64::min)
        }
        go(x, k)
    }

    #[test]
    fn the_dynamic_programme_finds_the_optimal_partition() {
        let mut rng = Rng(7);
        for trial in 0..30 {
            let n = 5 + trial % 9;
            let mut x: Vec<f64> = (0..n).map(|_| rng.next() * 10.0).collect();
            x.sort_by(f64::total_cmp);
            for k in 1..=3.min(n) {
                let ends = ckmeans(&x, k);
                let mut start = 0;
                let mut total = 0.0;
                for &e in &ends {
                    let c = &x[start..e];
                    let m = c.iter().sum::<f64>() / c.len() as f64;
                    total += c.iter().map(|v| (v - m).powi(2)).sum::<f64>();
                    start = e;
                }
                assert!((total - brute(&x, k)).abs() < 1e-9, "n={n} k={k} {ends:?}");
            }
        }
    }

    #[test]
    fn normal_noise_never_makes_bands() {
        for seed in 0..200 {
            let mut rng = Rng(seed);
            let mut x: Vec<f64> = (0..50).map(|_| 25.0 + 2.0 * rng.normal()).collect();
            x.sort_by(f64::total_cmp);
            assert_eq!(find_bands(&x), None, "seed {seed}: {x:?}");
        }
    }

    #[test]
    fn small_groups_of_normal_noise_make_no_bands_either() {
        let mut false_bands = Vec::new();
        for n in MIN_GROUP_HOSTS..=60 {
            for seed in 0..300 {
                let mut rng = Rng(1000 * n as u64 + seed);
                let mut x: Vec<f64> = (0..n).map(|_| 25.0 + 2.0 * rng.normal()).collect();
                x.sort_by(f64::total_cmp);
                if find_bands(&x).is_some() {
                    false_bands.push((
                        n,
                        seed,
                        find_bands(&x),
                        x.iter()
                            .map(|v| (v * 100.0).round() / 100.0)
                            .collect::<Vec<_>>(),
                    ));
                }
            }
        }
        assert!(
            false_bands.is_empty(),
            "{} false band(s): {false_bands:?}",
            false_bands.len()
        );
    }

    #[test]
    fn a_fast_minority_like_the_netflix_fleet_is_one_band_of_six() {
        // 44 slow hosts around 20x, 6 fast around 3x: the split the Netflix JVM case saw.
        let mut rng = Rng(3);
        let mut x: Vec<f64> = (0..50)
            .map(|i| if i < 44 { 20.0 } else { 3.0 } * (1.0 + 0.05 * rng.normal()))
            .collect();
        x.sort_by(f64::total_cmp);
        let (ends, sep) = find_bands(&x).unwrap();
        assert_eq!(ends, vec![6, 50]);
        assert!(sep > MIN_SEPARATION);
    }

    #[test]
    fn values_on_a_few_levels_a_hair_apart_are_not_bands() {
        // Whole cycles read 78.0 and 78.05: well separated, 0.06% apart.
        let x: Vec<f64> = [78.0; 20].iter().chain(&[78.05; 20]).copied().collect();
        assert_eq!(find_bands(&x), None);
    }
}
