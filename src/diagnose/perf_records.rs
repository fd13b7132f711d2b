//! The records of a perf ring buffer, parsed: pure byte parsing, apart from the unsafe ring
//! code in [`super::sampler`] that reads them out of shared memory. The layout follows the
//! attributes the sampler opens with (`sample_type = IP | TID | TIME [| CALLCHAIN]`,
//! `sample_id_all`), as `perf_event_open(2)` documents each `PERF_RECORD_*` type.

use perf_event_open_sys::bindings::{
    PERF_CONTEXT_MAX, PERF_RECORD_COMM, PERF_RECORD_EXIT, PERF_RECORD_FORK, PERF_RECORD_LOST,
    PERF_RECORD_MISC_COMM_EXEC, PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE,
};

/// One record from the ring, reduced to what diagnose uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A sample: where thread `tid` of process `pid` was at `time_ns`.
    Sample {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// `perf_clock` time in ns.
        time_ns: u64,
        /// Instruction pointer.
        ip: u64,
        /// Return addresses of the user call chain, innermost caller first (the leaf `ip`
        /// is not repeated); empty when call chains are not sampled or the walk found none.
        callers: Vec<u64>,
    },
    /// An executable mapping appeared.
    Mmap {
        /// Process.
        pid: u32,
        /// First address.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// File offset mapped at `start`.
        pgoff: u64,
        /// Backing file, or a pseudo-name (`//anon`, `[vdso]`).
        filename: String,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread got a name; `exec` when it came from an `execve`.
    Comm {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// Name.
        comm: String,
        /// True when the name comes from an exec (the address space was replaced).
        exec: bool,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread or process was created.
    Fork {
        /// New process.
        pid: u32,
        /// Parent process.
        ppid: u32,
        /// New thread.
        tid: u32,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread exited.
    Exit {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// Time in ns.
        time_ns: u64,
    },
    /// The kernel dropped records because the ring was full.
    Lost {
        /// How many.
        count: u64,
    },
}

impl Record {
    /// Time of the record, for merging rings in order (`Lost` sorts first).
    pub fn time_ns(&self) -> u64 {
        match self {
            Record::Sample { time_ns, .. }
            | Record::Mmap { time_ns, .. }
            | Record::Comm { time_ns, .. }
            | Record::Fork { time_ns, .. }
            | Record::Exit { time_ns, .. } => *time_ns,
            Record::Lost { .. } => 0,
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (v, rest) = self.b.split_first_chunk::<4>()?;
        self.b = rest;
        Some(u32::from_ne_bytes(*v))
    }
    fn u64(&mut self) -> Option<u64> {
        let (v, rest) = self.b.split_first_chunk::<8>()?;
        self.b = rest;
        Some(u64::from_ne_bytes(*v))
    }
    fn skip(&mut self, n: usize) -> Option<()> {
        self.b = self.b.get(n..)?;
        Some(())
    }
    /// A NUL-terminated string padded to 8 bytes, followed by the `sample_id` trailer
    /// (`pid, tid, time`) that `sample_id_all` appends: the trailer is read from the end.
    fn string_then_trailer(&mut self) -> Option<(String, u64)> {
        let trailer_at = self.b.len().checked_sub(16)?;
        let text = &self.b[..trailer_at];
        let end = text.iter().position(|&c| c == 0).unwrap_or(text.len());
        let s = String::from_utf8_lossy(&text[..end]).into_owned();
        self.b = &self.b[trailer_at..];
        let _pid_tid = self.u64()?;
        Some((s, self.u64()?))
    }
}

/// Most call-chain entries read from one sample: the kernel's own default limit
/// (`kernel.perf_event_max_stack`), which the sampler also asks for.
pub const MAX_STACK_FRAMES: usize = 127;

/// Parses one record body (after the 8-byte header) written with this module's attributes:
/// `sample_type = IP | TID | TIME`, plus `CALLCHAIN` when `callchain` is set, and
/// `sample_id_all`. Unknown types give `None`.
pub fn parse_record(kind: u32, misc: u16, body: &[u8], callchain: bool) -> Option<Record> {
    let mut c = Cursor { b: body };
    match kind {
        PERF_RECORD_SAMPLE => {
            let ip = c.u64()?;
            let pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            let mut callers = Vec::new();
            if callchain {
                let nr = c.u64()? as usize;
                // Entries at or above PERF_CONTEXT_MAX mark where kernel, user or guest
                // frames begin: markers, not addresses. The user chain starts with the
                // sampled ip itself, which is the leaf, not a caller.
                let mut first = true;
                for _ in 0..nr {
                    let a = c.u64()?;
                    if a >= PERF_CONTEXT_MAX {
                        continue;
                    }
                    let leaf = first && a == ip;
                    first = false;
                    if !leaf && callers.len() < MAX_STACK_FRAMES {
                        callers.push(a);
                    }
                }
            }
            Some(Record::Sample {
                pid,
                tid,
                time_ns,
                ip,
                callers,
            })
        }
        PERF_RECORD_MMAP2 => {
            let pid = c.u32()?;
            let _tid = c.u32()?;
            let start = c.u64()?;
            let len = c.u64()?;
            let pgoff = c.u64()?;
            // Either maj, min, ino, ino_generation or (PERF_RECORD_MISC_MMAP_BUILD_ID) a build
            // id: 24 bytes both ways.
            c.skip(24)?;
            let _prot = c.u32()?;
            let _flags = c.u32()?;
            let (filename, time_ns) = c.string_then_trailer()?;
            Some(Record::Mmap {
                pid,
                start,
                len,
                pgoff,
                filename,
                time_ns,
            })
        }
        PERF_RECORD_COMM => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let (comm, time_ns) = c.string_then_trailer()?;
            Some(Record::Comm {
                pid,
                tid,
                comm,
                exec: misc as u32 & PERF_RECORD_MISC_COMM_EXEC != 0,
                time_ns,
            })
        }
        PERF_RECORD_FORK | PERF_RECORD_EXIT => {
            let pid = c.u32()?;
            let ppid = c.u32()?;
            let tid = c.u32()?;
            let _ptid = c.u32()?;
            let time_ns = c.u64()?;
            Some(if kind == PERF_RECORD_FORK {
                Record::Fork {
                    pid,
                    ppid,
                    tid,
                    time_ns,
                }
            } else {
                Record::Exit { pid, tid, time_ns }
            })
        }
        PERF_RECORD_LOST => {
            let _id = c.u64()?;
            Some(Record::Lost { count: c.u64()? })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_event_open_sys::bindings::PERF_CONTEXT_USER;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    fn pid_tid(pid: u32, tid: u32) -> u64 {
        u64::from(pid) | (u64::from(tid) << 32)
    }

    #[test]
    fn sample_record_gives_ip_thread_and_time() {
        let body = bytes(&[0x401136, pid_tid(100, 101), 5_000]);
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, 0, &body, false),
            Some(Record::Sample {
                pid: 100,
                tid: 101,
                time_ns: 5_000,
                ip: 0x401136,
                callers: vec![],
            })
        );
    }

    #[test]
    fn a_sampled_call_chain_drops_the_context_marker_and_the_repeated_leaf() {
        // PERF_CONTEXT_USER, the leaf ip again, then two return addresses.
        let user = PERF_CONTEXT_USER;
        let body = bytes(&[
            0x401136,
            pid_tid(1, 2),
            9,
            4,
            user,
            0x401136,
            0x401200,
            0x401300,
        ]);
        let Some(Record::Sample { ip, callers, .. }) =
            parse_record(PERF_RECORD_SAMPLE, 0, &body, true)
        else {
            panic!("not a sample");
        };
        assert_eq!(ip, 0x401136);
        assert_eq!(callers, vec![0x401200, 0x401300]);
        // A chain cut short by the record's end is rejected, not misread.
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, 0, &body[..body.len() - 8], true),
            None
        );
    }

    #[test]
    fn mmap2_record_gives_the_file_and_reads_the_trailer_time() {
        let mut body = bytes(&[pid_tid(7, 7), 0x5555_0000, 0x2000, 0x1000, 0, 0, 0]);
        body.extend(5u32.to_ne_bytes()); // prot
        body.extend(2u32.to_ne_bytes()); // flags
        body.extend(b"/usr/bin/true\0\0\0"); // padded to 8
        body.extend(bytes(&[pid_tid(7, 7), 42]));
        assert_eq!(
            parse_record(PERF_RECORD_MMAP2, 0, &body, false),
            Some(Record::Mmap {
                pid: 7,
                start: 0x5555_0000,
                len: 0x2000,
                pgoff: 0x1000,
                filename: "/usr/bin/true".into(),
                time_ns: 42
            })
        );
    }

    #[test]
    fn comm_exec_flag_is_kept() {
        let mut body = bytes(&[pid_tid(9, 9)]);
        body.extend(b"spin\0\0\0\0");
        body.extend(bytes(&[pid_tid(9, 9), 77]));
        let r = parse_record(
            PERF_RECORD_COMM,
            PERF_RECORD_MISC_COMM_EXEC as u16,
            &body,
            true,
        );
        assert_eq!(
            r,
            Some(Record::Comm {
                pid: 9,
                tid: 9,
                comm: "spin".into(),
                exec: true,
                time_ns: 77
            })
        );
    }

    #[test]
    fn truncated_records_are_rejected_not_misread() {
        assert_eq!(parse_record(PERF_RECORD_SAMPLE, 0, &[0u8; 12], false), None);
        assert_eq!(parse_record(PERF_RECORD_COMM, 0, &[0u8; 8], false), None);
        assert_eq!(parse_record(999, 0, &[0u8; 64], false), None);
    }
}
