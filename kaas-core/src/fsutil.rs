//! Atomic replacement of small state files: write a temporary file, fsync, rename,
//! fsync the directory. A reader never sees a torn file; a crash leaves either old or
//! new (plus, at worst, an orphaned temporary file no reader looks at).
//!
//! Temporary names are unique per write (`.<name>.tmp-<pid>-<counter>-<nanos>`) and
//! created with O_EXCL | O_NOFOLLOW: two writers (two brokers, or a broker and
//! kaasctl) never share one temporary file, and a file or symlink planted under a
//! temporary name is refused, never written through.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Atomically replaces `path` with `contents`.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir_durable(dir)?;
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = create_temp(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Never leave our own half-written file behind (a planted one is not ours).
        if e.kind() != io::ErrorKind::AlreadyExists {
            let _ = fs::remove_file(&tmp);
        }
        return Err(e);
    }
    sync_dir(dir)
}

/// Replaces `path` with `contents` atomically for readers (a new file renamed in
/// place) but with no fsync: for files whose loss in a crash costs nothing (a
/// heartbeat), where the two fsyncs of [`atomic_write`] would cost the most.
pub fn replace_unsynced(path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = create_temp(&tmp)?;
        f.write_all(contents)?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = &written {
        if e.kind() != io::ErrorKind::AlreadyExists {
            let _ = fs::remove_file(&tmp);
        }
    }
    written
}

/// [`stage_file`] without the fsync: for a file whose bytes need not survive a
/// power cut once renamed in (a queue entry notified at once).
pub fn stage_file_unsynced(path: &Path, contents: &[u8]) -> io::Result<PathBuf> {
    stage(path, contents, false)
}

/// The first half of [`atomic_write`]: `contents` in a new temporary file beside
/// `path`, fsynced; returns its path, for a `rename` onto `path` (then a
/// [`sync_dir`]) when the caller is ready. Nothing is left behind on error.
pub fn stage_file(path: &Path, contents: &[u8]) -> io::Result<PathBuf> {
    stage(path, contents, true)
}

fn stage(path: &Path, contents: &[u8], synced: bool) -> io::Result<PathBuf> {
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = create_temp(&tmp)?;
        f.write_all(contents)?;
        if synced {
            f.sync_all()?;
        }
        Ok::<_, io::Error>(())
    })();
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            if e.kind() != io::ErrorKind::AlreadyExists {
                let _ = fs::remove_file(&tmp);
            }
            Err(e)
        }
    }
}

/// Creates a new temporary file: never an existing file, never through a symlink.
pub fn create_temp(tmp: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(tmp)
}

/// At most this many bytes of the target's name go into a temporary name, so that
/// the temporary name of any file whose own name fits (255 bytes) fits too.
const TEMP_NAME_PREFIX_BYTES: usize = 160;

