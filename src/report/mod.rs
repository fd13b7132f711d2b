//! Everything that turns results into something to read or store: the versioned fingerprint
//! schema ([`schema`]), terminal tables ([`terminal`], the c2c heatmap [`heatmap`], and
//! [`handoff`] for `spin --handoff`), the JSON exporter ([`json`]), the Prometheus text exporter ([`prom`]), the comparison of two
//! fingerprints ([`diff`]) and the HTML report ([`html`]) with its SVG charts ([`charts`]).
//! Exporters take results and return text or bytes; only the binary writes them anywhere.

pub mod charts;
pub mod diff;
pub mod fleet;
pub mod fleet_text;
pub mod handoff;
pub mod heatmap;
pub mod html;
pub mod json;
pub mod prom;
pub mod schema;
pub mod terminal;

#[cfg(test)]
pub(crate) mod test_support;
