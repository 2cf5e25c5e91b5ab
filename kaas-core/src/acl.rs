//! Kafka's ACL model (docs/security.md#acls): bindings of (resource type, pattern,
//! principal, host, operation, allow/deny), stored in `__cluster/acls.json`, and the
//! decision Kafka's authorizer makes from them: a super user may do anything; a
//! matching DENY wins; otherwise a matching ALLOW for the operation (or one that
//! implies it) allows; otherwise the answer is no.
//!
//! Codes are Kafka's wire codes (CreateAcls / DescribeAcls / DeleteAcls), so the
//! handlers and the file use the same numbers.

use crate::error::{read_versioned_json_or, update_locked_json};
use crate::layout::Volume;
use crate::VolumeError;
use serde::{Deserialize, Serialize};

macro_rules! coded_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal => $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }
            /// Kafka's name (`TRANSACTIONAL_ID`, `DESCRIBE_CONFIGS`); any case is read.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),* }
            }
            pub fn from_name(s: &str) -> Option<Self> {
                let s = s.replace('-', "_");
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(&s))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded_enum!(
    /// What an ACL is about (Kafka's ResourceType, the kinds kaas authorizes).
    ResourceType {
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
    }
);

coded_enum!(
    /// How an ACL's resource name matches (Kafka's PatternType).
    PatternType {
        Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED",
    }
);

coded_enum!(
    /// Kafka's AclOperation.
    Operation {
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
    }
);

coded_enum!(
    /// Kafka's AclPermissionType.
    Permission {
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
);

/// `TYPE:NAME` (`User:alice`): a principal as ACLs, `--super-users` and kaasctl take it.
/// Surrounding spaces are dropped (`--super-users 'User:a; User:b'`).
pub fn parse_principal(s: &str) -> Result<String, String> {
    let s = s.trim();
    match s.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(s.to_string()),
        _ => Err(format!("principal {s:?} is not TYPE:NAME (e.g. User:alice)")),
    }
}

/// Why an ACL naming `principal` can never apply, if so: every client here is a
/// `User:` (SASL, a certificate, or User:ANONYMOUS); Kafka accepts other types (a
/// custom principal builder may make them), which no kaas client has.
pub fn principal_warning(principal: &str) -> Option<String> {
    let kind = principal.trim().split_once(':').map(|(kind, _)| kind)?;
    (kind != "User").then(|| {
        format!(
            "principal {principal:?} is of type {kind:?}: every client of kaas is a User:, so this ACL never applies"
        )
    })
}

/// `*`, or an IP address as hosts are compared: IPv4-mapped IPv6 as IPv4, IPv6 in its
/// short form (`::1` for Java's `0:0:0:0:0:0:0:1`). None for anything else.
pub fn canonical_host(host: &str) -> Option<String> {
    if host == WILDCARD {
        return Some(host.to_string());
    }
    host.parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical().to_string())
}

/// The literal name that matches every resource of its type.
pub const WILDCARD: &str = "*";
/// The principal that matches every principal.
pub const ANY_PRINCIPAL: &str = "User:*";

