use super::Status;
use crate::cluster::Cluster;
use crate::out::{Out, Time, Tone};
use kaas_core::inspect::inspect_partition;
use kaas_core::offsets::{list_groups, GroupOffsets};
use serde::Serialize;

#[derive(Serialize)]
pub struct GroupPartitionRow {
    pub group: String,
    /// `classic`, or `consumer` for a KIP-848 consumer group (`group.protocol=consumer`).
    pub group_type: &'static str,
    /// The member that owns the partition: a consumer group's now; a classic group's in
    /// the last stable generation recorded on the volume (none once the group emptied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    pub committed: Option<Time>,
    pub high_watermark: Option<i64>,
    pub last_stable_offset: Option<i64>,
    /// HW − committed.
    pub lag: Option<i64>,
    /// Records a read_committed consumer can still fetch now: LSO − committed.
    pub real_lag: Option<i64>,
    /// Records held back behind an open transaction: HW − max(LSO, committed).
    pub blocked_by_open_transaction: Option<i64>,
    /// Control records (markers) after the committed offset: counted in the lag but
    /// never delivered to a consumer.
    pub control_records: Option<i64>,
    /// Offsets staged by open transactions for this partition.
    pub staged: usize,
    pub error: Option<String>,
}

/// Every group's file on the volume (or `only`'s), read once for all the views below.
type GroupFiles = Vec<(String, Result<GroupOffsets, kaas_core::VolumeError>)>;

fn group_files(c: &Cluster, only: Option<&str>) -> anyhow::Result<GroupFiles> {
    Ok(list_groups(&c.volume)?
        .into_iter()
        .filter(|g| only.is_none_or(|o| o == g))
        .map(|g| {
            let loaded = GroupOffsets::load(&c.volume, &g);
            (g, loaded)
        })
        .collect())
}

