//! The transaction state store: `__cluster/txn_state/slot-<N>.json` (N = 0..50) holding
//! the entries of every transactional id that hashes to N, and `slot-<N>.lock`, the
//! advisory lock every writer (broker or kaasctl) holds for its read-modify-write.
//! Each write bumps the file's `generation` and replaces it atomically, so a reader
//! without the lock still sees a whole file, old or new.

use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use crate::txn::{slot_for, TxnEntry};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

crate::versioned!(SlotFile);

pub const SLOTS: u32 = 50;
pub const SLOT_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotFile {
    pub version: u32,
    pub slot: u32,
    /// Bumped by every write; a cached copy is valid only while it matches.
    pub generation: u64,
    pub updated_ms: i64,
    pub entries: BTreeMap<String, TxnEntry>,
}

impl SlotFile {
    pub fn empty(slot: u32) -> Self {
        SlotFile {
            version: SLOT_FORMAT_VERSION,
            slot,
            generation: 0,
            updated_ms: 0,
            entries: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct TxnStateStore {
    volume: Volume,
}

impl TxnStateStore {
    pub fn new(volume: Volume) -> Self {
        TxnStateStore { volume }
    }

    pub fn dir(&self) -> PathBuf {
        self.volume.cluster_dir().join("txn_state")
    }
    pub fn slot_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.json"))
    }
    pub fn lock_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.lock"))
    }

    /// Reads a slot without the lock; a missing file is an empty slot, a corrupt or
    /// unknown-version file an error naming it.
    pub fn read_slot(&self, slot: u32) -> Result<SlotFile, VolumeError> {
        let path = self.slot_path(slot);
        match read_versioned_json::<SlotFile>(&path, "transaction slot", SLOT_FORMAT_VERSION) {
            Ok(f) if f.slot != slot => Err(VolumeError::Invalid {
                path,
                detail: format!("file says it is slot {}, its name says slot {slot}", f.slot),
            }),
            Ok(f) => Ok(f),
            Err(e) if e.is_not_found() => Ok(SlotFile::empty(slot)),
            Err(e) => Err(e),
        }
    }

    /// The identity of a slot file's current version, cheaply: its stamp and its
    /// `generation`, both read through one open descriptor (the stamp by fstat, the
    /// generation from the file's first bytes, where the writer puts it). None when
    /// the file does not exist or its head does not show a generation. A cached copy
    /// of the slot is current when both match: the generation rises at every write
    /// under the lock, and the stamp changes with every replacement of the file.
    pub fn peek(&self, slot: u32) -> Result<Option<(crate::fsutil::FileStamp, u64)>, VolumeError> {
        use std::io::Read;
        let path = self.slot_path(slot);
        let mut f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(VolumeError::io(&path, e)),
        };
        let stamp = crate::fsutil::stamp_of(&f.metadata().map_err(|e| VolumeError::io(&path, e))?);
        let mut head = [0u8; 160];
        let mut len = 0;
        while len < head.len() {
            match f.read(&mut head[len..]).map_err(|e| VolumeError::io(&path, e))? {
                0 => break,
                n => len += n,
            }
        }
        let head = String::from_utf8_lossy(&head[..len]);
        let generation = head.find("\"generation\":").and_then(|at| {
            let digits: String = head[at + 13..]
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok()
        });
        Ok(generation.map(|g| (stamp, g)))
    }

    /// The entry of one transactional id, read without the lock.
    pub fn get(&self, transactional_id: &str) -> Result<Option<TxnEntry>, VolumeError> {
        Ok(self
            .read_slot(slot_for(transactional_id))?
            .entries
            .remove(transactional_id))
    }

    /// Takes the exclusive lock of one slot and reads it. The lock is held until the
    /// guard is dropped, so a caller can check an entry, act on it (write markers,
    /// stage offsets) and record the result as one compare-and-set, with no other
    /// writer (broker or kaasctl) in between. Blocks while another process holds it.
    pub fn lock(&self, slot: u32) -> Result<SlotGuard, VolumeError> {
        let dir = self.dir();
        std::fs::create_dir_all(&dir).map_err(|e| VolumeError::io(&dir, e))?;
        let lock_path = self.lock_path(slot);
        let lock = crate::fsutil::lock_exclusive(&lock_path).map_err(|e| VolumeError::io(&lock_path, e))?;
        let file = self.read_slot(slot)?;
        Ok(SlotGuard {
            path: self.slot_path(slot),
            file,
            _lock: lock,
        })
    }

