//! Files written for other programs to read.

pub mod prometheus;
