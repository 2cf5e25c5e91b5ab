//! Errors for reading and writing volume files. Every variant names the file.

use std::io;
use std::path::PathBuf;
use thiserror::Error;

/// One file as read: its value, or why it could not be read. Listings return these
/// side by side so one bad file never hides the good ones.
pub type Loaded<T> = Result<T, VolumeError>;

#[derive(Debug, Error)]
pub enum VolumeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not valid JSON for {what}: {detail}")]
    Parse {
        path: PathBuf,
        what: &'static str,
        detail: String,
    },
    #[error("{path}: unknown format version {found} for {what} (this build reads version {supported})")]
    UnknownVersion {
        path: PathBuf,
        what: &'static str,
        found: u32,
        supported: u32,
    },
    #[error("{path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
    /// A lock file held by another process for the whole bounded wait (a paused or
    /// stuck broker or kaasctl): nothing was done, and the caller may try again —
    /// on the wire a retriable code, never KAFKA_STORAGE_ERROR.
    #[error("{path}: held by another process for the whole {waited_ms} ms wait (a paused or stuck broker or kaasctl?); try again")]
    Busy { path: PathBuf, waited_ms: u64 },
}

impl VolumeError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        VolumeError::Io {
            path: path.into(),
            source,
        }
    }
    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            VolumeError::Io { path, .. }
            | VolumeError::Parse { path, .. }
            | VolumeError::UnknownVersion { path, .. }
            | VolumeError::Invalid { path, .. }
            | VolumeError::Busy { path, .. } => path,
        }
    }
    /// Whether a lock was held elsewhere for the whole wait ([`VolumeError::Busy`]).
    pub fn is_busy(&self) -> bool {
        matches!(self, VolumeError::Busy { .. })
    }
    /// An I/O error that refuses the file for what it is or holds (not a regular file,
    /// a symbolic link, larger than a state file may be), not a failure of the volume.
    pub fn is_invalid_data(&self) -> bool {
        matches!(self, VolumeError::Io { source, .. } if source.kind() == io::ErrorKind::InvalidData)
    }
    pub fn is_not_found(&self) -> bool {
        matches!(self, VolumeError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// The entries of a directory as (file name, path), sorted by name; a directory that
/// does not exist yet is empty (volumes grow their folders lazily), any other error
/// names the directory.
pub fn dir_entries(dir: &std::path::Path) -> Result<Vec<(String, std::path::PathBuf)>, VolumeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(VolumeError::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| VolumeError::io(dir, e))?;
        out.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
    }
    out.sort();
    Ok(out)
}

