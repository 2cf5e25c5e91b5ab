//! Paths of the shared volume (ARCHITECTURE.md §3). The one place that knows where a
//! file lives; everything else asks here.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Volume {
    root: PathBuf,
}

impl Volume {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Volume { root: root.into() }
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn cluster_dir(&self) -> PathBuf {
        self.root.join("__cluster")
    }
    pub fn brokers_dir(&self) -> PathBuf {
        self.cluster_dir().join("brokers")
    }
    pub fn broker_lease(&self, id: i32) -> PathBuf {
        self.brokers_dir().join(format!("{id}.json"))
    }
    pub fn topics_dir(&self) -> PathBuf {
        self.cluster_dir().join("topics")
    }
    pub fn topic_file(&self, name: &str) -> PathBuf {
        self.topics_dir().join(format!("{name}.json"))
    }
    pub fn groups_dir(&self) -> PathBuf {
        self.cluster_dir().join("groups")
    }
    /// Committed offsets of one consumer group. Group ids are free-form strings, so the
    /// file name is the id with every byte outside `[A-Za-z0-9._-]` percent-encoded.
    pub fn group_offsets_file(&self, group: &str) -> PathBuf {
        self.groups_dir().join(format!("{}.json", encode_name(group)))
    }
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.root.join(format!("{topic}-{partition}"))
    }
}

/// Percent-encodes everything outside `[A-Za-z0-9._-]` (and a leading `.`).
pub fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}

/// Inverse of [`encode_name`].
pub fn decode_name(encoded: &str) -> Option<String> {
    if encoded == "%00" {
        return Some(String::new());
    }
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Kafka's topic name rule: 1..=249 chars of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_round_trip_through_file_names() {
        for name in ["plain", "with space/and slash", ".hidden", "", "ünï"] {
            let enc = encode_name(name);
            assert!(!enc.contains('/') && !enc.starts_with('.'), "{enc}");
            assert_eq!(decode_name(&enc).as_deref(), Some(name));
        }
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(valid_topic_name("orders.v1_x-y"));
        assert!(!valid_topic_name(""));
        assert!(!valid_topic_name(".."));
        assert!(!valid_topic_name("a/b"));
        assert!(!valid_topic_name(&"x".repeat(250)));
    }
}
