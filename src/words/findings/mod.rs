//! The sentences of `cpudoctor diagnose`'s findings: what was seen, what it costs on this
//! machine, what to do.
