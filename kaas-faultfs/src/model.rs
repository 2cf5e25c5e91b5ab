//! What the file system holds, in two versions: `live` is what every reader sees,
//! `durable` is what a power cut would leave. Everything written goes to `live` at
//! once and is queued as a pending operation; `fsync` of a file moves that file's
//! pending data into `durable`, `fsync` of a directory moves that directory's pending
//! entry changes (and whatever they depend on) into `durable`. A power cut throws
//! `live` away and keeps `durable`, optionally with a random prefix of what was pending.
//!
//! The rules are POSIX's, read strictly (what a program may rely on, not what ext4
//! happens to do):
//! - a file's data, size and mode are durable once the file is fsync'd (fdatasync
//!   counts the same);
//! - a directory entry (create, link, unlink, rename, mkdir, rmdir) is durable once
//!   the directory that holds it is fsync'd; a rename between two directories is one
//!   change to both, made durable by an fsync of either;
//! - a file's fsync does not make its own name durable, and a directory's fsync does
//!   not make the directory's own name in its parent durable.
//!
//! A name made durable for a file whose data never was comes back as an empty file,
//! as on a real disk.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::SystemTime;

pub type Ino = u64;
pub const ROOT: Ino = 1;
pub const PAGE: usize = 4096;

/// A file's bytes as sparse pages: a page never written reads as zeros.
#[derive(Clone, Default, Debug, PartialEq)]
pub struct FileData {
    pages: BTreeMap<u64, Box<[u8]>>,
    pub size: u64,
}

impl FileData {
    pub fn write(&mut self, offset: u64, mut data: &[u8]) {
        let end = offset + data.len() as u64;
        let mut pos = offset;
        while !data.is_empty() {
            let page = pos / PAGE as u64;
            let within = (pos % PAGE as u64) as usize;
            let n = data.len().min(PAGE - within);
            let buf = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE].into_boxed_slice());
            buf[within..within + n].copy_from_slice(&data[..n]);
            data = &data[n..];
            pos += n as u64;
        }
        self.size = self.size.max(end);
    }

    pub fn truncate(&mut self, size: u64) {
        if size < self.size {
            let first_gone = size.div_ceil(PAGE as u64);
            self.pages.split_off(&first_gone);
            // The page the new end falls in keeps only what is before it: a later
            // extension must read zeros there.
            if !size.is_multiple_of(PAGE as u64) {
                if let Some(buf) = self.pages.get_mut(&(size / PAGE as u64)) {
                    buf[(size % PAGE as u64) as usize..].fill(0);
                }
            }
        }
        self.size = size;
    }

    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        if offset >= self.size {
            return Vec::new();
        }
        let len = len.min((self.size - offset) as usize);
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let pos = offset + done as u64;
            let page = pos / PAGE as u64;
            let within = (pos % PAGE as u64) as usize;
            let n = (len - done).min(PAGE - within);
            if let Some(buf) = self.pages.get(&page) {
                out[done..done + n].copy_from_slice(&buf[within..within + n]);
            }
            done += n;
        }
        out
    }

    /// Pages held in memory (for the stats).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    File {
        data: FileData,
        mode: u32,
        mtime: SystemTime,
    },
    Dir {
        entries: BTreeMap<OsString, Ino>,
        mode: u32,
        mtime: SystemTime,
    },
}

impl Node {
    pub fn is_dir(&self) -> bool {
        matches!(self, Node::Dir { .. })
    }
    pub fn mode(&self) -> u32 {
        match self {
            Node::File { mode, .. } | Node::Dir { mode, .. } => *mode,
        }
    }
    pub fn mtime(&self) -> SystemTime {
        match self {
            Node::File { mtime, .. } | Node::Dir { mtime, .. } => *mtime,
        }
    }
    fn empty(dir: bool, mode: u32, mtime: SystemTime) -> Node {
        if dir {
            Node::Dir {
                entries: BTreeMap::new(),
                mode,
                mtime,
            }
        } else {
            Node::File {
                data: FileData::default(),
                mode,
                mtime,
            }
        }
    }
}

