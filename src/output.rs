//! The one writer of the files a user names (`--save`, `--prom`, `--pprof`, `--folded`,
//! `report -o`, `fleet --html`): [`check_all`] before any work, [`write`] at the end.
//!
//! What a path names decides how it is written, so that writing never harms what is there:
//!
//! - a regular file, or a new one: the bytes go to a temporary file beside it, reach the disk
//!   (`fsync`), and are renamed over it, so a reader (node_exporter's textfile collector, a
//!   second cpudoctor) sees the old file or the new one, never half of one. An existing file
//!   keeps its mode (and its owner, when root writes it). A symlink is followed: its target is
//!   replaced and the link stays a link. A file in a directory where this user may not create
//!   files is written in place instead (not atomic: nothing else can be done there).
//! - a FIFO or a character device (`/dev/null`, a terminal): opened and written as it is.
//!   Renaming over it would put a regular file where the device node or pipe was.
//! - `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`: that open descriptor,
//!   written at its own offset (the shell's `>>` or process substitution keep working).
//!
//! Refused before any work: a directory, a block device (a disk), a socket, a missing
//! directory, one this user may not write in, a name longer than the filesystem allows, two
//! outputs naming one file, an output that is also an input.
//!
//! Temporary files are registered while they exist, so that whoever handles a fatal signal
//! removes them ([`remove_temporaries`]); every error path removes its own.

use crate::error::InputError;
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which of descriptors 0, 1 and 2 were closed at start (bit N for descriptor N).
static CLOSED_AT_START: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Notes which standard descriptors are closed now; the binary calls it before Rust's
/// runtime, which opens /dev/null on a closed one (so a write to it would vanish). Only
/// `fcntl`, so it may run that early.
pub fn note_closed_standard_fds() {
    let mut closed = 0u8;
    for fd in 0..3 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(closed, std::sync::atomic::Ordering::Relaxed);
}

/// Whether standard descriptor `fd` was closed when cpudoctor started.
fn closed_at_start(fd: RawFd) -> bool {
    (0..3).contains(&fd)
        && CLOSED_AT_START.load(std::sync::atomic::Ordering::Relaxed) & (1 << fd) != 0
}

/// The name that means stdout.
pub const STDOUT: &str = "-";

/// Symlinks followed before a path counts as a loop (Linux's own limit, `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Where the bytes for one named output go, as found on disk when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// An open descriptor of this process: 1 for `-` and `/dev/stdout`, N for `/dev/fd/N`.
    Descriptor(RawFd),
    /// A FIFO or character device (symlinks resolved), opened and written as it is.
    Direct(PathBuf),
    /// A regular file, existing or new (symlinks resolved): a temporary file renamed over it.
    Replace(PathBuf),
    /// An existing regular file in a directory that takes no new files: written in place.
    InPlace(PathBuf),
}

impl Destination {
    /// True when the bytes go to stdout.
    pub fn is_stdout(&self) -> bool {
        *self == Destination::Descriptor(1)
    }
}

/// The descriptor a path names without going through the filesystem, if it does.
fn descriptor_of(path: &Path) -> Option<RawFd> {
    let b = path.as_os_str().as_bytes();
    let number = |s: &[u8]| std::str::from_utf8(s).ok()?.parse::<RawFd>().ok();
    match b {
        b"-" | b"/dev/stdout" => Some(1),
        b"/dev/stderr" => Some(2),
        _ => b
            .strip_prefix(b"/dev/fd/")
            .or_else(|| b.strip_prefix(b"/proc/self/fd/"))
            .or_else(|| b.strip_prefix(b"/proc/thread-self/fd/"))
            .and_then(number),
    }
}

/// The directory a file path is in (`.` for a bare name).
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// What `path`'s symlinks lead to: a descriptor, or the path at the end of the chain, which
/// need not exist yet (a dangling link: the file is created at its target).
enum Resolved {
    Descriptor(RawFd),
    Path(PathBuf),
}

fn resolve_links(path: &Path) -> io::Result<Resolved> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_SYMLINK_HOPS {
        if let Some(fd) = descriptor_of(&p) {
            return Ok(Resolved::Descriptor(fd));
        }
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)?;
                p = if target.is_absolute() {
                    target
                } else {
                    parent_of(&p).join(target)
                };
            }
            _ => return Ok(Resolved::Path(p)),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// Why a path cannot be used, in a few words.
