//! The transaction state store. For each slot N (0..50) of the transactional ids:
//!
//! - `__cluster/txn_state/slot-<N>.json`, the *checkpoint*: every entry of the slot as
//!   of its `generation`, replaced atomically (write, fsync, rename, fsync directory);
//! - `__cluster/txn_state/slot-<N>.journal`, the transitions since: one JSON line per
//!   transition, appended, each carrying the generation it makes (checkpoint + 1, + 2,
//!   ...), made durable with one fdatasync;
//! - `__cluster/txn_state/slot-<N>.lock`, the advisory lock every writer (broker or
//!   kaasctl) holds from its read to its last append.
//!
//! A transition costs one journal line — the entry as it is afterwards, with only the
//! history items it adds — whatever the number of ids in the slot. When the journal
//! outgrows the checkpoint (and at least [`FOLD_MIN_BYTES`]) the writer *folds* it:
//! writes a new checkpoint at the current generation, then truncates the journal. A
//! crash between the two leaves journal lines the checkpoint already holds; readers
//! skip lines at or below the checkpoint's generation.
//!
//! Readers (with or without the lock) load the checkpoint and replay the journal's
//! complete lines. A last line cut short by a crash — no newline, or unparseable with
//! nothing valid after it — is ignored by readers and cut off by the next writer
//! before it appends; it was never acknowledged. An invalid line with valid lines
//! after it is corruption: an error naming the file and the byte offset, and the
//! slot is left as it is for an operator (`kaasctl txn repair --fix` moves it aside).
//!
//! A reader keeps a [`SlotState`] and brings it up to date with
//! [`TxnStateStore::refresh`]: an open and fstat of each file, and a read of only the
//! journal bytes appended since. Format: docs/transaction-formats.md.
//!
//! Why one file of ~1,000 lines: the checkpoint, the journal, the fold and the group
//! commit are one protocol over the same two files and the same lock — a reader's
//! catch-up is only correct against exactly this writer's order of appends, folds and
//! renames — so they are read, reviewed and changed together.

use crate::error::VolumeError;
use crate::fsutil::{stamp_of, FileStamp};
use crate::layout::Volume;
use crate::txn::{slot_for, Transition, TxnEntry, HISTORY_LEN};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

crate::versioned!(SlotFile);

/// How long [`TxnStateStore::lock_slot`] waits for a slot lock another process holds:
/// longer than brokers take to take over the lock of a holder confirmed dead (the
/// session timeout, 10 s by default, and a judging interval), so a kaasctl command
/// racing such a take-over still gets the slot.
pub const SLOT_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How many slots the transactional ids hash into ([`crate::txn::slot_for`]).
pub use crate::txn::SLOTS;
/// The checkpoint format. Version 1 (before the journal) is read and migrated in
/// place: the first writer of such a slot writes it back as version 2 before it
/// appends, so a build that knows no journal refuses the slot instead of misreading it.
pub const SLOT_FORMAT_VERSION: u32 = 2;
pub const LEGACY_SLOT_FORMAT_VERSION: u32 = 1;
pub const JOURNAL_FORMAT_VERSION: u32 = 1;
/// A journal is folded into the checkpoint once it holds more bytes than this and
/// more than the checkpoint itself: the fold's cost, O(ids in the slot), is then paid
/// at most once per as many journal bytes, so each transition costs O(1) amortised.
pub const FOLD_MIN_BYTES: u64 = 1 << 20;
/// Lock-free reads retry this many times when a fold by another writer changes the
/// files under them.
const READ_ATTEMPTS: usize = 5;

/// A slot's entries at one generation: the checkpoint, and what a reader materialises
/// from checkpoint + journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotFile {
    pub version: u32,
    pub slot: u32,
    /// Raised by every transition; a cached copy is valid only while it matches.
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

/// One transition of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotOp {
    /// The entry as it is after the transition.
    Put(TxnEntry),
    /// The entry is gone (transactional.id.expiration.ms).
    Remove(String),
}

/// One journal line. Exactly one of `put` / `remove` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalLine {
    pub version: u32,
    pub generation: u64,
    pub at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub put: Option<TxnEntry>,
    /// With `put`: its `history` holds only the transitions added to the entry's
    /// previous history (which it extends, oldest dropped past [`HISTORY_LEN`]);
    /// false when it holds the whole history.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history_appended: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<String>,
}

/// A slot as a reader last saw it, and where in its files it stands.
#[derive(Debug, Clone)]
pub struct SlotState {
    pub file: SlotFile,
    checkpoint: Option<FileStamp>,
    checkpoint_len: u64,
    /// The inode of the journal whose bytes up to `journal_len` are applied.
    journal_inode: Option<u64>,
    /// Bytes of the journal applied (always just after a newline).
    journal_len: u64,
    /// Whether this copy's writer has fsynced the slot directory since the copy was
    /// read: the journal's directory entry may be unsynced (a writer that crashed
    /// between installing it and syncing the directory), and lines fdatasynced into
    /// a file whose name a power loss takes back are lost.
    dir_synced: bool,
    /// The journal read carries [`FOLD_DUE_MODE`]: a process's fdatasync of it failed,
    /// and the next holder rewrites the slot from what it reads before appending.
    journal_marked: bool,
}

/// A mode bit (owner execute; kaas never sets it on a journal otherwise, and the
/// volume's files are 0600) that a process whose
/// fdatasync of a slot journal failed sets on that journal with `fchmod`, writing no
/// data: its lines may never reach the disk, while every process still reads them
/// from the page cache until it drops them. Another process that appended behind
/// them and synced without seeing the error (Linux reports a write-back error once)
/// would have its line cut off with them. Whoever holds the slot next — any
/// process, also after the failing one died — reads the mark with the journal's
/// metadata and folds the slot from what it reads before its first append; the
/// fold's new journal carries no mark.
pub const FOLD_DUE_MODE: u32 = 0o100;

/// Whether a journal's metadata carries [`FOLD_DUE_MODE`].
fn marked(meta: &std::fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & FOLD_DUE_MODE != 0
}

/// Sets [`FOLD_DUE_MODE`] on a journal whose fdatasync (through `file`) failed. A
/// failure to do so is logged: then only this process knows to rewrite the slot.
fn mark_fold_due(file: &File, path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let marked = file
        .metadata()
        .and_then(|m| file.set_permissions(std::fs::Permissions::from_mode(m.permissions().mode() | FOLD_DUE_MODE)));
    if let Err(e) = marked {
        tracing::error!(path = %path.display(), error = %e, "could not mark a transaction slot journal whose fdatasync failed; only this process knows to rewrite it");
    }
}

/// What [`TxnStateStore::salvage`] saved of a slot that does not read.
#[derive(Debug)]
pub struct Salvage {
    /// The slot as saved: to be installed with [`TxnStateStore::fold`].
    pub state: SlotState,
    /// Why the checkpoint was not used (it did not parse).
    pub checkpoint_lost: Option<String>,
    /// Journal lines kept (applied, or already in the checkpoint).
    pub kept_lines: usize,
    /// Journal lines dropped: the first bad one and every line after it.
    pub dropped_lines: usize,
    /// The first bad line: its byte offset and what is wrong with it.
    pub dropped_at: Option<(u64, String)>,
    /// Transactional ids named by dropped lines (parsed, or found in the text of one
    /// that does not parse): their entries may be older than they were (a
    /// transition lost).
    pub maybe_stale: BTreeSet<String>,
    /// Dropped lines that do not parse (what they did is unknown).
    pub unreadable: usize,
    /// Ids a dropped line that parses put in a transaction in flight (Ongoing,
    /// Prepare*): it may have been acknowledged, its markers partly written.
    pub dropped_in_flight: BTreeSet<String>,
}

impl SlotState {
    fn new(file: SlotFile, checkpoint: Option<FileStamp>) -> Self {
        SlotState {
            checkpoint_len: checkpoint.map_or(0, |s| s.len),
            file,
            checkpoint,
            journal_inode: None,
            journal_len: 0,
            dir_synced: false,
            journal_marked: false,
        }
    }
    pub fn slot(&self) -> u32 {
        self.file.slot
    }
    pub fn generation(&self) -> u64 {
        self.file.generation
    }
    /// The inode of the journal this copy has read (or appended) up to, 0 for none
    /// (what [`GroupCommit::appended`] is told).
    pub fn journal(&self) -> u64 {
        self.journal_inode.unwrap_or(0)
    }
    pub fn entry(&self, transactional_id: &str) -> Option<&TxnEntry> {
        self.file.entries.get(transactional_id)
    }
    pub fn entries(&self) -> &BTreeMap<String, TxnEntry> {
        &self.file.entries
    }
    /// Whether the journal has grown past its bound (or the checkpoint is of the old
    /// version): the next writer folds it into the checkpoint.
    pub fn wants_fold(&self) -> bool {
        self.journal_len > FOLD_MIN_BYTES.max(self.checkpoint_len) || self.file.version != SLOT_FORMAT_VERSION
    }
}

/// What identifies the current version of a slot cheaply: the stamps of its two
/// files. A copy read while both were as they are now is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotStamp {
    pub checkpoint: Option<FileStamp>,
    pub journal: Option<FileStamp>,
}

/// The exclusive lock of one slot (see [`TxnStateStore::lock_slot`]); released on drop.
#[derive(Debug)]
pub struct SlotLock {
    slot: u32,
    _file: File,
    id: SlotLockId,
    /// The holder's lines: the one it wrote, the one it leaves when it lets go.
    lines: Arc<HolderLines>,
    /// The lock file's path.
    path: PathBuf,
    /// Taken from a holder judged dead ([`TxnStateStore::steal_slot`]): the slot is
    /// folded into a fresh checkpoint and journal before anything is appended, so
    /// nothing the deposed holder still writes reaches the files read from now on.
    fresh_history_due: AtomicBool,
}

