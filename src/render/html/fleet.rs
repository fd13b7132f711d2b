//! The fleet analysis as one self-contained HTML page: per group of alike hosts, a strip plot
//! of each banded figure (one row of dots per band, each dot a host) beside its bands' shares
//! and hosts; the figures with one band in a line.

use super::{escape, page_foot, page_head};
use crate::compare::fleet::FleetReport;
use crate::format::human_value;
use crate::render::charts::strip_chart;
use std::fmt::Write;

/// The page. A chart that cannot be drawn says so in its place.
pub fn fleet_to_html(r: &FleetReport) -> String {
    let mut h = String::new();
    let title = format!("cpudoctor fleet: {} hosts", r.hosts);
    h.push_str(&page_head(&title, ""));
    for g in &r.groups {
        let _ = writeln!(
            h,
            "<h2>{} ({}, {}) &middot; microcode {} &middot; kernel {} &middot; {}: {} hosts</h2>",
            escape(&g.microarchitecture),
            escape(&g.cpu_model),
            escape(&g.cpu.to_string()),
            escape(&g.microcode),
            escape(&g.kernel),
            escape(&g.hypervisor),
            g.hosts
        );
        if let Some(why) = &g.not_banded {
            let _ = writeln!(h, "<p>Not banded: {}.</p>", escape(why));
            continue;
        }
        if g.banded.is_empty() {
            let _ = writeln!(
                h,
                "<p>No figure splits these hosts into bands ({} figures looked at).</p>",
                g.unbanded.len()
            );
        }
        for f in &g.banded {
            let _ = writeln!(
                h,
                "<section class=\"hazard\"><h3>{} ({}): {} bands, {:.0} standard deviations \
                 apart</h3>",
                escape(&f.metric),
                escape(&f.probe),
                f.bands.len(),
                f.separation_sd
            );
            let values: Vec<Vec<f64>> = f.bands.iter().map(|b| b.values.clone()).collect();
            match strip_chart(
                &format!("{}: one dot per host", f.metric),
                &format!("{} ({})", f.metric, f.unit),
                &values,
            ) {
                Ok(svg) => {
                    let _ = writeln!(h, "<figure class=\"chart\">{svg}</figure>");
                }
                Err(e) => {
                    let _ = writeln!(h, "<p>Chart not drawn: {}.</p>", escape(&e.to_string()));
                }
            }
            h.push_str("<ol>\n");
            for b in &f.bands {
                let _ = writeln!(
                    h,
                    "<li>{} ({} to {}): {} hosts, {}{}</li>",
                    escape(&human_value(b.centre, &f.unit)),
                    escape(&human_value(b.low, &f.unit)),
                    escape(&human_value(b.high, &f.unit)),
                    b.hosts,
                    crate::format::pct(b.share, 0),
                    if b.host_labels.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", escape(&b.host_labels.join(", ")))
                    }
                );
            }
            h.push_str("</ol>\n");
            for v in &f.verdicts_differ {
                let levels: Vec<&str> = v.levels.iter().map(|l| l.word()).collect();
                let _ = writeln!(
                    h,
                    "<p>Verdict that differs between the bands: {} {}</p>",
                    escape(&v.hazard),
                    escape(&levels.join(" / "))
                );
            }
            h.push_str("</section>\n");
        }
        if !g.banded.is_empty() && !g.unbanded.is_empty() {
            let _ = writeln!(h, "<p>One band: {}.</p>", escape(&g.unbanded.join(", ")));
        }
    }
    h.push_str(&page_foot());
    h
}