/// The `*.json` files of a directory, sorted (see [`dir_entries`]).
pub fn json_files(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>, VolumeError> {
    Ok(dir_entries(dir)?
        .into_iter()
        .filter(|(name, _)| name.ends_with(".json"))
        .map(|(_, path)| path)
        .collect())
}

/// Reads a versioned JSON file. A file of another `version` is reported as such, never
/// as a parse error or, worse, misread: the happy path parses once straight into `T`
/// (which carries `version`), and only a failure or a mismatch re-reads just the
/// version field to say which it was.
pub fn read_versioned_json<T: serde::de::DeserializeOwned + Versioned>(
    path: &std::path::Path,
    what: &'static str,
    supported: u32,
) -> Result<T, VolumeError> {
    let bytes =
        crate::fsutil::read_capped(path, crate::fsutil::MAX_STATE_FILE_BYTES).map_err(|e| VolumeError::io(path, e))?;
    parse_versioned_json(path, &bytes, what, supported)
}

/// [`read_versioned_json`] of bytes already read from `path`.
pub fn parse_versioned_json<T: serde::de::DeserializeOwned + Versioned>(
    path: &std::path::Path,
    bytes: &[u8],
    what: &'static str,
    supported: u32,
) -> Result<T, VolumeError> {
    #[derive(serde::Deserialize)]
    struct VersionOnly {
        version: Option<u64>,
    }
    let parsed = match serde_json::from_slice::<T>(bytes) {
        Ok(v) if v.version() == supported => return Ok(v),
        other => other,
    };
    match serde_json::from_slice::<VersionOnly>(bytes) {
        Ok(VersionOnly { version: Some(found) }) if found != supported as u64 => Err(VolumeError::UnknownVersion {
            path: path.into(),
            what,
            found: found.min(u32::MAX as u64) as u32,
            supported,
        }),
        Ok(VersionOnly { version: None }) => Err(VolumeError::Parse {
            path: path.into(),
            what,
            detail: "missing numeric \"version\" field".into(),
        }),
        Ok(_) | Err(_) => Err(VolumeError::Parse {
            path: path.into(),
            what,
            detail: match parsed {
                Err(e) => e.to_string(),
                Ok(_) => "version field disagrees with the document".into(),
            },
        }),
    }
}

/// A file format with a `version` field.
pub trait Versioned {
    fn version(&self) -> u32;
}

/// Implements [`Versioned`] for structs with a `pub version: u32` field.
#[macro_export]
macro_rules! versioned {
    ($($t:ty),* $(,)?) => {
        $(impl $crate::error::Versioned for $t {
            fn version(&self) -> u32 {
                self.version
            }
        })*
    };
}

/// [`read_versioned_json`] of a cluster-wide state file that may not exist yet: a
/// missing file is `empty` (dynamic broker configs, SCRAM credentials, ACLs).
pub fn read_versioned_json_or<T: serde::de::DeserializeOwned + Versioned>(
    path: &std::path::Path,
    what: &'static str,
    supported: u32,
    empty: impl FnOnce() -> T,
) -> Result<T, VolumeError> {
    match read_versioned_json(path, what, supported) {
        Err(e) if e.is_not_found() => Ok(empty()),
        other => other,
    }
}

/// How long a writer of a cluster-wide state file (ACLs, SCRAM credentials, client
/// quotas, broker configs) waits for its `.lock`: held longer (by a paused broker, a
/// kaasctl stopped at its prompt, a stalled NFS server) the change is refused,
/// [`VolumeError::Busy`], and may be tried again. ARCHITECTURE.md: no lock is waited
/// on without a deadline.
pub const STATE_FILE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Read-modify-write of a cluster-wide state file under its `.lock` (every writer,
/// broker or kaasctl, takes it, for at most [`STATE_FILE_LOCK_WAIT`]): `f` changes the
/// value or returns an error, and then nothing is written; `tidy` normalises it (drops
/// empty entries, sorts); the file is replaced atomically, and only when the value
/// changed.
pub fn update_locked_json<T, E>(
    volume: &crate::Volume,
    path: &std::path::Path,
    read: impl FnOnce(&crate::Volume) -> Result<T, VolumeError>,
    f: impl FnOnce(&mut T) -> Result<(), E>,
    tidy: impl FnOnce(&mut T),
) -> Result<T, E>
where
    T: Clone + PartialEq + serde::Serialize,
    E: From<VolumeError>,
{
    update_locked_json_within(volume, path, STATE_FILE_LOCK_WAIT, read, f, tidy)
}

/// [`update_locked_json`] waiting at most `wait` for the lock.
pub fn update_locked_json_within<T, E>(
    volume: &crate::Volume,
    path: &std::path::Path,
    wait: std::time::Duration,
    read: impl FnOnce(&crate::Volume) -> Result<T, VolumeError>,
    f: impl FnOnce(&mut T) -> Result<(), E>,
    tidy: impl FnOnce(&mut T),
) -> Result<T, E>
where
    T: Clone + PartialEq + serde::Serialize,
    E: From<VolumeError>,
{
    let lock_path = path.with_extension("lock");
    crate::fsutil::create_dir_durable(&volume.cluster_dir()).map_err(|e| VolumeError::io(volume.cluster_dir(), e))?;
    let _lock = crate::fsutil::lock_exclusive_within(&lock_path, wait)
        .map_err(|e| VolumeError::io(&lock_path, e))?
        .ok_or_else(|| VolumeError::Busy {
            path: lock_path.clone(),
            waited_ms: wait.as_millis() as u64,
        })?;
    let mut value = read(volume)?;
    let before = value.clone();
    f(&mut value)?;
    tidy(&mut value);
    if value != before {
        crate::fsutil::write_json(path, &value).map_err(|e| VolumeError::io(path, e))?;
    }
    Ok(value)
}

/// The message a panic was raised with (`panic!` with a literal or a format), if it
/// carries one.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> Option<String> {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
}

/// An error and its causes on one line, `a: b: c`, leaving out a cause whose text the
/// line already holds (a [`VolumeError::Io`] names its source in its own message, so
/// printing the chain as-is says "File exists (os error 17)" twice).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

#[cfg(test)]
mod one_line_tests {
    #[test]
    fn a_cause_already_in_the_message_is_not_said_twice() {
        let io = super::VolumeError::Io {
            path: "data/__cluster/brokers".into(),
            source: std::io::Error::from_raw_os_error(17),
        };
        assert_eq!(
            super::one_line(&io),
            "data/__cluster/brokers: File exists (os error 17)"
        );
        #[derive(Debug, thiserror::Error)]
        #[error("cannot open the volume")]
        struct Outer(#[source] super::VolumeError);
        assert_eq!(
            super::one_line(&Outer(io)),
            "cannot open the volume: data/__cluster/brokers: File exists (os error 17)"
        );
    }
}

#[cfg(test)]
mod locked_json_tests {
    use super::*;

    /// A cluster-wide state file's writer (AlterClientQuotas, CreateAcls,
    /// AlterUserScramCredentials, a broker config change, kaasctl) waited for the file's
    /// `.lock` with no deadline: a paused holder froze every such request on every
    /// broker, each on a thread of its own, and their retries piled up. Refused as
    /// Busy after the wait, nothing written; the holder gone, it goes through.
    #[test]
    fn a_state_file_lock_held_elsewhere_is_waited_for_within_a_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let volume = crate::Volume::new(dir.path());
        let path = volume.cluster_dir().join("state.json");
        crate::fsutil::create_dir_durable(&volume.cluster_dir()).unwrap();
        let read = |_: &crate::Volume| -> Result<Vec<u32>, VolumeError> {
            Ok(std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default())
        };
        let add_one = || {
            update_locked_json_within::<_, VolumeError>(
                &volume,
                &path,
                std::time::Duration::from_millis(200),
                read,
                |v| {
                    v.push(1);
                    Ok(())
                },
                |_| {},
            )
        };
        let held = crate::fsutil::lock_exclusive(&path.with_extension("lock")).unwrap();
        let started = std::time::Instant::now();
        let refused = add_one();
        assert!(matches!(refused, Err(VolumeError::Busy { .. })), "{refused:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(!path.exists(), "nothing written");
        drop(held);
        assert_eq!(add_one().unwrap(), vec![1]);
    }
}
