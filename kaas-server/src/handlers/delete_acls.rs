//! DeleteAcls (key 31): removes the ACLs matching any of the filters from
//! `__cluster/acls.json` under its lock, and answers each filter with the ACLs it
//! matched. Needs ALTER on the cluster; SECURITY_DISABLED without `--authorizer acls`.

use super::create_acls::{acl_api_refused, audit};
use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{AclBinding, AclFilter, Operation};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 3;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |code: ResponseError, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(sb(message)))
    };
    if let Some((code, message)) = acl_api_refused(broker, ctx, Operation::Alter) {
        return DeleteAclsResponse::default()
            .with_filter_results(req.filters.iter().map(|_| failed(code, &message)).collect());
    }
    let filters: Vec<Result<AclFilter, String>> = req
        .filters
        .iter()
        .map(|f| {
            AclFilter::from_wire(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    // Under the lock: each filter's matches among the ACLs as they are then, all
    // removed in one write.
    let mut matched: Vec<Vec<AclBinding>> = Vec::new();
    let written = crate::blocking::off_worker(|| {
        broker.authz.update(&broker.volume, |acls| {
            matched = filters
                .iter()
                .map(|f| match f {
                    Ok(f) => acls.acls.iter().filter(|a| f.matches(a)).cloned().collect(),
                    Err(_) => Vec::new(),
                })
                .collect();
            acls.acls.retain(|a| !filters.iter().flatten().any(|f| f.matches(a)));
            Ok(())
        })
    });
    let results = match written {
        Err(e) => {
            tracing::error!(error = %e, "cannot write the ACLs");
            let message = e.to_string();
            filters
                .iter()
                .map(|_| failed(ResponseError::KafkaStorageError, &message))
                .collect()
        }
        Ok(_) => {
            let mut removed: Vec<AclBinding> = matched.iter().flatten().cloned().collect();
            removed.sort();
            removed.dedup();
            for acl in &removed {
                tracing::info!(acl = %acl, principal = %ctx.principal, peer = %ctx.peer, "ACL deleted");
            }
            audit(broker, ctx, "DeleteAcls", &removed);
            filters
                .iter()
                .zip(matched)
                .map(|(f, acls)| match f {
                    Err(problem) => failed(ResponseError::InvalidRequest, problem),
                    Ok(_) => DeleteAclsFilterResult::default().with_matching_acls(
                        acls.into_iter()
                            .map(|a| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(a.resource_type.code())
                                    .with_resource_name(sb(a.name))
                                    .with_pattern_type(a.pattern_type.code())
                                    .with_principal(sb(a.principal))
                                    .with_host(sb(a.host))
                                    .with_operation(a.operation.code())
                                    .with_permission_type(a.permission.code())
                            })
                            .collect(),
                    ),
                })
                .collect()
        }
    };
    DeleteAclsResponse::default().with_filter_results(results)
}