fn io_reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "no such file or directory".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied".into(),
        Some(libc::ELOOP) => "its symlinks form a loop".into(),
        Some(libc::ENAMETOOLONG) => "the path is longer than the system allows".into(),
        Some(libc::EROFS) => "the file system is read-only".into(),
        Some(libc::ENOTDIR) => "a part of the path is not a directory".into(),
        Some(libc::ENOSPC) => "no space left on the device".into(),
        _ => e.to_string(),
    }
}

/// Whether this user may write `path` (effective ids, as `open` would decide).
fn may_write(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a valid C string and integer flags.
    let r = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The longest file name `dir`'s filesystem takes (`NAME_MAX`, 255 on Linux filesystems).
fn name_max(dir: &Path) -> usize {
    const DEFAULT: usize = 255;
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return DEFAULT;
    };
    // SAFETY: a valid C string.
    let n = unsafe { libc::pathconf(c.as_ptr(), libc::_PC_NAME_MAX) };
    if n > 0 { n as usize } else { DEFAULT }
}

/// Where the bytes for `path` would go now, or why they cannot go there: no side effect but a
/// test file created and removed in the directory of a new file.
pub fn destination(path: &Path) -> Result<Destination, InputError> {
    let shown = path.display().to_string();
    let refuse = |reason: String| InputError::OutputNotWritable {
        path: shown.clone(),
        reason,
    };
    if path.as_os_str().is_empty() {
        return Err(refuse("the path is empty".into()));
    }
    let real = match resolve_links(path).map_err(|e| refuse(io_reason(&e)))? {
        Resolved::Descriptor(fd) => return open_descriptor(fd).map_err(refuse),
        Resolved::Path(p) => p,
    };
    let name = real.file_name().map_or(0, |n| n.len());
    let max = name_max(parent_of(&real));
    if name > max {
        return Err(refuse(format!(
            "its name is {name} bytes long, more than the {max} this file system allows"
        )));
    }
    match fs::metadata(&real) {
        Ok(m) => {
            let t = m.file_type();
            if t.is_dir() {
                return Err(refuse("it is a directory".into()));
            }
            if t.is_block_device() {
                return Err(refuse(
                    "it is a block device (a disk); cpudoctor writes files, FIFOs and \
                     character devices"
                        .into(),
                ));
            }
            if t.is_socket() {
                return Err(refuse("it is a socket".into()));
            }
            may_write(&real).map_err(|e| refuse(io_reason(&e)))?;
            if t.is_fifo() || t.is_char_device() {
                return Ok(Destination::Direct(real));
            }
            match try_new_file(parent_of(&real)) {
                Ok(()) => Ok(Destination::Replace(real)),
                Err(_) => Ok(Destination::InPlace(real)),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir = parent_of(&real);
            if !dir.is_dir() {
                return Err(InputError::OutputDirMissing {
                    path: shown,
                    dir: dir.display().to_string(),
                });
            }
            try_new_file(dir).map_err(|e| {
                refuse(match e.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => {
                        format!("no permission to write in {}", dir.display())
                    }
                    _ => format!("{} refuses new files ({})", dir.display(), io_reason(&e)),
                })
            })?;
            Ok(Destination::Replace(real))
        }
        Err(e) => Err(refuse(io_reason(&e))),
    }
}

/// Descriptor `fd`, when this process has it open for writing.
fn open_descriptor(fd: RawFd) -> Result<Destination, String> {
    if closed_at_start(fd) {
        return Err(format!(
            "{} was closed when cpudoctor started (`>&-`): what is written there is lost",
            match fd {
                1 => "stdout".to_string(),
                2 => "stderr".to_string(),
                _ => format!("descriptor {fd}"),
            }
        ));
    }
    // SAFETY: F_GETFL only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(format!("descriptor {fd} is not open in this process"));
    }
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY | libc::O_RDWR => Ok(Destination::Descriptor(fd)),
        _ => Err(format!("descriptor {fd} is not open for writing")),
    }
}

