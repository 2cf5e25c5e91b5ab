//! The crash-safe swap of a partition's segments for cleaned ones: the cleaner
//! (`crate::cleaner`) writes `*.cleaned` files beside the log and records the swap in
//! `cleaning-swap.json`; from that record on, the swap is decided, and whoever opens
//! the partition next finishes it ([`finish_interrupted_swap`], called by
//! `PartitionLog::open`). It lives with the log because opening a log depends on it;
//! the cleaner depends on the log, never the other way.

use super::segment_file_name;
use crate::error::read_versioned_json;
use crate::fsutil::sync_dir;
use crate::VolumeError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

pub const SWAP_FILE: &str = "cleaning-swap.json";
/// The format of `cleaning-swap.json` (the cleaner's `CLEANER_FORMAT_VERSION` when
/// the two were one constant).
pub const SWAP_FORMAT_VERSION: u32 = 1;

/// The cleaned files of one group of segments, ready to be swapped in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapGroup {
    /// Base offset of the new segment (that of the first segment it replaces).
    pub new_base: i64,
    /// Base offsets of the segments it replaces, in order.
    pub replaces: Vec<i64>,
    /// Whether it has a `.txnindex` (else the one of `new_base` is removed).
    pub txnindex: bool,
}

/// `cleaning-swap.json`: a swap in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapManifest {
    pub version: u32,
    pub tag: String,
    pub groups: Vec<SwapGroup>,
}

crate::versioned!(SwapManifest);

pub(crate) fn cleaned_path(dir: &Path, base: i64, ext: &str, tag: &str) -> PathBuf {
    dir.join(format!("{}.{tag}.cleaned", segment_file_name(base, ext)))
}

pub(crate) fn seg_path(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(segment_file_name(base, ext))
}

/// Removes `*.cleaned` files: those of `tag`, or all.
pub fn remove_cleaned_files(dir: &Path, tag: Option<&str>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = match tag {
            Some(t) => name.ends_with(&format!(".{t}.cleaned")),
            None => name.ends_with(".cleaned"),
        };
        if ours {
            if let Err(e) = fs::remove_file(entry.path()) {
                let (topic, partition) = crate::layout::partition_ids(&entry.path());
                tracing::warn!(topic, partition, path = %entry.path().display(), error = %e, "cannot remove a cleaner's temporary file");
            }
        }
    }
}

/// Carries out a recorded swap (idempotent: a crash half-way through is finished by
/// running it again): every replaced segment's files are removed, except that the
/// cleaned files are renamed over the first one's.
///
/// Every step of every group runs again, also for a group whose log was renamed
/// already. The swap's directory operations are made durable together, by the one
/// directory fsync at its end, and a power cut may keep a later one and lose an
/// earlier one (a file system without a journal orders none of them): the log's
/// rename kept, the index's rename and the other replaced segments' removals lost.
/// Skipping such a group left the old segments beside the cleaned log, which the open
/// cut back at the first of them: a log that was neither the old one nor the cleaned
/// one (`a_swap_whose_log_rename_outlived_its_other_steps_reads_as_one_done_whole`);
/// and the old index beside the cleaned log, whose positions may fall inside its
/// batches (argued by a review, not shown). Each step is idempotent. Between a crash
/// (or an install that failed after the record) and the open that finishes the swap
/// nothing makes a segment under the replaced bases: a failed install marks the log
/// broken, and the partition is reopened at once.
pub(crate) fn apply_swap(dir: &Path, m: &SwapManifest) -> Result<(), VolumeError> {
    let remove = |p: &Path| match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(VolumeError::io(p, e)),
    };
    for g in &m.groups {
        let log_tmp = cleaned_path(dir, g.new_base, "log", &m.tag);
        for &base in g.replaces.iter().filter(|b| **b != g.new_base) {
            for ext in ["log", "index", "txnindex"] {
                remove(&seg_path(dir, base, ext))?;
            }
        }
        let tmp_txn = cleaned_path(dir, g.new_base, "txnindex", &m.tag);
        if g.txnindex {
            if tmp_txn.exists() {
                fs::rename(&tmp_txn, seg_path(dir, g.new_base, "txnindex"))
                    .map_err(|e| VolumeError::io(&tmp_txn, e))?;
            }
        } else {
            remove(&seg_path(dir, g.new_base, "txnindex"))?;
        }
        let tmp_index = cleaned_path(dir, g.new_base, "index", &m.tag);
        if tmp_index.exists() {
            fs::rename(&tmp_index, seg_path(dir, g.new_base, "index")).map_err(|e| VolumeError::io(&tmp_index, e))?;
        }
        // The log's rename last: while its cleaned file exists, the group is not done.
        if log_tmp.exists() {
            fs::rename(&log_tmp, seg_path(dir, g.new_base, "log")).map_err(|e| VolumeError::io(&log_tmp, e))?;
        }
    }
    sync_dir(dir).map_err(|e| VolumeError::io(dir, e))
}

/// At open: finishes a swap a crash interrupted (its record exists), then removes
/// every other `*.cleaned` file (a pass that never reached its swap). Returns what was
/// done, for the log.
pub fn finish_interrupted_swap(dir: &Path) -> Result<Option<String>, VolumeError> {
    let path = dir.join(SWAP_FILE);
    let done = match read_versioned_json::<SwapManifest>(&path, "cleaner swap", SWAP_FORMAT_VERSION) {
        Ok(m) => {
            apply_swap(dir, &m)?;
            fs::remove_file(&path).map_err(|e| VolumeError::io(&path, e))?;
            sync_dir(dir).map_err(|e| VolumeError::io(dir, e))?;
            Some(format!(
                "finished an interrupted cleaner swap of {} segment group(s)",
                m.groups.len()
            ))
        }
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    remove_cleaned_files(dir, None);
    Ok(done)
}
