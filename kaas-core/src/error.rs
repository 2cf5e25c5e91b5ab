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
}

impl VolumeError {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        VolumeError::Io {
            path: path.into(),
            source,
        }
    }
    pub fn is_not_found(&self) -> bool {
        matches!(self, VolumeError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Reads a versioned JSON file: checks the `version` field before deserialising the
/// rest, so a newer format is reported as such rather than as a parse error.
pub fn read_versioned_json<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    what: &'static str,
    supported: u32,
) -> Result<T, VolumeError> {
    let bytes = std::fs::read(path).map_err(|e| VolumeError::io(path, e))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| VolumeError::Parse {
        path: path.into(),
        what,
        detail: e.to_string(),
    })?;
    let found = value
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| VolumeError::Parse {
            path: path.into(),
            what,
            detail: "missing numeric \"version\" field".into(),
        })? as u32;
    if found != supported {
        return Err(VolumeError::UnknownVersion {
            path: path.into(),
            what,
            found,
            supported,
        });
    }
    serde_json::from_value(value).map_err(|e| VolumeError::Parse {
        path: path.into(),
        what,
        detail: e.to_string(),
    })
}
