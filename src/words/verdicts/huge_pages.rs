//! The huge_pages verdict's words.