/// Creates and removes a test file in `dir`: whether it takes new files from this user.
fn try_new_file(dir: &Path) -> io::Result<()> {
    Temporary::create(dir, OsStr::new("cpudoctor-write-test"), 0o600).map(drop)
}

/// How two outputs, or an output and an input, are told to be the same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    Descriptor(RawFd),
    Inode(u64, u64),
    NewFile(PathBuf),
}

fn identity(dest: &Destination) -> Identity {
    match dest {
        Destination::Descriptor(fd) => Identity::Descriptor(*fd),
        Destination::Direct(p) | Destination::Replace(p) | Destination::InPlace(p) => {
            match fs::metadata(p) {
                Ok(m) => Identity::Inode(m.dev(), m.ino()),
                Err(_) => Identity::NewFile(
                    fs::canonicalize(parent_of(p))
                        .unwrap_or_else(|_| parent_of(p).to_path_buf())
                        .join(p.file_name().unwrap_or_default()),
                ),
            }
        }
    }
}

/// Checks every output of one command before any work: each can be written, no two name the
/// same file (character devices such as `/dev/null` excepted), none is one of `inputs`.
/// `outputs` pairs each path with the option that named it (`--save`); `stdout_taken` names
/// what already prints on stdout (`--json`), so that `-` cannot mix with it.
pub fn check_all(
    outputs: &[(&'static str, &Path)],
    inputs: &[&Path],
    stdout_taken: Option<&'static str>,
) -> Result<Vec<Destination>, InputError> {
    let mut seen: Vec<(&'static str, &Path, Identity)> = Vec::new();
    let mut dests = Vec::new();
    for &(what, path) in outputs {
        let dest = destination(path)?;
        if dest.is_stdout()
            && let Some(by) = stdout_taken
        {
            return Err(InputError::StdoutTaken { what, by });
        }
        let id = identity(&dest);
        // Two outputs may share a character device (`/dev/null`): it keeps nothing.
        let device = matches!(&dest, Destination::Direct(p)
            if fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device()));
        if !device && let Some((first, _, _)) = seen.iter().find(|(_, _, i)| *i == id) {
            return Err(InputError::SameOutput {
                first,
                second: what,
                path: path.display().to_string(),
            });
        }
        for input in inputs {
            if input.as_os_str() == STDOUT {
                continue; // stdin
            }
            let same = match (&id, fs::metadata(input)) {
                (Identity::Inode(d, i), Ok(m)) => m.dev() == *d && m.ino() == *i,
                _ => false,
            };
            if same {
                return Err(InputError::OutputIsInput {
                    what,
                    path: path.display().to_string(),
                });
            }
        }
        seen.push((what, path, id));
        dests.push(dest);
    }
    Ok(dests)
}

/// Temporary files that exist now, for [`remove_temporaries`].
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Makes temporary names unique within this process.
static SERIAL: AtomicU64 = AtomicU64::new(0);

fn registry() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every temporary file a write has open now: for the handler of a fatal signal,
/// which then ends the process before the write could finish.
pub fn remove_temporaries() {
    for p in registry().drain(..) {
        let _ = fs::remove_file(p);
    }
}

/// A temporary file beside an output: registered from before it exists until it is renamed
/// or removed, and removed when dropped uncommitted.
struct Temporary {
    path: PathBuf,
    file: Option<File>,
    /// Whether the file was created (a name already taken is not ours to remove).
    created: bool,
}

impl Temporary {
    /// `.NAME.tmp-PID-N` in `dir`, with NAME shortened to fit the file system's limit, created
    /// with `mode` (less the umask).
    fn create(dir: &Path, name: &OsStr, mode: u32) -> io::Result<Temporary> {
        let suffix = format!(
            ".tmp-{}-{}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        let room = name_max(dir).saturating_sub(1 + suffix.len());
        let mut bytes = vec![b'.'];
        bytes.extend(name.as_bytes().iter().take(room));
        bytes.extend(suffix.as_bytes());
        let path = dir.join(OsString::from_vec(bytes));
        registry().push(path.clone());
        let mut t = Temporary {
            path,
            file: None,
            created: false,
        };
        t.file = Some(
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&t.path)?,
        );
        t.created = true;
        Ok(t)
    }

    /// Renames it over `to`: from now on it is the output, not a temporary file.
    fn commit(mut self, to: &Path) -> io::Result<()> {
        drop(self.file.take());
        fs::rename(&self.path, to)?;
        registry().retain(|p| *p != self.path);
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return;
        }
        drop(self.file.take());
        if self.created {
            let _ = fs::remove_file(&self.path);
        }
        registry().retain(|p| *p != self.path);
    }
}

/// Writes `bytes` where `path` leads (see the module overview), whole or not at all for a
/// regular file. A path that can no longer be written is the [`InputError`] [`check_all`]
/// would have given; a failure while writing is the I/O error with the path named.
pub fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dest = destination(path)?;
    write_to(&dest, bytes)
        .map_err(|e| anyhow::Error::new(e).context(format!("cannot write {}", path.display())))
}