/// A temporary name beside `path` that no other writer (thread, process or broker on
/// another host sharing the volume) picks at the same time. It starts with (at most
/// 160 bytes of) the target's name, so an orphan says whose it was, and always fits
/// the file-name limit.
pub fn temp_path(path: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let target = path.file_name().unwrap_or_default().as_bytes();
    let mut name = std::ffi::OsString::from(".");
    name.push(std::ffi::OsStr::from_bytes(
        &target[..target.len().min(TEMP_NAME_PREFIX_BYTES)],
    ));
    name.push(format!(
        ".tmp-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}

/// Whether an error is the volume being out of space (or quota).
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The last resort for a small file that must still be written when the volume is
/// full (a broker's lease): `contents`, padded with spaces to the file's current
/// length, written over the existing file in place and fdatasynced. It needs no new
/// blocks as long as the contents fit the file's last block, but it is not atomic: a
/// reader may see a torn file (readers of leases keep their last good reading then)
/// and a crash may leave one (its writer rewrites it at start). JSON readers accept
/// the trailing spaces.
pub fn overwrite_in_place(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = open_volume_file(OpenOptions::new().write(true), path)?;
    let len = f.metadata()?.len() as usize;
    let mut padded = contents.to_vec();
    if padded.len() < len {
        padded.resize(len, b' ');
    }
    f.write_all_at(&padded, 0)?;
    f.sync_data()
}

/// Writes `contents` to `path` only if no file of that name exists yet: the file is
/// written whole and fsynced under a temporary name, then hard-linked into place,
/// which fails when another writer (another broker) got there first. Ok(false) then,
/// and nothing of ours is left behind either way.
pub fn atomic_create(path: &Path, contents: &[u8]) -> io::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_dir_durable(dir)?;
    let tmp = temp_path(path);
    // A file planted at the temporary name is refused here and is not ours to remove.
    let mut f = create_temp(&tmp)?;
    let linked = (|| {
        f.write_all(contents)?;
        f.sync_all()?;
        fs::hard_link(&tmp, path)
    })();
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => sync_dir(dir).map(|()| true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens a file of the volume for reading: never through a symlink, never blocking on
/// a FIFO or device (O_NONBLOCK), and only if it is a regular file. A planted symlink,
/// FIFO, device or directory is an error that says which it was.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_volume_file(OpenOptions::new().read(true), path)
}

/// Opens a file of the volume with `options` (read, write, create...): never through a
/// symlink, never blocking on a FIFO (O_NONBLOCK has no effect on regular files), and
/// only if it is a regular file. Every open of a volume file goes through here.
pub fn open_volume_file(options: &mut OpenOptions, path: &Path) -> io::Result<File> {
    open_volume_file_meta(options, path).map(|(f, _)| f)
}

/// [`open_volume_file`], with the metadata the regular-file check read (one fstat
/// where callers that want the file's size or stamp would otherwise make two).
pub fn open_volume_file_meta(options: &mut OpenOptions, path: &Path) -> io::Result<(File, fs::Metadata)> {
    let f = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(explain_open_error)?;
    let meta = ensure_regular(&f)?;
    Ok((f, meta))
}

/// [`open_regular`] with the file's metadata.
pub fn open_regular_meta(path: &Path) -> io::Result<(File, fs::Metadata)> {
    open_volume_file_meta(OpenOptions::new().read(true), path)
}

/// Names the planted symlink behind an ELOOP from an O_NOFOLLOW open.
fn explain_open_error(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => io::Error::new(
            io::ErrorKind::InvalidData,
            "is a symbolic link, which is never followed",
        ),
        _ => e,
    }
}

/// Refuses an open file that is not a regular file (a FIFO, device, socket or
/// directory planted where the volume keeps a file), saying which it is.
fn ensure_regular(f: &File) -> io::Result<fs::Metadata> {
    use std::os::unix::fs::FileTypeExt;
    let meta = f.metadata()?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(meta);
    }
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("is {what}, not a regular file"),
    ))
}

/// The largest state file (JSON, snapshot, slot checkpoint or journal) read off the
/// volume. A file past it is refused with its size rather than read into memory.
pub const MAX_STATE_FILE_BYTES: u64 = 256 << 20;

/// Reads a whole state file through [`open_regular`], refusing one larger than `cap`
/// (also one that grows past it while read).
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    read_capped_from(&open_regular(path)?, cap)
}

/// [`read_capped`] of an already open file.
pub fn read_capped_from(file: &File, cap: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let len = file.metadata()?.len();
    let too_big = |len: u64| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("is {len} bytes, more than the {cap} bytes a state file may have"),
        )
    };
    if len > cap {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Opens (creating if needed) a lock file and takes an exclusive advisory lock on it;
/// the lock is released when the returned file is dropped. Every writer of a shared
/// state file (broker or kaasctl) goes through here.
pub fn lock_exclusive(path: &Path) -> io::Result<File> {
    let f = open_lock_file(path)?;
    f.lock()?;
    Ok(f)
}

/// [`lock_exclusive`], waiting at most `wait` (pauses growing from 1 ms to 8 ms):
/// Ok(None) when another open file still holds the lock then. A lock held by a
/// process that is paused, or by a dead NFS client whose lock outlives it, gives its
/// waiters an error they retry, never a thread held forever.
pub fn lock_exclusive_within(path: &Path, wait: std::time::Duration) -> io::Result<Option<File>> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        if let Some(f) = try_lock_exclusive(path)? {
            return Ok(Some(f));
        }
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Ok(None);
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(std::time::Duration::from_millis(8));
    }
}

/// Opens (creating if needed) a lock file: never through a symlink, never blocking on
/// a FIFO planted in its place, only a regular file.
fn open_lock_file(path: &Path) -> io::Result<File> {
    // Readable too: a slot lock's holder reads the holder record it may rewrite.
    open_volume_file(
        OpenOptions::new().create(true).truncate(false).read(true).write(true),
        path,
    )
}

