//! The records of a perf ring buffer, parsed: pure byte parsing, apart from the unsafe ring
//! code in [`super::sampler`] that reads them out of shared memory. The layout follows the
//! attributes the sampler opens with (`sample_type = IP | TID | TIME [| CALLCHAIN]
//! [| REGS_USER | STACK_USER]`, `sample_id_all`), as `perf_event_open(2)` documents each
//! `PERF_RECORD_*` type. A CPU-wide event writes every process's records; [`process_and_time`]
//! reads a sample's or switch's process without the rest, so those of other processes are
//! skipped where they lie, stack copy and all.

use perf_event_open_sys::bindings::{
    PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER, PERF_RECORD_COMM, PERF_RECORD_EXIT,
    PERF_RECORD_FORK, PERF_RECORD_LOST, PERF_RECORD_MISC_COMM_EXEC, PERF_RECORD_MISC_CPUMODE_MASK,
    PERF_RECORD_MISC_KERNEL, PERF_RECORD_MISC_SWITCH_OUT, PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
    PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE, PERF_RECORD_SWITCH, PERF_RECORD_SWITCH_CPU_WIDE,
};

use crate::diagnose::symbolize::unwind::{UserRegs, UserStack};

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
        /// Instruction pointer (a kernel address when `in_kernel`).
        ip: u64,
        /// True when the sample landed in kernel code (the header's cpumode says so).
        in_kernel: bool,
        /// Return addresses of the kernel call chain, innermost caller first (the leaf `ip`
        /// is not repeated); empty for a sample in user space, or without call chains.
        kernel_callers: Vec<u64>,
        /// Return addresses of the user call chain, innermost caller first (the leaf `ip`
        /// is not repeated); empty when call chains are not sampled or the walk found none.
        /// For a sample in the kernel it begins with the user address the thread entered the
        /// kernel from (where it resumes).
        callers: Vec<u64>,
        /// The user registers and a copy of the top of the user stack, when sampled: what
        /// [`crate::diagnose::symbolize::unwind`] walks with the binaries' CFI.
        user: Option<UserStack>,
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
    /// The thread went off or onto a CPU (`PERF_RECORD_SWITCH` of a per-task event, or
    /// `PERF_RECORD_SWITCH_CPU_WIDE` of a CPU-wide one, with `context_switch`).
    Switch {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// Time in ns.
        time_ns: u64,
        /// Which way, and why it left.
        switch: Switch,
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
            | Record::Exit { time_ns, .. }
            | Record::Switch { time_ns, .. } => *time_ns,
            Record::Lost { .. } => 0,
        }
    }
}

/// One context switch of a followed thread, as the kernel's switch record says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// It was put on a CPU.
    In,
    /// It left the CPU while still runnable: preempted (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`,
    /// Linux 4.17 and later).
    OutPreempted,
    /// It left the CPU to sleep: blocked on a lock, I/O, a timer (or preempted, on a kernel
    /// before 4.17 that does not say).
    OutBlocked,
}

/// `perf_event_x86_regs` bit numbers of the registers in [`UserRegs`]; the kernel writes the
/// sampled registers in increasing bit order (BP, SP, IP).
const X86_REG_BP: u32 = 6;
const X86_REG_SP: u32 = 7;
const X86_REG_IP: u32 = 8;

/// `sample_regs_user` for [`UserRegs`].
pub const USER_REGS_MASK: u64 = (1 << X86_REG_BP) | (1 << X86_REG_SP) | (1 << X86_REG_IP);

/// What a sample record holds beyond IP, TID and TIME: the sampler's attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLayout {
    /// `PERF_SAMPLE_CALLCHAIN`.
    pub callchain: bool,
    /// `PERF_SAMPLE_REGS_USER` with [`USER_REGS_MASK`] and `PERF_SAMPLE_STACK_USER`.
    pub user_stack: bool,
    /// Kernel code sampled too (`exclude_kernel` clear), with its call chain when call chains
    /// are sampled: needs `perf_event_paranoid` <= 1 or `CAP_PERFMON`.
    pub kernel: bool,
}

impl SampleLayout {
    /// The sampled address only.
    pub const LEAF: SampleLayout = SampleLayout {
        callchain: false,
        user_stack: false,
        kernel: false,
    };
    /// The kernel's frame-pointer call chain.
    pub const CHAIN: SampleLayout = SampleLayout {
        callchain: true,
        user_stack: false,
        kernel: false,
    };
    /// The kernel's call chain, and registers and stack for unwinding with CFI.
    pub const CHAIN_AND_STACK: SampleLayout = SampleLayout {
        callchain: true,
        user_stack: true,
        kernel: false,
    };

