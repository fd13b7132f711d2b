//! The fleet analysis as text for a terminal: per group of alike hosts, the figures that split
//! them into bands (each band's centre, share and hosts) and, in one line, those that do not.

use crate::compare::fleet::{BandedFigure, FleetReport, Group};
use crate::format::human_value;
use crate::render::text::Style;
use crate::render::text::wrap;
use std::fmt::Write;

/// Most host names listed for one band; the rest are counted (`--json` lists all).
const MAX_LISTED_HOSTS: usize = 12;
/// Most one-band figures named in the closing line.
const MAX_LISTED_FIGURES: usize = 6;

/// `a, b, c and 4 more`: at most `max` items named, the rest counted (`--json` has them all).
fn listed(items: &[String], max: usize) -> String {
    let shown: Vec<&str> = items.iter().take(max).map(String::as_str).collect();
    match items.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

fn group_title(g: &Group) -> String {
    let mut parts = vec![format!(
        "{} ({}, {})",
        g.microarchitecture, g.cpu_model, g.cpu
    )];
    if !g.microcode.is_empty() {
        parts.push(format!("microcode {}", g.microcode));
    }
    if !g.kernel.is_empty() {
        parts.push(format!("kernel {}", g.kernel));
    }
    parts.push(if g.hypervisor == "none" {
        "bare metal".to_string()
    } else {
        format!("{} guest", g.hypervisor)
    });
    format!("{}: {} hosts", parts.join(", "), g.hosts)
}

fn figure(f: &BandedFigure, width: u16) -> String {
    let mut s = format!(
        "  {} ({}): {} bands, {:.0} standard deviations apart\n",
        f.metric,
        f.probe,
        f.bands.len(),
        f.separation_sd
    );
    for b in &f.bands {
        let head = format!(
            "{} ({} to {}): {} of {} hosts, {}",
            human_value(b.centre, &f.unit),
            human_value(b.low, &f.unit),
            human_value(b.high, &f.unit),
            b.hosts,
            f.bands.iter().map(|b| b.hosts).sum::<usize>(),
            crate::format::pct(b.share, 0)
        );
        let line = if b.host_labels.is_empty() {
            head
        } else {
            format!("{head}: {}", listed(&b.host_labels, MAX_LISTED_HOSTS))
        };
        s.push_str(&wrap(&line, width, 4));
    }
    if !f.verdicts_differ.is_empty() {
        let parts: Vec<String> = f
            .verdicts_differ
            .iter()
            .map(|v| {
                format!(
                    "{} {}",
                    v.hazard,
                    v.levels
                        .iter()
                        .map(|l| l.word())
                        .collect::<Vec<_>>()
                        .join(" / ")
                )
            })
            .collect();
        s.push_str(&wrap(
            &format!(
                "verdicts that differ between the bands: {}",
                parts.join("; ")
            ),
            width,
            4,
        ));
    }
    s
}

/// The fleet for a terminal of `style` (its width); `skipped` files were named on stderr.
pub fn render_fleet(r: &FleetReport, skipped: usize, style: impl Into<Style>) -> String {
    let width = style.into().width;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} hosts in {} group(s) of alike hosts (same CPU by CPUID family, model and stepping, \
         microcode, kernel, hypervisor){}",
        r.hosts,
        r.groups.len(),
        if skipped > 0 {
            format!("; {skipped} file(s) skipped")
        } else {
            String::new()
        }
    );
    let s_wrapped = wrap(s.trim_end(), width, 0);
    let mut s = s_wrapped;
    for g in &r.groups {
        s.push('\n');
        s.push_str(&wrap(&group_title(g), width, 0));
        if let Some(why) = &g.not_banded {
            s.push_str(&wrap(&format!("not banded: {why}"), width, 2));
            continue;
        }
        if g.banded.is_empty() {
            s.push_str(&wrap(
                &format!(
                    "No figure splits these hosts into bands ({} figures looked at).",
                    g.unbanded.len()
                ),
                width,
                2,
            ));
        } else {
            for f in &g.banded {
                s.push_str(&figure(f, width));
            }
            if !g.unbanded.is_empty() {
                s.push_str(&wrap(
                    &format!(
                        "One band: {} other figures ({}).",
                        g.unbanded.len(),
                        listed(&g.unbanded, MAX_LISTED_FIGURES)
                    ),
                    width,
                    2,
                ));
            }
        }
    }
    s.push('\n');
    s.push_str(&wrap(
        "Bands: exact 1-D k-means (Ckmeans.1d.dp) for 1 to 3 bands, the number chosen by BIC, \
         kept only in groups of 20 hosts or more, when adjacent bands are 6 standard deviations \
         of the widest band and 10% apart and each holds 2 hosts or more.",
        width,
        0,
    ));
    s
}
