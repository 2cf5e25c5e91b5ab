//! What several commands need to know about the cluster, read once per run.

use kaas_core::ownership::{owner, txn_slot_key};
use kaas_core::txn::TxnEntry;
use kaas_core::txn_store::{SlotFile, TxnStateStore};
use kaas_core::{Volume, VolumeError};

pub struct Cluster {
    pub volume: Volume,
    pub now_ms: i64,
    pub session_timeout_ms: i64,
    /// Brokers with a fresh lease.
    pub live: Vec<i32>,
    /// The live brokers less those still opening the volume: the rendezvous owners of
    /// slots and groups.
    pub serving: Vec<i32>,
    /// Serving brokers still joining: routed their share of slots and groups, which
    /// they take once every peer's lease routes to them (`BrokerLease::joining_ms`).
    pub joining: Vec<i32>,
}

/// "Now" for every kaasctl command: KAASCTL_NOW_MS pins it for reproducible output
/// (golden tests, incident write-ups); unset, it is the clock.
pub fn now_ms() -> i64 {
    std::env::var("KAASCTL_NOW_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(kaas_core::now_ms)
}

/// Whose volume `dir` is: the first owner (uid, gid) other than root among the data
/// directory as named (a symbolic link's own owner), the directory it leads to, and its
/// `__cluster` directory; None when all are root's, or there is no volume.
pub fn volume_owner(dir: &std::path::Path) -> anyhow::Result<Option<(u32, u32)>> {
    use std::os::unix::fs::MetadataExt;
    let stat = |path: &std::path::Path, follow: bool| {
        let meta = if follow {
            std::fs::metadata(path)
        } else {
            std::fs::symlink_metadata(path)
        };
        match meta {
            Ok(m) => Ok(Some((m.uid(), m.gid()))),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(anyhow::anyhow!("cannot stat {}: {e}", path.display())),
        }
    };
    // No volume: nothing of it to protect (the command says what is missing; the
    // dashboard, which would wait for it, is refused as root in main).
    let Some(named) = stat(dir, false)? else {
        return Ok(None);
    };
    // In that order, looking no further than needed: a user who cannot cross the
    // directory still learns whose it is.
    if named.0 != 0 {
        return Ok(Some(named));
    }
    if let Some(target) = stat(dir, true)?.filter(|&(uid, _)| uid != 0) {
        return Ok(Some(target));
    }
    Ok(stat(&dir.join("__cluster"), false)?.filter(|&(uid, _)| uid != 0))
}

/// Refuses a data directory that is not a kaas volume — missing, a file, or a
/// directory without `__cluster` (made by a broker's first start) — rather than
/// showing it as an empty cluster: a mistyped `--data-dir` must not read as "no
/// transactions, all healthy". `bootstraps`: the command may begin a volume in an
/// empty directory (users, ACLs and quotas set before the first broker starts).
pub fn check_is_volume(dir: &std::path::Path, bootstraps: bool) -> anyhow::Result<()> {
    use std::io::ErrorKind;
    let hint = "set --data-dir or KAAS_DATA_DIR to the brokers' data directory";
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => anyhow::bail!(
            "the data directory {} is a file, not a directory: {hint}",
            dir.display()
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            anyhow::bail!("the data directory {} does not exist: {hint}", dir.display())
        }
        Err(e) if e.kind() == ErrorKind::NotADirectory => anyhow::bail!(
            "the data directory {} does not exist: part of its path is a file: {hint}",
            dir.display()
        ),
        Err(e) => anyhow::bail!("cannot use the data directory {}: {e}", dir.display()),
    }
    let cluster = dir.join("__cluster");
    match std::fs::metadata(&cluster) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => anyhow::bail!("{} is not a kaas volume: its __cluster is a file", dir.display()),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
        // Another user's volume, closed to this one: what comes next says so better
        // (a mutating command's owner check names the owner; a read, the path).
        Err(e) if e.kind() == ErrorKind::PermissionDenied => return Ok(()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", cluster.display()),
    }
    // An empty directory (a fresh file system's lost+found aside) is a volume yet to
    // be made; anything else is someone else's directory.
    let empty = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .all(|e| e.file_name() == "lost+found");
    if bootstraps && empty {
        return Ok(());
    }
    anyhow::bail!(
        "{} is not a kaas volume: it has no __cluster directory ({}). A broker makes one at its first start with --data-dir pointing there; {hint}",
        dir.display(),
        if empty { "it is empty" } else { "it holds other files" }
    )
}