fn rows(c: &Cluster, files: &GroupFiles) -> Vec<GroupPartitionRow> {
    let mut rows = Vec::new();
    let names = topic_names(c);
    for (g, loaded) in files {
        let offsets = match loaded {
            Ok(o) => o,
            Err(e) => {
                rows.push(GroupPartitionRow {
                    group: g.clone(),
                    group_type: "classic",
                    owner: None,
                    topic: String::new(),
                    partition: -1,
                    committed_offset: -1,
                    committed: None,
                    high_watermark: None,
                    last_stable_offset: None,
                    lag: None,
                    real_lag: None,
                    blocked_by_open_transaction: None,
                    control_records: None,
                    staged: 0,
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
        let classic_owners: Vec<(&str, Vec<(String, i32)>)> = offsets
            .classic
            .iter()
            .filter(|r| r.protocol_type == "consumer")
            .flat_map(|r| &r.members)
            .filter_map(|m| Some((m.member_id.as_str(), classic_assignment(&m.assignment)?)))
            .collect();
        let owner = |topic: &str, p: i32| -> Option<String> {
            if let Some((mid, _)) = classic_owners
                .iter()
                .find(|(_, owned)| owned.iter().any(|(t, q)| t == topic && *q == p))
            {
                return Some(mid.to_string());
            }
            let consumer = offsets.consumer.as_ref()?;
            let id = names.iter().find(|(_, n)| n.as_str() == topic).map(|(id, _)| *id)?;
            consumer
                .members
                .iter()
                .find(|(_, m)| {
                    m.assigned.get(&id).is_some_and(|ps| ps.contains(&p))
                        || m.pending_revocation.get(&id).is_some_and(|ps| ps.contains(&p))
                })
                .map(|(mid, _)| mid.clone())
        };
        for (topic, parts) in &offsets.offsets {
            for (p, co) in parts {
                let staged = offsets
                    .pending
                    .values()
                    .filter(|s| s.offsets.get(topic).is_some_and(|x| x.contains_key(p)))
                    .count();
                let mut row = GroupPartitionRow {
                    group: g.clone(),
                    group_type: if offsets.consumer.is_some() {
                        "consumer"
                    } else {
                        "classic"
                    },
                    owner: owner(topic, *p),
                    topic: topic.clone(),
                    partition: *p,
                    committed_offset: co.offset,
                    committed: Time::from_ms(co.commit_ms),
                    high_watermark: None,
                    last_stable_offset: None,
                    lag: None,
                    real_lag: None,
                    blocked_by_open_transaction: None,
                    control_records: None,
                    staged,
                    error: None,
                };
                match inspect_partition(&c.volume.partition_dir(topic, *p), true) {
                    Ok(view) => {
                        let (hw, lso) = (view.log_end_offset, view.last_stable_offset);
                        row.high_watermark = Some(hw);
                        row.last_stable_offset = Some(lso);
                        row.lag = Some((hw - co.offset).max(0));
                        row.real_lag = Some((lso - co.offset).max(0));
                        row.blocked_by_open_transaction = Some((hw - lso.max(co.offset)).max(0));
                        row.control_records = Some(view.markers.iter().filter(|m| m.0 >= co.offset).count() as i64);
                    }
                    Err(e) => row.error = Some(e.to_string()),
                }
                rows.push(row);
            }
        }
    }
    rows
}

/// Topic ids to names, of the topics whose metadata reads.
fn topic_names(c: &Cluster) -> std::collections::BTreeMap<uuid::Uuid, String> {
    kaas_core::topic::list_topics(&c.volume)
        .map(|ts| ts.into_iter().flatten().map(|t| (t.topic_id, t.name)).collect())
        .unwrap_or_default()
}

/// One member of a KIP-848 consumer group, as the volume records it.
#[derive(Serialize)]
pub struct ConsumerMemberRow {
    pub group: String,
    pub group_state: &'static str,
    pub group_epoch: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub state: String,
    /// topic-partition names it owns and may consume.
    pub assigned: Vec<String>,
    /// topic-partition names it must give up.
    pub revoking: Vec<String>,
}

/// The members of every consumer group (KIP-848) in `files`.
fn consumer_members(c: &Cluster, files: &GroupFiles) -> Vec<ConsumerMemberRow> {
    let names = topic_names(c);
    let show = |a: &kaas_core::consumer_group::Assignment| -> Vec<String> {
        a.iter()
            .flat_map(|(id, ps)| {
                let name = names
                    .get(id)
                    .cloned()
                    .unwrap_or_else(|| format!("<deleted topic {id}>"));
                ps.iter().map(move |p| format!("{name}-{p}"))
            })
            .collect()
    };
    let mut out = Vec::new();
    // An unreadable file is reported by the offsets rows.
    for (g, offsets) in files.iter().filter_map(|(g, o)| Some((g, o.as_ref().ok()?))) {
        let Some(consumer) = &offsets.consumer else { continue };
        for (mid, m) in &consumer.members {
            out.push(ConsumerMemberRow {
                group: g.clone(),
                group_state: consumer.state(),
                group_epoch: consumer.group_epoch,
                member_id: mid.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_epoch: m.epoch,
                state: m.state.clone(),
                assigned: show(&m.assigned),
                revoking: show(&m.pending_revocation),
            });
        }
    }
    out
}

/// The partitions of a classic consumer's assignment (ConsumerProtocolAssignment, any
/// version: a version newer than the codec knows is read as its newest, as Apache's
/// consumer does); None when the bytes do not read as one. Asked only of groups of
/// protocol type `consumer` (Kafka Connect's, say, assign something else).
fn classic_assignment(bytes: &[u8]) -> Option<Vec<(String, i32)>> {
    use kafka_protocol::messages::ConsumerProtocolAssignment;
    use kafka_protocol::protocol::{Decodable, Message};
    let mut buf = bytes::Bytes::copy_from_slice(bytes);
    let version = i16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let _ = bytes::Buf::get_i16(&mut buf);
    let version = version.min(ConsumerProtocolAssignment::VERSIONS.max);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    Some(
        a.assigned_partitions
            .into_iter()
            .flat_map(|tp| {
                let topic = tp.topic.0.to_string();
                tp.partitions.into_iter().map(move |p| (topic.clone(), p))
            })
            .collect(),
    )
}

/// One member of a classic group's last stable generation, as the volume records it
/// (docs/volume-layout.md, `classic`).
pub struct ClassicMemberRow {
    pub group: String,
    pub generation: i32,
    pub protocol: String,
    pub member_id: String,
    pub leader: bool,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// topic-partition names; None when the assignment is not a consumer's.
    pub assigned: Option<Vec<String>>,
}

/// The members of every classic group recorded in `files`.
fn classic_members(files: &GroupFiles) -> Vec<ClassicMemberRow> {
    let mut out = Vec::new();
    // An unreadable file is reported by the offsets rows.
    for (g, offsets) in files.iter().filter_map(|(g, o)| Some((g, o.as_ref().ok()?))) {
        let Some(record) = &offsets.classic else { continue };
        for m in &record.members {
            out.push(ClassicMemberRow {
                group: g.clone(),
                generation: record.generation,
                protocol: record.protocol.clone(),
                leader: m.member_id == record.leader,
                assigned: (record.protocol_type == "consumer")
                    .then(|| classic_assignment(&m.assignment))
                    .flatten()
                    .map(|ps| ps.into_iter().map(|(t, p)| format!("{t}-{p}")).collect()),
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
            });
        }
    }
    out
}

pub fn run(c: &Cluster, out: &Out, only: Option<&str>) -> anyhow::Result<Status> {
    let files = group_files(c, only)?;
    let rows = rows(c, &files);
    let members = consumer_members(c, &files);
    let classic = classic_members(&files);
    if let (Some(g), true, true, true) = (only, rows.is_empty(), members.is_empty(), classic.is_empty()) {
        anyhow::bail!("no committed offsets or members for group {g:?}");
    }
    if !out.structured() && !classic.is_empty() {
        let mut t = out.table(&[
            "CLASSIC GROUP",
            "GENERATION",
            "PROTOCOL",
            "MEMBER",
            "INSTANCE",
            "CLIENT",
            "ASSIGNED",
        ]);
        for m in &classic {
            t.add_row(vec![
                out.cell(&m.group, Tone::Plain),
                out.cell(m.generation, Tone::Plain),
                out.cell(&m.protocol, Tone::Plain),
                out.cell(
                    if m.leader {
                        format!("{} (leader)", m.member_id)
                    } else {
                        m.member_id.clone()
                    },
                    Tone::Plain,
                ),
                out.cell(m.instance_id.as_deref().unwrap_or("-"), Tone::Plain),
                out.cell(format!("{} {}", m.client_id, m.client_host), Tone::Dim),
                match &m.assigned {
                    Some(ps) => out.cell(ps.join(","), Tone::Plain),
                    None => out.cell("(not a consumer assignment)", Tone::Dim),
                },
            ]);
        }
        outln!("{t}");
        outln!("");
    }
    if !out.structured() && !members.is_empty() {
        let mut t = out.table(&[
            "CONSUMER GROUP",
            "STATE",
            "EPOCH",
            "MEMBER",
            "CLIENT",
            "M.EPOCH",
            "ASSIGNED",
            "REVOKING",
        ]);
        for m in &members {
            t.add_row(vec![
                out.cell(&m.group, Tone::Plain),
                out.cell(
                    m.group_state,
                    if m.group_state == "Stable" {
                        Tone::Plain
                    } else {
                        Tone::Warn
                    },
                ),
                out.cell(m.group_epoch, Tone::Plain),
                out.cell(&m.member_id, Tone::Plain),
                out.cell(format!("{} {}", m.client_id, m.client_host), Tone::Dim),
                out.cell(m.member_epoch, Tone::Plain),
                out.cell(m.assigned.join(","), Tone::Plain),
                out.cell(
                    m.revoking.join(","),
                    if m.revoking.is_empty() { Tone::Plain } else { Tone::Warn },
                ),
            ]);
        }
        outln!("{t}");
        outln!("");
    }
    let problems = rows.iter().any(|r| r.error.is_some());
    if out.structured() {
        out.json(&rows);
    } else if !rows.is_empty() || (members.is_empty() && classic.is_empty()) {
        // A group with members shown above and no committed offsets: no empty table.
        let mut t = out.table(&[
            "GROUP",
            "PARTITION",
            "COMMITTED",
            "HW",
            "LAG",
            "REAL",
            "BLOCKED",
            "CONTROL",
        ]);
        let n = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        for r in &rows {
            if let Some(e) = &r.error {
                t.add_row(vec![
                    out.cell(&r.group, Tone::Plain),
                    out.cell(format!("{}-{}", r.topic, r.partition), Tone::Plain),
                    out.text(e, Tone::Bad),
                ]);
                continue;
            }
            t.add_row(vec![
                out.cell(&r.group, Tone::Plain),
                out.cell(format!("{}-{}", r.topic, r.partition), Tone::Plain),
                out.cell(r.committed_offset, Tone::Plain),
                out.cell(n(r.high_watermark), Tone::Plain),
                out.cell(n(r.lag), Tone::Plain),
                out.cell(n(r.real_lag), Tone::Plain),
                out.cell(
                    n(r.blocked_by_open_transaction),
                    if r.blocked_by_open_transaction.unwrap_or(0) > 0 {
                        Tone::Warn
                    } else {
                        Tone::Plain
                    },
                ),
                out.cell(n(r.control_records), Tone::Dim),
            ]);
        }
        outln!("{t}");
    }
    Ok(Status::from_problems(problems))
}