/// Like [`lock_exclusive`] but never waits: Ok(None) when another open file (this
/// process or another) holds the lock.
pub fn try_lock_exclusive(path: &Path) -> io::Result<Option<File>> {
    let f = open_lock_file(path)?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Whether the open `file` is the file `path` names now (same device and inode).
pub fn same_file(file: &File, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (file.metadata()?, std::fs::metadata(path)?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Makes a directory entry change (create, rename, unlink) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Volume roots this process serves: (path, device, inode) when sealed.
static SEALED_ROOTS: std::sync::Mutex<Vec<(PathBuf, u64, u64)>> = std::sync::Mutex::new(Vec::new());

/// Seals `root` (an existing directory, a volume's data directory) for this process:
/// from now on [`create_dir_durable`] creates nothing under `root` unless `root` is
/// still that very directory (same device and inode). A volume unmounted under a
/// running broker leaves its path a bare directory of the machine's own disk (or no
/// directory at all); every path-based write would otherwise create the volume's
/// directories afresh there and succeed — an offset commit acknowledged that no
/// volume keeps, hidden again when the volume is mounted back
/// (`a_broker_whose_volume_is_unmounted_acknowledges_nothing`,
/// tests/integration/test_disk_faults.py). No directory to write into, every such
/// write fails instead. What an existing directory at that path already holds (a
/// tree left there by an earlier process) is not guarded.
pub fn seal_root(root: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(root)?;
    if !m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", root.display()),
        ));
    }
    let mut roots = SEALED_ROOTS.lock().unwrap_or_else(|e| e.into_inner());
    roots.retain(|(p, _, _)| p != root);
    roots.push((root.to_path_buf(), m.dev(), m.ino()));
    Ok(())
}

/// Forgets a seal of `root` ([`seal_root`]): for a process opening a volume at a path
/// it sealed before (a broker restarted in the same process, on a directory made
/// anew), before it creates the volume's directories there.
pub fn unseal_root(root: &Path) {
    SEALED_ROOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(p, _, _)| p != root);
}

