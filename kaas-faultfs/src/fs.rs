//! The FUSE side: each request takes the model's lock, counts itself, checks the
//! injected faults, and answers from `live`. Delays are slept before the lock, so
//! requests in flight on several threads wait side by side, as on a network volume.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::model::{FsError, Ino, Model, Node};

/// The operations a fault can be attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write,
    Fsync,
    Rename,
    Create,
    Unlink,
    Open,
    Any,
}

impl Op {
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "write" => Op::Write,
            "fsync" => Op::Fsync,
            "rename" => Op::Rename,
            "create" => Op::Create,
            "unlink" => Op::Unlink,
            "open" => Op::Open,
            "any" => Op::Any,
            _ => return None,
        })
    }
}

/// An injected fault: the next `remaining` operations `op` on a path matching
/// `pattern` fail with `errno` (for good while `remaining` is None).
pub struct Rule {
    pub op: Op,
    pub pattern: glob::Pattern,
    pub errno: i32,
    pub remaining: Option<u64>,
}

pub struct State {
    pub model: Model,
    pub rules: Vec<Rule>,
    /// Power is off: every request fails with EIO and nothing changes any more.
    pub frozen: bool,
    /// Freeze when the fsync with this number (counting from the mount) arrives,
    /// before it takes effect.
    pub cut_at_fsync: Option<u64>,
    pub fsyncs: u64,
    pub faults_hit: u64,
    pub counts: BTreeMap<&'static str, u64>,
    dirs: HashMap<u64, Vec<(Ino, FileType, OsString)>>,
    next_fh: u64,
}

pub struct Shared {
    pub state: Mutex<State>,
    pub meta_delay_us: AtomicU64,
    pub fsync_delay_us: AtomicU64,
    /// Directories list their names in reverse byte order (`order reverse`) instead of
    /// in order: real file systems list in an order of their own (ext4: by hash), so
    /// code that removes a directory's files one by one must not rely on which goes
    /// first.
    pub listing_reversed: AtomicBool,
}

impl Shared {
    pub fn new(model: Model) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                model,
                rules: Vec::new(),
                frozen: false,
                cut_at_fsync: None,
                fsyncs: 0,
                faults_hit: 0,
                counts: BTreeMap::new(),
                dirs: HashMap::new(),
                next_fh: 1,
            }),
            meta_delay_us: AtomicU64::new(0),
            fsync_delay_us: AtomicU64::new(0),
            listing_reversed: AtomicBool::new(false),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in one request must not take every later one down with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// The errno of the first rule matching `op` on any of `paths`, used up by one.
    fn fault(&mut self, op: Op, paths: &[&str]) -> Option<i32> {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: false,
            require_literal_leading_dot: false,
        };
        let i = self.rules.iter().position(|r| {
            (r.op == op || r.op == Op::Any)
                && r.remaining != Some(0)
                && paths.iter().any(|p| r.pattern.matches_with(p, opts))
        })?;
        let rule = &mut self.rules[i];
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        let errno = rule.errno;
        self.rules.retain(|r| r.remaining != Some(0));
        self.faults_hit += 1;
        Some(errno)
    }

    fn path(&self, ino: Ino) -> String {
        self.model.path(ino).unwrap_or_default()
    }
}

pub struct FaultFs {
    pub shared: Arc<Shared>,
    pub ttl: Duration,
    uid: u32,
    gid: u32,
}

fn err(e: FsError) -> Errno {
    Errno::from_i32(e.errno())
}

