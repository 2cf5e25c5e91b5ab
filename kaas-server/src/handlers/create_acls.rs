//! CreateAcls (key 30): adds ACLs to `__cluster/acls.json` under its lock, as
//! `kaasctl acls add` does; every broker enforces them from its next volume sync,
//! this one at once. Needs ALTER on the cluster; SECURITY_DISABLED without
//! `--authorizer acls`, as Kafka without an authorizer answers.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{AclBinding, Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 3;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: CreateAclsRequest) -> CreateAclsResponse {
    let refuse_all = |code: ResponseError, message: String| {
        let results = req
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(sb(message.clone())))
            })
            .collect();
        CreateAclsResponse::default().with_results(results)
    };
    if let Some((code, message)) = acl_api_refused(broker, ctx, Operation::Alter) {
        return refuse_all(code, message);
    }
    let parsed: Vec<Result<AclBinding, String>> = req
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_wire(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    // What the file did not hold yet: only that is logged and journalled.
    let mut added: Vec<AclBinding> = Vec::new();
    let written = if valid.is_empty() {
        Ok(())
    } else {
        crate::blocking::off_worker(|| {
            broker.authz.update(&broker.volume, |acls| {
                for acl in &valid {
                    if !acls.acls.contains(acl) && !added.contains(acl) {
                        added.push(acl.clone());
                    }
                }
                acls.acls.extend(added.iter().cloned());
                Ok(())
            })
        })
        .map(drop)
    };
    let storage_error = match written {
        Ok(()) => {
            for acl in &added {
                tracing::info!(acl = %acl, principal = %ctx.principal, peer = %ctx.peer, "ACL created");
                if let Some(warning) = kaas_core::acl::principal_warning(&acl.principal) {
                    tracing::warn!(acl = %acl, "{warning}");
                }
            }
            audit(broker, ctx, "CreateAcls", &added);
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot write the ACLs");
            Some(e.to_string())
        }
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &storage_error) {
            (Err(problem), _) => AclCreationResult::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(sb(problem))),
            (Ok(_), Some(e)) => AclCreationResult::default()
                .with_error_code(ResponseError::KafkaStorageError.code())
                .with_error_message(Some(sb(e.clone()))),
            (Ok(_), None) => AclCreationResult::default(),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// Why a client may not use an ACL API, if it may not: SECURITY_DISABLED without the
/// authorizer, CLUSTER_AUTHORIZATION_FAILED without `op` (ALTER to change ACLs,
/// DESCRIBE to list them) on the cluster.
pub fn acl_api_refused(broker: &Broker, ctx: &RequestContext, op: Operation) -> Option<(ResponseError, String)> {
    if !broker.authz.enabled() {
        return Some((
            ResponseError::SecurityDisabled,
            "no authorizer is configured on the broker (--authorizer acls)".into(),
        ));
    }
    (!broker
        .authz
        .authorize(ctx, op, ResourceType::Cluster, crate::authz::CLUSTER))
    .then(|| {
        (
            ResponseError::ClusterAuthorizationFailed,
            format!("{} may not {} ACLs", ctx.principal, op.name().to_lowercase()),
        )
    })
}

/// One audit record per ACL changed (`kaasctl audit`), as kaasctl's own changes.
pub fn audit(broker: &Broker, ctx: &RequestContext, api: &str, acls: &[AclBinding]) {
    super::journal(broker, ctx, api, acls.iter().map(|acl| format!("acl {acl}")));
}
