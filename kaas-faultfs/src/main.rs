//! kaas-faultfs: a FUSE file system for testing kaas against power cuts, failing
//! disks and slow network volumes. A test tool: no kaas crate depends on it.
//!
//! It serves the tree found in `--backing` (read once at mount) from memory, keeping
//! apart what was written and what was made durable (`model.rs` has the rules). Tests
//! drive it through a Unix socket, one command per line (docs/testing.md, "The
//! fault-injecting file system"):
//!
//! ```text
//! status                      counts, pending changes, whether the power is off
//! fault OP GLOB ERRNO [N]     the next N (default 1, 0 = until cleared) OP on a path
//!                             matching GLOB fail with ERRNO (EIO, ENOSPC, EDQUOT, EROFS
//!                             or a number); OP: write fsync rename create unlink open any
//! clear                       drops every fault and delay
//! delay meta US | fsync US    every metadata request / fsync takes US microseconds more
//! cut-at-fsync N              the power goes when the Nth fsync from now arrives
//! cut [SEED]                  the power goes now (if not already): the backing
//!                             directory gets what was durable, plus, with SEED, a random
//!                             prefix of what was pending; then unmount and exit
//! stop                        a clean shutdown: the backing directory gets everything
//!                             written; unmount and exit
//! ```

mod fs;
mod model;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::fs::{FaultFs, Op, Rule, Shared};
use crate::model::{Model, Rng};

#[derive(Parser)]
#[command(
    version,
    about = "A FUSE file system that loses unsynced writes on a power cut and injects disk faults"
)]
struct Args {
    /// The directory served; rewritten with the surviving tree at `cut` or `stop`.
    #[arg(long)]
    backing: PathBuf,
    /// Where to mount.
    #[arg(long)]
    mountpoint: PathBuf,
    /// The control socket to create.
    #[arg(long)]
    control: PathBuf,
    /// Threads answering requests (delays overlap across them).
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// How long the kernel may cache names and attributes. 0: every lookup reaches
    /// this process (and its metadata delay), as on a volume without client caching.
    #[arg(long, default_value_t = 0)]
    ttl_ms: u64,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("kaas-faultfs: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> std::io::Result<()> {
    let model = Model::load(&args.backing)
        .map_err(|e| std::io::Error::other(format!("reading {}: {e}", args.backing.display())))?;
    let shared = Shared::new(model);
    let fs = FaultFs::new(shared.clone(), Duration::from_millis(args.ttl_ms));
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("kaas-faultfs".into()),
        fuser::MountOption::DefaultPermissions,
    ];
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(args.threads.max(1));
    config.clone_fd = true;
    let session = fuser::Session::new(fs, &args.mountpoint, &config)
        .map_err(|e| std::io::Error::other(format!("mounting on {}: {e}", args.mountpoint.display())))?;
    // The socket exists once the mount does: a test waits for it.
    let _ = std::fs::remove_file(&args.control);
    let listener = UnixListener::bind(&args.control)?;
    let backing = args.backing.clone();
    let mountpoint = args.mountpoint.clone();
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for conn in listener.incoming().flatten() {
            serve(conn, &shared, &backing, &mountpoint);
        }
    })?;
    session.run()
}

fn serve(conn: UnixStream, shared: &Arc<Shared>, backing: &Path, mountpoint: &Path) {
    let Ok(reader) = conn.try_clone() else { return };
    let mut out = conn;
    for line in BufReader::new(reader).lines() {
        let Ok(line) = line else { return };
        let (answer, exit) = match command(line.trim(), shared, backing) {
            Ok((answer, exit)) => (format!("ok {answer}"), exit),
            Err(e) => (format!("err {e}"), false),
        };
        let _ = writeln!(out, "{answer}").and_then(|()| out.flush());
        if exit {
            // Lazily: processes still holding files here get ENOTCONN, not a hang.
            let _ = rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::DETACH);
            std::process::exit(0);
        }
    }
}

fn errno(name: &str) -> Result<i32, String> {
    Ok(match name {
        "EIO" => libc::EIO,
        "ENOSPC" => libc::ENOSPC,
        "EDQUOT" => libc::EDQUOT,
        "EROFS" => libc::EROFS,
        "EACCES" => libc::EACCES,
        n => n.parse().map_err(|_| format!("unknown errno {n:?}"))?,
    })
}

/// Runs one control command: its answer, and whether to unmount and exit after it.
fn command(line: &str, shared: &Arc<Shared>, backing: &Path) -> Result<(String, bool), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |i: usize| -> Result<u64, String> {
        words
            .get(i)
            .ok_or_else(|| format!("{line:?}: a number is missing"))?
            .parse()
            .map_err(|e| format!("{line:?}: {e}"))
    };
    match words.as_slice() {
        ["status"] => {
            let st = shared.lock();
            let (meta, files, pages) = st.model.pending_counts();
            let status = serde_json::json!({
                "frozen": st.frozen,
                "fsyncs": st.fsyncs,
                "faults_hit": st.faults_hit,
                "faults_armed": st.rules.len(),
                "pending_entry_changes": meta,
                "files_with_pending_data": files,
                "pages": pages,
                "ops": st.counts,
            });
            Ok((status.to_string(), false))
        }
        ["fault", op, pattern, name, ..] => {
            let op = Op::parse(op).ok_or_else(|| format!("unknown operation {op:?}"))?;
            let pattern = glob::Pattern::new(pattern).map_err(|e| format!("{pattern:?}: {e}"))?;
            let errno = errno(name)?;
            let remaining = if words.len() > 4 { num(4)? } else { 1 };
            let remaining = (remaining > 0).then_some(remaining);
            shared.lock().rules.push(Rule {
                op,
                pattern,
                errno,
                remaining,
            });
            Ok((String::new(), false))
        }
        ["clear"] => {
            shared.lock().rules.clear();
            shared.meta_delay_us.store(0, Ordering::Relaxed);
            shared.fsync_delay_us.store(0, Ordering::Relaxed);
            Ok((String::new(), false))
        }
        ["order", which @ ("reverse" | "sorted")] => {
            shared.listing_reversed.store(*which == "reverse", Ordering::Relaxed);
            Ok((String::new(), false))
        }
        ["delay", "meta", _] => {
            shared.meta_delay_us.store(num(2)?, Ordering::Relaxed);
            Ok((String::new(), false))
        }
        ["delay", "fsync", _] => {
            shared.fsync_delay_us.store(num(2)?, Ordering::Relaxed);
            Ok((String::new(), false))
        }
        ["cut-at-fsync", _] => {
            let n = num(1)?.max(1);
            let mut st = shared.lock();
            let at = st.fsyncs + n;
            st.cut_at_fsync = Some(at);
            Ok((at.to_string(), false))
        }
        ["cut"] | ["cut", _] => {
            let mut rng = if words.len() > 1 { Some(Rng::new(num(1)?)) } else { None };
            let tree = {
                let mut st = shared.lock();
                st.frozen = true;
                st.model.after_cut(rng.as_mut())
            };
            tree.store(backing)
                .map_err(|e| format!("writing {}: {e}", backing.display()))?;
            Ok((String::new(), true))
        }
        ["stop"] => {
            let tree = {
                let mut st = shared.lock();
                st.frozen = true;
                st.model.live.clone()
            };
            tree.store(backing)
                .map_err(|e| format!("writing {}: {e}", backing.display()))?;
            Ok((String::new(), true))
        }
        _ => Err(format!("unknown command {line:?}")),
    }
}
