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
    /// Dynamic broker configs (IncrementalAlterConfigs / AlterConfigs on brokers).
    pub fn broker_configs_file(&self) -> PathBuf {
        self.cluster_dir().join("broker-configs.json")
    }
    /// ACLs (docs/security.md#acls).
    pub fn acls_file(&self) -> PathBuf {
        self.cluster_dir().join("acls.json")
    }
    /// SASL/SCRAM credentials: salted verifiers, never passwords (docs/security.md).
    pub fn scram_credentials_file(&self) -> PathBuf {
        self.cluster_dir().join("scram-credentials.json")
    }
    /// Client quotas (docs/quotas.md).
    pub fn client_quotas_file(&self) -> PathBuf {
        self.cluster_dir().join("client-quotas.json")
    }
    /// Held by whoever rewrites a topic file (config changes, added partitions).
    pub fn topic_files_lock(&self) -> PathBuf {
        self.cluster_dir().join("topic-files.lock")
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
    /// Committed offsets of one consumer group. Group ids are free-form strings of any
    /// length, so the file is named by [`stored_name`].
    pub fn group_offsets_file(&self, group: &str) -> PathBuf {
        self.groups_dir().join(format!("{}.json", stored_name(group)))
    }
    /// Where a deleted topic's partition directory is renamed, whole, under its
    /// `owner.gate` and `owner.lock`, before it is removed: no file of a live
    /// partition path is ever removed by name, so a topic created again under the
    /// name meanwhile never loses its lock files (docs/cluster.md, "Deleting a topic").
    /// What a crash leaves here is swept.
    pub fn deleted_dir(&self) -> PathBuf {
        self.cluster_dir().join("deleted")
    }
    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.root.join(format!("{topic}-{partition}"))
    }
}

/// A partition's topic and index, from its directory `<root>/<topic>-<partition>`,
/// for the `topic` and `partition` fields of log lines about it ("?" and -1 for a
/// path of another shape). `path` may be the directory or a file in it.
pub fn partition_ids(path: &Path) -> (String, i32) {
    let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
    let parse = |n: &str| {
        n.rsplit_once('-')
            .and_then(|(t, p)| Some((t.to_string(), p.parse::<i32>().ok()?)))
            .filter(|(t, _)| !t.is_empty())
    };
    name(path)
        .and_then(|n| parse(&n))
        .or_else(|| path.parent().and_then(name).and_then(|n| parse(&n)))
        .unwrap_or_else(|| ("?".to_string(), -1))
}

/// Longest [`encode_name`] used as it is; longer ones are shortened and hashed.
const MAX_PLAIN_STORED_NAME: usize = 180;
/// How much of a long encoded name is kept before its hash.
const HASHED_NAME_PREFIX: usize = 100;

/// The file-name form of a free-form name a client chose (a group id, a
/// transactional id): [`encode_name`] when that is at most 180 bytes, else the first
/// ~100 bytes of it, `~`, and 32 hex digits of the SHA-256 of the name. Either form
/// leaves room for a suffix and a temporary-file decoration within the 255-byte limit;
/// `~` never occurs in an encoded name, so a hashed name is told apart. The file
/// itself keeps the real name: readers of a hashed name take it from there and check
/// it (two names sharing a hashed name would need a SHA-256 collision).
pub fn stored_name(name: &str) -> String {
    use sha2::{Digest, Sha256};
    let encoded = encode_name(name);
    if encoded.len() <= MAX_PLAIN_STORED_NAME {
        return encoded;
    }
    let mut cut = HASHED_NAME_PREFIX;
    // Never split a %XX escape.
    while encoded.as_bytes()[cut - 1] == b'%' || encoded.as_bytes()[cut - 2] == b'%' {
        cut -= 1;
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}~{hex}", &encoded[..cut])
}

/// Whether a file stem is a [`stored_name`] that had to be hashed (its real name is
/// only inside the file).
pub fn is_hashed_name(stem: &str) -> bool {
    stem.contains('~')
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

/// The most partitions one topic can have: the directory of its last partition,
/// `<name>-99999`, still fits the 255-byte file-name limit with a topic name of
/// Kafka's maximum length (249).
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;

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
    fn log_lines_name_a_partition_by_its_directory() {
        let root = Path::new("/data");
        assert_eq!(partition_ids(&root.join("orders-3")), ("orders".into(), 3));
        assert_eq!(
            partition_ids(&root.join("my-topic.v2-0/00000000000000000000.log")),
            ("my-topic.v2".into(), 0)
        );
        assert_eq!(partition_ids(&root.join("__cluster")), ("?".into(), -1));
        assert_eq!(partition_ids(&root.join("-7")), ("?".into(), -1));
    }

    #[test]
    fn group_names_round_trip_through_file_names() {
        for name in ["plain", "with space/and slash", ".hidden", "", "ünï"] {
            let enc = encode_name(name);
            assert!(!enc.contains('/') && !enc.starts_with('.'), "{enc}");
            assert_eq!(decode_name(&enc).as_deref(), Some(name));
        }
    }

    #[test]
    fn stored_names_fit_the_file_name_limit_and_stay_apart() {
        let long_a = "g".repeat(5000);
        let long_b = format!("{}h", "g".repeat(4999));
        let escaped = "\u{1F600}/".repeat(100);
        for name in [long_a.as_str(), long_b.as_str(), escaped.as_str(), "short"] {
            let stored = stored_name(name);
            assert!(stored.len() + ".json".len() <= 200, "{} bytes", stored.len());
            assert!(!stored.contains('/') && !stored.starts_with('.'));
            assert_eq!(is_hashed_name(&stored), name != "short");
        }
        assert_ne!(stored_name(&long_a), stored_name(&long_b));
        assert_eq!(stored_name("short"), "short");
        // Exactly at the bound: plain; one past: hashed.
        assert!(!is_hashed_name(&stored_name(&"x".repeat(180))));
        assert!(is_hashed_name(&stored_name(&"x".repeat(181))));
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
