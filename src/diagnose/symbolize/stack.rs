//! A sampled call stack, named: each frame's address, function, module and offsets, and the
//! samples of each distinct stack. What symbolizing gives the analysis, the exports and the
//! flame graphs; saved in a diagnosis's `stacks`.

use serde::{Deserialize, Serialize};

/// One distinct call stack and the samples that ended in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackCount {
    /// Frames, leaf (the sampled instruction) first, outermost caller last.
    pub frames: Vec<StackFrame>,
    /// Samples with exactly this stack.
    pub samples: u64,
}

/// One frame of a sampled call stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StackFrame {
    /// Instruction address in the process (the sampled address for the leaf, a return
    /// address for callers).
    pub address: u64,
    /// Function name, when a symbol, DWARF or a perf map named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// File or mapping the address lies in (`/usr/lib/.../libc.so.6`, `[anon:jit]`, ...).
    pub module: String,
    /// Offset of `address` from the function's start (or the module's, when unnamed).
    pub offset: u64,
    /// Offset of `address` in the module's file, for file-backed code (what pprof's mappings
    /// need to find the instruction in the binary); absent for anonymous memory and in files
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_offset: Option<u64>,
}
