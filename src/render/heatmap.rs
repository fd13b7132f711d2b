//! Terminal heatmap of a matrix series (the core-to-core latency matrix): each cell shaded by
//! where its value falls between the smallest and largest, with the figure when the terminal
//! is wide enough and shades alone when it is not. Returns text; the binary prints it.

use crate::names::probe;
use crate::render::text::Style;
use crate::schema::probes::c2c::{BY_GROUP_SERIES, C2cFigures, C2cRaw, CAS_MATRIX_SERIES};
use crate::schema::{ProbeResult, Series, Status};
use std::fmt::Write;

/// Shades from coolest to hottest.
const SHADES: [char; 4] = ['░', '▒', '▓', '█'];
/// Characters per cell when figures are shown: a shade and a 5-wide number.
const WIDE_CELL: usize = 7;

/// Index into [`SHADES`] for `v` on the scale `lo..=hi`, split into equal bands.
pub fn shade_index(v: f64, lo: f64, hi: f64) -> usize {
    if hi <= lo {
        return 0;
    }
    let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    ((t * SHADES.len() as f64) as usize).min(SHADES.len() - 1)
}

fn short(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A topology group key (`shared_l3`) in the probe's own words (`shared L3`); an unknown key
/// (a newer cpudoctor's fingerprint) as it is.
fn group_words(key: &str) -> String {
    crate::machine::topology::PairGroup::from_key(key)
        .map_or(key, |g| g.label())
        .to_string()
}

/// Renders a `Series::Matrix`; `None` for other kinds or a matrix without values.
pub fn render_matrix(series: &Series, width: u16) -> Option<String> {
    let Series::Matrix {
        name,
        unit,
        rows,
        cols,
        values,
    } = series
    else {
        return None;
    };
    let cells: Vec<f64> = values.iter().flatten().flatten().copied().collect();
    let lo = cells.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = cells.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return None;
    }
    let label_w = rows.iter().map(String::len).max().unwrap_or(0) + 1;
    let wide = label_w + WIDE_CELL * cols.len() <= width as usize;
    let mut s = String::new();
    let _ = writeln!(s, "{name} ({unit}):");
    if wide {
        let _ = write!(s, "{:label_w$}", "");
        for c in cols {
            let _ = write!(s, "{c:>WIDE_CELL$}");
        }
        s.push('\n');
    } else {
        // Compact: one character per cell; the header gives column positions by tens.
        let _ = write!(s, "{:label_w$}", "");
        for i in 0..cols.len() {
            s.push(if i % 10 == 0 {
                char::from_digit(((i / 10) % 10) as u32, 10).unwrap_or('?')
            } else {
                ' '
            });
        }
        s.push('\n');
    }
    for (i, row) in values.iter().enumerate() {
        let _ = write!(s, "{:<label_w$}", rows.get(i).map_or("", String::as_str));
        for (j, cell) in row.iter().enumerate() {
            match (cell, wide) {
                (Some(v), true) => {
                    let _ = write!(s, " {}{:>5}", SHADES[shade_index(*v, lo, hi)], short(*v));
                }
                (Some(v), false) => s.push(SHADES[shade_index(*v, lo, hi)]),
                (None, true) => {
                    let _ = write!(s, "{:>WIDE_CELL$}", if i == j { "·" } else { "?" });
                }
                (None, false) => s.push(if i == j { '·' } else { ' ' }),
            }
        }
        s.push('\n');
    }
    let band = (hi - lo) / SHADES.len() as f64;
    let legend: Vec<String> = SHADES
        .iter()
        .enumerate()
        .map(|(k, sh)| {
            if band > 0.0 {
                format!(
                    "{sh} {}..{}",
                    short(lo + band * k as f64),
                    short(lo + band * (k + 1) as f64)
                )
            } else {
                format!("{sh} {}", short(lo))
            }
        })
        .take(if band > 0.0 { SHADES.len() } else { 1 })
        .collect();
    let _ = writeln!(
        s,
        "{}{}",
        legend.join("  "),
        if cells.len() < values.len() * values.len().saturating_sub(1) {
            if wide {
                "   (? not measured)"
            } else {
                "   (blank: not measured)"
            }
        } else {
            ""
        }
    );
    Some(s)
}