/// One version of the tree: inodes by number, the root at [`ROOT`].
#[derive(Clone, Default, Debug, PartialEq)]
pub struct Tree {
    pub nodes: HashMap<Ino, Node>,
}

impl Tree {
    fn entries_mut(&mut self, dir: Ino) -> &mut BTreeMap<OsString, Ino> {
        // A directory whose own name is not durable yet still holds durable entries
        // (reachable once its name is): its node is made on first use.
        let node = self
            .nodes
            .entry(dir)
            .or_insert_with(|| Node::empty(true, 0o755, SystemTime::UNIX_EPOCH));
        match node {
            Node::Dir { entries, .. } => entries,
            Node::File { .. } => unreachable!("inode {dir} is a file, never a directory"),
        }
    }

    /// Reads a directory tree from disk (regular files and directories only).
    pub fn load(root: &Path, next_ino: &mut Ino) -> io::Result<Tree> {
        let mut tree = Tree::default();
        let meta = fs::metadata(root)?;
        tree.nodes.insert(
            ROOT,
            Node::Dir {
                entries: BTreeMap::new(),
                mode: meta.permissions().mode() & 0o7777,
                mtime: meta.modified()?,
            },
        );
        let mut stack = vec![(root.to_path_buf(), ROOT)];
        while let Some((dir, ino)) = stack.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let meta = entry.metadata()?;
                let child = *next_ino;
                let mode = meta.permissions().mode() & 0o7777;
                let node = if meta.is_dir() {
                    stack.push((entry.path(), child));
                    Node::Dir {
                        entries: BTreeMap::new(),
                        mode,
                        mtime: meta.modified()?,
                    }
                } else if meta.is_file() {
                    let file = fs::File::open(entry.path())?;
                    let mut data = FileData::default();
                    let mut buf = vec![0u8; 1 << 20];
                    let mut offset = 0u64;
                    loop {
                        let n = file.read_at(&mut buf, offset)?;
                        if n == 0 {
                            break;
                        }
                        for (i, chunk) in buf[..n].chunks(PAGE).enumerate() {
                            if chunk.iter().any(|&b| b != 0) {
                                data.write(offset + (i * PAGE) as u64, chunk);
                            }
                        }
                        offset += n as u64;
                    }
                    data.size = meta.len();
                    Node::File {
                        data,
                        mode,
                        mtime: meta.modified()?,
                    }
                } else {
                    return Err(io::Error::other(format!(
                        "{}: only regular files and directories can be served",
                        entry.path().display()
                    )));
                };
                *next_ino += 1;
                tree.nodes.insert(child, node);
                tree.entries_mut(ino).insert(entry.file_name(), child);
            }
        }
        Ok(tree)
    }

    /// Writes the tree reachable from the root into `root`, which is emptied first.
    /// Files with two names become two hard links.
    pub fn store(&self, root: &Path) -> io::Result<()> {
        for entry in fs::read_dir(root)? {
            let path = entry?.path();
            if fs::symlink_metadata(&path)?.is_dir() {
                fs::remove_dir_all(&path)?;
            } else {
                fs::remove_file(&path)?;
            }
        }
        let mut written: HashMap<Ino, std::path::PathBuf> = HashMap::new();
        let mut stack = vec![(root.to_path_buf(), ROOT)];
        let mut dirs = Vec::new();
        while let Some((path, ino)) = stack.pop() {
            let Some(Node::Dir { entries, mode, mtime }) = self.nodes.get(&ino) else {
                continue;
            };
            for (name, &child) in entries {
                let child_path = path.join(name);
                if let Some(first) = written.get(&child) {
                    fs::hard_link(first, &child_path)?;
                    continue;
                }
                match self.nodes.get(&child) {
                    Some(Node::Dir { .. }) => {
                        fs::create_dir(&child_path)?;
                        stack.push((child_path.clone(), child));
                    }
                    Some(Node::File { data, mode, mtime }) => {
                        let file = fs::File::create(&child_path)?;
                        for (&page, buf) in &data.pages {
                            let at = page * PAGE as u64;
                            if at < data.size {
                                let n = ((data.size - at) as usize).min(PAGE);
                                file.write_all_at(&buf[..n], at)?;
                            }
                        }
                        file.set_len(data.size)?;
                        file.set_modified(*mtime)?;
                        fs::set_permissions(&child_path, fs::Permissions::from_mode(*mode))?;
                    }
                    None => {
                        // A name made durable for an inode nothing else of was.
                        fs::File::create(&child_path)?;
                    }
                }
                written.insert(child, child_path);
            }
            dirs.push((path, *mode, *mtime));
        }
        // Directories last: their modes may forbid writing into them.
        for (path, mode, mtime) in dirs.into_iter().rev() {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
            let _ = fs::File::open(&path).and_then(|d| d.set_modified(mtime));
        }
        Ok(())
    }
}

