//! The false_sharing verdict's words.
