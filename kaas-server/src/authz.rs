//! The authorizer (docs/security.md#acls): with `--authorizer acls`, every request is
//! checked where Kafka checks it against the ACLs on the volume
//! (`__cluster/acls.json`); without, everyone may do everything.
//!
//! The ACLs are cached, with the stamp of the file they came from: this broker's own
//! CreateAcls/DeleteAcls replace the cache at once, and the volume sync (every
//! second) re-reads the file when another broker or kaasctl changed it. A file that
//! cannot be read keeps the ACLs last read (logged), never an empty set: an
//! unreadable file must not open, or close, the cluster by accident.

use crate::config::{AuthorizerKind, Config};
use kaas_core::acl::{Acls, Operation, ResourceType};
use kaas_core::fsutil::{file_stamp, FileStamp};
use kaas_core::layout::Volume;
use kaas_core::VolumeError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tracing::{error, info};

/// The name of the one cluster resource (Kafka's `kafka-cluster`).
pub const CLUSTER: &str = "kafka-cluster";

/// The log target of authorization denials and failed logins (Kafka's
/// `kafka.authorizer.logger`): `RUST_LOG=info,kaas_server::audit=warn` silences them.
pub const AUDIT_LOG_TARGET: &str = "kaas_server::audit";

/// Audit lines of one kind logged a second at most; past it they are counted, and the
/// count is logged with the next line that is.
pub const AUDIT_LINES_PER_SECOND: u32 = 20;

/// A budget of log lines a second, so a client asking a thousand times a second for
/// what it may not have cannot flood the log.
pub struct LogBudget {
    state: std::sync::Mutex<(i64, u32, u64)>,
}

impl LogBudget {
    pub const fn new() -> Self {
        LogBudget {
            state: std::sync::Mutex::new((0, 0, 0)),
        }
    }

    /// Some(lines not logged since the last one that was) when this one may be
    /// logged; None when it is over the budget (and counted).
    pub fn admit(&self) -> Option<u64> {
        let second = kaas_core::now_ms() / 1000;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (at, logged, unlogged) = &mut *state;
        if *at != second {
            *at = second;
            *logged = 0;
        }
        if *logged >= AUDIT_LINES_PER_SECOND {
            *unlogged += 1;
            return None;
        }
        *logged += 1;
        Some(std::mem::take(unlogged))
    }
}

impl Default for LogBudget {
    fn default() -> Self {
        Self::new()
    }
}

/// Authorization denials' share of the log.
static DENIALS: LogBudget = LogBudget::new();

/// Every denial [`Authorizer::authorize`] logged (or would have, past the budget), by
/// principal and resource: tests count what a request logs.
#[cfg(test)]
pub(crate) static DENIALS_SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
/// Failed logins' share of the log.
pub static FAILED_LOGINS: LogBudget = LogBudget::new();

/// Who asks, as far as the authorizer needs to know: a request's principal and client
/// address (and its API, for the denial log). `handlers::RequestContext` is one.
pub trait Requester: Sync {
    fn principal(&self) -> &str;
    fn peer(&self) -> std::net::SocketAddr;
    fn api(&self) -> kafka_protocol::messages::ApiKey;
}

pub struct Authorizer {
    enabled: bool,
    /// `--allow-scram-changes-without-authorizer`.
    scram_changes_without_authorizer: bool,
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
    cache: RwLock<Cached>,
    /// This broker's CreateAcls/DeleteAcls, one at a time from the file's lock to the
    /// cache: two of them cannot install their results in the wrong order.
    writes: Mutex<()>,
    /// Volume syncs so far: every [`FULL_READ_EVERY`]th reads the file whatever its
    /// stamp says (a stamp can repeat: same size, a reused inode, a coarse clock).
    reloads: AtomicU64,
    /// The file went missing after it was read (logged once, until it is back).
    missing_logged: AtomicBool,
}

/// Every this many volume syncs (seconds) the ACL file is read even if its stamp has
/// not changed.
const FULL_READ_EVERY: u64 = 10;

