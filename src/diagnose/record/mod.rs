//! Recording: start or attach to the workload and record what it does while it runs, before
//! its threads, /proc entries and JIT code are gone. Owns:
//! - the workload: [`target`] (a started command held before `exec`, or an attached process),
//!   [`tree`] (an attached process's descendants);
//! - sampling: [`sampler`] (`perf_event_open` rings, per task or CPU-wide; the event chosen for
//!   this machine, kernel code sampled or why not), [`perf_records`] (the ring's records
//!   parsed);
//! - the kernel's other signals, read while the workload runs: [`threads`] (CPU and switches
//!   per thread), [`memory`] (huge-page use), [`contention`] (other processes' CPU time), the
//!   wall-clock recording [`wall`] (switch records, sleeping threads, who held the CPUs);
//! - hardware counters where a PMU exists: [`counters`], their encodings in [`events`];
//! - [`recording`]: the loop that runs all of the above into one
//!   [`recording::Recording`];
//! - [`work`]: a timed run of the command without the profiler, and the figure of its work.
//!
//! It names addresses through [`super::symbolize`] while the process lives (JIT code, call
//! stacks), and analyses nothing: [`super::analyse`] reads the `Recording`.

pub mod contention;
pub mod counters;
pub mod events;
pub mod memory;
pub mod perf_records;
pub mod recording;
pub mod sampler;
pub mod target;
pub mod threads;
pub mod tree;
pub mod wall;
pub mod watch;
pub mod work;
