//! Everything that turns results into something to read or store: the versioned fingerprint
//! schema ([`schema`]), terminal tables ([`terminal`]), the c2c heatmap ([`heatmap`]) and the
//! JSON exporter ([`json`]).
//! Exporters take results and return text or bytes; only the binary writes them anywhere.

pub mod heatmap;
pub mod json;
pub mod schema;
pub mod terminal;

#[cfg(test)]
pub(crate) mod test_support;