    /// This layout with kernel code sampled or not.
    pub const fn with_kernel(self, kernel: bool) -> SampleLayout {
        SampleLayout { kernel, ..self }
    }
}

/// Which part of a call chain the entries belong to.
#[derive(Clone, Copy)]
enum Context {
    Kernel,
    User,
    /// A guest's or hypervisor's frames: not this process's.
    Other,
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
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (v, rest) = (self.b.get(..n)?, self.b.get(n..)?);
        self.b = rest;
        Some(v)
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
/// `sample_type = IP | TID | TIME`, plus what `layout` adds, and `sample_id_all`. Unknown
/// types give `None`.
pub fn parse_record(kind: u32, misc: u16, body: &[u8], layout: SampleLayout) -> Option<Record> {
    let mut c = Cursor { b: body };
    match kind {
        PERF_RECORD_SAMPLE => {
            let ip = c.u64()?;
            let pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            let in_kernel =
                u32::from(misc) & PERF_RECORD_MISC_CPUMODE_MASK == PERF_RECORD_MISC_KERNEL;
            let mut callers = Vec::new();
            let mut kernel_callers = Vec::new();
            if layout.callchain {
                let nr = c.u64()? as usize;
                // Entries at or above PERF_CONTEXT_MAX mark where kernel, user or guest
                // frames begin: markers, not addresses. Each part starts with the address
                // the thread was at in it: the kernel part with the sampled ip itself, the
                // leaf, not a caller; the user part too for a sample in user space.
                let mut context = if in_kernel {
                    Context::Kernel
                } else {
                    Context::User
                };
                let mut first = true;
                for _ in 0..nr {
                    let a = c.u64()?;
                    if a >= PERF_CONTEXT_MAX {
                        context = match a {
                            PERF_CONTEXT_KERNEL => Context::Kernel,
                            PERF_CONTEXT_USER => Context::User,
                            _ => Context::Other,
                        };
                        first = true;
                        continue;
                    }
                    let leaf = first && a == ip;
                    first = false;
                    let into = match context {
                        Context::Kernel => &mut kernel_callers,
                        Context::User => &mut callers,
                        Context::Other => continue,
                    };
                    if !leaf && into.len() < MAX_STACK_FRAMES {
                        into.push(a);
                    }
                }
            }
            let user = if layout.user_stack {
                parse_user_stack(&mut c)?
            } else {
                None
            };
            Some(Record::Sample {
                pid,
                tid,
                time_ns,
                ip,
                in_kernel,
                kernel_callers,
                callers,
                user,
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
        PERF_RECORD_SWITCH | PERF_RECORD_SWITCH_CPU_WIDE => {
            // A CPU-wide event's record first names the task on the other side of the switch
            // (the next one at a switch-out, the previous one at a switch-in): not needed.
            if kind == PERF_RECORD_SWITCH_CPU_WIDE {
                let _next_prev_pid_tid = c.u64()?;
            }
            // Then the `sample_id` trailer: pid, tid, time of the task switching in or out
            // (the one running when the kernel writes it), as in the per-task record.
            let pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            let misc = u32::from(misc);
            let switch = if misc & PERF_RECORD_MISC_SWITCH_OUT == 0 {
                Switch::In
            } else if misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0 {
                Switch::OutPreempted
            } else {
                Switch::OutBlocked
            };
            Some(Record::Switch {
                pid,
                tid,
                time_ns,
                switch,
            })
        }
        PERF_RECORD_LOST => {
            let _id = c.u64()?;
            Some(Record::Lost { count: c.u64()? })
        }
        _ => None,
    }
}

/// The process and time of a sample or a CPU-wide switch record, read from the first 24 bytes
/// of its body (`ip, pid, tid, time` and `next_prev_pid, next_prev_tid, pid, tid, time`);
/// `None` for other types, which are read in full.
pub fn process_and_time(kind: u32, body_start: &[u8]) -> Option<(u32, u64)> {
    let mut c = Cursor { b: body_start };
    match kind {
        PERF_RECORD_SAMPLE | PERF_RECORD_SWITCH_CPU_WIDE => {
            c.skip(8)?;
            let pid = c.u32()?;
            let _tid = c.u32()?;
            Some((pid, c.u64()?))
        }
        _ => None,
    }
}

/// Bytes of a record body that [`process_and_time`] reads.
pub const PROCESS_AND_TIME_BYTES: usize = 24;

/// The new process of a fork record (`pid` first in its body); `None` for other types.
pub fn forked_process(kind: u32, body_start: &[u8]) -> Option<u32> {
    if kind != PERF_RECORD_FORK {
        return None;
    }
    Cursor { b: body_start }.u32()
}

/// `REGS_USER` then `STACK_USER`: `abi` (0 when the sample hit no user context, then no
/// registers follow), the registers of [`USER_REGS_MASK`], `size`, `size` bytes and, when
/// `size` is not 0, `dyn_size` (how many of them the kernel copied). `Some(None)`: well formed,
/// nothing to unwind.
fn parse_user_stack(c: &mut Cursor) -> Option<Option<UserStack>> {
    let abi = c.u64()?;
    let regs = if abi != 0 {
        let bp = c.u64()?;
        let sp = c.u64()?;
        let ip = c.u64()?;
        Some(UserRegs { ip, sp, bp })
    } else {
        None
    };
    let size = c.u64()? as usize;
    if size == 0 {
        return Some(None);
    }
    let data = c.bytes(size)?;
    let dyn_size = (c.u64()? as usize).min(size);
    Some(regs.map(|regs| UserStack {
        regs,
        bytes: data[..dyn_size].to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            parse_record(PERF_RECORD_SAMPLE, 0, &body, SampleLayout::LEAF),
            Some(Record::Sample {
                pid: 100,
                tid: 101,
                time_ns: 5_000,
                ip: 0x401136,
                in_kernel: false,
                kernel_callers: vec![],
                callers: vec![],
                user: None,
            })
        );
    }

    #[test]
    fn a_sample_in_the_kernel_keeps_its_kernel_chain_apart_from_the_user_one() {
        // The Redis case: a thread sampled in tcp_sendmsg under a write(2). The chain is
        // PERF_CONTEXT_KERNEL, the leaf, two kernel return addresses, PERF_CONTEXT_USER, the
        // user address the system call returns to, and one user caller.
        let leaf = 0xffff_ffff_81b0_0410;
        let body = bytes(&[
            leaf,
            pid_tid(7, 8),
            9,
            7,
            PERF_CONTEXT_KERNEL,
            leaf,
            0xffff_ffff_81b0_1000,
            0xffff_ffff_8100_0100,
            PERF_CONTEXT_USER,
            0x7f00_0000_1234,
            0x5555_0000_0100,
        ]);
        let misc = PERF_RECORD_MISC_KERNEL as u16;
        let Some(Record::Sample {
            ip,
            in_kernel,
            kernel_callers,
            callers,
            ..
        }) = parse_record(PERF_RECORD_SAMPLE, misc, &body, SampleLayout::CHAIN)
        else {
            panic!("not a sample");
        };
        assert_eq!(ip, leaf);
        assert!(in_kernel);
        assert_eq!(
            kernel_callers,
            vec![0xffff_ffff_81b0_1000, 0xffff_ffff_8100_0100]
        );
        assert_eq!(callers, vec![0x7f00_0000_1234, 0x5555_0000_0100]);
        // The same chain read as a user sample (cpumode user) would keep no kernel frames.
        let Some(Record::Sample { in_kernel, .. }) =
            parse_record(PERF_RECORD_SAMPLE, 2, &body, SampleLayout::CHAIN)
        else {
            panic!("not a sample");
        };
        assert!(!in_kernel);
    }

    #[test]
    fn user_registers_and_stack_copy_are_read_and_cut_to_what_the_kernel_copied() {
        // ip, pid/tid, time, a chain of one return address, then REGS_USER (abi 2 = 64-bit;
        // BP, SP, IP in bit order) and STACK_USER (size 24, of which dyn_size 16 copied).
        let mut words = vec![0x401136, pid_tid(3, 4), 11, 2, PERF_CONTEXT_USER, 0x401136];
        words.extend([2, 0x7ffd_0100, 0x7ffd_00f0, 0x401136]);
        words.extend([24, 0x1111, 0x401200, 0xdead, 16]);
        let body = bytes(&words);
        let Some(Record::Sample { callers, user, .. }) =
            parse_record(PERF_RECORD_SAMPLE, 0, &body, SampleLayout::CHAIN_AND_STACK)
        else {
            panic!("not a sample");
        };
        assert!(callers.is_empty());
        let user = user.expect("registers and stack");
        assert_eq!(
            user.regs,
            UserRegs {
                ip: 0x401136,
                sp: 0x7ffd_00f0,
                bp: 0x7ffd_0100
            }
        );
        assert_eq!(user.bytes, bytes(&[0x1111, 0x401200]));
        // No user context (abi 0) and an empty copy: a sample, nothing to unwind.
        let body = bytes(&[0x401136, pid_tid(3, 4), 11, 0, 0, 0]);
        let Some(Record::Sample { user, .. }) =
            parse_record(PERF_RECORD_SAMPLE, 0, &body, SampleLayout::CHAIN_AND_STACK)
        else {
            panic!("not a sample");
        };
        assert_eq!(user, None);
        // A stack copy cut short is rejected.
        let body = bytes(&words[..words.len() - 2]);
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, 0, &body, SampleLayout::CHAIN_AND_STACK),
            None
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
            parse_record(PERF_RECORD_SAMPLE, 0, &body, SampleLayout::CHAIN)
        else {
            panic!("not a sample");
        };
        assert_eq!(ip, 0x401136);
        assert_eq!(callers, vec![0x401200, 0x401300]);
        // A chain cut short by the record's end is rejected, not misread.
        assert_eq!(
            parse_record(
                PERF_RECORD_SAMPLE,
                0,
                &body[..body.len() - 8],
                SampleLayout::CHAIN
            ),
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
            parse_record(PERF_RECORD_MMAP2, 0, &body, SampleLayout::LEAF),
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
            SampleLayout::CHAIN,
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
    fn switch_records_say_in_out_and_preempted_from_misc() {
        let body = bytes(&[pid_tid(5, 6), 900]);
        let at =
            |misc: u32| parse_record(PERF_RECORD_SWITCH, misc as u16, &body, SampleLayout::LEAF);
        let rec = |switch| {
            Some(Record::Switch {
                pid: 5,
                tid: 6,
                time_ns: 900,
                switch,
            })
        };
        assert_eq!(at(0), rec(Switch::In));
        assert_eq!(at(PERF_RECORD_MISC_SWITCH_OUT), rec(Switch::OutBlocked));
        assert_eq!(
            at(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT),
            rec(Switch::OutPreempted)
        );
        assert_eq!(
            parse_record(PERF_RECORD_SWITCH, 0, &body[..12], SampleLayout::LEAF),
            None
        );
    }

    #[test]
    fn a_cpu_wide_switch_record_is_the_task_switching_not_the_one_on_the_other_side() {
        // PERF_RECORD_SWITCH_CPU_WIDE: next_prev_pid/tid (the task switched to at a switch-out,
        // from at a switch-in), then the sample_id trailer of the task switching, whose
        // record it is. Here 5/6 leaves the CPU to 77/78 (preempted), then comes back.
        let body = bytes(&[pid_tid(77, 78), pid_tid(5, 6), 900]);
        let at = |misc: u32| {
            parse_record(
                PERF_RECORD_SWITCH_CPU_WIDE,
                misc as u16,
                &body,
                SampleLayout::LEAF,
            )
        };
        let rec = |switch| {
            Some(Record::Switch {
                pid: 5,
                tid: 6,
                time_ns: 900,
                switch,
            })
        };
        assert_eq!(at(0), rec(Switch::In));
        assert_eq!(at(PERF_RECORD_MISC_SWITCH_OUT), rec(Switch::OutBlocked));
        assert_eq!(
            at(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT),
            rec(Switch::OutPreempted)
        );
        // Cut short before the trailer's time: rejected.
        assert_eq!(
            parse_record(
                PERF_RECORD_SWITCH_CPU_WIDE,
                0,
                &body[..20],
                SampleLayout::LEAF
            ),
            None
        );
        // Its process and time are read without the rest, as a sample's are.
        assert_eq!(
            process_and_time(PERF_RECORD_SWITCH_CPU_WIDE, &body),
            Some((5, 900))
        );
        let sample = bytes(&[0x401136, pid_tid(100, 101), 5_000, 0xdead]);
        assert_eq!(
            process_and_time(PERF_RECORD_SAMPLE, &sample[..PROCESS_AND_TIME_BYTES]),
            Some((100, 5_000))
        );
        assert_eq!(process_and_time(PERF_RECORD_MMAP2, &sample), None);
        let fork = bytes(&[pid_tid(300, 200), pid_tid(300, 201), 7]);
        assert_eq!(forked_process(PERF_RECORD_FORK, &fork), Some(300));
        assert_eq!(forked_process(PERF_RECORD_EXIT, &fork), None);
    }

    #[test]
    fn truncated_records_are_rejected_not_misread() {
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, 0, &[0u8; 12], SampleLayout::LEAF),
            None
        );
        assert_eq!(
            parse_record(PERF_RECORD_COMM, 0, &[0u8; 8], SampleLayout::LEAF),
            None
        );
        assert_eq!(parse_record(999, 0, &[0u8; 64], SampleLayout::LEAF), None);
    }
}