    /// Read-modify-write of one slot under its exclusive lock. `f` gets the entries
    /// and returns its result plus whether it changed anything; only then is the file
    /// rewritten (generation + 1).
    pub fn update<R>(
        &self,
        slot: u32,
        now_ms: i64,
        f: impl FnOnce(&mut BTreeMap<String, TxnEntry>) -> (R, bool),
    ) -> Result<R, VolumeError> {
        let mut guard = self.lock(slot)?;
        let (result, changed) = f(&mut guard.file.entries);
        if changed {
            guard.write(now_ms)?;
        }
        Ok(result)
    }

    /// Every slot, each as read or as the error that prevented reading it.
    pub fn read_all(&self) -> Vec<(u32, Result<SlotFile, VolumeError>)> {
        (0..SLOTS).map(|s| (s, self.read_slot(s))).collect()
    }
}

/// One slot, read and held under its exclusive lock (see [`TxnStateStore::lock`]).
pub struct SlotGuard {
    path: PathBuf,
    file: SlotFile,
    _lock: std::fs::File,
}

impl SlotGuard {
    pub fn file(&self) -> &SlotFile {
        &self.file
    }
    pub fn entry(&self, transactional_id: &str) -> Option<&TxnEntry> {
        self.file.entries.get(transactional_id)
    }
    /// Replaces one entry in memory; [`SlotGuard::write`] makes it durable.
    pub fn set(&mut self, entry: TxnEntry) {
        self.file.entries.insert(entry.transactional_id.clone(), entry);
    }
    pub fn entries_mut(&mut self) -> &mut BTreeMap<String, TxnEntry> {
        &mut self.file.entries
    }
    /// Writes the slot (generation + 1), atomically replacing the file, still under
    /// the lock. Returns the new generation. After an error the file may hold the old
    /// or (if only the directory fsync failed) the new version, and this copy matches
    /// neither for sure: drop the guard and read again.
    pub fn write(&mut self, now_ms: i64) -> Result<u64, VolumeError> {
        self.file.generation += 1;
        self.file.updated_ms = now_ms;
        write_json(&self.path, &self.file).map_err(|e| VolumeError::io(&self.path, e))?;
        Ok(self.file.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::{init_producer_id, Actor, InitOutcome};

    fn entry(id: &str) -> TxnEntry {
        match init_producer_id(None, id, 60_000, (-1, -1), 1, &Actor::Broker { id: 0 }, &mut || 7) {
            InitOutcome::Ready { entry, .. } => entry,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_slot_is_fnv1a_of_the_id_modulo_50() {
        // FNV-1a("a") = 0xe40c292c; 0xe40c292c % 50 = 38.
        assert_eq!(slot_for("a"), 0xe40c_292c % 50);
        assert_eq!(slot_for(""), 0x811c_9dc5 % 50);
        assert!((0..1000).all(|i| slot_for(&format!("txn-{i}")) < SLOTS));
    }

    #[test]
    fn updates_bump_the_generation_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let store = TxnStateStore::new(Volume::new(dir.path()));
        let slot = slot_for("t1");
        store
            .update(slot, 5, |entries| {
                entries.insert("t1".into(), entry("t1"));
                ((), true)
            })
            .unwrap();
        store.update(slot, 6, |_| ((), false)).unwrap();
        let file = store.read_slot(slot).unwrap();
        assert_eq!(file.generation, 1, "an unchanged update does not write");
        let (stamp, generation) = store.peek(slot).unwrap().unwrap();
        assert_eq!(generation, 1);
        store.update(slot, 7, |_| ((), true)).unwrap();
        let (stamp2, generation2) = store.peek(slot).unwrap().unwrap();
        assert_eq!(generation2, 2);
        assert_ne!(stamp, stamp2);
        assert!(store.peek(slot + 1).unwrap().is_none());
        assert_eq!(store.get("t1").unwrap().unwrap().producer_id, 7);
        assert!(store.lock_path(slot).exists());
    }

    #[test]
    fn a_corrupt_slot_file_is_an_error_naming_it_and_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = TxnStateStore::new(Volume::new(dir.path()));
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.slot_path(3), b"{\"version\": 1, \"slot\": 3, \"gener").unwrap();
        let err = store.read_slot(3).unwrap_err().to_string();
        assert!(err.contains("slot-3.json"), "{err}");
        assert!(store.update(3, 1, |_| ((), true)).is_err());
        assert_eq!(
            std::fs::read(store.slot_path(3)).unwrap(),
            b"{\"version\": 1, \"slot\": 3, \"gener"
        );
        std::fs::write(store.slot_path(4), b"{\"version\": 2}").unwrap();
        assert!(store
            .read_slot(4)
            .unwrap_err()
            .to_string()
            .contains("unknown format version 2"));
    }
}
