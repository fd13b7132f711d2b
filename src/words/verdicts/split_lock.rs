//! The split_lock verdict's words.