/// Run as root on a volume that belongs to another user (the brokers'), kaasctl becomes
/// that user before it opens anything on the volume: its supplementary groups dropped,
/// its gid and uid the owner's. What it writes then belongs to the brokers' user (who
/// can read it), and a symbolic link that user planted (`__cluster/audit` pointing at
/// /etc, or the data directory itself pointing elsewhere) leads it nowhere that user
/// could not write already: root's rights never reach past the volume
/// (docs/kaasctl.md#run-as-root). The owner is [`volume_owner`]'s (a volume whose root
/// is root's, such as an NFS export, with the brokers' files in it, is theirs). A
/// volume root's alone, kaasctl stays root. Returns the uid taken.
///
/// kaasctl calls this first thing, while it is one thread: the calls below change the
/// calling thread's ids (the raw system calls), which are then the process's, and
/// every thread started later inherits them.
pub fn act_as_volume_owner(dir: &std::path::Path) -> anyhow::Result<Option<u32>> {
    use rustix::process::{Gid, Uid};
    if !rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let Some((uid, gid)) = volume_owner(dir)? else {
        return Ok(None);
    };
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
    let me = os_user();
    let switched = rustix::thread::set_thread_groups(&[])
        .and_then(|()| rustix::thread::set_thread_res_gid(gid, gid, gid))
        .and_then(|()| rustix::thread::set_thread_res_uid(uid, uid, uid));
    if let Err(e) = switched {
        anyhow::bail!(
            "kaasctl runs as root and could not become the volume's owner (uid {}, gid {}): {e}; run it as that user (e.g. `sudo -u <user> kaasctl ...`)",
            uid.as_raw(),
            gid.as_raw()
        );
    }
    if rustix::process::geteuid() != uid || rustix::process::getegid() != gid {
        anyhow::bail!(
            "kaasctl could not become the volume's owner (uid {}, gid {})",
            uid.as_raw(),
            gid.as_raw()
        );
    }
    // The audit journal names who ran it, not only whom it acted as.
    let _ = ACTING_FOR.set(me);
    Ok(Some(uid.as_raw()))
}

/// Who ran kaasctl when it became the volume's owner ([`act_as_volume_owner`]).
static ACTING_FOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Refuses a mutating command run by another user than the volume's owner
/// ([`volume_owner`]: the brokers' user), unless `allow` (--allow-other-user).
pub fn check_volume_owner(dir: &std::path::Path, allow: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let owner = match volume_owner(dir)? {
        Some((uid, _)) => uid,
        None => std::fs::metadata(dir)
            .map_err(|e| anyhow::anyhow!("cannot stat {}: {e}", dir.display()))?
            .uid(),
    };
    let me = rustix::process::geteuid().as_raw();
    if owner == me || allow {
        return Ok(());
    }
    anyhow::bail!(
        "the volume {} belongs to uid {owner} (the brokers' user) and kaasctl runs as uid {me}: files it writes would belong to uid {me}, which brokers running as uid {owner} may not read. Run kaasctl as the brokers' user (e.g. `sudo -u <user> kaasctl ...`), or pass --allow-other-user",
        dir.display()
    )
}

/// The command line as the audit journal records it: as typed, but with the data
/// directory's path made absolute (`--data-dir data` says nothing to whoever reads the
/// journal later from another directory).
pub fn command_line() -> Vec<String> {
    absolute_data_dir(std::env::args().collect())
}

fn absolute_data_dir(mut args: Vec<String>) -> Vec<String> {
    let absolute = |p: &str| {
        std::path::absolute(p)
            .map(|a| a.display().to_string())
            .unwrap_or_else(|_| p.to_string())
    };
    let mut i = 1;
    while i < args.len() {
        if args[i] == "--" {
            break;
        }
        if args[i] == "--data-dir" && i + 1 < args.len() {
            args[i + 1] = absolute(&args[i + 1]);
            i += 1;
        } else if let Some(p) = args[i].strip_prefix("--data-dir=") {
            args[i] = format!("--data-dir={}", absolute(p));
        }
        i += 1;
    }
    args
}

/// Who a mutating command is recorded as (transition history, audit journal): the OS
/// account it runs as, [`os_user`].
pub fn admin_actor(tool: &str) -> kaas_core::txn::Actor {
    kaas_core::txn::Actor::Admin {
        tool: tool.into(),
        user: os_user(),
    }
}

/// The OS account kaasctl runs as: the name the password database gives its effective
/// uid, not `$USER` (which whoever starts kaasctl can set to anything), or `uid N`
/// when /etc/passwd has no entry for it (a container's arbitrary uid, a directory
/// service user).
pub fn os_user() -> String {
    let uid = rustix::process::geteuid().as_raw();
    let name = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| passwd_name(&passwd, uid))
        .unwrap_or_else(|| format!("uid {uid}"));
    match ACTING_FOR.get() {
        Some(ran) => format!("{ran} as {name}"),
        None => name,
    }
}

/// The name of `uid` in passwd(5) text.
fn passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let (name, _, id) = (fields.next()?, fields.next()?, fields.next()?);
        (id.parse::<u32>().ok() == Some(uid) && !name.is_empty()).then(|| name.to_string())
    })
}

