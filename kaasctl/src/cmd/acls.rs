//! `kaasctl acls`: the ACLs brokers with `--authorizer acls` enforce
//! (`__cluster/acls.json`, docs/security.md#acls), read and written off the volume
//! under the same lock the brokers' CreateAcls/DeleteAcls take. Brokers pick a change
//! up at their next volume sync (about a second).

use super::Status;
use crate::cli::{AclPatternFilter, AclResourceArgs, AclSpec};
use crate::cluster::{admin_actor, Cluster};
use crate::out::{Out, Tone};
use kaas_core::acl::{AclBinding, AclFilter, Acls, PatternFilter, PatternType, Permission, ResourceType};

impl AclResourceArgs {
    /// The resource named, if one is.
    fn resource(&self) -> Option<(ResourceType, String)> {
        if let Some(t) = &self.topic {
            Some((ResourceType::Topic, t.clone()))
        } else if let Some(g) = &self.group {
            Some((ResourceType::Group, g.clone()))
        } else if let Some(t) = &self.transactional_id {
            Some((ResourceType::TransactionalId, t.clone()))
        } else if self.cluster {
            Some((ResourceType::Cluster, "kafka-cluster".into()))
        } else {
            None
        }
    }
}

impl AclSpec {
    /// Every binding the flags describe: each principal × host × operation.
    fn bindings(&self) -> anyhow::Result<Vec<AclBinding>> {
        let (resource_type, name) = self
            .resource
            .resource()
            .ok_or_else(|| anyhow::anyhow!("name a resource: --topic, --group, --transactional-id or --cluster"))?;
        let pattern_type = if self.prefixed {
            PatternType::Prefixed
        } else {
            PatternType::Literal
        };
        let principals = self
            .allow
            .iter()
            .map(|p| (p, Permission::Allow))
            .chain(self.deny.iter().map(|p| (p, Permission::Deny)));
        let mut out = Vec::new();
        for (principal, permission) in principals {
            for host in &self.hosts {
                for &operation in &self.operations {
                    let b = AclBinding {
                        resource_type,
                        pattern_type,
                        name: name.clone(),
                        principal: principal.clone(),
                        host: host.clone(),
                        operation,
                        permission,
                    };
                    if let Some(problem) = b.invalid() {
                        anyhow::bail!("{b}: {problem}");
                    }
                    out.push(b.canonical());
                }
            }
        }
        if out.is_empty() {
            anyhow::bail!("name at least one --allow-principal or --deny-principal");
        }
        Ok(out)
    }
}

pub fn list(
    c: &Cluster,
    out: &Out,
    resource: &AclResourceArgs,
    pattern: AclPatternFilter,
    principal: Option<&str>,
) -> anyhow::Result<Status> {
    let acls = Acls::read(&c.volume)?;
    let (resource_type, name) = resource.resource().unzip();
    let filter = AclFilter {
        resource_type,
        pattern: match pattern {
            AclPatternFilter::Any => PatternFilter::Any,
            AclPatternFilter::Match => PatternFilter::Match,
            AclPatternFilter::Literal => PatternFilter::Exactly(PatternType::Literal),
            AclPatternFilter::Prefixed => PatternFilter::Exactly(PatternType::Prefixed),
        },
        name,
        principal: principal.map(str::to_string),
        ..Default::default()
    };
    let rows: Vec<&AclBinding> = acls.acls.iter().filter(|a| filter.matches(a)).collect();
    if out.structured() {
        out.json(&rows);
    } else {
        let mut t = out.table(&[
            "PERMISSION",
            "PRINCIPAL",
            "HOST",
            "OPERATION",
            "RESOURCE TYPE",
            "NAME",
            "PATTERN",
        ]);
        for a in &rows {
            let tone = if a.permission == Permission::Deny {
                Tone::Warn
            } else {
                Tone::Plain
            };
            t.add_row(vec![
                out.cell(a.permission, tone),
                out.cell(&a.principal, Tone::Plain),
                out.cell(&a.host, Tone::Plain),
                out.cell(a.operation, Tone::Plain),
                out.cell(a.resource_type, Tone::Plain),
                out.cell(&a.name, Tone::Plain),
                out.cell(a.pattern_type, Tone::Plain),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::Ok)
}

pub fn add(c: &Cluster, spec: &AclSpec) -> anyhow::Result<Status> {
    let wanted = spec.bindings()?;
    let mut added = Vec::new();
    Acls::update::<anyhow::Error>(&c.volume, |acls| {
        for b in &wanted {
            if !acls.acls.contains(b) && !added.contains(b) {
                added.push(b.clone());
            }
        }
        acls.acls.extend(added.iter().cloned());
        Ok(())
    })?;
    for b in &added {
        outln!("added: {b}");
    }
    for b in &wanted {
        if let Some(warning) = kaas_core::acl::principal_warning(&b.principal) {
            eprintln!("kaasctl: warning: {}", crate::out::safe(&warning));
        }
    }
    for b in wanted.iter().filter(|b| !added.contains(b)) {
        outln!("already there: {b}");
    }
    audit_all(c, &added)?;
    Ok(Status::Ok)
}

pub fn delete(c: &Cluster, spec: &AclSpec) -> anyhow::Result<Status> {
    let wanted = spec.bindings()?;
    let mut removed = Vec::new();
    Acls::update::<anyhow::Error>(&c.volume, |acls| {
        acls.acls.retain(|a| {
            // By either spelling of its host (a hand-written 0:0:0:0:0:0:0:1 too).
            let gone = wanted.contains(&a.clone().canonical());
            if gone {
                removed.push(a.clone());
            }
            !gone
        });
        Ok(())
    })?;
    if removed.is_empty() {
        anyhow::bail!("no such ACL: {}", wanted[0]);
    }
    for b in &removed {
        outln!("deleted: {b}");
    }
    for b in wanted.iter().filter(|b| !removed.contains(b)) {
        outln!("was not there: {b}");
    }
    audit_all(c, &removed)?;
    Ok(Status::Ok)
}

/// Records changes already made, one record per ACL; every record is tried, and a
/// failure says which changes stand unrecorded.
fn audit_all(c: &Cluster, acls: &[AclBinding]) -> anyhow::Result<()> {
    let command = crate::cluster::command_line();
    let failed: Vec<String> = acls
        .iter()
        .filter_map(|acl| {
            let target = format!("acl {acl}");
            kaas_core::admin::record_audit(
                &c.volume,
                &admin_actor("kaasctl"),
                &command,
                &target,
                None,
                None,
                c.now_ms,
            )
            .err()
            .map(|e| format!("{target}: {e}"))
        })
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "the changes above stand, but these audit records could not be written:\n{}",
            failed.join("\n")
        );
    }
    Ok(())
}