/// A change to one file's contents or attributes, not yet durable.
#[derive(Clone, Debug)]
pub enum DataOp {
    /// At most one page of bytes, so that a power cut may keep a prefix of pages.
    Write {
        offset: u64,
        bytes: Vec<u8>,
    },
    Truncate(u64),
    Mode(u32),
    Mtime(SystemTime),
}

/// A change to directory entries, not yet durable.
#[derive(Clone, Debug)]
pub enum MetaOp {
    Link {
        dir: Ino,
        name: OsString,
        ino: Ino,
        is_dir: bool,
        mode: u32,
        mtime: SystemTime,
    },
    Unlink {
        dir: Ino,
        name: OsString,
        ino: Ino,
    },
    Rename {
        from_dir: Ino,
        from_name: OsString,
        to_dir: Ino,
        to_name: OsString,
        ino: Ino,
    },
}

impl MetaOp {
    fn touches(&self, dir: Ino) -> bool {
        match self {
            MetaOp::Link { dir: d, .. } | MetaOp::Unlink { dir: d, .. } => *d == dir,
            MetaOp::Rename { from_dir, to_dir, .. } => *from_dir == dir || *to_dir == dir,
        }
    }
    fn dirs(&self) -> [Ino; 2] {
        match self {
            MetaOp::Link { dir, .. } | MetaOp::Unlink { dir, .. } => [*dir, *dir],
            MetaOp::Rename { from_dir, to_dir, .. } => [*from_dir, *to_dir],
        }
    }

    fn apply(&self, tree: &mut Tree) {
        match self {
            MetaOp::Link {
                dir,
                name,
                ino,
                is_dir,
                mode,
                mtime,
            } => {
                tree.nodes
                    .entry(*ino)
                    .or_insert_with(|| Node::empty(*is_dir, *mode, *mtime));
                tree.entries_mut(*dir).insert(name.clone(), *ino);
            }
            MetaOp::Unlink { dir, name, ino } => {
                let entries = tree.entries_mut(*dir);
                if entries.get(name) == Some(ino) {
                    entries.remove(name);
                }
            }
            MetaOp::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
                ino,
            } => {
                let from = tree.entries_mut(*from_dir);
                if from.get(from_name) == Some(ino) {
                    from.remove(from_name);
                }
                tree.entries_mut(*to_dir).insert(to_name.clone(), *ino);
            }
        }
    }
}

fn apply_data(tree: &mut Tree, ino: Ino, ops: &[DataOp]) {
    // Every file's pending list starts with its mode and time, set at its creation.
    let node = tree
        .nodes
        .entry(ino)
        .or_insert_with(|| Node::empty(false, 0o644, SystemTime::UNIX_EPOCH));
    let Node::File { data, mode, mtime } = node else { return };
    for op in ops {
        match op {
            DataOp::Write { offset, bytes } => data.write(*offset, bytes),
            DataOp::Truncate(size) => data.truncate(*size),
            DataOp::Mode(m) => *mode = *m,
            DataOp::Mtime(t) => *mtime = *t,
        }
    }
}