/// Err when `dir` lies under a sealed root that is gone or is another directory now.
pub fn check_sealed_root(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let roots: Vec<(PathBuf, u64, u64)> = SEALED_ROOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|(root, _, _)| dir.starts_with(root))
        .cloned()
        .collect();
    for (root, dev, ino) in roots {
        let same = fs::metadata(&root).is_ok_and(|m| m.is_dir() && m.dev() == dev && m.ino() == ino);
        if !same {
            // Not NotFound: a volume gone from under the broker is a failed write
            // (kaas_volume_write_errors_total), not a file another process removed.
            return Err(io::Error::other(
                format!(
                    "the volume's data directory {} is gone or is not the directory this broker opened (an unmounted volume?); not creating {} in its place",
                    root.display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// `create_dir_all` whose new directories survive a power cut: each directory it
/// creates is followed by an fsync of its parent, which is what makes a new name
/// durable (without it a cut can take the directory, and every file fsynced inside
/// it, away: tests/integration/test_power_cut.py, the volume's own data directory).
/// A directory found already there has its parent fsynced once per process and
/// directory, best effort (its creator may have died, or still be on its way,
/// between the mkdir and the fsync; a parent this process may not read, say a home
/// directory of mode 0711, is left alone); after that it costs one stat. "Directory"
/// is the one at the path, by device, inode and birth time: a partition directory
/// renamed away (a deleted topic's) and made again by another process is a new one
/// whose parent may not be synced yet (`a_directory_made_again_at_a_path_has_its_parent_synced_again`).
/// Under a sealed root ([`seal_root`]) nothing is created unless the root is still
/// the directory sealed.
pub fn create_dir_durable(dir: &Path) -> io::Result<()> {
    ensure_dir_durable(dir).map(|_| ())
}

/// [`create_dir_durable`]; true when it fsynced `dir`'s parent for `dir` itself.
fn ensure_dir_durable(dir: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    type Identity = (u64, u64, Option<std::time::SystemTime>);
    static DURABLE: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, Identity>>> =
        std::sync::Mutex::new(None);
    let identity = |m: &fs::Metadata| (m.dev(), m.ino(), m.created().ok());
    // Whether `d` is new to this process as the directory `id` names.
    let remember = |d: &Path, id: Identity| {
        DURABLE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(Default::default)
            .insert(d.to_path_buf(), id)
            != Some(id)
    };
    if dir.as_os_str().is_empty() {
        return Ok(false);
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Some(m) = fs::metadata(dir).ok().filter(|m| m.is_dir()) {
        if !remember(dir, identity(&m)) {
            return Ok(false);
        }
        if let Err(e) = sync_dir(parent) {
            tracing::debug!(dir = %parent.display(), error = %e, "cannot fsync the parent of an existing directory");
        }
        return Ok(true);
    }
    check_sealed_root(dir)?;
    create_dir_durable(parent)?;
    match fs::create_dir(dir) {
        Ok(()) => {}
        // Another process made it at the same moment; its fsync of the parent may
        // not have run yet, and what we put inside must not depend on it.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
        Err(e) => return Err(e),
    }
    // Which directory the fsync below makes durable: taken before it, so one made
    // at the path by another process after it (ours renamed away meanwhile) is not
    // remembered as synced. Gone already: nothing to remember; the caller finds the
    // path missing and makes it again.
    let made = fs::metadata(dir).ok();
    sync_dir(parent)?;
    if let Some(m) = made {
        remember(dir, identity(&m));
    }
    Ok(true)
}

/// `value` as the volume writes JSON files: pretty, with a final newline.
pub fn json_bytes<T: serde::Serialize>(value: &T) -> io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Serialises `value` as pretty JSON and replaces `path` atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    atomic_write(path, &json_bytes(value)?)
}

/// What identifies one version of a file cheaply: size, modification time and inode.
/// Atomic replacement (rename) always changes the inode, so a cached copy whose stamp
/// still matches the file on disk is current — without reading the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<std::time::SystemTime>,
    pub inode: u64,
    /// Inode change time (seconds, nanoseconds): also set by the rename that
    /// installs a new version.
    pub changed: (i64, i64),
}

/// The stamp of `path`, or None if it does not exist (or cannot be read). The file is
/// opened and its descriptor stat'ed rather than the path: on NFS an open revalidates
/// the file with the server (close-to-open consistency), where a path `stat` may be
/// answered from the client's attribute cache for seconds.
pub fn file_stamp(path: &Path) -> Option<FileStamp> {
    Some(stamp_of(&open_regular_meta(path).ok()?.1))
}

/// The stamp of an open file's metadata.
pub fn stamp_of(m: &fs::Metadata) -> FileStamp {
    use std::os::unix::fs::MetadataExt;
    FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        inode: m.ino(),
        changed: (m.ctime(), m.ctime_nsec()),
    }
}

#[cfg(test)]
mod tests {

    /// A directory this process made (its parent synced), renamed away, and made
    /// again at the path by another process that has not synced the parent yet: the
    /// path was remembered, so nothing synced the parent again, and what this process
    /// then wrote and fsynced inside could vanish with the directory in a power cut
    /// (found by a review of the deleted-directory rename). Remembered by device,
    /// inode and birth time now.
    #[test]
    fn a_directory_made_again_at_a_path_has_its_parent_synced_again() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("t-0");
        assert!(ensure_dir_durable(&dir).unwrap(), "made: its parent synced");
        assert!(!ensure_dir_durable(&dir).unwrap(), "then one stat");
        std::fs::rename(&dir, root.path().join("gone")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        assert!(ensure_dir_durable(&dir).unwrap(), "another directory at the path");
        assert!(!ensure_dir_durable(&dir).unwrap());
        // Made again after the old one was removed (its inode free to be reused).
        std::fs::remove_dir(root.path().join("gone")).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::create_dir(&dir).unwrap();
        assert!(
            ensure_dir_durable(&dir).unwrap(),
            "made again where its inode may be reused"
        );
    }
    use super::*;

    /// A volume unmounted under its broker: its path gone, or a bare directory in its
    /// place. Nothing is created there; the root as it was still takes new ones.
    #[test]
    fn nothing_is_created_under_a_sealed_root_that_is_gone_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        fs::create_dir(&root).unwrap();
        seal_root(&root).unwrap();
        create_dir_durable(&root.join("__cluster/groups")).unwrap();
        // Gone: nothing comes back, not the root itself.
        fs::rename(&root, dir.path().join("away")).unwrap();
        let e = atomic_write(&root.join("__cluster/offsets/g.json"), b"{}").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert!(e.to_string().contains("not the directory this broker opened"), "{e}");
        assert!(!root.exists());
        // Replaced by a bare directory (a mountpoint with nothing mounted on it).
        fs::create_dir(&root).unwrap();
        assert!(atomic_write(&root.join("__cluster/offsets/g.json"), b"{}").is_err());
        assert!(create_dir_durable(&root.join("t-0")).is_err());
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
        // Back in place: directories are created again.
        fs::remove_dir(&root).unwrap();
        fs::rename(dir.path().join("away"), &root).unwrap();
        atomic_write(&root.join("__cluster/offsets/g.json"), b"{}").unwrap();
        // Outside every sealed root, nothing changes.
        create_dir_durable(&dir.path().join("elsewhere/deep")).unwrap();
    }

    #[test]
    fn a_symlink_planted_at_the_old_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let target = dir.path().join("state.json");
        std::os::unix::fs::symlink(&victim, dir.path().join("state.json.tmp")).unwrap();
        atomic_write(&target, b"{}").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&target).unwrap(), b"{}");
    }

    #[test]
    fn concurrent_writers_of_one_file_never_produce_a_torn_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        let writers: Vec<_> = (0..4u8)
            .map(|w| {
                let target = target.clone();
                std::thread::spawn(move || {
                    let body = vec![b'a' + w; 64 * 1024];
                    for _ in 0..50 {
                        atomic_write(&target, &body).unwrap();
                    }
                })
            })
            .collect();
        for _ in 0..200 {
            if let Ok(bytes) = fs::read(&target) {
                assert_eq!(bytes.len(), 64 * 1024);
                assert!(bytes.iter().all(|b| *b == bytes[0]), "a torn file was read");
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "state.json")
            .collect();
        assert!(leftovers.is_empty(), "temporary files left behind: {leftovers:?}");
    }

    #[test]
    fn a_file_or_symlink_already_at_a_temporary_name_is_refused_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let tmp = dir.path().join(".state.json.tmp-1-2-3");
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        assert!(create_temp(&tmp).is_err());
        let dangling = dir.path().join(".state.json.tmp-4-5-6");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(create_temp(&dangling).is_err());
        assert!(
            !dir.path().join("nowhere").exists(),
            "a dangling symlink was not followed"
        );
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn files_with_names_of_the_longest_legal_length_are_written_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{}.json", "n".repeat(250)));
        atomic_write(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        let fresh = dir.path().join(format!("{}.json", "m".repeat(250)));
        assert!(atomic_create(&fresh, b"first").unwrap());
        assert!(!atomic_create(&fresh, b"second").unwrap());
        assert_eq!(fs::read(&fresh).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "temporary files left behind: {names:?}");
    }

    #[test]
    fn only_regular_files_are_read_and_never_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let regular = dir.path().join("ok.json");
        fs::write(&regular, b"{}").unwrap();
        assert_eq!(read_capped(&regular, 10).unwrap(), b"{}");
        let fifo = dir.path().join("fifo.json");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&regular, &link).unwrap();
        let folder = dir.path().join("dir.json");
        fs::create_dir(&folder).unwrap();
        for (path, words) in [
            (&fifo, "a FIFO"),
            (&zero, "symbolic link"),
            (&link, "symbolic link"),
            (&folder, "a directory"),
        ] {
            let e = read_capped(path, 1 << 20).unwrap_err();
            assert!(e.to_string().contains(words), "{}: {e}", path.display());
        }
        let big = dir.path().join("big.json");
        fs::write(&big, vec![b' '; 11]).unwrap();
        let e = read_capped(&big, 10).unwrap_err();
        assert!(e.to_string().contains("11 bytes, more than the 10"), "{e}");
    }

    #[test]
    fn a_file_overwritten_in_place_reads_as_the_new_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lease.json");
        atomic_write(&path, br#"{"heartbeat_ms": 123456789}"#).unwrap();
        overwrite_in_place(&path, br#"{"heartbeat_ms": 1}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["heartbeat_ms"], 1);
        overwrite_in_place(&path, br#"{"heartbeat_ms": 1234567890123, "more": true}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["more"], true);
    }

    #[test]
    fn temporary_names_are_unique_and_hidden() {
        let a = temp_path(Path::new("/v/x.json"));
        let b = temp_path(Path::new("/v/x.json"));
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().to_string_lossy().starts_with(".x.json.tmp-"));
        let longest = temp_path(&Path::new("/v").join("y".repeat(255)));
        assert!(longest.file_name().unwrap().len() <= 255);
    }
}
