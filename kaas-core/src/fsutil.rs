//! Atomic replacement of small state files: write `*.tmp`, fsync, rename, fsync the
//! directory. A reader never sees a torn file; a crash leaves either old or new.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Atomically replaces `path` with `contents`.
pub fn atomic_write(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = dir.join(tmp_name);
    {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(dir)
}

/// Opens (creating if needed) a lock file and takes an exclusive advisory lock on it;
/// the lock is released when the returned file is dropped. Every writer of a shared
/// state file (broker or kaasctl) goes through here.
pub fn lock_exclusive(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    f.lock()?;
    Ok(f)
}

/// Makes a directory entry change (create, rename, unlink) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Serialises `value` as pretty JSON and replaces `path` atomically.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    atomic_write(path, &bytes)
}

/// What identifies one version of a file cheaply: size, modification time and inode.
/// Atomic replacement (rename) always changes the inode, so a cached copy whose stamp
/// still matches the file on disk is current — without reading the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<std::time::SystemTime>,
    pub inode: u64,
}

/// The stamp of `path`, or None if it does not exist (or cannot be stat'ed).
pub fn file_stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).ok()?;
    Some(FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        inode: m.ino(),
    })
}
