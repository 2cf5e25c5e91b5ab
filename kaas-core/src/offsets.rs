//! Committed consumer-group offsets: one file per group,
//! `__cluster/groups/<encoded group id>.json`, replaced atomically on every commit.

use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::layout::{decode_name, Volume};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const OFFSETS_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub offset: i64,
    #[serde(default = "minus_one")]
    pub leader_epoch: i32,
    #[serde(default)]
    pub metadata: Option<String>,
    pub commit_ms: i64,
}

fn minus_one() -> i32 {
    -1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupOffsets {
    pub version: u32,
    pub group: String,
    /// topic -> partition -> committed offset
    pub offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
}

impl GroupOffsets {
    pub fn new(group: &str) -> Self {
        GroupOffsets {
            version: OFFSETS_FORMAT_VERSION,
            group: group.to_string(),
            offsets: BTreeMap::new(),
        }
    }

    /// Loads a group's offsets; a missing file is an empty group, a broken one an error.
    pub fn load(volume: &Volume, group: &str) -> Result<GroupOffsets, VolumeError> {
        let path = volume.group_offsets_file(group);
        match read_versioned_json(&path, "group offsets", OFFSETS_FORMAT_VERSION) {
            Ok(g) => Ok(g),
            Err(e) if e.is_not_found() => Ok(GroupOffsets::new(group)),
            Err(e) => Err(e),
        }
    }

    pub fn save(&self, volume: &Volume) -> Result<(), VolumeError> {
        let path = volume.group_offsets_file(&self.group);
        write_json(&path, self).map_err(|e| VolumeError::io(&path, e))
    }

    pub fn delete(volume: &Volume, group: &str) -> Result<(), VolumeError> {
        let path = volume.group_offsets_file(group);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io(&path, e)),
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.offsets.get(topic).and_then(|p| p.get(&partition))
    }

    pub fn set(&mut self, topic: &str, partition: i32, offset: CommittedOffset) {
        self.offsets
            .entry(topic.to_string())
            .or_default()
            .insert(partition, offset);
    }

    /// Drops every offset of a deleted topic; true if anything was removed.
    pub fn remove_topic(&mut self, topic: &str) -> bool {
        self.offsets.remove(topic).is_some()
    }
}

/// Group ids that have an offsets file on the volume.
pub fn list_groups(volume: &Volume) -> Result<Vec<String>, VolumeError> {
    let dir = volume.groups_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(VolumeError::io(&dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| VolumeError::io(&dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".json") {
            if let Some(group) = decode_name(stem) {
                out.push(group);
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_a_reload_and_missing_means_empty() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        assert!(GroupOffsets::load(&volume, "g 1")
            .unwrap()
            .offsets
            .is_empty());
        let mut g = GroupOffsets::new("g 1");
        g.set(
            "t",
            3,
            CommittedOffset {
                offset: 42,
                leader_epoch: -1,
                metadata: Some("m".into()),
                commit_ms: 7,
            },
        );
        g.save(&volume).unwrap();
        let back = GroupOffsets::load(&volume, "g 1").unwrap();
        assert_eq!(back, g);
        assert_eq!(list_groups(&volume).unwrap(), vec!["g 1".to_string()]);
    }

    #[test]
    fn a_corrupt_offsets_file_is_an_error_not_an_empty_group() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        std::fs::create_dir_all(volume.groups_dir()).unwrap();
        std::fs::write(volume.group_offsets_file("g"), b"garbage").unwrap();
        let err = GroupOffsets::load(&volume, "g").unwrap_err().to_string();
        assert!(err.contains("g.json"), "{err}");
    }
}
