//! Log cleaner throughput and memory (docs/performance.md#log-cleaner): builds a
//! compacted partition of N records over K keys (values of V bytes, in batches of 100
//! records, uncompressed or compressed), then runs one cleaning pass and prints one
//! JSON object: bytes before and after, seconds, MB/s read, map entries and the
//! process's peak RSS before and after the pass.
//!
//! cargo run --release -p kaas-core --example bench_cleaner -- [records] [keys] [value bytes] [none|lz4|gzip|zstd]

use kaas_core::batch::build_batch;
use kaas_core::cleaner::{clean, never, CleanLimits, CleanerState};
use kaas_core::log::compression::{compress, Codec};
use kaas_core::log::LogConfig;
use kaas_core::partition::PartitionState;
use std::time::Instant;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (records, keys, value_len) = (arg(1, 2_000_000), arg(2, 100_000), arg(3, 100));
    let codec = match args.get(4).map(String::as_str) {
        Some("lz4") => Codec::Lz4,
        Some("gzip") => Codec::Gzip,
        Some("zstd") => Codec::Zstd,
        _ => Codec::None,
    };
    let per_batch = 100;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = LogConfig {
        segment_bytes: 64 << 20,
        compact: true,
        cleanup_delete: false,
        ..LogConfig::default()
    };
    let mut p = PartitionState::open(dir.path(), config, 0).expect("open");
    let value = vec![b'v'; value_len];
    let mut key_bufs: Vec<Vec<u8>> = Vec::with_capacity(per_batch);
    for start in (0..records).step_by(per_batch) {
        key_bufs.clear();
        for i in start..(start + per_batch).min(records) {
            key_bufs.push(format!("key-{:08}", (i * 7919) % keys).into_bytes());
        }
        let recs: Vec<kaas_core::batch::PlainRecord<'_>> =
            key_bufs.iter().map(|k| (Some(&k[..]), Some(&value[..]))).collect();
        let mut b = build_batch(0, 1, None, 0, &recs);
        if codec != Codec::None {
            let payload = compress(codec, &b[61..]).expect("compress");
            b.truncate(61);
            b.extend_from_slice(&payload);
            let len = (b.len() - 12) as i32;
            b[8..12].copy_from_slice(&len.to_be_bytes());
            let attrs = i16::from_be_bytes([b[21], b[22]]) | codec.code();
            b[21..23].copy_from_slice(&attrs.to_be_bytes());
            let crc = crc32c::crc32c(&b[21..]);
            b[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let h = p.log.validate(&b).expect("valid");
        p.append(&mut b, &h, 0, 1).expect("append");
    }
    // Seal every segment holding the data.
    p.log.roll(1).expect("roll");
    let mut b = build_batch(0, 1, None, 0, &[(Some(b"last"), Some(b"v"))]);
    let h = p.log.validate(&b).expect("valid");
    p.append(&mut b, &h, 0, 1).expect("append");
    let rss_before = peak_rss_kib();
    let state = CleanerState::default();
    let plan = p.cleaner_plan(&state, 10).expect("plan").expect("something to clean");
    let input = p.clean_input(&plan, &state, "bench".into(), 10);
    let started = Instant::now();
    let out = clean(
        &input,
        CleanLimits {
            dedupe_buffer_bytes: 128 << 20,
            io_max_bytes_per_second: None,
            stop: &never,
        },
        10,
    )
    .expect("clean");
    let installed = p.install_cleaned(&out, 10).expect("install");
    let secs = started.elapsed().as_secs_f64();
    let r = &out.report;
    println!(
        "{{\"records\": {records}, \"keys\": {keys}, \"value_bytes\": {value_len}, \"codec\": \"{codec:?}\", \"installed\": {installed}, \
\"bytes_before\": {}, \"bytes_after\": {}, \"records_removed\": {}, \"map_entries\": {}, \"seconds\": {secs:.3}, \
\"mb_per_s_read\": {:.1}, \"peak_rss_mib_before_pass\": {:.1}, \"peak_rss_mib_after_pass\": {:.1}}}",
        r.bytes_before,
        r.bytes_after,
        r.records_removed,
        r.map_entries,
        r.bytes_before as f64 / 1e6 / secs,
        rss_before as f64 / 1024.0,
        peak_rss_kib() as f64 / 1024.0
    );
}
