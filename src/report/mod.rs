//! Everything that turns results into something to read or store: the versioned fingerprint
//! schema ([`schema`]), terminal tables ([`terminal`]) and the JSON exporter ([`json`]).
//! Exporters take results and return text or bytes; only the binary writes them anywhere.

pub mod charts;
pub mod diff;
pub mod html;
pub mod json;
pub mod schema;
pub mod terminal;

#[cfg(test)]
pub(crate) mod test_support;