/// Where an inode is linked in `live`, for paths and link counts.
#[derive(Clone, Debug)]
pub struct Place {
    pub parent: Ino,
    pub name: OsString,
    pub links: u32,
    pub opens: u32,
}

#[derive(Debug)]
pub enum FsError {
    NotFound,
    Exists,
    NotDir,
    IsDir,
    NotEmpty,
    Invalid,
}

impl FsError {
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::Invalid => libc::EINVAL,
        }
    }
}

/// The whole state: both trees and what stands between them.
pub struct Model {
    pub live: Tree,
    pub durable: Tree,
    pub places: HashMap<Ino, Place>,
    pending_meta: Vec<MetaOp>,
    pending_data: HashMap<Ino, Vec<DataOp>>,
    next_ino: Ino,
}

impl Model {
    pub fn load(root: &Path) -> io::Result<Model> {
        let mut next_ino = ROOT + 1;
        let live = Tree::load(root, &mut next_ino)?;
        let mut places = HashMap::new();
        places.insert(
            ROOT,
            Place {
                parent: ROOT,
                name: OsString::new(),
                links: 1,
                opens: 0,
            },
        );
        for node in live.nodes.values() {
            if let Node::Dir { entries, .. } = node {
                for &child in entries.values() {
                    places
                        .entry(child)
                        .or_insert(Place {
                            parent: 0,
                            name: OsString::new(),
                            links: 0,
                            opens: 0,
                        })
                        .links += 1;
                }
            }
        }
        // Parents, from a walk (a file with two names keeps one of them).
        for (&ino, node) in &live.nodes {
            if let Node::Dir { entries, .. } = node {
                for (name, &child) in entries {
                    let place = places.get_mut(&child).expect("counted above");
                    place.parent = ino;
                    place.name = name.clone();
                }
            }
        }
        Ok(Model {
            durable: live.clone(),
            live,
            places,
            pending_meta: Vec::new(),
            pending_data: HashMap::new(),
            next_ino,
        })
    }

    pub fn node(&self, ino: Ino) -> Option<&Node> {
        self.live.nodes.get(&ino)
    }

    pub fn lookup(&self, dir: Ino, name: &OsStr) -> Result<Ino, FsError> {
        match self.live.nodes.get(&dir) {
            Some(Node::Dir { entries, .. }) => entries.get(name).copied().ok_or(FsError::NotFound),
            Some(_) => Err(FsError::NotDir),
            None => Err(FsError::NotFound),
        }
    }