/// One ACL.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub pattern_type: PatternType,
    /// A literal name (`*` for all), or a prefix.
    pub name: String,
    /// `User:alice`, or `User:*`.
    pub principal: String,
    /// A client address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Whether this ACL is about `name` of `resource_type`.
    pub fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }

    /// `host` is the client's address as [`canonical_host`] writes it.
    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == ANY_PRINCIPAL)
            && (self.host == host
                || self.host == WILDCARD
                // An ACL written by hand in another form (`0:0:0:0:0:0:0:1`, as Java
                // prints it, or `::ffff:10.0.0.1`).
                || canonical_host(&self.host).is_some_and(|h| h == host))
    }

    /// A binding from Kafka's wire fields (CreateAcls), checked as [`AclBinding::invalid`].
    pub fn from_wire(
        resource_type: i8,
        name: &str,
        pattern: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, String> {
        let binding = AclBinding {
            resource_type: ResourceType::from_code(resource_type)
                .ok_or_else(|| format!("unknown or unsupported resource type {resource_type}"))?,
            pattern_type: PatternType::from_code(pattern)
                .ok_or_else(|| format!("pattern type {pattern} is not LITERAL (3) or PREFIXED (4)"))?,
            name: name.to_string(),
            principal: principal.to_string(),
            host: host.to_string(),
            operation: Operation::from_code(operation).ok_or_else(|| format!("unknown operation {operation}"))?,
            permission: Permission::from_code(permission)
                .ok_or_else(|| format!("permission type {permission} is not DENY (2) or ALLOW (3)"))?,
        };
        match binding.invalid() {
            Some(problem) => Err(problem),
            None => Ok(binding.canonical()),
        }
    }

    /// The binding with its host as [`canonical_host`] writes it, so equal ACLs are
    /// equal strings (kept once in the file, deleted by either spelling).
    /// Its principal trimmed too: ` User:alice` (a stray space in a script) would
    /// otherwise be stored as a principal no client ever is.
    pub fn canonical(mut self) -> AclBinding {
        if let Some(h) = canonical_host(&self.host) {
            self.host = h;
        }
        if self.principal.trim().len() != self.principal.len() {
            self.principal = self.principal.trim().to_string();
        }
        self
    }

    /// What is wrong with this binding for CreateAcls (Kafka's checks), if anything.
    pub fn invalid(&self) -> Option<String> {
        if self.name.is_empty() {
            return Some("the resource name must not be empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.name != "kafka-cluster" {
            return Some("the cluster resource is named kafka-cluster".into());
        }
        if self.pattern_type == PatternType::Prefixed && self.name == WILDCARD {
            return Some("a prefixed ACL cannot have the name '*' (use a literal '*')".into());
        }
        if let Err(problem) = parse_principal(&self.principal) {
            return Some(problem);
        }
        if canonical_host(&self.host).is_none() {
            return Some(format!(
                "host {:?} is not an IP address or '*' (ACL hosts are client addresses, not names or ranges)",
                self.host
            ));
        }
        None
    }
}

impl std::fmt::Display for AclBinding {
    /// `ALLOW User:alice from * to WRITE TOPIC orders- (PREFIXED)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} from {} to {} {} {} ({})",
            self.permission,
            self.principal,
            self.host,
            self.operation,
            self.resource_type,
            self.name,
            self.pattern_type
        )
    }
}

/// Wire codes of "any" in Kafka's ACL filters (AclBindingFilter).
pub const ANY_CODE: i8 = 1;
/// PatternType MATCH: the ACLs that would apply to the named resource.
pub const MATCH_CODE: i8 = 2;

impl AclFilter {
    /// A filter from Kafka's wire fields (DescribeAcls, DeleteAcls): `1` is ANY for
    /// every coded field, pattern `2` is MATCH. What is not a known code is refused with
    /// the field's name.
    pub fn from_wire(
        resource_type: i8,
        name: Option<&str>,
        pattern: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, String> {
        fn coded<T>(code: i8, what: &str, from: impl Fn(i8) -> Option<T>) -> Result<Option<T>, String> {
            if code == ANY_CODE {
                Ok(None)
            } else {
                from(code)
                    .map(Some)
                    .ok_or_else(|| format!("unknown or unsupported {what} {code}"))
            }
        }
        Ok(AclFilter {
            resource_type: coded(resource_type, "resource type", ResourceType::from_code)?,
            pattern: match pattern {
                ANY_CODE => PatternFilter::Any,
                MATCH_CODE => PatternFilter::Match,
                p => PatternFilter::Exactly(
                    PatternType::from_code(p).ok_or_else(|| format!("unknown pattern type {p}"))?,
                ),
            },
            name: name.map(str::to_string),
            // Trimmed as bindings are stored ([`AclBinding::canonical`]): deleting with
            // the spelling the ACL was created with finds it.
            principal: principal.map(|p| p.trim().to_string()),
            host: host.map(|h| canonical_host(h).unwrap_or_else(|| h.to_string())),
            operation: coded(operation, "operation", Operation::from_code)?,
            permission: coded(permission, "permission type", Permission::from_code)?,
        })
    }
}

/// The operations an ALLOW of `op` grants (Kafka: READ, WRITE, DELETE and ALTER imply
/// DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
fn implied_by(granted: Operation, wanted: Operation) -> bool {
    granted == wanted
        || granted == Operation::All
        || (wanted == Operation::Describe
            && matches!(
                granted,
                Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
            ))
        || (wanted == Operation::DescribeConfigs && granted == Operation::AlterConfigs)
}

/// Kafka's AclBindingFilter: `None` matches anything; a `Match` pattern matches the
/// ACLs that would apply to the named resource (literal equal or `*`, prefixes of it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub pattern: PatternFilter,
    pub name: Option<String>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PatternFilter {
    #[default]
    Any,
    Match,
    Exactly(PatternType),
}

impl AclFilter {
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.resource_type.is_none_or(|t| t == acl.resource_type)
            && match (self.pattern, &self.name) {
                (PatternFilter::Match, Some(name)) => acl.covers(acl.resource_type, name),
                (PatternFilter::Match, None) => true,
                (PatternFilter::Any, name) => name.as_ref().is_none_or(|n| *n == acl.name),
                (PatternFilter::Exactly(p), name) => {
                    p == acl.pattern_type && name.as_ref().is_none_or(|n| *n == acl.name)
                }
            }
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self
                .host
                .as_ref()
                .is_none_or(|h| *h == acl.host || canonical_host(&acl.host).as_deref() == Some(h.as_str()))
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }
}

