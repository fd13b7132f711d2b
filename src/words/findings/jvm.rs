//! The Netflix JVM case's finding: HotSpot's secondary-super cache written by type checks in
//! more than one thread (JDK-8180450).

use crate::format::pct;
use crate::reference::NETFLIX_TRUE_SHARING_FIX_SPEEDUP;

/// The scan that gives the case away.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanFacts<'a> {
    /// Share of all samples in the methods that scan.
    pub share: f64,
    /// The first such method.
    pub method: &'a str,
    /// How many methods scan.
    pub methods: usize,
    /// The scan instruction.
    pub instruction: &'a str,
    /// Its offset in the method.
    pub offset: u64,
}

/// `45.0% of all samples in m (1 JIT method), with the secondary-supers scan ...`.
pub fn scan(s: &ScanFacts) -> String {
    format!(
        "{} of all samples in {} ({} JIT method{}), with the secondary-supers scan `{}` at \
         +{:#x}",
        pct(s.share, 1),
        s.method,
        s.methods,
        if s.methods == 1 { "" } else { "s" },
        s.instruction,
        s.offset
    )
}

/// `process 7: HotSpot 17.0.15 (/usr/lib/jvm/...)`.
pub fn process(pid: u32, version: Option<&str>, home: &str) -> String {
    let version = version.unwrap_or("of unknown version");
    format!("process {pid}: HotSpot {version} ({home})")
}

/// `2 threads in it: 1 (a) 480 samples, 2 (b) 470 samples`.
pub fn threads(threads: &[(u32, &str, u64)]) -> String {
    format!(
        "{} threads in it: {}",
        threads.len(),
        threads
            .iter()
            .map(|(tid, name, n)| format!("{tid} ({name}) {n} samples"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The finding's title.
pub fn title(method: &str) -> String {
    format!("{method}: type checks contend on a class's secondary-super cache (JDK-8180450)")
}

/// What the contention is and what it cost Netflix.
pub fn explanation() -> String {
    format!(
        "The Netflix JVM case. An instanceof, checkcast or interface dispatch against an \
         interface that is not a class's primary super scans the class's secondary supers \
         (`repne scas`) and stores the interface found in the class's one-element \
         _secondary_super_cache. When threads check the same class against different \
         interfaces, each overwrites what the other just stored: every check misses, scans, \
         and writes the line the other cores read, so it bounces between cores (true sharing; \
         the adjacent _secondary_supers field pays too). This is JDK-8180450; Netflix measured \
         {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x throughput from removing it."
    )
}

/// What to do: the JDK release that fixed it, and code that avoids it.
pub fn advice(fixed_in_jdk: u32) -> String {
    format!(
        "Run on JDK {fixed_in_jdk} or later, where a hashed table of secondary supers replaced \
         the cache (a backport to 21u exists: check your vendor's 21.0.x notes). In code: do \
         not check one class against many interfaces in a hot path (check the concrete class, \
         or cache the result per class), and avoid alternating type checks of the same objects \
         across threads."
    )
}
