//! Everything that turns a typed result into something to read: a fingerprint (typed in
//! [`crate::schema`]) on the terminal ([`terminal`], the c2c heatmap [`heatmap`], and
//! [`handoff`] for `spin --handoff`), a diagnosis ([`diagnosis`]) and its flame graphs
//! ([`flame`]), the comparisons `compare` made (two fingerprints [`diff`], two diagnoses
//! [`profile_diff`] led by [`why`], a fleet [`fleet_text`]), an experiment ([`experiment`]),
//! the Prometheus text exporter ([`prom`]), and the HTML report ([`html`]) with its SVG charts
//! ([`charts`]). [`text`] holds the table and the paragraph wrapper the terminal views share.
//! Nothing here compares or judges (that is `compare`'s and `hazards`'); renderers and
//! exporters take results and return text or bytes; only the binary writes them anywhere.

pub mod charts;
pub mod diagnosis;
pub mod diff;
pub mod experiment;
pub mod flame;
pub mod fleet_text;
pub mod handoff;
pub mod heatmap;
pub mod html;
pub mod profile_diff;
pub mod prom;
pub mod terminal;
pub mod text;
pub mod why;
