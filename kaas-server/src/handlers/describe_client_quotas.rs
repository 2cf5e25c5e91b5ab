//! DescribeClientQuotas (key 48): the quotas of `__cluster/client-quotas.json` whose
//! entity a filter selects (docs/quotas.md). A component matches a name (match type
//! 0), the default (1) or any entity of its type (2); with `strict`, entities with a
//! type the filter does not name are left out. Needs DESCRIBE_CONFIGS on the cluster
//! (as Kafka's); an unreadable file is KAFKA_STORAGE_ERROR with its path.

use super::{sb, RequestContext};
use crate::authz::CLUSTER;
use crate::broker::Broker;
use kaas_core::acl::{Operation, ResourceType};
use kaas_core::quotas::{ClientQuotas, FilterComponent, Match, CLIENT_ID, IP, USER};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let failed = |code: ResponseError, message: String| {
        DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(sb(message)))
            .with_entries(None)
    };
    if !broker
        .authz
        .authorize(ctx, Operation::DescribeConfigs, ResourceType::Cluster, CLUSTER)
    {
        return failed(
            ResponseError::ClusterAuthorizationFailed,
            format!("{} may not describe client quotas", ctx.principal),
        );
    }
    let filter = match filter(&req) {
        Ok(f) => f,
        Err(message) => return failed(ResponseError::InvalidRequest, message),
    };
    let quotas = match crate::blocking::off_worker(|| ClientQuotas::read(&broker.volume)) {
        Ok(q) => q,
        Err(e) => return failed(ResponseError::KafkaStorageError, e.to_string()),
    };
    let entries = quotas
        .matching(&filter, req.strict)
        .into_iter()
        .map(|e| {
            EntryData::default()
                .with_entity(
                    e.entity
                        .components()
                        .into_iter()
                        .map(|(t, name)| {
                            EntityData::default()
                                .with_entity_type(sb(t))
                                .with_entity_name(name.map(sb))
                        })
                        .collect(),
                )
                .with_values(
                    e.quotas
                        .iter()
                        .map(|(k, &v)| ValueData::default().with_key(sb(k.as_str())).with_value(v))
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default()
        .with_error_message(None)
        .with_entries(Some(entries))
}

fn filter(req: &DescribeClientQuotasRequest) -> Result<Vec<FilterComponent>, String> {
    let mut out: Vec<FilterComponent> = Vec::with_capacity(req.components.len());
    for c in &req.components {
        let entity_type = c.entity_type.to_string();
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(format!(
                "unknown quota entity type {entity_type:?} (expected user, client-id or ip)"
            ));
        }
        if out.iter().any(|f| f.entity_type == entity_type) {
            return Err(format!("entity type {entity_type} filtered twice"));
        }
        let matches = match (c.match_type, &c._match) {
            (0, Some(name)) => Match::Exact(name.to_string()),
            (0, None) => return Err(format!("match type 0 (exact) for {entity_type} without a name")),
            (1, _) => Match::Default,
            (2, _) => Match::Any,
            (other, _) => {
                return Err(format!(
                    "unknown match type {other} for {entity_type} (expected 0, 1 or 2)"
                ))
            }
        };
        out.push(FilterComponent { entity_type, matches });
    }
    Ok(out)
}