pub const ACLS_FORMAT_VERSION: u32 = 1;

/// `__cluster/acls.json`: every ACL of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acls {
    pub version: u32,
    #[serde(default)]
    pub acls: Vec<AclBinding>,
}

crate::versioned!(Acls);

impl Acls {
    /// The ACLs on the volume; none stored is none.
    pub fn read(volume: &Volume) -> Result<Acls, VolumeError> {
        read_versioned_json_or(&volume.acls_file(), "ACLs", ACLS_FORMAT_VERSION, || Acls {
            version: ACLS_FORMAT_VERSION,
            acls: Vec::new(),
        })
    }

    /// Read-modify-write under `acls.lock` (brokers and kaasctl alike); nothing is
    /// written when `f` fails or changes nothing. Kept sorted and without duplicates.
    pub fn update<E: From<VolumeError>>(
        volume: &Volume,
        f: impl FnOnce(&mut Acls) -> Result<(), E>,
    ) -> Result<Acls, E> {
        update_locked_json(volume, &volume.acls_file(), Self::read, f, |a| {
            a.acls.sort();
            a.acls.dedup();
        })
    }

    /// Kafka's decision for `principal` from `host` doing `op` on `name` of
    /// `resource_type`. Super users are the caller's to check first.
    pub fn allows(&self, principal: &str, host: &str, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        let relevant = || {
            self.acls
                .iter()
                .filter(move |a| a.covers(resource_type, name) && a.applies_to(principal, host))
        };
        let denied = relevant()
            .any(|a| a.permission == Permission::Deny && (a.operation == op || a.operation == Operation::All));
        !denied && relevant().any(|a| a.permission == Permission::Allow && implied_by(a.operation, op))
    }

    /// Whether any ACL at all is about `name` of `resource_type`, whoever it names
    /// (allow.everyone.if.no.acl.found opens a resource only when none is).
    pub fn any_about(&self, resource_type: ResourceType, name: &str) -> bool {
        self.acls.iter().any(|a| a.covers(resource_type, name))
    }