struct Cached {
    acls: Arc<Acls>,
    /// The stamp of the file `acls` were read from; None: read it at the next sync.
    stamp: Option<FileStamp>,
    /// Bumped by every [`Authorizer::update`]: a reload that began before it does not
    /// put back what it read.
    generation: u64,
    /// The file has been read (or written by this broker): from then on a missing
    /// file is an accident, not "no ACLs".
    file_seen: bool,
}

/// This broker's authorization settings as its lease states them, for peers and
/// `kaasctl doctor` to compare: `none`, or `acls super-users=User:a;User:b
/// allow-everyone-if-no-acl-found=false` (super users sorted).
pub fn lease_settings(config: &Config) -> String {
    match config.authorizer {
        AuthorizerKind::None => "none".into(),
        AuthorizerKind::Acls => {
            let mut supers = config.super_users.clone();
            supers.sort();
            supers.dedup();
            format!(
                "acls super-users={} allow-everyone-if-no-acl-found={}",
                supers.join(";"),
                config.allow_everyone_if_no_acl_found
            )
        }
    }
}

impl Authorizer {
    /// Reads the ACLs at start when enforcing them; an unreadable file stops the broker.
    pub fn load(volume: &Volume, config: &Config) -> Result<Authorizer, VolumeError> {
        let enabled = config.authorizer == AuthorizerKind::Acls;
        let (acls, stamp) = if enabled {
            let stamp = file_stamp(&volume.acls_file());
            (Acls::read(volume)?, stamp)
        } else {
            (Acls::default(), None)
        };
        if enabled {
            info!(
                acls = acls.acls.len(),
                super_users = ?config.super_users,
                allow_everyone_if_no_acl_found = config.allow_everyone_if_no_acl_found,
                "ACL authorizer on"
            );
        } else if config.allow_scram_changes_without_authorizer {
            tracing::warn!("no authorizer, and --allow-scram-changes-without-authorizer: any client may change any user's SCRAM credentials");
        } else {
            info!(super_users = ?config.super_users, "no authorizer: every client may do everything but change SCRAM credentials (AlterUserScramCredentials), which only --super-users may (--allow-scram-changes-without-authorizer opens it)");
        }
        Ok(Authorizer {
            enabled,
            scram_changes_without_authorizer: config.allow_scram_changes_without_authorizer,
            super_users: config.super_users.iter().cloned().collect(),
            allow_if_no_acl: config.allow_everyone_if_no_acl_found,
            cache: RwLock::new(Cached {
                acls: Arc::new(acls),
                stamp,
                generation: 0,
                file_seen: stamp.is_some(),
            }),
            writes: Mutex::new(()),
            reloads: AtomicU64::new(1),
            missing_logged: AtomicBool::new(false),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Re-reads `acls.json` if its stamp changed since it was last read (and every
    /// [`FULL_READ_EVERY`] calls regardless). A file that is gone after it was read
    /// keeps the ACLs last read, as an unreadable one does: neither may open or close
    /// the cluster by accident (kaas never deletes it; no ACLs is an empty list).
    pub fn reload(&self, volume: &Volume) {
        if !self.enabled {
            return;
        }
        let full = self
            .reloads
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(FULL_READ_EVERY);
        // The stamp before the content: a file replaced in between is read again at
        // the next sync, as its stamp differs from the one kept.
        let path = volume.acls_file();
        let stamp = file_stamp(&path);
        let generation = {
            let c = self.cached();
            if stamp.is_none() {
                if c.file_seen && !self.missing_logged.swap(true, Ordering::Relaxed) {
                    error!(path = %path.display(), "the ACL file is gone or cannot be opened; enforcing the ACLs last read");
                }
                return;
            }
            self.missing_logged.store(false, Ordering::Relaxed);
            if stamp == c.stamp && !full {
                return;
            }
            c.generation
        };
        match Acls::read(volume) {
            Ok(acls) => {
                let mut c = self.cache.write().unwrap_or_else(|p| p.into_inner());
                if c.generation != generation {
                    return; // this broker wrote newer ACLs meanwhile
                }
                if *c.acls != acls {
                    info!(acls = acls.acls.len(), "ACLs changed on the volume");
                }
                c.acls = Arc::new(acls);
                c.stamp = stamp;
                c.file_seen = true;
            }
            Err(e) => error!(error = %e, "cannot read the ACLs; enforcing the ones last read"),
        }
    }

    /// A read-modify-write of the ACL file for CreateAcls/DeleteAcls ([`Acls::update`],
    /// under the file's lock), enforced by this broker at once. Blocking file work.
    /// The file is read again at the next sync (no stamp is kept), so a writer that
    /// came between the write and the cache update is not missed.
    pub fn update(
        &self,
        volume: &Volume,
        f: impl FnOnce(&mut Acls) -> Result<(), VolumeError>,
    ) -> Result<Acls, VolumeError> {
        let _one_at_a_time = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let acls = Acls::update(volume, f)?;
        let mut c = self.cache.write().unwrap_or_else(|p| p.into_inner());
        c.acls = Arc::new(acls.clone());
        c.stamp = None;
        c.generation += 1;
        c.file_seen = true;
        Ok(acls)
    }

    fn cached(&self) -> std::sync::RwLockReadGuard<'_, Cached> {
        self.cache.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The ACLs being enforced.
    pub fn acls(&self) -> Arc<Acls> {
        self.cached().acls.clone()
    }

    fn is_super(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Kafka's decision for the request's principal and client address; a denial is
    /// logged at info, as Kafka's `kafka.authorizer.logger` does, at most
    /// [`AUDIT_LINES_PER_SECOND`] a second (then how many were not logged).
    pub fn authorize(&self, ctx: &dyn Requester, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        let allowed = self.decide(ctx, op, resource_type, name);
        if !allowed {
            #[cfg(test)]
            DENIALS_SEEN
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((ctx.principal().to_string(), name.to_string()));
            if let Some(unlogged) = DENIALS.admit() {
                if unlogged > 0 {
                    info!(target: AUDIT_LOG_TARGET, unlogged, "authorization denials not logged since the last one that was (rate limit)");
                }
                info!(
                    target: AUDIT_LOG_TARGET,
                    principal = %ctx.principal(),
                    host = %host_of(ctx),
                    operation = %op,
                    resource_type = %resource_type,
                    resource = name,
                    api = ?ctx.api(),
                    "denied"
                );
            }
        }
        allowed
    }

    /// [`Self::authorize`] without the denial log: for filtering what a listing shows
    /// (all topics of a Metadata request, ListGroups, ListTransactions), where a denial
    /// is not a refusal of anything asked for (Kafka's `logIfDenied = false`). A user
    /// allowed 10 of 1,000 topics would otherwise log 990 denials per Metadata request
    /// and use up the audit log's budget for the real ones.
    pub fn authorize_quietly(
        &self,
        ctx: &dyn Requester,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.decide(ctx, op, resource_type, name)
    }

    fn decide(&self, ctx: &dyn Requester, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        if !self.enabled || self.is_super(ctx.principal()) {
            return true;
        }
        let acls = self.acls();
        acls.allows(ctx.principal(), &host_of(ctx), op, resource_type, name)
            || (self.allow_if_no_acl && !acls.any_about(resource_type, name))
    }

    /// Whether the principal may add, change or delete SCRAM credentials: ALTER on the
    /// cluster (Kafka's check) with the authorizer on; without it, only a super user
    /// (or anyone, with `--allow-scram-changes-without-authorizer`).
    pub fn may_change_credentials(&self, ctx: &dyn Requester) -> bool {
        if self.enabled {
            return self.authorize(ctx, Operation::Alter, ResourceType::Cluster, CLUSTER);
        }
        self.scram_changes_without_authorizer || self.is_super(ctx.principal())
    }

    /// Whether the principal may list the SCRAM users (DescribeUserScramCredentials):
    /// DESCRIBE on the cluster with the authorizer on; without it, as
    /// [`Self::may_change_credentials`].
    pub fn may_see_credentials(&self, ctx: &dyn Requester) -> bool {
        if self.enabled {
            return self.authorize(ctx, Operation::Describe, ResourceType::Cluster, CLUSTER);
        }
        self.scram_changes_without_authorizer || self.is_super(ctx.principal())
    }

    /// Whether the principal may do `op` on some resource of `resource_type`
    /// (Kafka's authorizeByResourceType).
    pub fn authorize_any(&self, ctx: &dyn Requester, op: Operation, resource_type: ResourceType) -> bool {
        // As Kafka's authorizeByResourceType: a made-up name first (which also lets
        // everyone through without the authorizer, and super users), so that
        // allow.everyone.if.no.acl.found (and a literal '*' ALLOW) count as they would
        // for a resource no ACL names; then the ALLOWs not wholly denied.
        if self.decide(ctx, op, resource_type, "hardcode") {
            return true;
        }
        self.acls()
            .allows_any(ctx.principal(), &host_of(ctx), op, resource_type)
    }

    /// Kafka's cluster_authorized_operations: unset (i32::MIN) unless asked for; none
    /// without DESCRIBE on the cluster; else the operations allowed on it.
    pub fn cluster_authorized_operations(&self, ctx: &dyn Requester, asked: bool) -> i32 {
        if !asked {
            i32::MIN
        } else if self.authorize(ctx, Operation::Describe, ResourceType::Cluster, CLUSTER) {
            self.authorized_operations(ctx, ResourceType::Cluster, CLUSTER)
        } else {
            0
        }
    }

    /// The operations the principal may do on the resource, as Kafka's bit field
    /// (bit n for operation code n), for the *_authorized_operations fields.
    pub fn authorized_operations(&self, ctx: &dyn Requester, resource_type: ResourceType, name: &str) -> i32 {
        operations_of(resource_type)
            .iter()
            .filter(|&&op| self.decide(ctx, op, resource_type, name))
            .fold(0, |bits, op| bits | 1 << op.code())
    }
}

/// The client's address as ACL hosts are written: the IP alone, an IPv4 client on a
/// dual-stack socket as IPv4.
fn host_of(ctx: &dyn Requester) -> String {
    ctx.peer().ip().to_canonical().to_string()
}

/// The operations Kafka reports in *_authorized_operations for each resource type.
fn operations_of(resource_type: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => &[
            Create,
            Alter,
            Describe,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_lines_are_held_to_a_budget_a_second_and_the_rest_counted() {
        let budget = LogBudget::new();
        let second = kaas_core::now_ms() / 1000;
        let mut logged = 0;
        for _ in 0..100 {
            if budget.admit().is_some() {
                logged += 1;
            }
        }
        if kaas_core::now_ms() / 1000 == second {
            assert_eq!(logged, AUDIT_LINES_PER_SECOND, "within one second");
            std::thread::sleep(std::time::Duration::from_millis(
                1000 - (kaas_core::now_ms() % 1000) as u64 + 5,
            ));
            assert_eq!(
                budget.admit(),
                Some(100 - u64::from(AUDIT_LINES_PER_SECOND)),
                "the count comes with the next line"
            );
        }
    }
    use crate::handlers::test_support::ctx;
    use kaas_core::acl::{AclBinding, PatternType, Permission};
    use kafka_protocol::messages::ApiKey;

    fn config(dir: &std::path::Path, extra: &[&str]) -> Config {
        let mut args = vec![
            "kaas-server",
            "--data-dir",
            dir.to_str().unwrap(),
            "--authorizer",
            "acls",
        ];
        args.extend_from_slice(extra);
        <Config as clap::Parser>::parse_from(args)
    }

    fn allow(name: &str, principal: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            pattern_type: PatternType::Literal,
            name: name.into(),
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    /// Stores an ACL letting alice WRITE `topic`, as another process would.
    fn store_alice_write(volume: &Volume, topic: &str) {
        Acls::update::<VolumeError>(volume, |a| {
            a.acls.push(allow(topic, "User:alice", Operation::Write));
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn super_users_pass_others_need_an_acl_and_changes_on_the_volume_are_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let authz = Authorizer::load(&volume, &config(dir.path(), &["--super-users", "User:root;User:ops"])).unwrap();
        let mut c = ctx(ApiKey::Produce, 9);
        assert!(!authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
        c.principal = "User:ops".into();
        assert!(authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
        c.principal = "User:alice".into();
        store_alice_write(&volume, "t");
        assert!(
            !authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"),
            "cached until the next sync"
        );
        authz.reload(&volume);
        assert!(authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
        assert_eq!(
            authz.authorized_operations(&c, ResourceType::Topic, "t"),
            1 << Operation::Write.code() | 1 << Operation::Describe.code()
        );
    }

    #[test]
    fn an_unreadable_acl_file_keeps_the_acls_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        store_alice_write(&volume, "t");
        let authz = Authorizer::load(&volume, &config(dir.path(), &[])).unwrap();
        std::fs::write(volume.acls_file(), b"{ not json").unwrap();
        authz.reload(&volume);
        let mut c = ctx(ApiKey::Produce, 9);
        c.principal = "User:alice".into();
        assert!(authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
        assert!(
            Authorizer::load(&volume, &config(dir.path(), &[])).is_err(),
            "a broker does not start on ACLs it cannot read"
        );
    }

    #[test]
    fn allow_everyone_if_no_acl_found_opens_only_resources_no_acl_names() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        store_alice_write(&volume, "guarded");
        let authz = Authorizer::load(
            &volume,
            &config(dir.path(), &["--allow-everyone-if-no-acl-found", "true"]),
        )
        .unwrap();
        let c = ctx(ApiKey::Produce, 9);
        assert!(authz.authorize(&c, Operation::Write, ResourceType::Topic, "open"));
        assert!(!authz.authorize(&c, Operation::Write, ResourceType::Topic, "guarded"));
        // An idempotent producer id (WRITE on some topic) is not refused because one
        // topic has an ACL: Kafka asks about a name no ACL covers first (review finding).
        assert!(authz.authorize_any(&c, Operation::Write, ResourceType::Topic));
    }

    #[test]
    fn a_vanished_acl_file_keeps_the_acls_last_read() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        store_alice_write(&volume, "t");
        let authz = Authorizer::load(
            &volume,
            &config(dir.path(), &["--allow-everyone-if-no-acl-found", "true"]),
        )
        .unwrap();
        std::fs::remove_file(volume.acls_file()).unwrap();
        for _ in 0..FULL_READ_EVERY + 1 {
            authz.reload(&volume);
        }
        let mut c = ctx(ApiKey::Produce, 9);
        c.principal = "User:mallory".into();
        assert!(
            !authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"),
            "the file's ACLs still hold: t stays closed to others"
        );
    }

    #[test]
    fn a_change_with_the_same_stamp_is_read_within_a_full_read_round() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let authz = Authorizer::load(&volume, &config(dir.path(), &[])).unwrap();
        authz.reload(&volume);
        // Another writer's change the stamp cannot see (kept stamp forced equal).
        store_alice_write(&volume, "t");
        authz.cache.write().unwrap().stamp = file_stamp(&volume.acls_file());
        let mut c = ctx(ApiKey::Produce, 9);
        c.principal = "User:alice".into();
        assert!(!authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
        for _ in 0..FULL_READ_EVERY {
            authz.reload(&volume);
        }
        assert!(authz.authorize(&c, Operation::Write, ResourceType::Topic, "t"));
    }

    #[test]
    fn without_the_authorizer_everything_is_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::new(dir.path());
        let config = <Config as clap::Parser>::parse_from(["kaas-server", "--data-dir", dir.path().to_str().unwrap()]);
        let authz = Authorizer::load(&volume, &config).unwrap();
        assert!(authz.authorize(
            &ctx(ApiKey::DeleteTopics, 6),
            Operation::Delete,
            ResourceType::Topic,
            "t"
        ));
    }
}
