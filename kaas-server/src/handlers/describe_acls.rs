//! DescribeAcls (key 29): the ACLs matching a filter, grouped by resource pattern, as
//! this broker enforces them (its cache of `__cluster/acls.json`). Needs DESCRIBE on
//! the cluster; SECURITY_DISABLED without `--authorizer acls`.

use super::create_acls::acl_api_refused;
use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::acl::{AclFilter, Operation};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 3;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse {
    let fail = |code: ResponseError, message: String| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(sb(message)))
    };
    if let Some((code, message)) = acl_api_refused(broker, ctx, Operation::Describe) {
        return fail(code, message);
    }
    let filter = match AclFilter::from_wire(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(problem) => return fail(ResponseError::InvalidRequest, problem),
    };
    let acls = broker.authz.acls();
    let mut resources: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in acls.acls.iter().filter(|a| filter.matches(a)) {
        resources
            .entry((acl.resource_type.code(), &acl.name, acl.pattern_type.code()))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(sb(acl.principal.clone()))
                    .with_host(sb(acl.host.clone()))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|((resource_type, name, pattern_type), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(resource_type)
                    .with_resource_name(sb(name))
                    .with_pattern_type(pattern_type)
                    .with_acls(acls)
            })
            .collect(),
    )
}