    /// The path of `ino` under the mount's root ("" for the root, None once unlinked).
    pub fn path(&self, ino: Ino) -> Option<String> {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let place = self.places.get(&at)?;
            if place.links == 0 {
                return None;
            }
            parts.push(place.name.to_string_lossy().into_owned());
            at = place.parent;
        }
        parts.reverse();
        Some(parts.join("/"))
    }

    pub fn child_path(&self, dir: Ino, name: &OsStr) -> String {
        match self.path(dir) {
            Some(p) if p.is_empty() => name.to_string_lossy().into_owned(),
            Some(p) => format!("{p}/{}", name.to_string_lossy()),
            None => name.to_string_lossy().into_owned(),
        }
    }

    fn dir_entries_mut(&mut self, dir: Ino) -> Result<&mut BTreeMap<OsString, Ino>, FsError> {
        match self.live.nodes.get_mut(&dir) {
            Some(Node::Dir { entries, mtime, .. }) => {
                *mtime = SystemTime::now();
                Ok(entries)
            }
            Some(_) => Err(FsError::NotDir),
            None => Err(FsError::NotFound),
        }
    }

    /// Creates a file or directory; the new inode is opened once if `open`.
    pub fn create(&mut self, dir: Ino, name: &OsStr, is_dir: bool, mode: u32, open: bool) -> Result<Ino, FsError> {
        if self.lookup(dir, name).is_ok() {
            return Err(FsError::Exists);
        }
        let ino = self.next_ino;
        self.dir_entries_mut(dir)?.insert(name.to_owned(), ino);
        self.next_ino += 1;
        let mtime = SystemTime::now();
        self.live.nodes.insert(ino, Node::empty(is_dir, mode, mtime));
        self.places.insert(
            ino,
            Place {
                parent: dir,
                name: name.to_owned(),
                links: 1,
                opens: u32::from(open),
            },
        );
        self.pending_meta.push(MetaOp::Link {
            dir,
            name: name.to_owned(),
            ino,
            is_dir,
            mode,
            mtime,
        });
        if !is_dir {
            self.pending_data
                .insert(ino, vec![DataOp::Mode(mode), DataOp::Mtime(mtime)]);
        }
        Ok(ino)
    }

    pub fn link(&mut self, ino: Ino, dir: Ino, name: &OsStr) -> Result<(), FsError> {
        match self.live.nodes.get(&ino) {
            Some(Node::Dir { .. }) => return Err(FsError::IsDir),
            Some(_) => {}
            None => return Err(FsError::NotFound),
        }
        if self.lookup(dir, name).is_ok() {
            return Err(FsError::Exists);
        }
        self.dir_entries_mut(dir)?.insert(name.to_owned(), ino);
        let place = self.places.get_mut(&ino).ok_or(FsError::NotFound)?;
        place.links += 1;
        if place.links == 1 {
            place.parent = dir;
            place.name = name.to_owned();
        }
        let (mode, mtime) = (self.live.nodes[&ino].mode(), self.live.nodes[&ino].mtime());
        self.pending_meta.push(MetaOp::Link {
            dir,
            name: name.to_owned(),
            ino,
            is_dir: false,
            mode,
            mtime,
        });
        Ok(())
    }

    /// unlink (`dir_wanted` false) or rmdir (true).
    pub fn remove(&mut self, dir: Ino, name: &OsStr, dir_wanted: bool) -> Result<(), FsError> {
        let ino = self.lookup(dir, name)?;
        match self.live.nodes.get(&ino) {
            Some(Node::Dir { entries, .. }) if dir_wanted && !entries.is_empty() => return Err(FsError::NotEmpty),
            Some(Node::Dir { .. }) if dir_wanted => {}
            Some(Node::Dir { .. }) => return Err(FsError::IsDir),
            Some(_) if dir_wanted => return Err(FsError::NotDir),
            _ => {}
        }
        self.dir_entries_mut(dir)?.remove(name);
        self.pending_meta.push(MetaOp::Unlink {
            dir,
            name: name.to_owned(),
            ino,
        });
        self.drop_link(ino, dir, name);
        Ok(())
    }

    fn drop_link(&mut self, ino: Ino, dir: Ino, name: &OsStr) {
        let Some(place) = self.places.get_mut(&ino) else { return };
        place.links = place.links.saturating_sub(1);
        if place.links > 0 && place.parent == dir && place.name == name {
            // Another name is left: find it for paths.
            let other = self.live.nodes.iter().find_map(|(&d, n)| match n {
                Node::Dir { entries, .. } => entries.iter().find(|(_, &c)| c == ino).map(|(nm, _)| (d, nm.clone())),
                _ => None,
            });
            if let (Some((d, nm)), Some(place)) = (other, self.places.get_mut(&ino)) {
                place.parent = d;
                place.name = nm;
            }
        }
        self.forget_if_unused(ino);
    }

    fn forget_if_unused(&mut self, ino: Ino) {
        if let Some(place) = self.places.get(&ino) {
            if place.links == 0 && place.opens == 0 {
                self.places.remove(&ino);
                self.live.nodes.remove(&ino);
                // Unreachable and closed: nothing can fsync it any more.
                self.pending_data.remove(&ino);
            }
        }
    }

    pub fn rename(
        &mut self,
        from_dir: Ino,
        from: &OsStr,
        to_dir: Ino,
        to: &OsStr,
        no_replace: bool,
    ) -> Result<(), FsError> {
        let ino = self.lookup(from_dir, from)?;
        if from_dir == to_dir && from == to {
            return Ok(());
        }
        let moving_dir = self.live.nodes.get(&ino).is_some_and(Node::is_dir);
        // A directory cannot move into itself or below itself.
        if moving_dir {
            let mut at = to_dir;
            while at != ROOT {
                if at == ino {
                    return Err(FsError::Invalid);
                }
                at = self.places.get(&at).map_or(ROOT, |p| p.parent);
            }
        }
        let replaced = self.lookup(to_dir, to).ok();
        if let Some(old) = replaced {
            if no_replace {
                return Err(FsError::Exists);
            }
            match (moving_dir, self.live.nodes.get(&old)) {
                (true, Some(Node::Dir { entries, .. })) if !entries.is_empty() => return Err(FsError::NotEmpty),
                (true, Some(Node::File { .. })) => return Err(FsError::NotDir),
                (false, Some(Node::Dir { .. })) => return Err(FsError::IsDir),
                _ => {}
            }
        }
        self.dir_entries_mut(to_dir)?;
        self.dir_entries_mut(from_dir)?.remove(from);
        self.dir_entries_mut(to_dir)?.insert(to.to_owned(), ino);
        if let Some(place) = self.places.get_mut(&ino) {
            place.parent = to_dir;
            place.name = to.to_owned();
        }
        self.pending_meta.push(MetaOp::Rename {
            from_dir,
            from_name: from.to_owned(),
            to_dir,
            to_name: to.to_owned(),
            ino,
        });
        if let Some(old) = replaced {
            self.drop_link(old, to_dir, to);
        }
        Ok(())
    }

    pub fn opened(&mut self, ino: Ino) {
        if let Some(place) = self.places.get_mut(&ino) {
            place.opens += 1;
        }
    }

    pub fn released(&mut self, ino: Ino) {
        if let Some(place) = self.places.get_mut(&ino) {
            place.opens = place.opens.saturating_sub(1);
        }
        self.forget_if_unused(ino);
    }

    fn file_mut(&mut self, ino: Ino) -> Result<(&mut FileData, &mut u32, &mut SystemTime), FsError> {
        match self.live.nodes.get_mut(&ino) {
            Some(Node::File { data, mode, mtime }) => Ok((data, mode, mtime)),
            Some(_) => Err(FsError::IsDir),
            None => Err(FsError::NotFound),
        }
    }

    pub fn write(&mut self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<(), FsError> {
        let now = SystemTime::now();
        let (data, _, mtime) = self.file_mut(ino)?;
        data.write(offset, bytes);
        *mtime = now;
        let pending = self.pending_data.entry(ino).or_default();
        // Split on page boundaries: a cut keeping a prefix keeps whole pages.
        let mut at = offset;
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = rest.len().min(PAGE - (at % PAGE as u64) as usize);
            pending.push(DataOp::Write {
                offset: at,
                bytes: rest[..n].to_vec(),
            });
            at += n as u64;
            rest = &rest[n..];
        }
        pending.push(DataOp::Mtime(now));
        Ok(())
    }

    pub fn truncate(&mut self, ino: Ino, size: u64) -> Result<(), FsError> {
        let (data, _, mtime) = self.file_mut(ino)?;
        data.truncate(size);
        *mtime = SystemTime::now();
        self.pending_data.entry(ino).or_default().push(DataOp::Truncate(size));
        Ok(())
    }

    pub fn chmod(&mut self, ino: Ino, new_mode: u32) -> Result<(), FsError> {
        match self.live.nodes.get_mut(&ino) {
            Some(Node::File { mode, .. }) => {
                *mode = new_mode;
                self.pending_data.entry(ino).or_default().push(DataOp::Mode(new_mode));
            }
            // A directory's mode goes with its entry in its parent: made durable here
            // at once (kaas never changes one).
            Some(Node::Dir { mode, .. }) => {
                *mode = new_mode;
                if let Some(Node::Dir { mode, .. }) = self.durable.nodes.get_mut(&ino) {
                    *mode = new_mode;
                }
            }
            None => return Err(FsError::NotFound),
        }
        Ok(())
    }

    pub fn set_mtime(&mut self, ino: Ino, time: SystemTime) -> Result<(), FsError> {
        match self.live.nodes.get_mut(&ino) {
            Some(Node::File { mtime, .. }) => {
                *mtime = time;
                self.pending_data.entry(ino).or_default().push(DataOp::Mtime(time));
            }
            Some(Node::Dir { mtime, .. }) => *mtime = time,
            None => return Err(FsError::NotFound),
        }
        Ok(())
    }

    /// fsync / fdatasync of a file: its pending data becomes durable.
    pub fn sync_file(&mut self, ino: Ino) {
        if let Some(ops) = self.pending_data.remove(&ino) {
            apply_data(&mut self.durable, ino, &ops);
        }
    }

    /// A failed write-back (an fsync answered EIO): like Linux, the pending data is
    /// dropped from what will ever reach the disk, and stays readable until then.
    pub fn lose_pending_data(&mut self, ino: Ino) {
        self.pending_data.remove(&ino);
    }

    /// fsync of a directory: every pending entry change in it becomes durable, with
    /// every earlier change those depend on (a rename out of another directory, and
    /// what came before it there).
    pub fn sync_dir(&mut self, dir: Ino) {
        let mut dirs = vec![dir];
        let mut chosen = vec![false; self.pending_meta.len()];
        for (i, op) in self.pending_meta.iter().enumerate().rev() {
            if dirs.iter().any(|&d| op.touches(d)) {
                chosen[i] = true;
                for d in op.dirs() {
                    if !dirs.contains(&d) {
                        dirs.push(d);
                    }
                }
            }
        }
        let mut kept = Vec::new();
        for (op, chosen) in std::mem::take(&mut self.pending_meta).into_iter().zip(chosen) {
            if chosen {
                op.apply(&mut self.durable);
            } else {
                kept.push(op);
            }
        }
        self.pending_meta = kept;
    }

    /// What a power cut leaves: `durable`, plus, when `rng` is given, a random prefix
    /// of the pending entry changes and of each file's pending pages (a disk that got
    /// part of its queue out before the power went).
    pub fn after_cut(&self, rng: Option<&mut Rng>) -> Tree {
        let mut tree = self.durable.clone();
        if let Some(rng) = rng {
            let keep = rng.below(self.pending_meta.len() as u64 + 1) as usize;
            for op in &self.pending_meta[..keep] {
                op.apply(&mut tree);
            }
            let mut inos: Vec<_> = self.pending_data.keys().copied().collect();
            inos.sort_unstable();
            for ino in inos {
                let ops = &self.pending_data[&ino];
                let keep = rng.below(ops.len() as u64 + 1) as usize;
                if keep > 0 {
                    apply_data(&mut tree, ino, &ops[..keep]);
                }
            }
        }
        tree
    }

    /// Counts for the stats: pending entry changes, files with pending data, pages.
    pub fn pending_counts(&self) -> (usize, usize, usize) {
        let pages = self
            .live
            .nodes
            .values()
            .map(|n| {
                if let Node::File { data, .. } = n {
                    data.pages()
                } else {
                    0
                }
            })
            .sum();
        (self.pending_meta.len(), self.pending_data.len(), pages)
    }
}

/// splitmix64: deterministic from a seed, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

#[cfg(test)]
mod tests;
