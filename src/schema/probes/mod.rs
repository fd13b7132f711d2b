//! Each probe's typed result: its raw record (what it measured, as saved) and its figures
//! (what its analysis made of it), one module per probe. The doc comment of every field is the
//! reference for what a saved file holds.

pub mod c2c;
pub mod sharing;