impl SlotLock {
    /// The lock held on `file` (whose metadata is `meta`); `stolen`: taken from a
    /// holder judged dead, so a fresh history is due.
    fn on(
        slot: u32,
        file: File,
        meta: &std::fs::Metadata,
        stolen: bool,
        lines: Arc<HolderLines>,
        path: PathBuf,
    ) -> SlotLock {
        use std::os::unix::fs::MetadataExt;
        SlotLock {
            slot,
            _file: file,
            id: SlotLockId {
                slot,
                dev: meta.dev(),
                ino: meta.ino(),
                seq: {
                    static SEQ: AtomicU64 = AtomicU64::new(0);
                    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
                    lock_fate().insert(seq, false);
                    seq
                },
            },
            fresh_history_due: AtomicBool::new(stolen),
            lines,
            path,
        }
    }
    pub fn slot(&self) -> u32 {
        self.slot
    }
    /// Which lock file this is: a writer that let the lock go (group commit) checks
    /// after its sync that the slot's lock file is still this one.
    pub fn id(&self) -> SlotLockId {
        self.id
    }
    /// Whether a fresh history is due before the first append: the lock was taken
    /// from a holder judged dead, or its file named another holder.
    pub fn stolen(&self) -> bool {
        self.fresh_history_due.load(Ordering::Acquire)
    }
}

/// The identity of one slot lock file (device and inode): the slot's lock changes
/// hands by a new file only when it is taken from a holder judged dead, so a holder
/// whose file is no longer the one at the path has been deposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLockId {
    pub slot: u32,
    dev: u64,
    ino: u64,
    /// Which taking of the lock (unique in this process): see [`lock_fate`].
    seq: u64,
}

/// What became of each slot lock this process took and has not let go cleanly:
/// false while held, true once found lost — its line was another holder's when it
/// was let go (its lock lapsed, and another process took the same file). A lock let
/// go cleanly has no entry: another holder's line is then a normal change of hands.
fn lock_fate() -> std::sync::MutexGuard<'static, std::collections::HashMap<u64, bool>> {
    static FATE: std::sync::OnceLock<Mutex<std::collections::HashMap<u64, bool>>> = std::sync::OnceLock::new();
    FATE.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl Drop for SlotLock {
    /// Lets the lock go. First, through a fresh open (on NFS, close-to-open reads the
    /// server's copy), whether the file still names this holder: if not, or if it
    /// cannot be read, the lock was lost before it was let go (it lapsed and another
    /// process took the file), and every later check of it fails. Then a second line
    /// marking this holder released is written after the first (through the locked
    /// descriptor, flushed before the unlock). It counts only while the first line
    /// names the same holder and run, so a late one — from a holder whose lock lapsed
    /// — never erases the line of the holder after it. Should the write fail, the
    /// next holder finds no release and starts a fresh journal: the safe side.
    fn drop(&mut self) {
        use std::os::unix::fs::FileExt;
        let HolderLines { held, released } = &*self.lines;
        let still_named = crate::fsutil::open_regular(&self.path).and_then(|f| holder_line(&f));
        let clean = matches!(&still_named, Ok(contents) if first_line(contents) == held.as_bytes());
        {
            let mut fate = lock_fate();
            if clean {
                fate.remove(&self.id.seq);
            } else {
                fate.insert(self.id.seq, true);
            }
        }
        if let Err(e) = still_named {
            tracing::warn!(slot = self.slot, path = %self.path.display(), error = %e, "cannot read a transaction slot lock file when letting it go; what this process still waits on in that slot is not acknowledged");
        }
        if let Err(e) = self._file.write_all_at(released.as_bytes(), LINE_WIDTH) {
            tracing::warn!(slot = self.slot, path = %self.path.display(), error = %e, "cannot mark a transaction slot lock released; its next holder starts a fresh journal");
        }
    }
}

/// Width of a lock file's first line (the holder, padded with spaces), so a release
/// line always goes at the same offset, after it.
const LINE_WIDTH: u64 = 128;

/// A lock file's first line: the holder's (with its newline).
fn first_line(contents: &[u8]) -> &[u8] {
    match contents.iter().position(|b| *b == b'\n') {
        Some(nl) => &contents[..=nl],
        None => contents,
    }
}

/// Who holds a slot lock, as recorded in the lock file (one line) by every holder
/// when it takes the lock: what a broker judging the lock abandoned reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotHolder {
    /// A broker, judged dead by its lease.
    Broker(i32),
    /// kaasctl or another tool: never judged dead (stop it to free the slot).
    Admin,
}

impl SlotHolder {
    /// The lock file's line: who, which process, and a CRC-32C of both, so a read
    /// that raced a rewrite (torn) names nobody rather than a wrong broker.
    ///
    /// The pid alone does not tell processes apart: every broker of the Kubernetes
    /// StatefulSet is PID 1, and a broker restarted on another node after its NFS
    /// locks lapsed would write the very line of the process it replaced. A random
    /// word drawn once per process does.
    fn record(&self) -> String {
        Self::line(&self.who())
    }
    /// The second line a holder writes when it lets the lock go cleanly: `released`
    /// and its own first line's text. The next holder that finds the first line of
    /// another process without it knows that one did not let go — it crashed, or its
    /// NFS lock lapsed with writes still in its cache — and starts a fresh journal.
    fn released_record(&self) -> String {
        Self::line(&format!("released {}", self.who()))
    }
    fn who(&self) -> String {
        static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let nonce = NONCE.get_or_init(|| uuid::Uuid::new_v4().simple().to_string());
        match self {
            SlotHolder::Broker(id) => format!("broker {id} pid {} run {nonce}", std::process::id()),
            SlotHolder::Admin => format!("admin pid {} run {nonce}", std::process::id()),
        }
    }
    /// A line of [`LINE_WIDTH`] bytes: the text, its CRC, spaces, a newline.
    fn line(who: &str) -> String {
        let text = format!("{who} crc {:08x}", crc32c::crc32c(who.as_bytes()));
        format!("{text:<width$}\n", width = LINE_WIDTH as usize - 1)
    }
    /// Whether a lock file's contents show its first line's holder let it go: a
    /// second line `released` followed by exactly that holder's text.
    fn is_released(contents: &[u8]) -> bool {
        let first = first_line(contents);
        let (Some(who), Some(second)) = (Self::checked_text(first), contents.get(first.len()..)) else {
            return false;
        };
        Self::checked_text(first_line(second)).is_some_and(|r| r.strip_prefix("released ") == Some(who))
    }
    /// A line's text before ` crc `, if its CRC matches.
    fn checked_text(line: &[u8]) -> Option<&str> {
        let text = std::str::from_utf8(line).ok()?.trim_end();
        let (who, crc) = text.rsplit_once(" crc ")?;
        (u32::from_str_radix(crc, 16).ok()? == crc32c::crc32c(who.as_bytes())).then_some(who)
    }
    /// The holder a lock file's contents name; None for anything else (an empty
    /// file, written by an older build, a torn read: never judged by a lease — see
    /// [`TxnStateStore::steal_slot`]).
    pub fn parse(contents: &[u8]) -> Option<SlotHolder> {
        let who = Self::checked_text(first_line(contents))?;
        let mut words = who.split_whitespace();
        match words.next()? {
            "broker" => words.next()?.parse().ok().map(SlotHolder::Broker),
            "admin" => Some(SlotHolder::Admin),
            _ => None,
        }
    }
}

/// A holder's two lock-file lines, built once per store: the one it writes when it
/// takes a lock, and the one it adds when it lets go.
#[derive(Debug)]
struct HolderLines {
    held: String,
    released: String,
}

impl HolderLines {
    fn of(holder: SlotHolder) -> Arc<Self> {
        Arc::new(HolderLines {
            held: holder.record(),
            released: holder.released_record(),
        })
    }
}

/// A slot lock file's holder line, as read from its start (at most 160 bytes: longer
/// than any line a holder writes).
fn holder_line(file: &File) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut line = vec![0u8; 2 * LINE_WIDTH as usize + 32];
    let n = file.read_at(&mut line, 0)?;
    line.truncate(n);
    Ok(line)
}

/// A slot lock file as a broker judging its holder read it: which file (inode) and
/// what it said. Two reads a judging interval apart that are equal mean one holder
/// held it all along (see [`TxnStateStore::steal_slot`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HolderSeen {
    inode: u64,
    record: Vec<u8>,
}

/// What a broker judging a held slot lock last read of it ([`HolderSeen`]), since
/// when it has read the same, and when it last looked: the judge's memory between
/// looks (see [`TxnStateStore::steal_slot`]).
#[derive(Debug, Clone)]
pub struct Sighting {
    seen: HolderSeen,
    since: std::time::Instant,
    last: std::time::Instant,
    /// Looks that found it so, this one included.
    looks: u32,
}

/// When a slot lock held under a line naming nobody is taken over
/// ([`TxnStateStore::steal_slot`]): once read unchanged for `after`, in at least
/// [`UNNAMED_LOOKS`] looks no further apart than `gap` (two looks further apart are
/// not one sighting: the lock may have changed hands and back in between, unseen).
#[derive(Debug, Clone, Copy)]
pub struct UnnamedHold {
    pub after: std::time::Duration,
    pub gap: std::time::Duration,
}

impl UnnamedHold {
    /// Never taken over (tests); looks at any distance are one sighting (a holder
    /// named by its line is judged by its lease on two looks in a row).
    pub const NEVER: UnnamedHold = UnnamedHold {
        after: std::time::Duration::MAX,
        gap: std::time::Duration::MAX,
    };
}

/// Looks a lock held under a line naming nobody must be found so, unchanged, before
/// it is taken over: a live holder is in that state for a few system calls, so one
/// look in such a window is possible on a busy slot, and three in a row are not.
const UNNAMED_LOOKS: u32 = 3;

#[derive(Debug, Clone)]
pub struct TxnStateStore {
    volume: Volume,
    holder: SlotHolder,
    lines: Arc<HolderLines>,
    /// What this process keeps of each slot between writes (shared by the clones).
    kept: Arc<Kept>,
}

/// Per slot, in this process: the journal descriptor the first append to the current
/// journal opened, which every sync goes through, and whether the slot must be
/// written again from memory before its next write.
#[derive(Debug)]
struct Kept {
    journals: Vec<Mutex<Option<HeldJournal>>>,
    fold_due: Vec<AtomicBool>,
}

impl Kept {
    fn new() -> Arc<Self> {
        Arc::new(Kept {
            journals: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
            fold_due: (0..SLOTS).map(|_| AtomicBool::new(false)).collect(),
        })
    }
}