/// [`write`] for a file another user's program reads (the Prometheus text for
/// node_exporter's textfile collector, which runs as its own user): a new file is made
/// `0644` whatever the umask (under `umask 077` it was `0600`, which the collector cannot
/// read). An existing file keeps its mode, as with [`write`].
pub fn write_shared(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dest = destination(path)?;
    let written = match &dest {
        Destination::Replace(p) => replace(p, bytes, Some(SHARED_MODE)),
        other => write_to(other, bytes),
    };
    written.map_err(|e| {
        let e = io::Error::new(e.kind(), io_reason(&e));
        anyhow::Error::new(e).context(format!("cannot write {}", path.display()))
    })
}

/// The mode of a new file [`write_shared`] makes: read by all, written by its owner.
pub const SHARED_MODE: u32 = 0o644;

/// Writes `bytes` to a destination found by [`destination`].
pub fn write_to(dest: &Destination, bytes: &[u8]) -> io::Result<()> {
    let reason = |e: io::Error| io::Error::new(e.kind(), io_reason(&e));
    match dest {
        Destination::Descriptor(1) => {
            let mut out = io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()
        }
        Destination::Descriptor(fd) => {
            // SAFETY: checked open by `open_descriptor`; borrowed, never closed here.
            let fd = unsafe { BorrowedFd::borrow_raw(*fd) };
            let mut f = File::from(fd.try_clone_to_owned()?);
            f.write_all(bytes)
        }
        Destination::Direct(p) => {
            let mut f = OpenOptions::new().write(true).open(p).map_err(reason)?;
            f.write_all(bytes).map_err(reason)
        }
        Destination::InPlace(p) => {
            let mut f = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(p)
                .map_err(reason)?;
            f.write_all(bytes).map_err(reason)?;
            f.sync_all().map_err(reason)
        }
        Destination::Replace(p) => replace(p, bytes, None).map_err(reason),
    }
}