impl Cluster {
    pub fn open(volume: Volume, session_timeout_ms: i64) -> Result<Cluster, VolumeError> {
        let now_ms = now_ms();
        // The leases read once; each set as `kaas_core::admin::live_brokers` and
        // `serving_brokers` compute it.
        let leases: Vec<_> = kaas_core::broker::list_brokers(&volume)?
            .into_iter()
            .filter_map(|l| l.ok())
            .filter(|l| l.is_alive(now_ms, session_timeout_ms))
            .collect();
        let ids = |keep: &dyn Fn(&kaas_core::broker::BrokerLease) -> bool| {
            let mut ids: Vec<i32> = leases.iter().filter(|l| keep(l)).map(|l| l.broker_id).collect();
            ids.sort_unstable();
            ids
        };
        let live = ids(&|_| true);
        let serving = ids(&|l| !l.is_opening());
        let joining = ids(&|l| l.liveness(now_ms, session_timeout_ms) == kaas_core::broker::Liveness::Joining);
        Ok(Cluster {
            volume,
            now_ms,
            session_timeout_ms,
            live,
            serving,
            joining,
        })
    }

    /// Who ends a transaction of `slot` past its timeout, in words: its coordinator's
    /// reaper, once it coordinates (a joining one waits for its peers first).
    pub fn reaper_of(&self, slot: u32) -> Option<String> {
        self.slot_owner(slot).map(|b| {
            if self.joining.contains(&b) {
                format!("broker {b} owns its slot and its reaper aborts it once broker {b} has joined (it waits for its peers' leases to route to it)")
            } else {
                format!("broker {b} owns its slot and its reaper aborts it within one sweep")
            }
        })
    }

    pub fn store(&self) -> TxnStateStore {
        TxnStateStore::new(self.volume.clone())
    }

    /// The live broker coordinating a slot (rendezvous over the serving brokers).
    pub fn slot_owner(&self, slot: u32) -> Option<i32> {
        owner(&txn_slot_key(slot), &self.serving)
    }

    /// Every slot file, read in parallel (the slots are independent files).
    pub fn slots(&self) -> Vec<(u32, Result<SlotFile, VolumeError>)> {
        self.map_slots(|slot, file| vec![(slot, file)])
    }

    /// Reads every slot in parallel and maps each to what the caller keeps, dropping
    /// the parsed file at once: memory holds the results, not 50 slot files.
    pub fn map_slots<R: Send>(&self, f: impl Fn(u32, Result<SlotFile, VolumeError>) -> Vec<R> + Sync) -> Vec<R> {
        let store = self.store();
        let slots: Vec<u32> = (0..kaas_core::txn_store::SLOTS).collect();
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8);
        let chunk = slots.len().div_ceil(workers);
        std::thread::scope(|s| {
            let handles: Vec<_> = slots
                .chunks(chunk)
                .map(|part| {
                    let (store, f) = (&store, &f);
                    s.spawn(move || part.iter().flat_map(|&n| f(n, store.read_slot(n))).collect::<Vec<_>>())
                })
                .collect();
            // Chunks are in slot order, so results come back in slot order.
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("slot reader thread"))
                .collect()
        })
    }

    /// Every coordinator entry of the slots that read (an unreadable slot is left out:
    /// `txn::check` reports it).
    pub fn entries(&self) -> Vec<TxnEntry> {
        self.map_slots(|_, file| file.map(|f| f.entries.into_values().collect()).unwrap_or_default())
    }

    /// [`Self::entries`], and the slots that could not be read: an entry missing from
    /// the first may be in one of those.
    pub fn entries_and_unreadable_slots(&self) -> (Vec<TxnEntry>, Vec<u32>) {
        let mut entries = Vec::new();
        let mut unreadable = Vec::new();
        for item in self.map_slots(|slot, file| match file {
            Ok(f) => f.entries.into_values().map(Ok).collect(),
            Err(_) => vec![Err(slot)],
        }) {
            match item {
                Ok(e) => entries.push(e),
                Err(slot) => unreadable.push(slot),
            }
        }
        (entries, unreadable)
    }

    /// Age of an entry's open transaction, if one is open.
    pub fn txn_age_ms(&self, e: &TxnEntry) -> Option<i64> {
        (e.txn_start_ms > 0
            && !matches!(
                e.state,
                kaas_core::txn::TxnState::Empty
                    | kaas_core::txn::TxnState::CompleteCommit
                    | kaas_core::txn::TxnState::CompleteAbort
            ))
        .then(|| self.now_ms - e.txn_start_ms)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorded_command_names_the_data_directory_absolutely() {
        let cwd = std::env::current_dir().unwrap();
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            super::absolute_data_dir(args(&["kaasctl", "--data-dir", "data", "txn", "abort", "x"])),
            args(&[
                "kaasctl",
                "--data-dir",
                &cwd.join("data").display().to_string(),
                "txn",
                "abort",
                "x"
            ])
        );
        assert_eq!(
            super::absolute_data_dir(args(&["kaasctl", "--data-dir=/v/data", "users", "add", "--data-dir"])),
            args(&["kaasctl", "--data-dir=/v/data", "users", "add", "--data-dir"])
        );
    }

    #[test]
    fn the_user_is_the_password_databases_name_for_the_uid() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# comment\nkaas:x:998:998::/var/lib/kaas:/usr/sbin/nologin\n";
        assert_eq!(super::passwd_name(passwd, 998).as_deref(), Some("kaas"));
        assert_eq!(super::passwd_name(passwd, 0).as_deref(), Some("root"));
        assert_eq!(super::passwd_name(passwd, 1000), None);
    }
}