/// A journal descriptor opened before a write not yet synced. Linux reports a
/// write-back error to every descriptor open when it happened, and to a descriptor
/// opened later only while nobody has seen it: another process's fdatasync of the
/// same journal (a reader's `sync_now`, kaasctl) would otherwise take the error, and
/// a sync through a fresh open would succeed over lost lines.
#[derive(Debug)]
struct HeldJournal {
    inode: u64,
    file: Arc<File>,
}

/// An I/O error of a replay: a file replaced under an NFS reader (ESTALE) is a fold
/// by another host, read again; anything else is a definite error.
fn io_failure(path: &std::path::Path, e: std::io::Error) -> ReplayError {
    if e.raw_os_error() == Some(libc::ESTALE) {
        ReplayError::Moved(VolumeError::io(path, e))
    } else {
        ReplayError::Fatal(VolumeError::io(path, e))
    }
}

/// Why a replay stopped short.
enum ReplayError {
    /// The files changed under a lock-free reader (a fold), or disagree: read again.
    Moved(VolumeError),
    /// A definite error (I/O, an unknown version).
    Fatal(VolumeError),
}

impl TxnStateStore {
    /// A store whose locks are recorded as an admin tool's (kaasctl, tests).
    pub fn new(volume: Volume) -> Self {
        TxnStateStore {
            volume,
            holder: SlotHolder::Admin,
            lines: HolderLines::of(SlotHolder::Admin),
            kept: Kept::new(),
        }
    }

    /// A store whose locks are recorded as broker `broker_id`'s: other brokers may
    /// take them once that broker's lease is confirmed dead ([`Self::steal_slot`]).
    pub fn for_broker(volume: Volume, broker_id: i32) -> Self {
        TxnStateStore {
            volume,
            holder: SlotHolder::Broker(broker_id),
            lines: HolderLines::of(SlotHolder::Broker(broker_id)),
            kept: Kept::new(),
        }
    }