impl FaultFs {
    pub fn new(shared: Arc<Shared>, ttl: Duration) -> FaultFs {
        FaultFs {
            shared,
            ttl,
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }

    /// Sleeps the configured delay, takes the lock and counts the request; None
    /// once the power is off.
    fn begin(&self, name: &'static str, meta: bool) -> Option<MutexGuard<'_, State>> {
        if meta {
            let us = self.shared.meta_delay_us.load(Ordering::Relaxed);
            if us > 0 {
                std::thread::sleep(Duration::from_micros(us));
            }
        }
        let mut st = self.shared.lock();
        *st.counts.entry(name).or_default() += 1;
        if st.frozen {
            return None;
        }
        Some(st)
    }

    fn attr(&self, ino: Ino, node: &Node, links: u32) -> FileAttr {
        let (kind, size, perm) = match node {
            Node::File { data, mode, .. } => (FileType::RegularFile, data.size, *mode),
            Node::Dir { mode, .. } => (FileType::Directory, 0, *mode),
        };
        let mtime = node.mtime();
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm: (perm & 0o7777) as u16,
            nlink: if node.is_dir() { 2 } else { links },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    fn attr_of(&self, st: &State, ino: Ino) -> Result<FileAttr, Errno> {
        let node = st.model.node(ino).ok_or(Errno::ENOENT)?;
        let links = st.model.places.get(&ino).map_or(1, |p| p.links);
        Ok(self.attr(ino, node, links))
    }

    fn make(&self, parent: INodeNo, name: &OsStr, dir: bool, mode: u32, open: bool) -> Result<FileAttr, Errno> {
        let Some(mut st) = self.begin(if dir { "mkdir" } else { "create" }, true) else {
            return Err(Errno::EIO);
        };
        let path = st.model.child_path(parent.0, name);
        if let Some(errno) = st.fault(Op::Create, &[&path]) {
            return Err(Errno::from_i32(errno));
        }
        let ino = st.model.create(parent.0, name, dir, mode & 0o7777, open).map_err(err)?;
        self.attr_of(&st, ino)
    }
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(st) = self.begin("lookup", true) else {
            return reply.error(Errno::EIO);
        };
        match st
            .model
            .lookup(parent.0, name)
            .map_err(err)
            .and_then(|ino| self.attr_of(&st, ino))
        {
            Ok(attr) => reply.entry(&self.ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let Some(st) = self.begin("getattr", true) else {
            return reply.error(Errno::EIO);
        };
        match self.attr_of(&st, ino.0) {
            Ok(attr) => reply.attr(&self.ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some(mut st) = self.begin("setattr", true) else {
            return reply.error(Errno::EIO);
        };
        let ino = ino.0;
        if let Some(size) = size {
            let path = st.path(ino);
            if let Some(errno) = st.fault(Op::Write, &[&path]) {
                return reply.error(Errno::from_i32(errno));
            }
            if let Err(e) = st.model.truncate(ino, size) {
                return reply.error(err(e));
            }
        }
        if let Some(mode) = mode {
            if let Err(e) = st.model.chmod(ino, mode & 0o7777) {
                return reply.error(err(e));
            }
        }
        if let Some(t) = mtime {
            let t = match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            };
            if let Err(e) = st.model.set_mtime(ino, t) {
                return reply.error(err(e));
            }
        }
        match self.attr_of(&st, ino) {
            Ok(attr) => reply.attr(&self.ttl, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        match self.make(parent, name, false, mode, false) {
            Ok(attr) => reply.entry(&self.ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, mode: u32, _umask: u32, reply: ReplyEntry) {
        match self.make(parent, name, true, mode, false) {
            Ok(attr) => reply.entry(&self.ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(parent, name, false, mode, true) {
            Ok(attr) => reply.created(&self.ttl, &attr, Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, false, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(parent, name, true, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let Some(mut st) = self.begin("rename", true) else {
            return reply.error(Errno::EIO);
        };
        if flags.bits() & !libc::RENAME_NOREPLACE != 0 {
            return reply.error(Errno::EINVAL);
        }
        let from = st.model.child_path(parent.0, name);
        let to = st.model.child_path(newparent.0, newname);
        if let Some(errno) = st.fault(Op::Rename, &[&from, &to]) {
            return reply.error(Errno::from_i32(errno));
        }
        let no_replace = flags.bits() & libc::RENAME_NOREPLACE != 0;
        match st.model.rename(parent.0, name, newparent.0, newname, no_replace) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let Some(mut st) = self.begin("link", true) else {
            return reply.error(Errno::EIO);
        };
        let path = st.model.child_path(newparent.0, newname);
        if let Some(errno) = st.fault(Op::Create, &[&path]) {
            return reply.error(Errno::from_i32(errno));
        }
        match st
            .model
            .link(ino.0, newparent.0, newname)
            .map_err(err)
            .and_then(|()| self.attr_of(&st, ino.0))
        {
            Ok(attr) => reply.entry(&self.ttl, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let Some(mut st) = self.begin("open", true) else {
            return reply.error(Errno::EIO);
        };
        let path = st.path(ino.0);
        if let Some(errno) = st.fault(Op::Open, &[&path]) {
            return reply.error(Errno::from_i32(errno));
        }
        match st.model.node(ino.0) {
            Some(Node::File { .. }) => {
                st.model.opened(ino.0);
                reply.opened(FileHandle(0), FopenFlags::empty())
            }
            Some(Node::Dir { .. }) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(st) = self.begin("read", false) else {
            return reply.error(Errno::EIO);
        };
        match st.model.node(ino.0) {
            Some(Node::File { data, .. }) => reply.data(&data.read(offset, size as usize)),
            Some(Node::Dir { .. }) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(mut st) = self.begin("write", false) else {
            return reply.error(Errno::EIO);
        };
        let path = st.path(ino.0);
        if let Some(errno) = st.fault(Op::Write, &[&path]) {
            return reply.error(Errno::from_i32(errno));
        }
        match st.model.write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(err(e)),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // Counted even after the power went: the kernel's last word on an inode.
        let mut st = self.shared.lock();
        *st.counts.entry("release").or_default() += 1;
        st.model.released(ino.0);
        reply.ok()
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match self.sync(ino.0, false) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let Some(mut st) = self.begin("opendir", true) else {
            return reply.error(Errno::EIO);
        };
        let Some(Node::Dir { entries, .. }) = st.model.node(ino.0) else {
            return reply.error(Errno::ENOTDIR);
        };
        // The listing is taken once, at opendir: a name neither added nor removed
        // meanwhile is listed exactly once, however the directory changes.
        let parent = st.model.places.get(&ino.0).map_or(ino.0, |p| p.parent);
        let mut listing = vec![
            (ino.0, FileType::Directory, OsString::from(".")),
            (parent, FileType::Directory, OsString::from("..")),
        ];
        for (name, &child) in entries {
            let kind = match st.model.node(child) {
                Some(Node::Dir { .. }) => FileType::Directory,
                _ => FileType::RegularFile,
            };
            listing.push((child, kind, name.clone()));
        }
        if self.shared.listing_reversed.load(Ordering::Relaxed) {
            listing[2..].reverse();
        }
        let fh = st.next_fh;
        st.next_fh += 1;
        st.dirs.insert(fh, listing);
        reply.opened(FileHandle(fh), FopenFlags::empty())
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(st) = self.begin("readdir", true) else {
            return reply.error(Errno::EIO);
        };
        let Some(listing) = st.dirs.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, kind, name)) in listing.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.shared.lock().dirs.remove(&fh.0);
        reply.ok()
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        match self.sync(ino.0, true) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 30, 1 << 30, 1 << 30, 1 << 24, 1 << 24, 4096, 255, 4096)
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        reply.ok()
    }
}

impl FaultFs {
    fn remove(&self, parent: INodeNo, name: &OsStr, dir: bool, reply: ReplyEmpty) {
        let Some(mut st) = self.begin(if dir { "rmdir" } else { "unlink" }, true) else {
            return reply.error(Errno::EIO);
        };
        let path = st.model.child_path(parent.0, name);
        if let Some(errno) = st.fault(Op::Unlink, &[&path]) {
            return reply.error(Errno::from_i32(errno));
        }
        match st.model.remove(parent.0, name, dir) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(e)),
        }
    }

    /// fsync of a file or a directory: the delay, the power cut armed for this fsync,
    /// an injected fault (which, on a file, loses its pending data as Linux does),
    /// then the durable step.
    fn sync(&self, ino: Ino, dir: bool) -> Result<(), Errno> {
        let us = self.shared.fsync_delay_us.load(Ordering::Relaxed);
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
        let Some(mut st) = self.begin(if dir { "fsyncdir" } else { "fsync" }, false) else {
            return Err(Errno::EIO);
        };
        st.fsyncs += 1;
        if st.cut_at_fsync.is_some_and(|n| st.fsyncs >= n) {
            st.frozen = true;
            return Err(Errno::EIO);
        }
        let path = st.path(ino);
        if let Some(errno) = st.fault(Op::Fsync, &[&path]) {
            if !dir {
                st.model.lose_pending_data(ino);
            }
            return Err(Errno::from_i32(errno));
        }
        if dir {
            st.model.sync_dir(ino);
        } else {
            st.model.sync_file(ino);
        }
        Ok(())
    }
}