/// The heatmap and topology summary for a `c2c` result; `None` for any other probe or a
/// result that is not ok.
pub fn render_c2c(p: &ProbeResult, style: impl Into<Style>) -> Option<String> {
    let width = style.into().width;
    if p.name != probe::C2C || p.status != Status::Ok {
        return None;
    }
    let matrix = p
        .series
        .iter()
        .find(|s| matches!(s, Series::Matrix { name, .. } if name == CAS_MATRIX_SERIES))?;
    let mut s = String::from("Core-to-core latency, one way, lock cmpxchg ping-pong\n");
    s.push_str(&render_matrix(matrix, width)?);
    let groups = p.series.iter().find_map(|s| match s {
        Series::Bars {
            name,
            labels,
            values,
            ..
        } if name == BY_GROUP_SERIES => Some((labels, values)),
        _ => None,
    });
    if let Some((labels, values)) = groups {
        let counts = p.raw::<C2cRaw>().ok().map(|r| r.effects.pair_groups);
        let parts: Vec<String> = labels
            .iter()
            .zip(values)
            .map(|(l, v)| {
                let n = counts
                    .as_ref()
                    .map_or(0, |c| c.values().filter(|g| g.key() == l).count());
                format!(
                    "{} {} ns ({n} pair{})",
                    group_words(l),
                    short(*v),
                    if n == 1 { "" } else { "s" }
                )
            })
            .collect();
        let _ = writeln!(s, "By topology: {}", parts.join("; "));
    }
    let figures = p.figures::<C2cFigures>().unwrap_or_default();
    if let (Some(cas), Some(ls)) = (
        figures.c2c_latency_ns.as_ref(),
        figures.c2c_load_store_latency_ns.as_ref(),
    ) {
        let _ = writeln!(
            s,
            "Median over pairs: lock cmpxchg {} ns; plain flag {} ns (no lock: a store's \
             ownership request plus the reader's miss)",
            short(cas.value),
            short(ls.value)
        );
    }
    if let Some((m, t)) = p
        .raw::<C2cRaw>()
        .ok()
        .map(|r| (r.effects.pairs_measured, r.effects.pairs_total))
        && m < t
    {
        let _ = writeln!(
            s,
            "Measured {m} of {t} pairs (time budget; --budget SECONDS to measure more)"
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(values: Vec<Vec<Option<f64>>>) -> Series {
        let labels: Vec<String> = (0..values.len()).map(|i| format!("cpu{i}")).collect();
        Series::Matrix {
            name: "c2c_latency_ns".into(),
            unit: "ns".into(),
            rows: labels.clone(),
            cols: labels,
            values,
        }
    }

    #[test]
    fn shades_split_the_range_in_equal_bands() {
        assert_eq!(shade_index(10.0, 10.0, 50.0), 0);
        assert_eq!(shade_index(20.0, 10.0, 50.0), 1);
        assert_eq!(shade_index(49.0, 10.0, 50.0), 3);
        assert_eq!(shade_index(50.0, 10.0, 50.0), 3);
        assert_eq!(shade_index(7.0, 7.0, 7.0), 0);
    }

    #[test]
    fn two_cpu_matrix_snapshot() {
        let out = render_matrix(
            &m(vec![vec![None, Some(103.4)], vec![Some(103.4), None]]),
            80,
        )
        .unwrap();
        assert_eq!(
            out,
            "c2c_latency_ns (ns):\n\
             \x20       cpu0   cpu1\n\
             cpu0       · ░  103\n\
             cpu1  ░  103      ·\n\
             ░ 103\n"
        );
    }

    #[test]
    fn far_pairs_get_the_hot_shade_and_gaps_are_marked() {
        let out = render_matrix(
            &m(vec![
                vec![None, Some(20.0), None],
                vec![Some(20.0), None, Some(200.0)],
                vec![None, Some(200.0), None],
            ]),
            80,
        )
        .unwrap();
        assert!(out.contains("░ 20.0"), "{out}");
        assert!(out.contains("█  200"), "{out}");
        assert!(out.contains("?"), "{out}");
        assert!(out.contains("(? not measured)"), "{out}");
    }

    #[test]
    fn narrow_terminals_get_one_character_per_cell() {
        let n = 40;
        let values: Vec<Vec<Option<f64>>> = (0..n)
            .map(|i| (0..n).map(|j| (i != j).then_some((i + j) as f64)).collect())
            .collect();
        let out = render_matrix(&m(values), 80).unwrap();
        let row = out.lines().nth(2).unwrap();
        assert_eq!(row.chars().count(), "cpu39 ".len() + n, "{row:?}");
        assert!(row.contains('·'));
    }

    #[test]
    fn group_keys_read_as_words() {
        assert_eq!(group_words("shared_l3"), "shared L3");
        assert_eq!(group_words("other_numa_node"), "other NUMA node");
        assert_eq!(group_words("smt_sibling"), "SMT sibling");
        assert_eq!(group_words("unknown"), "topology unknown");
        assert_eq!(group_words("next_galaxy"), "next_galaxy");
    }

    #[test]
    fn only_c2c_results_render() {
        let p = ProbeResult::new("pause", Status::Ok);
        assert!(render_c2c(&p, 80).is_none());
    }
}