    pub fn dir(&self) -> PathBuf {
        self.volume.cluster_dir().join("txn_state")
    }
    /// The checkpoint.
    pub fn slot_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.json"))
    }
    pub fn journal_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.journal"))
    }
    pub fn lock_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.lock"))
    }
    /// Held only while the slot's lock file is replaced (a steal) or while its holder
    /// replaces or cuts the slot's files (a fold, a torn tail cut): see
    /// [`Self::steal_slot`].
    pub fn gate_path(&self, slot: u32) -> PathBuf {
        self.dir().join(format!("slot-{slot}.gate"))
    }

    /// The stamps of a slot's files; None when neither exists (an empty slot).
    pub fn stamp(&self, slot: u32) -> Option<SlotStamp> {
        let stamp = SlotStamp {
            checkpoint: crate::fsutil::file_stamp(&self.slot_path(slot)),
            journal: crate::fsutil::file_stamp(&self.journal_path(slot)),
        };
        (stamp.checkpoint.is_some() || stamp.journal.is_some()).then_some(stamp)
    }

    /// Reads a slot without the lock; a slot with no files is empty, a corrupt or
    /// unknown-version file an error naming it (and the byte offset in a journal).
    pub fn read_slot(&self, slot: u32) -> Result<SlotFile, VolumeError> {
        Ok(self.load(slot)?.file)
    }

    /// The entry of one transactional id, read without the lock.
    pub fn get(&self, transactional_id: &str) -> Result<Option<TxnEntry>, VolumeError> {
        Ok(self
            .read_slot(slot_for(transactional_id))?
            .entries
            .remove(transactional_id))
    }

    /// Every slot, each as read or as the error that prevented reading it.
    pub fn read_all(&self) -> Vec<(u32, Result<SlotFile, VolumeError>)> {
        (0..SLOTS).map(|s| (s, self.read_slot(s))).collect()
    }

    /// Reads the checkpoint through one descriptor: its contents and the stamp of
    /// exactly the version read.
    fn read_checkpoint(&self, slot: u32) -> Result<(SlotFile, Option<FileStamp>), VolumeError> {
        let path = self.slot_path(slot);
        let (file, meta) = match crate::fsutil::open_regular_meta(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((SlotFile::empty(slot), None)),
            Err(e) => return Err(VolumeError::io(&path, e)),
        };
        let stamp = stamp_of(&meta);
        let bytes = crate::fsutil::read_capped_from(&file, crate::fsutil::MAX_STATE_FILE_BYTES)
            .map_err(|e| VolumeError::io(&path, e))?;
        let parsed = parse_checkpoint(&path, &bytes)?;
        if parsed.slot != slot {
            return Err(VolumeError::Invalid {
                path,
                detail: format!("file says it is slot {}, its name says slot {slot}", parsed.slot),
            });
        }
        Ok((parsed, Some(stamp)))
    }

    /// Reads a slot in full without the lock: the checkpoint, then the journal.
    pub fn load(&self, slot: u32) -> Result<SlotState, VolumeError> {
        let mut last = None;
        for _ in 0..READ_ATTEMPTS {
            let (file, stamp) = self.read_checkpoint(slot)?;
            let mut state = SlotState::new(file, stamp);
            match self.replay(&mut state) {
                // The checkpoint must still be the one read: a fold in between may
                // have emptied the journal of lines the old checkpoint lacks.
                Ok(_) if crate::fsutil::file_stamp(&self.slot_path(slot)) == stamp => return Ok(state),
                Ok(_) => {
                    last = Some(VolumeError::Invalid {
                        path: self.slot_path(slot),
                        detail: "replaced while read, again and again".into(),
                    })
                }
                Err(ReplayError::Fatal(e)) => return Err(e),
                Err(ReplayError::Moved(e)) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// Brings `state` up to date without the lock: reads only what was appended since,
    /// or everything again when the checkpoint was replaced. Returns whether anything
    /// changed. On error `state` is as before or newer, never torn.
    pub fn refresh(&self, state: &mut SlotState) -> Result<bool, VolumeError> {
        let slot = state.slot();
        if crate::fsutil::file_stamp(&self.slot_path(slot)) != state.checkpoint {
            *state = self.load(slot)?;
            return Ok(true);
        }
        let before = state.file.generation;
        match self.replay(state) {
            Ok(_) => Ok(state.file.generation != before),
            Err(ReplayError::Fatal(e)) => Err(e),
            Err(ReplayError::Moved(_)) => {
                *state = self.load(slot)?;
                Ok(true)
            }
        }
    }

    /// Applies the journal's complete lines after `state.journal_len`. Returns the
    /// journal's size as it was read (0: no journal); past `journal_len` it holds a
    /// torn last line.
    fn replay(&self, state: &mut SlotState) -> Result<u64, ReplayError> {
        let path = self.journal_path(state.slot());
        let (mut file, meta) = match crate::fsutil::open_regular_meta(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return if state.journal_len == 0 {
                    state.journal_inode = None;
                    Ok(0)
                } else {
                    Err(ReplayError::Moved(VolumeError::io(&path, e)))
                };
            }
            Err(e) => return Err(io_failure(&path, e)),
        };
        let inode = stamp_of(&meta).inode;
        if state.journal_inode.is_some_and(|i| i != inode) || meta.len() < state.journal_len {
            return Err(ReplayError::Moved(VolumeError::Invalid {
                path,
                detail: "the journal was replaced or truncated while read".into(),
            }));
        }
        state.journal_inode = Some(inode);
        state.journal_marked = marked(&meta);
        if meta.len() == state.journal_len {
            return Ok(meta.len());
        }
        if meta.len() > crate::fsutil::MAX_STATE_FILE_BYTES {
            return Err(ReplayError::Fatal(VolumeError::Invalid {
                path,
                detail: format!(
                    "the journal is {} bytes, more than the {} bytes a state file may have",
                    meta.len(),
                    crate::fsutil::MAX_STATE_FILE_BYTES
                ),
            }));
        }
        let start = state.journal_len;
        let mut bytes = Vec::with_capacity((meta.len() - start) as usize);
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.take(meta.len() - start).read_to_end(&mut bytes))
            .map_err(|e| io_failure(&path, e))?;
        let mut at = 0usize;
        while let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') {
            let line = &bytes[at..at + nl];
            let offset = start + at as u64;
            match parse_line(line) {
                Ok(parsed) => {
                    if parsed.version != JOURNAL_FORMAT_VERSION {
                        return Err(ReplayError::Fatal(VolumeError::UnknownVersion {
                            path,
                            what: "transaction slot journal line",
                            found: parsed.version,
                            supported: JOURNAL_FORMAT_VERSION,
                        }));
                    }
                    if parsed.generation > state.file.generation {
                        if parsed.generation != state.file.generation + 1 {
                            return Err(ReplayError::Moved(VolumeError::Invalid {
                                path,
                                detail: format!(
                                    "byte {offset}: line of generation {} follows generation {}",
                                    parsed.generation, state.file.generation
                                ),
                            }));
                        }
                        apply_line(&mut state.file, parsed).map_err(|detail| {
                            ReplayError::Moved(VolumeError::Invalid {
                                path: path.clone(),
                                detail: format!("byte {offset}: {detail}"),
                            })
                        })?;
                    }
                }
                Err(e) => {
                    // A line of a newer format: refuse, never cut it as torn.
                    if let Some(found) = line_version(line).filter(|v| *v != JOURNAL_FORMAT_VERSION) {
                        return Err(ReplayError::Fatal(VolumeError::UnknownVersion {
                            path,
                            what: "transaction slot journal line",
                            found,
                            supported: JOURNAL_FORMAT_VERSION,
                        }));
                    }
                    // A torn write of the last append ends the journal: nothing valid
                    // after it. Anything valid after it makes it corruption.
                    let rest = &bytes[at + nl + 1..];
                    if rest
                        .split(|b| *b == b'\n')
                        .any(|l| parse_line(l).is_ok() || line_version(l).is_some())
                    {
                        return Err(ReplayError::Moved(VolumeError::Parse {
                            path,
                            what: "transaction slot journal line",
                            detail: format!("byte {offset}: {e}"),
                        }));
                    }
                    return Ok(meta.len());
                }
            }
            at += nl + 1;
            state.journal_len = start + at as u64;
        }
        Ok(meta.len())
    }

    /// Takes the exclusive lock of one slot, waiting at most [`SLOT_LOCK_WAIT`] while
    /// another process holds it ([`Self::lock_slot_within`]). Brokers take their
    /// slots' locks through their own bounded, take-over-aware wait; this is for
    /// callers that keep no state of their own (kaasctl, tests).
    pub fn lock_slot(&self, slot: u32) -> Result<SlotLock, VolumeError> {
        self.lock_slot_within(slot, SLOT_LOCK_WAIT)
    }

    /// Takes the exclusive lock of one slot, or [`VolumeError::Busy`] once another
    /// process held it for all of `wait`. Tried without blocking, again and again,
    /// with pauses growing to 50 ms: a blocking `flock` on a file a take-over replaced
    /// would wait for its deposed holder, which may stay paused forever; each try
    /// opens the path afresh. Unbounded, a kaasctl command on a slot whose lock a
    /// paused broker held waited for good, saying nothing: brokers take such a lock
    /// over only when they need the slot, and nobody may need an idle one.
    pub fn lock_slot_within(&self, slot: u32, wait: std::time::Duration) -> Result<SlotLock, VolumeError> {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            if let Some(lock) = self.try_lock_slot(slot)? {
                return Ok(lock);
            }
            if started.elapsed() >= wait {
                return Err(VolumeError::Busy {
                    path: self.lock_path(slot),
                    waited_ms: started.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
    }

    /// Like [`Self::lock_slot`] but never waits: None while another process (or
    /// another open of the lock file) holds it.
    pub fn try_lock_slot(&self, slot: u32) -> Result<Option<SlotLock>, VolumeError> {
        let path = self.lock_path(slot);
        let Some(file) = self
            .with_dir(|| crate::fsutil::try_lock_exclusive(&path))
            .map_err(|e| VolumeError::io(&path, e))?
        else {
            return Ok(None);
        };
        self.held(slot, file)
    }

    /// A lock just taken on `file`: None if the file is no longer the slot's lock
    /// file (a steal replaced it between the open and the lock: nobody else opens it
    /// any more). Otherwise the file records this holder (written only when it names
    /// another, not synced: a record that lags on a network file system costs only a
    /// steal that waits, never safety — see [`Self::steal_slot`]).
    fn held(&self, slot: u32, file: File) -> Result<Option<SlotLock>, VolumeError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.lock_path(slot);
        let io = |e: std::io::Error| VolumeError::io(&path, e);
        let mine = file.metadata().map_err(io)?;
        let current = match crate::fsutil::open_regular_meta(&path) {
            Ok((_, m)) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        if (mine.dev(), mine.ino()) != (current.dev(), current.ino()) {
            return Ok(None);
        }
        let record = &self.lines.held;
        let contents = holder_line(&file).map_err(io)?;
        let another = first_line(&contents) != record.as_bytes();
        // Not let go cleanly by another process (or written by an older build).
        let unreleased = another && !SlotHolder::is_released(&contents);
        if contents != record.as_bytes() {
            use std::os::unix::fs::FileExt;
            // This holder's line alone (any release line cut off, so that a lapse of
            // this lock is seen as one), through a descriptor of its own closed at
            // once: on NFS the close sends it to the server (close-to-open), so a
            // broker judging the lock reads this holder, not the last one.
            // Written only if that descriptor is of the file locked: a holder stopped
            // since its check above, whose lock was taken over meanwhile, must not
            // write its line into the new holder's file.
            let other = crate::fsutil::open_volume_file(OpenOptions::new().write(true), &path).map_err(io)?;
            let opened = other.metadata().map_err(io)?;
            if (opened.dev(), opened.ino()) != (mine.dev(), mine.ino()) {
                return Ok(None);
            }
            other
                .write_all_at(record.as_bytes(), 0)
                .and_then(|_| other.set_len(record.len() as u64))
                .map_err(io)?;
        }
        // The last holder, another process, did not let go cleanly: if its lock
        // lapsed (NFS), it may still flush writes of its own to the journal — at the
        // offsets it computed, over whatever this holder appends there. So the slot
        // is folded into a fresh journal before this holder's first append, as after
        // a take-over: those writes land in a file nobody reads (issue 25 item 9).
        Ok(Some(SlotLock::on(
            slot,
            file,
            &mine,
            unreleased,
            self.lines.clone(),
            path,
        )))
    }

    /// Takes slot `slot`'s lock, or, while another process holds it, takes it over
    /// if its recorded holder is a broker `judge` says is dead (a broker whose lease is confirmed
    /// dead: a process paused by SIGSTOP or a frozen VM keeps its lock forever).
    /// None while the lock stays held by a holder not judged dead.
    ///
    /// A lock file that names no holder while the lock is held — its first line
    /// released by the last holder, empty, or unreadable as a holder line — is taken
    /// over once `sighting` has read it unchanged as `unnamed` says. Its holder is
    /// a process stopped in a window of a few system calls: the last holder between
    /// marking its line released and the unlock, or the next between its lock and
    /// writing its own line. Either may be paused for as long as any other holder
    /// (CI caught one between mark and unlock), and which one it is cannot be read,
    /// so no lease can judge it: a holder that moves writes its line within those
    /// few calls. A take-over is safe whoever holds the lock (below); the wait only
    /// keeps a live holder in that window from losing its slot.
    ///
    /// A steal puts a new lock file in place of the old one (rename), under the
    /// slot's gate, so two brokers never both steal. The deposed holder keeps a lock
    /// on a file nobody else opens, and:
    /// - acknowledges nothing more: every acknowledgment waits for a sync, then checks
    ///   that the slot's lock file is still its own ([`Self::holds`]), and the steal
    ///   renames the file before the new holder reads the slot — so each transition
    ///   either was durable before the new holder's read, or is never acknowledged;
    /// - appends nothing the new holder reads: the new holder folds the slot into a
    ///   fresh checkpoint and journal before its first append (see
    ///   [`Self::catch_up`]), an append checks that the journal it opened is the one
    ///   its copy was read from, and a fold or torn-tail cut (the only writes by
    ///   path) runs under the gate after checking the lock file is still its own.
    pub fn steal_slot(
        &self,
        slot: u32,
        judge: &dyn Fn(i32) -> bool,
        unnamed: UnnamedHold,
        sighting: &mut Option<Sighting>,
    ) -> Result<Option<SlotLock>, VolumeError> {
        if let Some(lock) = self.try_lock_slot(slot)? {
            *sighting = None;
            return Ok(Some(lock));
        }
        let path = self.lock_path(slot);
        // The lock file as it is now, and as the caller's last look found it: only a
        // record unchanged since then (the same file, the same holder process) is
        // judged — a holder writes its line just after it takes the lock, so a line
        // read once may still name the holder before it, which may be dead.
        let now = self.holder_seen(slot)?;
        let at = std::time::Instant::now();
        let before = sighting
            .as_ref()
            .filter(|s| Some(&s.seen) == now.as_ref() && at.duration_since(s.last) <= unnamed.gap)
            .map(|s| (s.since, s.looks));
        *sighting = now.clone().map(|seen| Sighting {
            seen,
            since: before.map_or(at, |(since, _)| since),
            last: at,
            looks: before.map_or(1, |(_, looks)| looks + 1),
        });
        let (Some(now), Some((since, looks))) = (now, before) else {
            return Ok(None);
        };
        let looks = looks + 1;
        // A broker is judged by its lease; kaasctl never; a file naming nobody by how
        // long it has stayed so. Judged before the gate is taken: the gate is held
        // only for the swap.
        let holder = SlotHolder::parse(&now.record).filter(|_| !SlotHolder::is_released(&now.record));
        let take = match holder {
            Some(SlotHolder::Broker(id)) => self.holder != SlotHolder::Broker(id) && judge(id),
            Some(SlotHolder::Admin) => false,
            None => looks >= UNNAMED_LOOKS && at.duration_since(since) >= unnamed.after,
        };
        if !take {
            tracing::debug!(slot, ?holder, "slot lock held by a holder not judged dead");
            return Ok(None);
        }
        let Some(_gate) = self.gate(slot)? else {
            tracing::debug!(slot, "slot lock held, and its gate too: no take-over this time");
            return Ok(None);
        };
        // Under the gate: still held, by the same holder in the same file.
        if let Some(lock) = self.try_lock_slot(slot)? {
            *sighting = None;
            return Ok(Some(lock));
        }
        if self.holder_seen(slot)?.as_ref() != Some(&now) {
            return Ok(None);
        }
        let fresh = crate::fsutil::temp_path(&path);
        let io = |e: std::io::Error| VolumeError::io(&fresh, e);
        let mut file = crate::fsutil::create_temp(&fresh).map_err(io)?;
        let taken = (|| {
            file.try_lock().map_err(|e| std::io::Error::other(e.to_string()))?;
            file.write_all(self.lines.held.as_bytes())?;
            std::fs::rename(&fresh, &path)
        })();
        if let Err(e) = taken {
            let _ = std::fs::remove_file(&fresh);
            return Err(io(e));
        }
        let meta = file.metadata().map_err(|e| VolumeError::io(&path, e))?;
        *sighting = None;
        match holder {
            Some(holder) => tracing::warn!(slot, ?holder, "took over a transaction slot lock whose holder's lease is confirmed dead"),
            None => tracing::warn!(slot, held_unnamed_ms = at.duration_since(since).as_millis() as u64, "took over a transaction slot lock held under no holder's line (its holder stopped between taking or letting go of the lock and its line)"),
        }
        Ok(Some(SlotLock::on(slot, file, &meta, true, self.lines.clone(), path)))
    }

    /// The slot's lock file now: its inode and its holder line (None: no file).
    fn holder_seen(&self, slot: u32) -> Result<Option<HolderSeen>, VolumeError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.lock_path(slot);
        match crate::fsutil::open_regular_meta(&path) {
            Ok((f, m)) => Ok(Some(HolderSeen {
                inode: m.ino(),
                record: holder_line(&f).map_err(|e| VolumeError::io(&path, e))?,
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(VolumeError::io(&path, e)),
        }
    }

    /// Whether this process still holds the slot's lock `id`: the slot's lock file is
    /// still the one `id` names, and its holder line is still this holder's. Checked
    /// through a fresh open (on NFS, close-to-open revalidates it with the server),
    /// after a sync and before an answer.
    pub fn holds(&self, id: SlotLockId) -> Result<bool, VolumeError> {
        Ok(self.lost_because(id)?.is_none())
    }

    /// Why this process no longer holds the slot's lock `id`, if it does not:
    /// - the lock file was replaced: a broker that judged this holder dead took the
    ///   slot over ([`Self::steal_slot`]);
    /// - the same file names another holder: this process's lock lapsed — an NFS
    ///   client cut off past its lock lease loses its locks without being told — and
    ///   another process took it and wrote its line (every holder does, at once,
    ///   through a descriptor it closes: [`Self::held`]). Issue 25 item 9.
    fn lost_because(&self, id: SlotLockId) -> Result<Option<String>, VolumeError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.lock_path(id.slot);
        match crate::fsutil::open_regular_meta(&path) {
            Ok((f, m)) => {
                if (m.dev(), m.ino()) != (id.dev, id.ino) {
                    return Ok(Some(
                        "this process's lock on the slot was taken over by a broker that judged its holder dead (paused longer than the session timeout?): nothing it wrote since counts".into(),
                    ));
                }
                // Let go cleanly: whoever holds it now took it in turn. Found lost
                // when let go, or held and naming another holder now: lapsed.
                let held = match lock_fate().get(&id.seq) {
                    None => return Ok(None),
                    Some(lost) => !lost,
                };
                let contents = holder_line(&f).map_err(|e| VolumeError::io(&path, e))?;
                let line = first_line(&contents);
                if !held || line != self.lines.held.as_bytes() {
                    return Ok(Some(format!(
                        "the lock file now names another holder ({:?}): this process's lock lapsed (a network file system's lock lease, lost while it was cut off?) and another process took the slot: nothing it wrote since counts",
                        String::from_utf8_lossy(line).trim_end()
                    )));
                }
                Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(
                "the slot's lock file is gone (taken over, or moved by hand): nothing this process wrote since counts"
                    .into(),
            )),
            Err(e) => Err(VolumeError::io(&path, e)),
        }
    }

    /// [`Self::holds`] as an error naming why the lock is lost.
    pub fn check_held(&self, id: SlotLockId) -> Result<(), VolumeError> {
        match self.lost_because(id)? {
            None => Ok(()),
            Some(detail) => Err(VolumeError::Invalid {
                path: self.lock_path(id.slot),
                detail,
            }),
        }
    }

    /// The slot's gate, tried for about 1 s; None if another process kept it.
    fn gate(&self, slot: u32) -> Result<Option<File>, VolumeError> {
        let path = self.gate_path(slot);
        for _ in 0..100 {
            if let Some(gate) = self
                .with_dir(|| crate::fsutil::try_lock_exclusive(&path))
                .map_err(|e| VolumeError::io(&path, e))?
            {
                return Ok(Some(gate));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Ok(None)
    }

    /// The gate, for a holder about to replace, cut or remove files by path: held
    /// from a check that `id` is still the slot's lock to the end of the change, so
    /// no steal (which needs the gate) falls in between.
    fn gate_checked(&self, id: SlotLockId) -> Result<File, VolumeError> {
        let gate = self.gate(id.slot)?.ok_or_else(|| VolumeError::Invalid {
            path: self.gate_path(id.slot),
            detail: "held by another process for over a second".into(),
        })?;
        self.check_held(id)?;
        Ok(gate)
    }

    /// Runs `f` with the slot's gate held from a check that `id` is still the slot's
    /// lock to the end of `f`, for a holder writing or removing files of the slot's
    /// transactions by path (a transaction's marker queue entries): no take-over,
    /// which needs the gate, falls in between, so what `f` does lands before the
    /// slot's next holder acts, or not at all (Err: the lock is lost, or the gate was
    /// kept by another process for over a second). A holder paused after a plain
    /// check could otherwise replace or remove what the next holder wrote since.
    pub fn while_held<T>(&self, id: SlotLockId, f: impl FnOnce() -> Result<T, VolumeError>) -> Result<T, VolumeError> {
        let _gate = self.gate_checked(id)?;
        f()
    }

    /// Runs `f`, creating the slot directory first only when `f` finds it missing
    /// (no mkdir on every lock).
    fn with_dir<T>(&self, f: impl Fn() -> std::io::Result<T>) -> std::io::Result<T> {
        match f() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::fsutil::create_dir_durable(&self.dir())?;
                f()
            }
            other => other,
        }
    }

    /// [`Self::refresh`] when it is cheap: `state`'s checkpoint is the current one, of
    /// this version (no full read, no migration), so only the journal bytes appended
    /// since are read — an open and fstat of each file. Returns the journal's size
    /// as read, or None when a full refresh is needed (`state` is then as before or
    /// newer, never torn).
    pub fn refresh_if_cheap(&self, state: &mut SlotState) -> Result<Option<u64>, VolumeError> {
        if state.checkpoint.is_none()
            || state.file.version != SLOT_FORMAT_VERSION
            || crate::fsutil::file_stamp(&self.slot_path(state.slot())) != state.checkpoint
        {
            return Ok(None);
        }
        match self.replay(state) {
            Ok(seen) => Ok(Some(seen)),
            Err(ReplayError::Fatal(e)) => Err(e),
            Err(ReplayError::Moved(_)) => Ok(None),
        }
    }

    /// Under the lock: [`Self::catch_up`]'s common case, reading each file once —
    /// the cached state's checkpoint is current and the journal holds nothing past
    /// its last complete line (nothing to cut, nothing to migrate). False when the
    /// full `catch_up` is needed; after an error `state` is None, as after
    /// `catch_up`'s.
    pub fn catch_up_cheaply(&self, lock: &SlotLock, state: &mut Option<SlotState>) -> Result<bool, VolumeError> {
        // A fresh history or a rewrite from memory is due: only `catch_up` does those.
        if lock.stolen() || self.kept.fold_due[lock.slot as usize].load(Ordering::Acquire) {
            return Ok(false);
        }
        let Some(st) = state.as_mut().filter(|st| st.slot() == lock.slot) else {
            return Ok(false);
        };
        match self.refresh_if_cheap(st) {
            Ok(seen) => Ok(seen == Some(st.journal_len) && !st.journal_marked),
            Err(e) => {
                *state = None;
                Err(e)
            }
        }
    }

    /// Under the lock: brings `state` (None: nothing read yet) up to date for a write.
    /// A torn last line is cut off, and a version-1 checkpoint migrated, so the next
    /// append lands on a clean journal end under a checkpoint every reader knows.
    pub fn catch_up(&self, lock: &SlotLock, state: &mut Option<SlotState>) -> Result<(), VolumeError> {
        let result = self.catch_up_inner(lock, state);
        if result.is_err() {
            // Whatever `state` holds now is not known to match the files.
            *state = None;
        }
        result
    }

    fn catch_up_inner(&self, lock: &SlotLock, state: &mut Option<SlotState>) -> Result<(), VolumeError> {
        let st = match state {
            Some(st) if st.slot() == lock.slot => {
                self.refresh(st)?;
                st
            }
            _ => state.insert(self.load(lock.slot)?),
        };
        let path = self.journal_path(lock.slot);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > st.journal_len) {
            // Bytes past the last line applied. Before cutting anything, read the
            // slot again from scratch: only what a full read also finds torn is cut.
            *st = self.load(lock.slot)?;
            let len = std::fs::metadata(&path).map_err(|e| VolumeError::io(&path, e))?.len();
            if len > st.journal_len {
                let _gate = self.gate_checked(lock.id)?;
                tracing::warn!(path = %path.display(), from = st.journal_len, to = len, "cutting off the torn end of a transaction slot journal (an append cut by a crash, never acknowledged)");
                let f = crate::fsutil::open_volume_file(OpenOptions::new().write(true), &path)
                    .map_err(|e| VolumeError::io(&path, e))?;
                let cut = f
                    .set_len(st.journal_len)
                    .and_then(|_| crate::failpoint::check(crate::failpoint::TXN_JOURNAL_CUT_SYNC))
                    .and_then(|_| f.sync_data());
                if let Err(e) = cut {
                    // As after a failed sync of an append: nothing of this journal
                    // counts as on disk any more; the slot is written again from
                    // memory before its next write — by this process, or by whoever
                    // holds it next (this sync may have taken a write-back error of
                    // another process's line).
                    self.kept.fold_due[lock.slot as usize].store(true, Ordering::Release);
                    mark_fold_due(&f, &path);
                    return Err(VolumeError::io(&path, e));
                }
            }
        }
        // Every slot written by this build has a version-2 checkpoint before its
        // first journal line: a build that knows no journal then refuses the slot
        // (unknown version) instead of reading it as empty.
        //
        // A lock taken from a holder judged dead: a fresh checkpoint and journal
        // first, so whatever the deposed holder still appends to the files it opened
        // is never read (see `steal_slot`).
        let fold_due = &self.kept.fold_due[lock.slot as usize];
        if st.checkpoint.is_none()
            || st.file.version != SLOT_FORMAT_VERSION
            || lock.stolen()
            || fold_due.load(Ordering::Acquire)
            || st.journal_marked
        {
            if st.journal_marked {
                tracing::warn!(slot = lock.slot, "rewriting a transaction slot whose journal a process failed to sync (marked by its mode), before appending to it");
            }
            self.fold(lock, st)?;
            lock.fresh_history_due.store(false, Ordering::Release);
            fold_due.store(false, Ordering::Release);
        }
        // A copy read under a lock taken over meanwhile must not be written from: the
        // take-over's fold replaced the files after this check, or the check fails.
        self.check_held(lock.id)
    }

    /// Under the lock, with `state` caught up: appends one line per op (one write, no
    /// sync: see [`Self::sync`] and [`GroupCommit`]) and applies them to `state`.
    /// Returns the generation of the last line. After an error the journal may end in
    /// a torn line and `state` is stale: catch up again before the next append.
    pub fn append(
        &self,
        lock: &SlotLock,
        state: &mut SlotState,
        ops: &[SlotOp],
        now_ms: i64,
    ) -> Result<u64, VolumeError> {
        assert_eq!(lock.slot, state.slot(), "append under another slot's lock");
        if ops.is_empty() {
            return Ok(state.generation());
        }
        let path = self.journal_path(lock.slot);
        let mut bytes = Vec::with_capacity(512 * ops.len());
        let mut lines = Vec::with_capacity(ops.len());
        // An id put twice in one append: its second delta is against its first.
        let mut earlier: BTreeMap<&str, &TxnEntry> = BTreeMap::new();
        for (generation, op) in (state.file.generation + 1..).zip(ops) {
            let line = match op {
                SlotOp::Put(entry) => {
                    let prior = match earlier.get(entry.transactional_id.as_str()) {
                        Some(e) => Some(*e),
                        None => state.file.entries.get(&entry.transactional_id),
                    };
                    earlier.insert(&entry.transactional_id, entry);
                    let appended = prior.and_then(|p| appended_history(&p.history, &entry.history));
                    let mut stored = entry.clone();
                    if let Some(n) = appended {
                        stored.history = entry.history.iter().skip(entry.history.len() - n).cloned().collect();
                    }
                    JournalLine {
                        version: JOURNAL_FORMAT_VERSION,
                        generation,
                        at_ms: now_ms,
                        put: Some(stored),
                        history_appended: appended.is_some(),
                        remove: None,
                    }
                }
                SlotOp::Remove(id) => {
                    earlier.remove(id.as_str());
                    JournalLine {
                        version: JOURNAL_FORMAT_VERSION,
                        generation,
                        at_ms: now_ms,
                        put: None,
                        history_appended: false,
                        remove: Some(id.clone()),
                    }
                }
            };
            serde_json::to_writer(&mut bytes, &line).map_err(|e| VolumeError::io(&path, std::io::Error::other(e)))?;
            bytes.push(b'\n');
            lines.push(line);
        }
        crate::failpoint::check(crate::failpoint::TXN_JOURNAL_APPEND).map_err(|e| VolumeError::io(&path, e))?;
        // No journal when this copy was read: this append creates it, and finding one
        // (a take-over's fresh history, or any writer's) means the copy is stale.
        let mut options = OpenOptions::new();
        match state.journal_inode {
            None => options.create_new(true).append(true),
            Some(_) => options.append(true),
        };
        let mut f = crate::fsutil::open_volume_file(&mut options, &path).map_err(|e| VolumeError::io(&path, e))?;
        // The journal this copy was read from, or none yet: under the lock nobody
        // else replaces it, so another one means the lock was taken over (a steal
        // folded the slot) — checked on the descriptor written through, before the
        // write.
        let opened = stamp_of(&f.metadata().map_err(|e| VolumeError::io(&path, e))?).inode;
        if state.journal_inode.is_some_and(|i| i != opened) {
            return Err(VolumeError::Invalid {
                path,
                detail: "the journal was replaced since this writer read it under the slot lock: the lock was taken over by another process".into(),
            });
        }
        self.hold_journal(lock.slot, opened, &f)
            .map_err(|e| VolumeError::io(&path, e))?;
        f.write_all(&bytes).map_err(|e| VolumeError::io(&path, e))?;
        let meta = f.metadata().map_err(|e| VolumeError::io(&path, e))?;
        if state.journal_inode != Some(stamp_of(&meta).inode) || !state.dir_synced {
            // This append created the journal (or found a new one, or its copy was
            // read from files some other writer may not have finished syncing): the
            // directory entries must be durable too, or a power loss takes the file
            // with it.
            crate::fsutil::sync_dir(&self.dir()).map_err(|e| VolumeError::io(self.dir(), e))?;
            state.dir_synced = true;
        }
        if meta.len() != state.journal_len + bytes.len() as u64 {
            return Err(VolumeError::Invalid {
                path,
                detail: format!(
                    "journal is {} bytes after appending {} at byte {}: another writer without the slot lock?",
                    meta.len(),
                    bytes.len(),
                    state.journal_len
                ),
            });
        }
        for line in lines {
            apply_line(&mut state.file, line).map_err(|detail| VolumeError::Invalid {
                path: path.clone(),
                detail,
            })?;
        }
        state.journal_inode = Some(stamp_of(&meta).inode);
        state.journal_len = meta.len();
        Ok(state.file.generation)
    }

    /// Makes every line appended so far durable (fdatasync of the journal).
    pub fn sync(&self, slot: u32) -> Result<(), VolumeError> {
        self.sync_existing(slot).map(|_| ())
    }

    /// [`Self::sync`], saying which journal (its inode) it synced, if there was one. Through the
    /// descriptor this process's first append to the current journal opened
    /// ([`HeldJournal`]): a write-back error of any line since is reported to it,
    /// whoever else synced the journal first.
    pub fn sync_existing(&self, slot: u32) -> Result<Option<u64>, VolumeError> {
        let path = self.journal_path(slot);
        let fresh = match crate::fsutil::open_regular(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(VolumeError::io(&path, e)),
        };
        let io = |e: std::io::Error| VolumeError::io(&path, e);
        let inode = stamp_of(&fresh.metadata().map_err(io)?).inode;
        // Kept, not taken: an append racing this sync (it wrote after this sync
        // began) is covered by a later sync through the same descriptor, opened
        // before its write. It is replaced when the journal is (a fold).
        let held = {
            let mut kept = self.kept.journals[slot as usize]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // One of a journal replaced since (a fold) is let go: it covers nothing.
            if kept.as_ref().is_some_and(|h| h.inode != inode) {
                *kept = None;
            }
            kept.as_ref().map(|h| h.file.clone())
        };
        let file = held.as_deref().unwrap_or(&fresh);
        let synced = crate::failpoint::check(crate::failpoint::TXN_JOURNAL_SYNC)
            .and_then(|_| file.sync_data())
            .and_then(|_| file.metadata());
        match synced {
            // The journal in place after the sync: one that replaced the synced file
            // meanwhile (a rescue, a peer's fold) is what readers see, and the sync
            // covered none of it — the caller compares it with where its lines went.
            Ok(meta) if !marked(&meta) => {
                match crate::fsutil::open_regular(&path).and_then(|f| f.metadata()) {
                    Ok(now) => Ok(Some(stamp_of(&now).inode)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(io(e)),
                }
            }
            // Another process's sync of this journal failed (it marked the file):
            // lines before this process's may never reach the disk, and this
            // sync, which may not have been told, proves nothing about them.
            Ok(_) => Err(VolumeError::Invalid {
                path,
                detail: "another process's fdatasync of this journal failed (the journal is marked for a rewrite): nothing in it counts as durable until the slot is rewritten".into(),
            }),
            Err(e) => {
                // Marked for whoever holds the slot next (see FOLD_DUE_MODE); this
                // process also refuses to count anything durable until it folded.
                mark_fold_due(file, &path);
                Err(io(e))
            }
        }
    }

    /// Keeps a descriptor of journal `inode` from before this append's write, unless
    /// one from an earlier unsynced append is kept already.
    fn hold_journal(&self, slot: u32, inode: u64, f: &File) -> std::io::Result<()> {
        let mut held = self.kept.journals[slot as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if held.as_ref().is_none_or(|h| h.inode != inode) {
            *held = Some(HeldJournal {
                inode,
                file: Arc::new(f.try_clone()?),
            });
        }
        Ok(())
    }

    /// The inode of the journal descriptor this process keeps for slot `slot`'s
    /// syncs, if any (tests).
    #[doc(hidden)]
    pub fn kept_journal_inode(&self, slot: u32) -> Option<u64> {
        self.kept.journals[slot as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|h| h.inode)
    }

    /// Folds the journal into the checkpoint when it has grown past its bound (or the
    /// checkpoint is of the old version). Returns whether it folded.
    pub fn maybe_fold(&self, lock: &SlotLock, state: &mut SlotState) -> Result<bool, VolumeError> {
        if !state.wants_fold() {
            return Ok(false);
        }
        self.fold(lock, state)?;
        Ok(true)
    }

    /// Writes the checkpoint at `state`'s generation, then installs a fresh, empty
    /// journal. Each step is durable (fsync of the file and of the directory) before
    /// the next: a crash after the checkpoint leaves journal lines it already holds,
    /// which readers skip. The new journal is a new file (rename), so a reader's
    /// position in the old one can never be mistaken for one in the new.
    pub fn fold(&self, lock: &SlotLock, state: &mut SlotState) -> Result<(), VolumeError> {
        assert_eq!(lock.slot, state.slot(), "fold under another slot's lock");
        let path = self.slot_path(lock.slot);
        let io = |e: std::io::Error| VolumeError::io(&path, e);
        let mut bytes = {
            // Serialised as version 2 without touching `state` until it is on disk.
            #[derive(Serialize)]
            struct Checkpoint<'a> {
                version: u32,
                slot: u32,
                generation: u64,
                updated_ms: i64,
                entries: &'a BTreeMap<String, TxnEntry>,
            }
            serde_json::to_vec(&Checkpoint {
                version: SLOT_FORMAT_VERSION,
                slot: state.file.slot,
                generation: state.file.generation,
                updated_ms: state.file.updated_ms,
                entries: &state.file.entries,
            })
            .map_err(|e| io(std::io::Error::other(e)))?
        };
        bytes.push(b'\n');
        let journal = self.journal_path(lock.slot);
        let dir = self.dir();
        // Both files written and synced first; then, under the gate and only while the
        // lock is still this one, renamed in by path — the checkpoint's rename durable
        // before the journal's. The gate is held for two renames and a directory sync,
        // so a holder paused there is unlikely (it would stall the slot's take-over
        // until it resumes: docs/transactions.md).
        let staged = crate::fsutil::stage_file(&path, &bytes).map_err(io)?;
        let staged_journal = match crate::fsutil::stage_file(&journal, b"") {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(&staged);
                return Err(VolumeError::io(&journal, e));
            }
        };
        let installed = (|| {
            let _gate = self.gate_checked(lock.id)?;
            std::fs::rename(&staged, &path)
                .and_then(|_| crate::fsutil::sync_dir(&dir))
                .map_err(io)?;
            state.file.version = SLOT_FORMAT_VERSION;
            state.checkpoint = crate::fsutil::file_stamp(&path);
            state.checkpoint_len = bytes.len() as u64;
            crate::failpoint::check(crate::failpoint::TXN_FOLD_AFTER_CHECKPOINT).map_err(io)?;
            std::fs::rename(&staged_journal, &journal).map_err(|e| VolumeError::io(&journal, e))
        })();
        if let Err(e) = installed {
            let _ = std::fs::remove_file(&staged);
            let _ = std::fs::remove_file(&staged_journal);
            return Err(e);
        }
        crate::fsutil::sync_dir(&dir).map_err(|e| VolumeError::io(&dir, e))?;
        let inode = crate::fsutil::file_stamp(&journal).map(|s| s.inode);
        state.journal_inode = inode;
        state.journal_len = 0;
        state.dir_synced = true;
        state.journal_marked = false;
        Ok(())
    }

    /// What can be saved of a slot that does not read (`kaasctl txn repair --fix`),
    /// under its lock: the checkpoint if it parses, then the journal's valid prefix —
    /// its lines in order up to the first that does not parse, breaks the
    /// generations' sequence or does not apply. Nothing after that line is trusted
    /// (it may be another writer's history, issue 25 item 9). Install the result with
    /// [`Self::fold`] (a new checkpoint at its generation and an empty journal).
    pub fn salvage(&self, lock: &SlotLock) -> Result<Salvage, VolumeError> {
        let slot = lock.slot;
        let (file, checkpoint_lost) = match self.read_checkpoint(slot) {
            Ok((file, _)) => (file, None),
            Err(e @ (VolumeError::Parse { .. } | VolumeError::Invalid { .. })) => {
                (SlotFile::empty(slot), Some(e.to_string()))
            }
            Err(e) => return Err(e),
        };
        let mut out = Salvage {
            state: SlotState::new(file, None),
            checkpoint_lost,
            kept_lines: 0,
            dropped_lines: 0,
            dropped_at: None,
            maybe_stale: BTreeSet::new(),
            unreadable: 0,
            dropped_in_flight: BTreeSet::new(),
        };
        let path = self.journal_path(slot);
        let bytes = match crate::fsutil::open_regular_meta(&path) {
            Ok((file, _)) => crate::fsutil::read_capped_from(&file, crate::fsutil::MAX_STATE_FILE_BYTES)
                .map_err(|e| VolumeError::io(&path, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(VolumeError::io(&path, e)),
        };
        let lines: Vec<(u64, &[u8])> = {
            let mut at = 0usize;
            let mut v = Vec::new();
            // Only complete lines: a torn last one was never acknowledged.
            while let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') {
                v.push((at as u64, &bytes[at..at + nl]));
                at += nl + 1;
            }
            v
        };
        let checkpoint_read = out.checkpoint_lost.is_none();
        let mut applied_any = false;
        for (i, (offset, line)) in lines.iter().enumerate() {
            let file = &mut out.state.file;
            let verdict = match parse_line(line) {
                Err(e) => Err(format!("does not parse: {e}")),
                Ok(l) if l.version != JOURNAL_FORMAT_VERSION => Err(format!("format version {}", l.version)),
                // Lines the checkpoint already holds (a fold cut short before the
                // journal was replaced).
                Ok(l) if checkpoint_read && !applied_any && l.generation <= file.generation => Ok(None),
                Ok(l) if (checkpoint_read || applied_any) && l.generation != file.generation + 1 => Err(format!(
                    "line of generation {} follows generation {}",
                    l.generation, file.generation
                )),
                Ok(l) => Ok(Some(l)),
            };
            let applied = match verdict {
                Ok(None) => Ok(()),
                Ok(Some(l)) => {
                    // Without the checkpoint, the history restarts at the first line,
                    // and an entry it held starts from the transitions its lines add.
                    if !checkpoint_read {
                        if !applied_any {
                            file.generation = l.generation.saturating_sub(1);
                        }
                        if let Some(e) = l.put.as_ref().filter(|_| l.history_appended) {
                            if !file.entries.contains_key(&e.transactional_id) {
                                let mut bare = e.clone();
                                bare.history.clear();
                                file.entries.insert(e.transactional_id.clone(), bare);
                            }
                        }
                    }
                    applied_any = true;
                    apply_line(file, l)
                }
                Err(e) => Err(e),
            };
            match applied {
                Ok(()) => {
                    out.kept_lines += 1;
                }
                Err(why) => {
                    out.dropped_at = Some((*offset, why));
                    out.dropped_lines = lines.len() - i;
                    for (_, rest) in &lines[i..] {
                        match parse_line(rest) {
                            Ok(l) => {
                                if let Some(e) = &l.put {
                                    if e.state.is_in_flight() {
                                        out.dropped_in_flight.insert(e.transactional_id.clone());
                                    }
                                }
                                out.maybe_stale
                                    .extend(l.put.map(|e| e.transactional_id).into_iter().chain(l.remove));
                            }
                            Err(_) => {
                                out.unreadable += 1;
                                out.maybe_stale.extend(id_in_damaged_line(rest));
                            }
                        }
                    }
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Takes the lock of one slot and reads it, for a compare-and-set by a caller that
    /// keeps no state of its own (kaasctl, tests): see [`SlotGuard`].
    pub fn lock(&self, slot: u32) -> Result<SlotGuard, VolumeError> {
        let lock = self.lock_slot(slot)?;
        let mut state = None;
        self.catch_up(&lock, &mut state)?;
        Ok(SlotGuard {
            store: self.clone(),
            lock,
            state: state.expect("caught up"),
        })
    }

    /// Read-modify-write of one slot under its exclusive lock. `f` gets the entries
    /// and returns its result plus whether it changed anything; only then are the
    /// changed entries appended (one line each) and made durable.
    pub fn update<R>(
        &self,
        slot: u32,
        now_ms: i64,
        f: impl FnOnce(&mut BTreeMap<String, TxnEntry>) -> (R, bool),
    ) -> Result<R, VolumeError> {
        let mut guard = self.lock(slot)?;
        let mut entries = guard.state.file.entries.clone();
        let (result, changed) = f(&mut entries);
        if changed {
            let before = &guard.state.file.entries;
            let mut ops: Vec<SlotOp> = entries
                .iter()
                .filter(|(id, e)| before.get(*id) != Some(*e))
                .map(|(_, e)| SlotOp::Put(e.clone()))
                .collect();
            ops.extend(
                before
                    .keys()
                    .filter(|id| !entries.contains_key(*id))
                    .map(|id| SlotOp::Remove(id.clone())),
            );
            guard.commit(&ops, now_ms)?;
        }
        Ok(result)
    }
}

/// One slot, held under its exclusive lock (see [`TxnStateStore::lock`]), so a caller
/// can check an entry, act on it (write markers, stage offsets) and record the result
/// as one compare-and-set, with no other writer (broker or kaasctl) in between.
pub struct SlotGuard {
    store: TxnStateStore,
    lock: SlotLock,
    state: SlotState,
}

impl SlotGuard {
    pub fn entry(&self, transactional_id: &str) -> Option<&TxnEntry> {
        self.state.entry(transactional_id)
    }
    /// Folds the journal into the checkpoint now (tools and test fixtures that want
    /// the whole slot in `slot-N.json`).
    pub fn fold(&mut self) -> Result<(), VolumeError> {
        self.store.fold(&self.lock, &mut self.state)
    }
    /// Appends `ops`, makes them durable and folds the journal when due. Returns the
    /// new generation. After an error, drop the guard and read again.
    pub fn commit(&mut self, ops: &[SlotOp], now_ms: i64) -> Result<u64, VolumeError> {
        if ops.is_empty() {
            return Ok(self.state.generation());
        }
        let generation = self.store.append(&self.lock, &mut self.state, ops, now_ms)?;
        self.store.sync(self.lock.slot)?;
        self.store.check_held(self.lock.id)?;
        // The transitions are durable; a failed fold only leaves the journal longer
        // (the next writer folds it).
        if let Err(e) = self.store.maybe_fold(&self.lock, &mut self.state) {
            tracing::warn!(slot = self.lock.slot, error = %e, "folding a transaction slot journal failed; the next writer retries");
        }
        Ok(generation)
    }
}

/// Why a wait on a line of a history the slot has left fails.
const MOVED_ASIDE: &str =
    "the slot started a new history (its journal was moved aside or replaced by another process) before this transition was synced; it is not durable";

/// One appended line as [`GroupCommit`] knows it: its generation, in the slot history
/// it was appended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub generation: u64,
    history: u64,
}

/// Shares one fdatasync among the transitions this process appended to a slot's
/// journal concurrently (group commit): a writer appends under the slot lock, lets
/// the lock go, and then waits here until a sync that started after its append has
/// finished — its own, or one another writer started meanwhile.
///
/// Generations identify lines only within one history of the slot: when an append's
/// generation is not above the last one seen (the slot was moved aside and started
/// again), what was known durable is forgotten, and a writer still waiting with a
/// [`Mark`] of the old history gets an error instead of a durability it does not
/// have. A sync credits only what this process had appended when it started, in the
/// history it started in — never the generation a waiter asked for. A failed
/// fdatasync poisons the slot: the kernel reports a write-back error once, so a later
/// sync that succeeds proves nothing about the lines before it. Waits fail until the slot is folded again (a
/// new checkpoint and journal, written and synced from memory): see
/// [`GroupCommit::poisoned`] and [`GroupCommit::fold`].
#[derive(Debug)]
pub struct GroupCommit {
    slots: Vec<SlotSync>,
    syncs: AtomicU64,
}

#[derive(Debug, Default)]
struct SlotSync {
    /// Held during the fdatasync, so writers arriving meanwhile wait for it and then
    /// usually find their line covered.
    turn: Mutex<()>,
    track: Mutex<Track>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Track {
    appended: u64,
    durable: u64,
    /// The journal (inode) this process's last append went to: a sync of another
    /// journal covers none of the lines appended to it.
    journal: u64,
    /// Raised when the slot's history restarts; a sync records its result only in
    /// the history it started in.
    history: u64,
    poisoned: bool,
}

impl Track {
    /// A new history: what was known durable is forgotten.
    fn restart(&mut self) {
        self.history += 1;
        self.durable = 0;
    }
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit {
            slots: (0..SLOTS).map(|_| SlotSync::default()).collect(),
            syncs: AtomicU64::new(0),
        }
    }
}

impl GroupCommit {
    fn track(&self, slot: u32) -> std::sync::MutexGuard<'_, Track> {
        self.slots[slot as usize]
            .track
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Records that this process appended a slot's journal (inode `journal`) up to
    /// `generation`; returns the mark to wait on.
    pub fn appended(&self, slot: u32, generation: u64, journal: u64) -> Mark {
        let mut t = self.track(slot);
        // A new history: the generations started again (the slot was moved aside),
        // or this append went to another journal than lines of this process not yet
        // durable — another process replaced the journal since (a fold, a repair's
        // rescue), and no sync of the new one covers them. A fold by this process
        // marks them durable first (`made_durable`), so it restarts nothing.
        if generation <= t.appended || (journal != t.journal && t.durable < t.appended) {
            t.restart();
        }
        t.journal = journal;
        t.appended = generation;
        Mark {
            generation,
            history: t.history,
        }
    }

    /// Records that the slot is durable up to `generation` by other means (a fold:
    /// the whole slot, as read from journal `read_from`, written and synced into the
    /// new journal `journal`), which also heals a poisoned slot. Lines of this process
    /// not yet durable that went to another journal than `read_from` are not in what
    /// was folded (another process replaced the journal since): the history restarts
    /// first, as in [`Self::appended`]. Call it within [`Self::folding`], so no sync
    /// judges the slot between the fold's rename and this record ([`Self::fold`]).
    fn made_durable(&self, slot: u32, generation: u64, read_from: u64, journal: u64) {
        let mut t = self.track(slot);
        // Lines of this process not yet durable that the fold may not hold: they went
        // to another journal, or the fold's state ends below them (cut off the same
        // file since).
        if (read_from != t.journal || generation < t.appended) && t.durable < t.appended {
            t.restart();
        }
        // The highest generation known, also a peer's: a later append at or below it
        // is a new history (the slot was moved aside), whatever this process appended.
        t.appended = t.appended.max(generation);
        t.durable = t.durable.max(generation);
        t.journal = journal;
        t.poisoned = false;
    }

    /// Runs `fold` (a fold of the slot by this process, and its [`Self::made_durable`])
    /// with no sync of the slot starting or ending in between: a sync that found the
    /// fold's new journal before the fold was recorded would take this process's
    /// lines, made durable by the fold, for lines lost to another process's rewrite.
    fn folding<T>(&self, slot: u32, fold: impl FnOnce() -> T) -> T {
        let _turn = self.slots[slot as usize].turn.lock().unwrap_or_else(|p| p.into_inner());
        fold()
    }

    /// Runs `fold` on `state` — a fold of the slot by this process, under its lock;
    /// Ok(true) if it folded — and records what it made durable: the slot up to the
    /// state's generation, as read from the journal `state` was read from, now in the
    /// fold's journal ([`Self::made_durable`], with no sync in between:
    /// [`Self::folding`]). Also heals a poisoned slot.
    pub fn fold<E>(
        &self,
        slot: u32,
        state: &mut SlotState,
        fold: impl FnOnce(&mut SlotState) -> Result<bool, E>,
    ) -> Result<bool, E> {
        let read_from = state.journal();
        self.folding(slot, || {
            let folded = fold(state)?;
            if folded {
                self.made_durable(slot, state.generation(), read_from, state.journal());
            }
            Ok(folded)
        })
    }

    /// Whether a sync of this slot failed since its last fold.
    pub fn poisoned(&self, slot: u32) -> bool {
        self.track(slot).poisoned
    }

    /// Whether the line `mark` names is known durable (no waiting).
    pub fn is_durable(&self, slot: u32, mark: Mark) -> bool {
        // What was durable before a failed sync stays durable.
        let t = self.track(slot);
        t.history == mark.history && t.durable >= mark.generation
    }

    /// Returns once the line `mark` names is durable. Blocking. An error when the
    /// slot's history restarted since that line was appended (it was moved aside:
    /// no sync of the slot's journal now covers it).
    pub fn wait_durable(&self, store: &TxnStateStore, slot: u32, mark: Mark) -> Result<(), VolumeError> {
        self.sync_slot(store, slot, Some(mark))
    }

    /// Makes the slot's journal durable as it is now, whatever this process knows
    /// of it: for an answer derived from a state this process did not append (a
    /// retry finding its transition already there, written by a first attempt or by
    /// another process whose sync may not have happened; generations alone cannot
    /// tell, as a slot moved aside starts its history again).
    pub fn sync_now(&self, store: &TxnStateStore, slot: u32) -> Result<(), VolumeError> {
        self.sync_slot(store, slot, None)
    }

    /// One fdatasync of the slot's journal, unless `wanted` is already known durable.
    fn sync_slot(&self, store: &TxnStateStore, slot: u32, wanted: Option<Mark>) -> Result<(), VolumeError> {
        let moved_aside = || VolumeError::Invalid {
            path: store.journal_path(slot),
            detail: MOVED_ASIDE.into(),
        };
        let _turn = self.slots[slot as usize].turn.lock().unwrap_or_else(|p| p.into_inner());
        let before = {
            let t = self.track(slot);
            if let Some(mark) = wanted {
                if t.history != mark.history {
                    return Err(moved_aside());
                }
                if t.durable >= mark.generation {
                    return Ok(());
                }
            }
            if t.poisoned {
                return Err(VolumeError::Invalid {
                    path: store.journal_path(slot),
                    detail: "an earlier fdatasync of this journal failed; refusing to count anything as durable until the slot is rewritten".into(),
                });
            }
            *t
        };
        // Everything appended before this sync starts is covered by it.
        let synced = store.sync_existing(slot);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let mut t = self.track(slot);
        match synced {
            Err(e) => {
                t.poisoned = true;
                return Err(e);
            }
            // No journal, though this process appended to one in this history: it was
            // moved aside (by hand, or an older kaasctl's quarantine) and its lines are not the slot's any
            // more. Or another journal than the one this process's lines not yet
            // durable went to: another process replaced it after them (a repair's
            // rescue may have dropped them; a peer's fold kept them, but this process
            // cannot tell which), and this sync covers none of them. Whatever comes
            // next starts a new history; a waiter is told its line is not durable
            // (the client retries, and a retry finding its transition there answers
            // from the files).
            Ok(synced)
                if t.history == before.history
                    && match synced {
                        None => before.appended > 0,
                        Some(inode) => inode != before.journal && before.durable < before.appended,
                    } =>
            {
                t.history += 1;
                t.durable = 0;
                t.appended = 0;
                return match wanted {
                    Some(_) => Err(moved_aside()),
                    None => Ok(()),
                };
            }
            Ok(_) => {}
        }
        // Only what was appended before the sync started, in the history it started
        // in: a waiter's own generation may belong to an older history.
        if t.history == before.history {
            t.durable = t.durable.max(before.appended);
        }
        match wanted {
            Some(mark) if t.history != mark.history => Err(moved_aside()),
            _ => Ok(()),
        }
    }

    /// Syncs every slot with appended lines not yet known durable (a periodic flush of
    /// transitions whose writers did not wait, such as Complete*). Every slot is
    /// tried; the first error is returned.
    pub fn flush(&self, store: &TxnStateStore) -> Result<(), VolumeError> {
        let mut first = None;
        for slot in 0..SLOTS {
            let t = *self.track(slot);
            if t.poisoned || t.durable >= t.appended {
                continue;
            }
            let mark = Mark {
                generation: t.appended,
                history: t.history,
            };
            if let Err(e) = self.wait_durable(store, slot, mark) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// fdatasyncs issued so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
}

/// How many items at the end of `new` extend `old` (oldest dropped past
/// [`HISTORY_LEN`]) into `new`; None when `new` is not such an extension.
fn appended_history(old: &VecDeque<Transition>, new: &VecDeque<Transition>) -> Option<usize> {
    (0..=new.len()).find(|&n| {
        let kept = new.len() - n;
        let from = old.len().saturating_sub(kept);
        old.len() - from == kept
            && old.iter().skip(from).eq(new.iter().take(kept))
            && (old.len() + n).min(HISTORY_LEN) == new.len()
    })
}

fn apply_line(file: &mut SlotFile, line: JournalLine) -> Result<(), String> {
    match (line.put, line.remove) {
        (Some(mut entry), None) => {
            if line.history_appended {
                let added = std::mem::take(&mut entry.history);
                let mut history = file
                    .entries
                    .get(&entry.transactional_id)
                    .map(|e| e.history.clone())
                    .ok_or_else(|| {
                        format!(
                            "line extends the history of {:?}, which the slot does not hold",
                            entry.transactional_id
                        )
                    })?;
                history.extend(added);
                while history.len() > HISTORY_LEN {
                    history.pop_front();
                }
                entry.history = history;
            }
            file.entries.insert(entry.transactional_id.clone(), entry);
        }
        (None, Some(id)) => {
            file.entries.remove(&id);
        }
        _ => return Err("line has neither or both of \"put\" and \"remove\"".into()),
    }
    file.generation = line.generation;
    file.updated_ms = line.at_ms;
    Ok(())
}

fn parse_line(line: &[u8]) -> Result<JournalLine, serde_json::Error> {
    serde_json::from_slice(line)
}

/// The transactional id a damaged journal line names, if its text still shows one
/// (`"transactional_id":"…"` for a put, `"remove":"…"`), for a rescue to say which
/// entry may have lost a transition.
fn id_in_damaged_line(line: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(line);
    ["\"transactional_id\":\"", "\"remove\":\""].iter().find_map(|key| {
        let start = text.find(key)? + key.len();
        let end = text[start..].find('"')?;
        Some(text[start..start + end].to_string()).filter(|id| !id.contains('\\') && !id.contains('\u{fffd}'))
    })
}

/// The `version` of a line that does not parse as a [`JournalLine`], if it has one.
fn line_version(line: &[u8]) -> Option<u32> {
    #[derive(Deserialize)]
    struct VersionOnly {
        version: u32,
    }
    serde_json::from_slice::<VersionOnly>(line).ok().map(|v| v.version)
}

/// A checkpoint of version 2, or of version 1 (migrated by the next writer).
fn parse_checkpoint(path: &std::path::Path, bytes: &[u8]) -> Result<SlotFile, VolumeError> {
    match crate::error::parse_versioned_json::<SlotFile>(path, bytes, "transaction slot", SLOT_FORMAT_VERSION) {
        Err(VolumeError::UnknownVersion {
            found: LEGACY_SLOT_FORMAT_VERSION,
            ..
        }) => {
            crate::error::parse_versioned_json::<SlotFile>(path, bytes, "transaction slot", LEGACY_SLOT_FORMAT_VERSION)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests;
