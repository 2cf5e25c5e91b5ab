//! OffsetFetch (key 9): committed offsets of one group (v0-7) or several (v8+).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use std::sync::Arc;

pub const MIN: i16 = 1;
pub const MAX: i16 = 8;

/// (topic, [(partition, offset, leader epoch, metadata)]) for one group, or its error.
type Fetched = Result<Vec<(String, Vec<(i32, i64, i32, Option<String>)>)>, i16>;

fn fetch(broker: &Broker, group: &str, wanted: Option<Vec<(String, Vec<i32>)>>) -> Fetched {
    let offsets = broker.groups.fetch_offsets(group).map_err(|e| {
        tracing::error!(group, error = %e, "cannot read committed offsets");
        ResponseError::CoordinatorNotAvailable.code()
    })?;
    let wanted = wanted.unwrap_or_else(|| {
        offsets
            .offsets
            .iter()
            .map(|(t, ps)| (t.clone(), ps.keys().copied().collect()))
            .collect()
    });
    Ok(wanted
        .into_iter()
        .map(|(topic, partitions)| {
            let rows = partitions
                .into_iter()
                .map(|p| match offsets.get(&topic, p) {
                    Some(c) => (p, c.offset, c.leader_epoch, c.metadata.clone()),
                    None => (p, -1, -1, Some(String::new())),
                })
                .collect();
            (topic, rows)
        })
        .collect())
}

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    if ctx.version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let mut out = OffsetFetchResponseGroup::default().with_group_id(g.group_id.clone());
                match fetch(broker, &g.group_id.0, wanted) {
                    Err(code) => out.error_code = code,
                    Ok(rows) => {
                        out.topics = rows
                            .into_iter()
                            .map(|(t, ps)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(sb(t)))
                                    .with_partitions(
                                        ps.into_iter()
                                            .map(|(p, o, e, m)| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(p)
                                                    .with_committed_offset(o)
                                                    .with_committed_leader_epoch(e)
                                                    .with_metadata(m.map(sb))
                                            })
                                            .collect(),
                                    )
                            })
                            .collect()
                    }
                }
                out
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let mut resp = OffsetFetchResponse::default();
    match fetch(broker, &req.group_id.0, wanted) {
        Err(code) => {
            if ctx.version >= 2 {
                resp.error_code = code;
            }
        }
        Ok(rows) => {
            resp.topics = rows
                .into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(TopicName(sb(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o, e, m)| {
                                    let mut r = OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_metadata(m.map(sb));
                                    if ctx.version >= 5 {
                                        r.committed_leader_epoch = e;
                                    }
                                    r
                                })
                                .collect(),
                        )
                })
                .collect();
        }
    }
    resp
}
