//! DeleteGroups (key 42): removes empty groups and their committed offsets.

use super::RequestContext;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 2;

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    // A step-down while the request is served (a pause past half the session timeout)
    // means another broker may coordinate the groups: checked under each group's lock.
    let stepdowns = broker.stepdown_count();
    let results = req
        .groups_names
        .into_iter()
        .map(|g| {
            // Kafka's check: DELETE on the group.
            let code = if !broker
                .authz
                .authorize(ctx, Operation::Delete, ResourceType::Group, &g.0)
            {
                kafka_protocol::error::ResponseError::GroupAuthorizationFailed.code()
            } else if broker.owns_group(&g.0) {
                let still_ours = || broker.still_fresh_since(stepdowns) && broker.owns_group(&g.0);
                broker
                    .groups
                    .delete_guarded(&g.0, &still_ours)
                    .err()
                    .map_or(0, |e| e.code())
            } else {
                broker.group_refusal(&g.0).code()
            };
            DeletableGroupResult::default().with_group_id(g).with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
