use super::Status;
use crate::cluster::Cluster;
use crate::out::{safe, when, Out, Time, Tone};
use kaas_core::batch::{control_marker_type, records};
use kaas_core::inspect::scan_batches;
use serde::Serialize;

#[derive(Serialize)]
pub struct RecordRow {
    pub offset: i64,
    pub timestamp: Option<Time>,
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: Vec<(String, Option<String>)>,
}

#[derive(Serialize)]
pub struct BatchRow {
    /// Offsets between the previous batch and this one that are not in the log
    /// (removed by the log cleaner): [first, last].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_before: Option<[i64; 2]>,
    pub base_offset: i64,
    pub last_offset: i64,
    pub record_count: i32,
    pub size_bytes: usize,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub control: bool,
    /// COMMIT or ABORT for control batches.
    pub control_type: Option<&'static str>,
    pub compression: &'static str,
    pub max_timestamp: Option<Time>,
    pub partition_leader_epoch: i32,
    /// With --records, for uncompressed batches.
    pub records: Option<Vec<RecordRow>>,
}

#[derive(Serialize)]
pub struct LogDump {
    pub batches: Vec<BatchRow>,
    /// Where the valid log ends early, if it does (what recovery would cut).
    pub bad_tail: Option<String>,
}

fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

pub fn run(
    c: &Cluster,
    out: &Out,
    topic: &str,
    partition: i32,
    from: i64,
    count: usize,
    with_records: bool,
) -> anyhow::Result<Status> {
    let dir = c.volume.partition_dir(topic, partition);
    if !dir.is_dir() {
        anyhow::bail!("no partition directory {}", dir.display());
    }
    let mut batches = Vec::new();
    // Offsets missing between the start and the first batch shown count as a gap too.
    let log_start = kaas_core::inspect::segment_files(&dir)?
        .first()
        .map_or(0, |s| s.base_offset)
        .max(kaas_core::log::LogStartFile::read(&dir)?.unwrap_or(0));
    let mut expected: Option<i64> = Some(from.max(log_start));
    let bad = scan_batches(&dir, from, |h, bytes| {
        if batches.len() >= count {
            return;
        }
        let gap_before = expected.filter(|e| h.base_offset > *e).map(|e| [e, h.base_offset - 1]);
        expected = Some(h.next_offset());
        let recs = if with_records && !h.is_control() {
            records(bytes).map(|rs| {
                rs.into_iter()
                    .filter(|r| r.offset >= from)
                    .map(|r| RecordRow {
                        offset: r.offset,
                        timestamp: Time::from_ms(r.timestamp),
                        key: r.key.as_deref().map(text),
                        value: r.value.as_deref().map(text),
                        headers: r
                            .headers
                            .into_iter()
                            .map(|(k, v)| (k, v.as_deref().map(text)))
                            .collect(),
                    })
                    .collect()
            })
        } else {
            None
        };
        batches.push(BatchRow {
            gap_before,
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            record_count: h.record_count,
            size_bytes: h.total_len(),
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            transactional: h.is_transactional(),
            control: h.is_control(),
            control_type: if h.is_control() {
                control_marker_type(bytes).map(|c| if c { "COMMIT" } else { "ABORT" })
            } else {
                None
            },
            compression: match h.compression() {
                0 => "none",
                1 => "gzip",
                2 => "snappy",
                3 => "lz4",
                4 => "zstd",
                _ => "unknown",
            },
            max_timestamp: Time::from_ms(h.max_timestamp),
            partition_leader_epoch: h.partition_leader_epoch,
            records: recs,
        });
    })?;
    let dump = LogDump {
        batches,
        bad_tail: bad.map(|b| format!("{} at byte {}: {}", b.path.display(), b.position, b.reason)),
    };
    let problems = dump.bad_tail.is_some();
    if out.structured() {
        out.json(&dump);
    } else {
        let mut t = out.table(&["OFFSETS", "RECORDS", "PRODUCER", "SEQ", "FLAGS", "TIME"]);
        for b in &dump.batches {
            if let Some([first, last]) = b.gap_before {
                t.add_row(vec![
                    out.cell(format!("{first}..{last}"), Tone::Dim),
                    out.cell(0, Tone::Dim),
                    out.cell("-", Tone::Dim),
                    out.cell("-", Tone::Dim),
                    out.cell("gap (compacted away)", Tone::Dim),
                    out.cell("", Tone::Dim),
                ]);
            }
            let mut flags = Vec::new();
            if b.transactional {
                flags.push("txn".to_string());
            }
            if let Some(ct) = b.control_type {
                flags.push(ct.to_string());
            } else if b.control {
                flags.push("control".into());
            }
            if b.compression != "none" {
                flags.push(b.compression.to_string());
            }
            t.add_row(vec![
                out.cell(format!("{}..{}", b.base_offset, b.last_offset), Tone::Plain),
                out.cell(b.record_count, Tone::Plain),
                out.cell(
                    if b.producer_id >= 0 {
                        format!("{}/{}", b.producer_id, b.producer_epoch)
                    } else {
                        "-".into()
                    },
                    Tone::Plain,
                ),
                out.cell(
                    if b.base_sequence >= 0 {
                        b.base_sequence.to_string()
                    } else {
                        "-".into()
                    },
                    Tone::Plain,
                ),
                out.cell(
                    flags.join(" "),
                    match b.control_type {
                        Some("ABORT") => Tone::Bad,
                        Some("COMMIT") => Tone::Good,
                        _ => Tone::Plain,
                    },
                ),
                out.cell(
                    b.max_timestamp.as_ref().map(|t| when(t.epoch_ms)).unwrap_or_default(),
                    Tone::Dim,
                ),
            ]);
        }
        outln!("{t}");
        for b in &dump.batches {
            for r in b.records.iter().flatten() {
                outln!(
                    "{}\t{}\t{}",
                    r.offset,
                    safe(r.key.as_deref().unwrap_or("(null)")),
                    safe(r.value.as_deref().unwrap_or("(null)"))
                );
            }
        }
        if let Some(b) = &dump.bad_tail {
            eprintln!("kaasctl: the log ends early: {}", safe(b));
        }
    }
    Ok(Status::from_problems(problems))
}