/// A regular file through a temporary file and a rename, keeping the old file's mode; a new
/// one gets `new_mode` exactly when given (else 0666 less the umask).
fn replace(real: &Path, bytes: &[u8], new_mode: Option<u32>) -> io::Result<()> {
    let dir = parent_of(real);
    let old = fs::metadata(real).ok();
    let name = real.file_name().unwrap_or(OsStr::new("output"));
    // A new file gets 0666 less the umask, as any file the shell creates. An existing one's
    // mode is the temporary file's from the start, so a 0600 file's new content is never
    // readable by others, not even before the rename; it is set exactly once written.
    let mode = old.as_ref().map_or(0o666, |m| m.mode() & 0o777);
    let mut tmp = Temporary::create(dir, name, mode)?;
    let file = tmp.file.as_mut().expect("just created");
    file.write_all(bytes)?;
    if let Some(m) = &old {
        // Root writing another user's file gives it back to them (before the mode: chown
        // clears set-id bits).
        if nix::unistd::geteuid().is_root() {
            let _ = std::os::unix::fs::fchown(&*file, Some(m.uid()), Some(m.gid()));
        }
        file.set_permissions(fs::Permissions::from_mode(m.mode() & 0o7777))?;
    } else if let Some(m) = new_mode {
        file.set_permissions(fs::Permissions::from_mode(m))?;
    }
    file.sync_all()?;
    tmp.commit(real)?;
    // The rename reaches the disk with the directory.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn left_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_file_is_written_whole_and_nothing_else_is_left() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.json");
        write(&p, b"hello").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"hello");
        assert_eq!(left_in(d.path()), ["out.json"]);
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("real.json");
        fs::write(&target, b"old").unwrap();
        let link = d.path().join("link.json");
        symlink("real.json", &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // A dangling link: the file is created at its target.
        let dangling = d.path().join("dangling.json");
        symlink("made.json", &dangling).unwrap();
        write(&dangling, b"made").unwrap();
        assert_eq!(fs::read(d.path().join("made.json")).unwrap(), b"made");
        // A loop is refused with its name.
        let a = d.path().join("a");
        let b = d.path().join("b");
        symlink(&b, &a).unwrap();
        symlink(&a, &b).unwrap();
        let e = destination(&a).unwrap_err().to_string();
        assert!(e.contains("loop"), "{e}");
    }

    #[test]
    fn an_existing_file_keeps_its_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("secret.json");
        fs::write(&p, b"old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write(&p, b"new").unwrap();
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        assert_eq!(fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn a_fifo_and_a_character_device_are_written_as_they_are() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(
            destination(Path::new("/dev/null")).unwrap(),
            Destination::Direct("/dev/null".into())
        );
        write(Path::new("/dev/null"), b"gone").unwrap();
        // /dev/full is a device that is always full: an error, and still a device after.
        let e = write(Path::new("/dev/full"), b"x").unwrap_err();
        assert!(format!("{e:#}").contains("no space"), "{e:#}");
        assert!(
            fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }

    #[test]
    fn descriptors_are_written_without_reopening() {
        assert_eq!(
            destination(Path::new("-")).unwrap(),
            Destination::Descriptor(1)
        );
        assert!(destination(Path::new("/dev/stdout")).unwrap().is_stdout());
        let e = destination(Path::new("/dev/fd/987"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not open"), "{e}");
    }

    #[test]
    fn what_cannot_be_written_is_refused_before_any_work() {
        let d = tempfile::tempdir().unwrap();
        let long = d.path().join(format!("{}.json", "x".repeat(300)));
        let e = destination(&long).unwrap_err().to_string();
        assert!(e.contains("305 bytes"), "{e}");
        let e = destination(d.path()).unwrap_err().to_string();
        assert!(e.contains("directory"), "{e}");
        let e = destination(&d.path().join("no/such/x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert!(left_in(d.path()).is_empty(), "{:?}", left_in(d.path()));
    }

    #[test]
    fn a_name_close_to_the_limit_still_gets_a_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("y".repeat(name_max(d.path())));
        write(&p, b"ok").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"ok");
        assert_eq!(left_in(d.path()).len(), 1);
    }

    #[test]
    fn two_outputs_naming_one_file_and_an_output_that_is_an_input_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.json");
        let link = d.path().join("link.json");
        symlink(&a, &link).unwrap();
        let e = check_all(&[("--save", &a), ("--pprof", &a)], &[], None).unwrap_err();
        assert!(matches!(e, InputError::SameOutput { .. }), "{e}");
        fs::write(&a, b"{}").unwrap();
        let e = check_all(&[("--save", &a), ("--pprof", &link)], &[], None).unwrap_err();
        assert!(matches!(e, InputError::SameOutput { .. }), "{e}");
        let e = check_all(&[("-o", &link)], &[&a], None).unwrap_err();
        assert!(matches!(e, InputError::OutputIsInput { .. }), "{e}");
        let e = check_all(&[("--save", Path::new("-"))], &[], Some("--json")).unwrap_err();
        assert!(matches!(e, InputError::StdoutTaken { .. }), "{e}");
        // /dev/null twice is fine: nothing is kept there.
        let null = Path::new("/dev/null");
        check_all(&[("--save", null), ("--pprof", null)], &[], None).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let t = Temporary::create(d.path(), OsStr::new("x.json"), 0o600).unwrap();
        assert_eq!(left_in(d.path()).len(), 1);
        drop(t);
        assert!(left_in(d.path()).is_empty());
        // A write that fails (the device is full) leaves nothing either.
        let full = d.path().join("full.json");
        symlink("/dev/full", &full).unwrap();
        assert!(write(&full, b"x").is_err());
        assert_eq!(left_in(d.path()), ["full.json"]);
    }
}