    /// Kafka's authorizeByResourceType: whether `principal` from `host` may do `op` on
    /// at least one resource of `resource_type` — an ALLOW for it (or ALL) that no DENY
    /// for it covers wholly (a literal `*` DENY covers everything; a prefixed DENY
    /// covers the names and prefixes it starts; a literal DENY its own name).
    /// InitProducerId without a transactional id asks it of TOPIC WRITE.
    pub fn allows_any(&self, principal: &str, host: &str, op: Operation, resource_type: ResourceType) -> bool {
        let applicable = || {
            self.acls.iter().filter(move |a| {
                a.resource_type == resource_type
                    && a.applies_to(principal, host)
                    && (a.operation == op || a.operation == Operation::All)
            })
        };
        let denies: Vec<&AclBinding> = applicable().filter(|a| a.permission == Permission::Deny).collect();
        if denies
            .iter()
            .any(|d| d.pattern_type == PatternType::Literal && d.name == WILDCARD)
        {
            return false;
        }
        let denied_by_prefix = |name: &str| {
            denies
                .iter()
                .any(|d| d.pattern_type == PatternType::Prefixed && name.starts_with(&d.name))
        };
        applicable()
            .filter(|a| a.permission == Permission::Allow)
            .any(|a| match a.pattern_type {
                PatternType::Literal if a.name == WILDCARD => true,
                PatternType::Literal => {
                    !denied_by_prefix(&a.name)
                        && !denies
                            .iter()
                            .any(|d| d.pattern_type == PatternType::Literal && d.name == a.name)
                }
                PatternType::Prefixed => !denied_by_prefix(&a.name),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_with_stray_spaces_is_stored_trimmed_and_other_types_are_warned_about() {
        let acl = AclBinding::from_wire(2, "t", 3, " User:alice ", "*", 2, 3).unwrap();
        assert_eq!(acl.principal, "User:alice");
        assert_eq!(principal_warning("User:alice"), None);
        assert!(principal_warning("Group:ops").unwrap().contains("never applies"));
    }
    use proptest::prelude::*;

    fn acl(
        rt: ResourceType,
        pt: PatternType,
        name: &str,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            pattern_type: pt,
            name: name.into(),
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn deny_wins_prefixes_and_wildcards_match_and_describe_is_implied() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let acls = Acls {
            version: 1,
            acls: vec![
                acl(Topic, Prefixed, "orders-", "User:alice", Write, Allow),
                acl(Topic, Literal, "orders-secret", "User:alice", All, Deny),
                acl(Topic, Literal, "*", "User:*", Read, Allow),
                acl(TransactionalId, Literal, "alice-tx", "User:alice", Write, Allow),
                acl(Group, Literal, "g", "User:bob", Read, Allow),
            ],
        };
        assert!(acls.allows("User:alice", "10.0.0.1", Write, Topic, "orders-eu"));
        assert!(
            acls.allows("User:alice", "10.0.0.1", Describe, Topic, "orders-eu"),
            "WRITE implies DESCRIBE"
        );
        assert!(
            !acls.allows("User:alice", "10.0.0.1", Write, Topic, "orders-secret"),
            "DENY wins"
        );
        assert!(
            !acls.allows("User:alice", "10.0.0.1", Read, Topic, "orders-secret"),
            "DENY ALL denies READ too"
        );
        assert!(
            acls.allows("User:bob", "h", Read, Topic, "anything"),
            "literal * and User:*"
        );
        assert!(!acls.allows("User:bob", "h", Write, Topic, "orders-eu"));
        assert!(!acls.allows("User:bob", "h", Write, TransactionalId, "alice-tx"));
        assert!(acls.allows("User:bob", "h", Describe, Group, "g"));
        assert!(!acls.allows("User:bob", "h", Delete, Group, "g"));
        assert!(
            !acls.allows("User:carol", "h", Describe, Cluster, "kafka-cluster"),
            "no ACL, no access"
        );
    }

    #[test]
    fn hosts_are_ip_addresses_compared_in_one_form() {
        let mut a = acl(
            ResourceType::Topic,
            PatternType::Literal,
            "t",
            "User:x",
            Operation::Read,
            Permission::Allow,
        );
        for (host, canonical) in [
            ("0:0:0:0:0:0:0:1", "::1"),
            ("::ffff:10.0.0.1", "10.0.0.1"),
            ("10.0.0.1", "10.0.0.1"),
        ] {
            a.host = host.into();
            assert_eq!(a.invalid(), None);
            let acls = Acls {
                version: 1,
                acls: vec![a.clone()],
            };
            assert!(
                acls.allows("User:x", canonical, Operation::Read, ResourceType::Topic, "t"),
                "{host}"
            );
            assert!(
                !acls.allows("User:x", "10.9.9.9", Operation::Read, ResourceType::Topic, "t"),
                "{host}"
            );
            assert_eq!(a.clone().canonical().host, canonical);
        }
        for bad in ["", "kafka.example.com", "10.0.0.0/8"] {
            a.host = bad.into();
            assert!(a.invalid().is_some(), "{bad:?}");
        }
    }

    #[test]
    fn filters_match_as_kafkas_binding_filters() {
        let a = acl(
            ResourceType::Topic,
            PatternType::Prefixed,
            "orders-",
            "User:alice",
            Operation::Write,
            Permission::Allow,
        );
        let any = AclFilter::default();
        assert!(any.matches(&a));
        let on = |name: &str, pattern| AclFilter {
            name: Some(name.into()),
            pattern,
            ..Default::default()
        };
        assert!(on("orders-eu", PatternFilter::Match).matches(&a));
        assert!(!on("orders-eu", PatternFilter::Any).matches(&a));
        assert!(on("orders-", PatternFilter::Exactly(PatternType::Prefixed)).matches(&a));
        assert!(!on("orders-", PatternFilter::Exactly(PatternType::Literal)).matches(&a));
    }

    #[test]
    fn acls_round_trip_through_the_file_sorted_and_deduplicated() {
        let dir = tempfile::tempdir().unwrap();
        let v = Volume::new(dir.path());
        let a = acl(
            ResourceType::Group,
            PatternType::Literal,
            "g",
            "User:bob",
            Operation::Read,
            Permission::Allow,
        );
        Acls::update::<VolumeError>(&v, |acls| {
            acls.acls.push(a.clone());
            acls.acls.push(a.clone());
            Ok(())
        })
        .unwrap();
        assert_eq!(Acls::read(&v).unwrap().acls, vec![a]);
        assert!(std::fs::read_to_string(v.acls_file()).unwrap().contains("\"GROUP\""));
    }

    #[test]
    fn some_resource_of_a_type_is_allowed_unless_every_allowed_one_is_denied() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        use ResourceType::*;
        let with = |acls: Vec<AclBinding>| Acls { version: 1, acls };
        let w = |pt, name: &str, perm| acl(Topic, pt, name, "User:alice", Write, perm);
        assert!(!with(vec![]).allows_any("User:alice", "h", Write, Topic));
        assert!(with(vec![w(Literal, "t", Allow)]).allows_any("User:alice", "h", Write, Topic));
        assert!(!with(vec![w(Literal, "t", Allow)]).allows_any("User:bob", "h", Write, Topic));
        assert!(
            !with(vec![w(Literal, "t", Allow)]).allows_any("User:alice", "h", Read, Topic),
            "WRITE does not grant READ"
        );
        assert!(!with(vec![w(Literal, "t", Allow), w(Literal, "t", Deny)]).allows_any("User:alice", "h", Write, Topic));
        assert!(
            !with(vec![w(Prefixed, "t-", Allow), w(Prefixed, "t", Deny)]).allows_any("User:alice", "h", Write, Topic)
        );
        assert!(
            with(vec![w(Prefixed, "t", Allow), w(Prefixed, "t-", Deny)]).allows_any("User:alice", "h", Write, Topic),
            "t-... is denied, tx is not"
        );
        assert!(!with(vec![w(Prefixed, "t", Allow), w(Literal, "*", Deny)]).allows_any(
            "User:alice",
            "h",
            Write,
            Topic
        ));
        assert!(with(vec![acl(Topic, Literal, "*", "User:*", All, Allow)]).allows_any("User:alice", "h", Write, Topic));
        assert!(
            !with(vec![acl(Group, Literal, "*", "User:*", All, Allow)]).allows_any("User:alice", "h", Write, Topic),
            "another resource type"
        );
    }

    /// Against a reference model written straight from Kafka's rule: deny if any
    /// matching DENY names the operation or ALL; else allow if any matching ALLOW
    /// names it, ALL, or an operation implying it.
    fn model(acls: &[AclBinding], principal: &str, host: &str, op: Operation, rt: ResourceType, name: &str) -> bool {
        let m: Vec<&AclBinding> = acls
            .iter()
            .filter(|a| {
                a.resource_type == rt
                    && (a.principal == principal || a.principal == "User:*")
                    && (a.host == host || a.host == "*")
                    && match a.pattern_type {
                        PatternType::Literal => a.name == name || a.name == "*",
                        PatternType::Prefixed => name.starts_with(a.name.as_str()),
                    }
            })
            .collect();
        let implies = |g: Operation| {
            g == op
                || g == Operation::All
                || (op == Operation::Describe
                    && [Operation::Read, Operation::Write, Operation::Delete, Operation::Alter].contains(&g))
                || (op == Operation::DescribeConfigs && g == Operation::AlterConfigs)
        };
        !m.iter()
            .any(|a| a.permission == Permission::Deny && (a.operation == op || a.operation == Operation::All))
            && m.iter()
                .any(|a| a.permission == Permission::Allow && implies(a.operation))
    }

    fn arb_acl() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(ResourceType::ALL),
            prop::sample::select(PatternType::ALL),
            prop::sample::select(vec!["*", "a", "ab", "abc", "b"]),
            prop::sample::select(vec!["User:*", "User:x", "User:y"]),
            prop::sample::select(vec!["*", "10.0.0.1"]),
            prop::sample::select(Operation::ALL),
            prop::sample::select(Permission::ALL),
        )
            .prop_map(|(rt, pt, name, principal, host, op, perm)| AclBinding {
                host: host.into(),
                ..acl(rt, pt, name, principal, op, perm)
            })
    }

    proptest! {
        #[test]
        fn the_decision_is_kafkas(
            acls in prop::collection::vec(arb_acl(), 0..8),
            principal in prop::sample::select(vec!["User:x", "User:y"]),
            host in prop::sample::select(vec!["10.0.0.1", "10.0.0.2"]),
            op in prop::sample::select(Operation::ALL),
            rt in prop::sample::select(ResourceType::ALL),
            name in prop::sample::select(vec!["a", "ab", "abc", "b", "*"]),
        ) {
            let set = Acls { version: 1, acls: acls.clone() };
            prop_assert_eq!(set.allows(principal, host, op, rt, name), model(&acls, principal, host, op, rt, name));
        }
    }
}
