//! Golden tests: the real kaasctl binary against fixture volumes built by kaas-core's
//! own writers, with "now" pinned (KAASCTL_NOW_MS) so ages are stable. Each case's
//! stdout, stderr and exit code are compared with `tests/golden/<case>.txt`;
//! `UPDATE_GOLDEN=1 cargo test -p kaasctl --test golden` rewrites them (review the diff).
//! (One file of ~1,000 lines: every case shares the fixture volume built at its top.)

use kaas_core::batch::{build_batch, validate_all};
use kaas_core::broker::{BrokerLease, LEASE_FORMAT_VERSION};
use kaas_core::fence_log::FenceLog;
use kaas_core::log::LogConfig;
use kaas_core::marker_queue::{self, MarkerEntry, MarkerResult, MARKER_FORMAT_VERSION};
use kaas_core::offsets::{CommittedOffset, GroupOffsets};
use kaas_core::partition::PartitionState;
use kaas_core::topic::{PartitionOwner, TopicMeta};
use kaas_core::txn::{slot_for, Actor, TopicPartition, Transition, TxnEntry, TxnState};
use kaas_core::txn_store::TxnStateStore;
use kaas_core::Volume;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Command;

const NOW: i64 = 1_800_000_000_000;

/// A throwaway volume at a path of fixed length (`/tmp/.tmpXXXXXX`) whatever TMPDIR
/// says: prose cells are wrapped before the path is redacted to `<DATA>`, so where a
/// golden's lines break must not depend on the machine's temporary directory.
fn fixture_dir() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new().prefix(".tmp").rand_bytes(6).tempdir_in("/tmp")
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn entry(
    id: &str,
    pid: i64,
    epoch: i16,
    state: TxnState,
    parts: &[TopicPartition],
    groups: &[&str],
    start: i64,
) -> TxnEntry {
    let by = Actor::Broker { id: 0 };
    let mut history = VecDeque::new();
    history.push_back(Transition {
        at_ms: NOW - 300_000,
        from: TxnState::Empty,
        to: TxnState::Empty,
        producer_id: pid,
        epoch: 0,
        reason: "InitProducerId (new)".into(),
        by: by.clone(),
    });
    if state != TxnState::Empty {
        history.push_back(Transition {
            at_ms: start,
            from: TxnState::Empty,
            to: state,
            producer_id: pid,
            epoch,
            reason: "AddPartitionsToTxn".into(),
            by,
        });
    }
    TxnEntry {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: epoch,
        last_epoch: -1,
        last_producer_id: -1,
        state,
        timeout_ms: 60_000,
        partitions: parts.iter().cloned().collect::<BTreeSet<_>>(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        txn_start_ms: if state == TxnState::Empty { -1 } else { start },
        txn_seq: if state == TxnState::Empty { 0 } else { 1 },
        markers_queued: false,
        last_update_ms: start,
        history,
    }
}

/// Writes the entry, then folds its slot: the fixture's slots are whole in their
/// checkpoints, so the corruption cases below can cut and rewrite `slot-N.json`.
fn put(volume: &Volume, e: TxnEntry) {
    let store = TxnStateStore::new(volume.clone());
    let slot = slot_for(&e.transactional_id);
    store
        .update(slot, NOW - 1_000, |entries| {
            entries.insert(e.transactional_id.clone(), e.clone());
            ((), true)
        })
        .unwrap();
    store.lock(slot).unwrap().fold().unwrap();
}

fn produce(p: &mut PartitionState, producer: Option<(i64, i16, i32)>, txn: bool, values: &[&str], ts: i64) {
    let recs: Vec<kaas_core::batch::PlainRecord> =
        values.iter().map(|v| (Some(&b"k"[..]), Some(v.as_bytes()))).collect();
    let mut b = build_batch(0, ts, producer, if txn { 0x10 } else { 0 }, &recs);
    let h = validate_all(&b).unwrap();
    p.append(&mut b, &h, 0, ts).unwrap();
}

fn topic(volume: &Volume, name: &str, partitions: i32, id: u128, configs: &[(&str, &str)]) {
    let mut meta = TopicMeta::new(
        name,
        partitions,
        configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        NOW - 900_000,
    );
    meta.topic_id = uuid_from(id);
    meta.write(volume).unwrap();
    for p in 0..partitions {
        PartitionOwner {
            version: 1,
            broker: 0,
            leader_epoch: 0,
            released: false,
            updated_ms: NOW - 900_000,
            topic_id: None,
        }
        .write(&PartitionOwner::path(volume, name, p))
        .unwrap();
    }
}

fn uuid_from(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(n)
}

/// The standard fixture: two brokers (0 alive, 1 dead), two topics, an overdue open
/// transaction, a committed one, an aborted one on `events`, a hanging transaction on
/// orders-1, a PrepareCommit left behind, a queue entry for the dead broker, fences,
/// and a group with committed and staged offsets.
fn fixture(dir: &Path) -> Volume {
    let v = Volume::new(dir);
    for (id, hb) in [(0, NOW - 500), (1, NOW - 60_000)] {
        BrokerLease {
            version: LEASE_FORMAT_VERSION,
            broker_id: id,
            host: "127.0.0.1".into(),
            port: 9092 + id as u16,
            incarnation: format!("incarnation-{id}"),
            started_ms: NOW - 3_600_000,
            heartbeat_ms: hb,
            stopped_ms: None,
            stepped_down_ms: None,
            opening_ms: None,
            joining_ms: None,
            listeners: Default::default(),
            authorizer: None,
            renewal: 0,
            routes: None,
        }
        .write(&v)
        .unwrap();
    }
    topic(&v, "orders", 2, 1, &[("retention.ms", "60000")]);
    topic(&v, "events", 1, 2, &[]);
    let cfg = LogConfig::default();
    let mut o0 = PartitionState::open(&v.partition_dir("orders", 0), cfg.clone(), NOW).unwrap();
    produce(&mut o0, None, false, &["plain-0", "plain-1"], NOW - 200_000);
    produce(&mut o0, Some((101, 0, 0)), true, &["committed"], NOW - 190_000);
    o0.write_marker(101, 0, true, 0, 0, NOW - 189_000).unwrap();
    produce(&mut o0, Some((100, 0, 0)), true, &["open-0", "open-1"], NOW - 120_000);
    o0.write_snapshot(NOW - 100_000).unwrap();
    produce(&mut o0, None, false, &["behind"], NOW - 90_000);
    drop(o0);
    let mut o1 = PartitionState::open(&v.partition_dir("orders", 1), cfg.clone(), NOW).unwrap();
    produce(&mut o1, Some((102, 0, 0)), true, &["hanging"], NOW - 600_000);
    drop(o1);
    let mut e0 = PartitionState::open(&v.partition_dir("events", 0), cfg, NOW).unwrap();
    produce(&mut e0, Some((103, 2, 0)), true, &["rolled-back"], NOW - 50_000);
    e0.write_marker(103, 2, false, 0, 0, NOW - 49_000).unwrap();
    drop(e0);

    put(
        &v,
        entry(
            "open-tx",
            100,
            0,
            TxnState::Ongoing,
            &[tp("orders", 0)],
            &["billing"],
            NOW - 120_000,
        ),
    );
    let mut done = entry("done-tx", 101, 0, TxnState::CompleteCommit, &[], &[], NOW - 190_000);
    done.txn_start_ms = -1;
    put(&v, done);
    put(
        &v,
        entry(
            "prep-tx",
            104,
            0,
            TxnState::PrepareCommit,
            &[tp("events", 0)],
            &[],
            NOW - 40_000,
        ),
    );
    put(&v, entry("idle-tx", 105, 3, TxnState::Empty, &[], &[], NOW - 300_000));
    let mut aborted = entry("aborted-tx", 103, 2, TxnState::CompleteAbort, &[], &[], NOW - 49_000);
    aborted.txn_start_ms = -1;
    put(&v, aborted);

    let mut fences = FenceLog::empty(0);
    fences.append(103, 2, Some("aborted-tx"), NOW - 49_500);
    fences.save(&v).unwrap();
    // Broker 1's fence watcher applied it 400 ms after it was recorded, before it died.
    let mut reached = kaas_core::fence_log::FenceDeliveries::load(&v, 1).unwrap();
    reached
        .record(
            &v,
            &[kaas_core::fence_log::PeerFence {
                producer_id: 103,
                epoch: 2,
                writer: 0,
                recorded_ms: NOW - 49_500,
            }],
            NOW - 49_100,
            i64::MAX,
        )
        .unwrap();
    marker_queue::enqueue(
        &v,
        1,
        &MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "prep-tx".into(),
            producer_id: 104,
            producer_epoch: 0,
            result: MarkerResult::Commit,
            coordinator_epoch: 0,
            partitions: vec![tp("events", 0)],
            txn_seq: Some(1),
            enqueued_by: 0,
            enqueued_ms: NOW - 39_000,
            hanging_since: None,
        },
    )
    .unwrap();
    let mut g = GroupOffsets::new("billing");
    let co = |offset| CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: None,
        commit_ms: NOW - 95_000,
    };
    g.set("orders", 0, co(2));
    g.stage(100, 0, "open-tx", "orders", 0, co(5));
    g.save(&v).unwrap();
    v
}

fn run(dir: &Path, args: &[&str]) -> String {
    run_env(dir, args, &[])
}

/// The volume's file system as `kaasctl doctor` sees it in these tests (4 KiB blocks):
/// 4 GiB with half free, and 90% of the inodes free.
const ROOMY_DISK: &str = "1048576,524288,1000000,900000";

fn run_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .env("KAASCTL_STATVFS", ROOMY_DISK)
        // Wide enough that tables keep their shape whatever the temporary directory's
        // length (paths are never cut, so `<DATA>` redaction works at any width); the
        // 80-column fit is checked by `tables_fit_80_columns`. A case may set its own.
        .env("COLUMNS", "200")
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env("KAASCTL_NOW_MS", NOW.to_string())
        // Not what the audit journal records (the uid's account is), whatever $USER says.
        .env("USER", "golden")
        .env("NO_COLOR", "1")
        .output()
        .expect("kaasctl runs");
    let dir_s = dir.display().to_string();
    let user = os_user_name();
    let clean = |b: &[u8]| {
        let mut s = String::from_utf8_lossy(b)
            .replace(&dir_s, "<DATA>")
            // An audit file named after a path holds it percent-encoded.
            .replace(&dir_s.replace('/', "%2F"), "<DATA>")
            .replace(env!("CARGO_BIN_EXE_kaasctl"), "<KAASCTL>");
        if let Some(user) = &user {
            s = s.replace(&format!("\"user\": \"{user}\""), "\"user\": \"<USER>\"");
        }
        // Audit file names carry the process id.
        let mut out = String::new();
        for line in s.lines() {
            out.push_str(&redact_pid(line));
            out.push('\n');
        }
        out
    };
    format!(
        "$ kaasctl {}\nexit: {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        out.status.code().unwrap_or(-1),
        clean(&out.stdout),
        clean(&out.stderr)
    )
}

/// The name of the account running the tests, as `id -un` gives it: what kaasctl
/// records in the audit journal.
fn os_user_name() -> Option<String> {
    let out = Command::new("id").arg("-un").output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

/// An audit file's process id and random process tag vary per run.
fn redact_pid(line: &str) -> String {
    match line.find("/audit/") {
        Some(i) => {
            let (head, tail) = line.split_at(i + 7);
            let mut parts = tail.splitn(4, '-');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some(ts), Some(_pid), Some(_tag), Some(rest)) => format!("{head}{ts}-<PID>-<TAG>-{rest}"),
                _ => line.to_string(),
            }
        }
        None => line.to_string(),
    }
}

fn golden(case: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{case}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden {}; run with UPDATE_GOLDEN=1", path.display()));
    assert_eq!(text, want, "golden {case} differs (UPDATE_GOLDEN=1 to accept)");
}

fn cases(dir: &Path, list: &[(&str, &[&str])]) {
    for (case, args) in list {
        golden(case, &run(dir, args));
    }
}

#[test]
fn read_commands_tables() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    cases(
        d.path(),
        &[
            ("brokers", &["brokers"]),
            ("topics", &["topics"]),
            ("groups", &["groups"]),
            ("txn_list", &["txn", "list"]),
            (
                "txn_list_filtered",
                &[
                    "txn",
                    "list",
                    "--state",
                    "ongoing,PrepareCommit",
                    "--older-than",
                    "1m",
                    "--sort",
                    "age",
                ],
            ),
            (
                "txn_list_glob_owner",
                &["txn", "list", "--transactional-id", "*-tx", "--owner", "1"],
            ),
            ("txn_show", &["txn", "show", "open-tx"]),
            ("txn_show_missing", &["txn", "show", "nope"]),
            ("txn_timeline", &["txn", "timeline", "aborted-tx"]),
            ("txn_find_hanging", &["txn", "find-hanging"]),
            ("txn_repair_check", &["txn", "repair"]),
            ("fence_show", &["fence", "show"]),
            ("markers_list", &["markers", "list"]),
            ("markers_show", &["markers", "show"]),
            ("producers_show", &["producers", "show", "orders", "0"]),
            ("log_dump", &["log", "dump", "orders", "0", "--records"]),
            ("log_dump_events", &["log", "dump", "events", "0", "--from", "1"]),
            ("lso_explain_open", &["lso", "explain", "orders", "0"]),
            ("lso_explain_hanging", &["lso", "explain", "orders", "1"]),
            ("lso_explain_clear", &["lso", "explain", "events", "0"]),
            ("metrics", &["metrics"]),
            ("audit_empty", &["audit"]),
            ("usage_error", &["txn", "list", "--older-than", "soon"]),
            ("unknown_state", &["txn", "list", "--state", "Bogus"]),
        ],
    );
}

#[test]
fn read_commands_json() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    cases(
        d.path(),
        &[
            ("json_brokers", &["brokers", "--json"]),
            ("json_topics", &["topics", "--json"]),
            ("json_groups", &["groups", "--json"]),
            ("json_txn_list", &["txn", "list", "--json"]),
            ("json_txn_show", &["txn", "show", "open-tx", "--json"]),
            ("json_txn_timeline", &["txn", "timeline", "open-tx", "--json"]),
            ("json_find_hanging", &["txn", "find-hanging", "--json"]),
            ("json_fence_show", &["fence", "show", "--json"]),
            ("json_markers_list", &["markers", "list", "--json"]),
            ("json_markers_show", &["markers", "show", "1", "--json"]),
            ("json_producers_show", &["producers", "show", "orders", "0", "--json"]),
            ("json_log_dump", &["log", "dump", "events", "0", "--json"]),
            ("json_lso_explain", &["lso", "explain", "orders", "0", "--json"]),
        ],
    );
}

#[test]
fn abort_dry_run_then_abort_then_repair() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    cases(
        d.path(),
        &[
            ("abort_dry_run", &["txn", "abort", "open-tx", "--dry-run"]),
            ("abort_needs_yes_without_a_terminal", &["txn", "abort", "open-tx"]),
            ("abort_prepare_refused", &["txn", "abort", "prep-tx", "--yes"]),
            (
                "abort_queued_no_wait",
                &["txn", "abort", "open-tx", "--yes", "--wait", "0s"],
            ),
            (
                "after_abort_txn_list",
                &["txn", "list", "--state", "PrepareAbort,PrepareCommit"],
            ),
            ("after_abort_markers", &["markers", "show"]),
            ("repair_fix", &["txn", "repair", "--fix", "--yes", "--wait", "0s"]),
            ("after_repair_txn_list", &["txn", "list"]),
            ("after_repair_find_hanging", &["txn", "find-hanging"]),
            // JSON: the user is the OS account running the test (redacted), whose
            // name's length would change a table's widths.
            ("after_repair_audit", &["audit", "-o", "json"]),
        ],
    );
}

#[test]
fn abort_with_every_broker_down_writes_markers_itself() {
    let d = fixture_dir().unwrap();
    let v = fixture(d.path());
    std::fs::remove_file(v.broker_lease(0)).unwrap();
    cases(
        d.path(),
        &[
            ("offline_abort", &["txn", "abort", "open-tx", "--yes"]),
            ("offline_after_lso", &["lso", "explain", "orders", "0"]),
            ("offline_after_log", &["log", "dump", "orders", "0", "--from", "5"]),
            ("offline_after_groups", &["groups", "billing"]),
        ],
    );
}

/// After a topic is deleted and created again, the old topic's `owner.json` stays in a
/// partition directory its old leader still holds until that broker syncs: `brokers`
/// credited that broker with leading the new topic's partition, which the brokers
/// themselves do not (Metadata answers no leader).
#[test]
fn brokers_credit_no_leadership_to_another_topics_owner_file() {
    let d = fixture_dir().unwrap();
    let v = fixture(d.path());
    let path = PartitionOwner::path(&v, "orders", 0);
    let mut owner = PartitionOwner::read(&path).unwrap();
    owner.topic_id = Some(uuid::Uuid::from_u128(0xdead));
    owner.write(&path).unwrap();
    let out = run(d.path(), &["brokers", "--json"]);
    let json: serde_json::Value = serde_json::from_str(
        out.split("--- stdout\n")
            .nth(1)
            .unwrap()
            .split("--- stderr")
            .next()
            .unwrap(),
    )
    .unwrap();
    let leads: Vec<&str> = json[0]["leads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(leads, vec!["events-0", "orders-1"], "{out}");
}

/// `txn show` dropped what it could not read: a corrupt offsets file of one of the
/// transaction's groups showed as no staged offsets, an unreadable queue entry (maybe
/// this producer's) as no queued markers, and the command exited 0. Both are named
/// now, and the exit status is 3 (a file could not be read).
#[test]
fn txn_show_names_the_files_it_could_not_read() {
    let d = fixture_dir().unwrap();
    let v = fixture(d.path());
    std::fs::write(
        kaas_core::offsets::offsets_file(&v, "billing"),
        b"{\"version\": 1, \"gro",
    )
    .unwrap();
    std::fs::write(marker_queue::queue_dir(&v, 1).join("100-0-1.json"), b"{\"version\"").unwrap();
    cases(
        d.path(),
        &[
            ("unreadable_txn_show", &["txn", "show", "open-tx"]),
            ("unreadable_txn_show_json", &["txn", "show", "open-tx", "--json"]),
        ],
    );
}

#[test]
fn corrupt_and_odd_files_are_reported_with_their_paths() {
    let d = fixture_dir().unwrap();
    let v = fixture(d.path());
    let store = TxnStateStore::new(v.clone());
    let open_slot = slot_for("open-tx");
    let truncated = std::fs::read(store.slot_path(open_slot)).unwrap();
    std::fs::write(store.slot_path(open_slot), &truncated[..truncated.len() / 2]).unwrap();
    let other = slot_for("done-tx");
    let mut future: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.slot_path(other)).unwrap()).unwrap();
    future["version"] = 9.into();
    std::fs::write(store.slot_path(other), serde_json::to_vec(&future).unwrap()).unwrap();
    // A slot file without its lock file, and an empty queue directory.
    std::fs::remove_file(store.lock_path(slot_for("idle-tx"))).unwrap();
    std::fs::create_dir_all(marker_queue::queue_dir(&v, 7)).unwrap();
    std::fs::write(v.topic_file("broken"), b"{\"version\": 1, \"name\": ").unwrap();
    cases(
        d.path(),
        &[
            ("corrupt_txn_list", &["txn", "list"]),
            ("corrupt_txn_list_json", &["txn", "list", "--json"]),
            ("corrupt_topics", &["topics"]),
            ("corrupt_markers_list", &["markers", "list"]),
            ("corrupt_missing_lock_show", &["txn", "show", "idle-tx"]),
            ("corrupt_find_hanging", &["txn", "find-hanging"]),
            // open-tx's slot does not read: its partition's pin is not judged hanging.
            ("corrupt_lso_explain", &["lso", "explain", "orders", "0"]),
            ("corrupt_repair", &["txn", "repair"]),
            (
                "corrupt_repair_fix",
                &["txn", "repair", "--fix", "--yes", "--wait", "0s"],
            ),
            // Its checkpoint does not parse: refused above, rescued when accepted.
            (
                "corrupt_repair_fix_accepting_loss",
                &["txn", "repair", "--fix", "--yes", "--wait", "0s", "--accept-slot-loss"],
            ),
            ("corrupt_after_fix_list", &["txn", "list"]),
        ],
    );
    let moved: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "the corrupt slot was moved aside, not deleted; the newer-version one was left for its build"
    );
    assert!(store.slot_path(other).exists());
}

/// An unreadable file is named by its whole path, on one line, at any terminal width
/// and whatever the volume path's length: the path is what an operator greps for
/// and pastes into the next command (a narrow table used to cut `evil.json` in two).
/// Goldens of the rows at 60, 80 and 200 columns.
#[test]
fn unreadable_files_are_named_by_their_whole_path_at_any_width() {
    for pad in [1usize, 6, 23, 70] {
        let base = fixture_dir().unwrap();
        let dir = base.path().join("v".repeat(pad));
        let v = fixture(&dir);
        let topic = v.topic_file("evil");
        let group = dir.join("__cluster/groups/evil-group.json");
        let marker = marker_queue::queue_dir(&v, 0).join("7-0-1.json");
        for file in [&topic, &group, &marker] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, b"{\"version\": 1, \"name\": ").unwrap();
        }
        let commands: [(&[&str], &Path); 3] = [
            (&["topics"], &topic),
            (&["groups"], &group),
            (&["markers", "show"], &marker),
        ];
        for columns in ["60", "80", "200"] {
            let mut all = String::new();
            for (args, file) in commands {
                let text = run_env(&dir, args, &[("COLUMNS", columns)]);
                let whole = format!(
                    "<DATA>{}",
                    file.display()
                        .to_string()
                        .strip_prefix(&dir.display().to_string())
                        .unwrap()
                );
                assert!(
                    text.lines().any(|l| l.contains(&whole)),
                    "{columns} columns, {} characters of volume path, kaasctl {args:?}: no line holds {whole}\n{text}",
                    dir.display().to_string().len()
                );
                all.push_str(&text);
            }
            if pad == 1 {
                golden(&format!("unreadable_paths_{columns}_columns"), &all);
            }
        }
    }
}

#[test]
fn an_empty_volume_and_a_missing_one() {
    // A volume whose first broker has not written anything yet but `__cluster`.
    let d = fixture_dir().unwrap();
    std::fs::create_dir(d.path().join("__cluster")).unwrap();
    cases(
        d.path(),
        &[
            ("empty_txn_list", &["txn", "list"]),
            ("empty_brokers_json", &["brokers", "--json"]),
            ("empty_metrics", &["metrics"]),
        ],
    );
    golden("missing_data_dir", &run(&d.path().join("nope"), &["txn", "list"]));
}

/// A mistyped --data-dir must not read as an empty, healthy cluster: a directory
/// without `__cluster`, a file, a path through a file are refused with what they are.
#[test]
fn a_directory_that_is_not_a_volume_is_refused() {
    let empty = fixture_dir().unwrap();
    let other = fixture_dir().unwrap();
    std::fs::write(other.path().join("notes.txt"), "not a volume").unwrap();
    let mut all = String::new();
    for (dir, args) in [
        (empty.path(), &["doctor"][..]),
        (empty.path(), &["txn", "list"][..]),
        (empty.path(), &["top", "--once"][..]),
        (other.path(), &["doctor"][..]),
        (other.path(), &["brokers"][..]),
        (&other.path().join("notes.txt"), &["txn", "list"][..]),
        (&other.path().join("notes.txt/data"), &["txn", "list"][..]),
    ] {
        let text = run(dir, args);
        assert!(
            text.contains("exit: 1"),
            "kaasctl {args:?} on {}: {text}",
            dir.display()
        );
        all.push_str(&text);
    }
    golden("not_a_volume", &all);
    // (Its message depends on who runs it: root is told why it needs the volume.)
    let missing = run(&other.path().join("nope"), &["top", "--once"]);
    assert!(
        missing.contains("exit: 1") && missing.contains("does not exist"),
        "{missing}"
    );
    // Users, ACLs and quotas may be set up in an empty directory before the first
    // broker starts; not in a directory holding other files.
    let add = |dir: &Path, args: &[&str]| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
            .args(["--data-dir"])
            .arg(dir)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A refused command exits without reading it: a broken pipe is no failure.
        let _ = child.stdin.take().unwrap().write_all(b"alice-secret\n");
        child.wait_with_output().unwrap()
    };
    let quota: &[&str] = &["quotas", "set", "--user", "alice", "producer_byte_rate=1024"];
    let user: &[&str] = &["users", "add", "alice", "--password-stdin"];
    let acl: &[&str] = &[
        "acls",
        "add",
        "--topic",
        "t",
        "--allow-principal",
        "User:alice",
        "--operation",
        "read",
    ];
    for args in [quota, user, acl] {
        let fresh = fixture_dir().unwrap();
        let added = add(fresh.path(), args);
        assert!(added.status.success(), "{args:?}: {added:?}");
        assert!(fresh.path().join("__cluster").is_dir(), "{args:?}");
        let refused = add(other.path(), args);
        assert_eq!(refused.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("is not a kaas volume"));
    }
    assert!(add(empty.path(), quota).status.success());
}

#[test]
fn tables_fit_80_columns() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    for args in [
        &["brokers"][..],
        &["topics"],
        &["groups"],
        &["txn", "list"],
        &["txn", "show", "open-tx"],
        &["txn", "timeline", "open-tx"],
        &["txn", "find-hanging"],
        &["fence", "show"],
        &["markers", "list"],
        &["markers", "show"],
        &["producers", "show", "orders", "0"],
        &["log", "dump", "orders", "0"],
        &["audit"],
        &["users", "list"],
        &["acls", "list"],
        &["doctor"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
            .arg("--data-dir")
            .arg(d.path())
            .args(args)
            .env("KAASCTL_NOW_MS", NOW.to_string())
            // An 80-column terminal (a pipe gets whole lines, see below).
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "{args:?}: {} columns: {line:?}",
                line.chars().count()
            );
        }
        assert!(
            !text.contains("\u{1b}["),
            "{args:?}: colour escapes when not a terminal"
        );
    }
}

#[test]
fn colour_is_used_only_when_asked_and_never_with_no_color() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    let run = |extra: &[&str], no_color: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kaasctl"));
        c.arg("--data-dir").arg(d.path()).args(["txn", "list"]).args(extra);
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        String::from_utf8(c.output().unwrap().stdout).unwrap()
    };
    assert!(run(&["--color", "always"], false).contains("\u{1b}["));
    assert!(!run(&["--color", "never"], false).contains("\u{1b}["));
    assert!(
        !run(&[], false).contains("\u{1b}["),
        "auto: stdout is not a terminal here"
    );
    assert!(!run(&["--color", "auto"], true).contains("\u{1b}["));
}

/// A compacted topic cleaned once by the cleaner (its first partition) and never
/// (its second, with a failure recorded): `topics`, `compaction` and a `log dump`
/// with the gaps cleaning left.
#[test]
fn compaction_views() {
    use kaas_core::cleaner::{clean, never, CleanLimits, CleanerState};
    let d = fixture_dir().unwrap();
    let v = Volume::new(d.path());
    topic(
        &v,
        "profiles",
        2,
        3,
        &[("cleanup.policy", "compact"), ("segment.bytes", "300")],
    );
    let cfg = kaas_core::configs::log_config_for(
        &LogConfig::default(),
        &BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), "300".to_string()),
        ]),
    )
    .unwrap();
    for partition in 0..2 {
        let dir = v.partition_dir("profiles", partition);
        let mut p = PartitionState::open(&dir, cfg.clone(), NOW).unwrap();
        for round in 0..4 {
            for key in ["alice", "bob"] {
                let value = format!("{key}-v{round}");
                let mut b = build_batch(
                    0,
                    NOW - 100_000 + round,
                    None,
                    0,
                    &[(Some(key.as_bytes()), Some(value.as_bytes()))],
                );
                let h = validate_all(&b).unwrap();
                p.append(&mut b, &h, 0, NOW - 100_000).unwrap();
            }
        }
        let mut state = CleanerState::default();
        if partition == 0 {
            let plan = p.cleaner_plan(&state, NOW - 60_000).unwrap().unwrap();
            let input = p.clean_input(&plan, &state, "0-0".into(), NOW - 60_000);
            let limits = CleanLimits {
                dedupe_buffer_bytes: 1 << 20,
                io_max_bytes_per_second: None,
                stop: &never,
            };
            let out = clean(&input, limits, NOW - 60_000).unwrap();
            assert!(p.install_cleaned(&out, NOW - 60_000).unwrap());
            let mut report = out.report;
            report.finished_ms = NOW - 59_990;
            state.record(report, p.log.config().delete_retention_ms);
        } else {
            state.version = kaas_core::cleaner::CLEANER_FORMAT_VERSION;
            state.last_error = Some("its 9 records do not fit the cleaner's offset map".into());
        }
        state.write(&dir).unwrap();
    }
    cases(
        d.path(),
        &[
            ("compaction_topics", &["topics"]),
            ("compaction_table", &["compaction"]),
            ("compaction_json", &["compaction", "profiles", "--json"]),
            ("compaction_log_dump", &["log", "dump", "profiles", "0"]),
            ("compaction_unknown_topic", &["compaction", "nope"]),
        ],
    );
}

/// Every command whose reader closes the pipe before reading a byte (as `head` does
/// once it has its lines) ends quietly: no panic, no "Broken pipe" message, exit 0.
#[test]
fn a_reader_that_closes_early_ends_every_command_quietly() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    let commands: &[&[&str]] = &[
        &["brokers"],
        &["topics"],
        &["compaction"],
        &["groups"],
        &["txn", "list"],
        &["txn", "list", "--json"],
        &["txn", "show", "open-tx"],
        &["txn", "timeline", "aborted-tx"],
        &["txn", "find-hanging"],
        &["txn", "repair"],
        &["txn", "abort", "open-tx", "--dry-run"],
        &["fence", "show"],
        &["markers", "list"],
        &["markers", "show"],
        &["producers", "show", "orders", "0"],
        &["log", "dump", "orders", "0", "--records"],
        &["log", "dump", "orders", "0", "--json"],
        &["lso", "explain", "orders", "0"],
        &["metrics"],
        &["audit"],
        &["doctor"],
        &["top", "--once"],
        &["completions", "bash"],
        &["man"],
    ];
    for args in commands {
        // The reader is gone before kaasctl starts, so its first write fails, whatever
        // the scheduling. (Closing it after the start raced with kaasctl: a command
        // that wrote its few lines first ended with its own exit code, 3 for
        // `markers list` on this fixture, and the test failed under load.)
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
            .arg("--data-dir")
            .arg(d.path())
            .args(*args)
            .env("KAASCTL_NOW_MS", NOW.to_string())
            .env("NO_COLOR", "1")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("kaasctl runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(0) && !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "kaasctl {args:?}: {:?}\n{stderr}",
            out.status
        );
    }
}

/// Into a pipe (no COLUMNS, not a terminal) tables never wrap: every row is one line,
/// whatever its length, so `grep` and `cut` see whole rows.
#[test]
fn piped_tables_are_never_wrapped() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    std::fs::write(d.path().join("__cluster/topics/broken.json"), b"{\"version\":1,").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .arg("--data-dir")
        .arg(d.path())
        .arg("topics")
        .env_remove("COLUMNS")
        .env("NO_COLOR", "1")
        .output()
        .expect("kaasctl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // Header, the unreadable topic and two topics: four lines, each whole.
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("broken.json") && l.contains("line 1 column 13")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("00000000-0000-0000-0000-000000000001") && l.contains("retention.ms=60000")),
        "{text}"
    );
    assert!(lines.iter().map(|l| l.chars().count()).max().unwrap() > 100, "{text}");
}

/// One live broker (heartbeat 500 ms ago), a topic with a committed transaction.
fn healthy(dir: &Path) -> Volume {
    let v = Volume::new(dir);
    lease(&v, 0, NOW - 500);
    topic(&v, "t", 1, 9, &[]);
    let mut p = PartitionState::open(&v.partition_dir("t", 0), LogConfig::default(), NOW).unwrap();
    produce(&mut p, Some((200, 0, 0)), true, &["a", "b"], NOW - 30_000);
    p.write_marker(200, 0, true, 0, 0, NOW - 29_000).unwrap();
    drop(p);
    let mut done = entry("ok-tx", 200, 0, TxnState::CompleteCommit, &[], &[], NOW - 29_000);
    done.txn_start_ms = -1;
    put(&v, done);
    v
}

/// Group `group` with offsets `first`.. committed for partitions 0-3 of "orders".
fn orders_committed(group: &str, first: i64) -> GroupOffsets {
    let mut g = GroupOffsets::new(group);
    for p in 0..4 {
        g.set(
            "orders",
            p,
            CommittedOffset {
                offset: first + p as i64,
                leader_epoch: -1,
                metadata: None,
                commit_ms: NOW - 5_000,
            },
        );
    }
    g
}

fn lease(v: &Volume, id: i32, heartbeat_ms: i64) {
    BrokerLease {
        version: LEASE_FORMAT_VERSION,
        broker_id: id,
        host: "127.0.0.1".into(),
        port: 9092 + id as u16,
        incarnation: format!("incarnation-{id}"),
        started_ms: NOW - 3_600_000,
        heartbeat_ms,
        stopped_ms: None,
        stepped_down_ms: None,
        opening_ms: None,
        joining_ms: None,
        listeners: Default::default(),
        authorizer: None,
        renewal: 0,
        routes: None,
    }
    .write(v)
    .unwrap();
}

#[test]
fn doctor_finds_each_kind_of_problem_and_says_what_to_do() {
    // Healthy: exit 0.
    let ok = fixture_dir().unwrap();
    healthy(ok.path());
    cases(ok.path(), &[("doctor_healthy", &["doctor"])]);
    // A full disk and exhausted inodes on the same volume.
    golden(
        "doctor_disk_full",
        &run_env(
            ok.path(),
            &["doctor"],
            &[("KAASCTL_STATVFS", "1048576,20000,1000000,30000")],
        ),
    );
    // The standard fixture: a dead broker with queued markers, an overdue transaction,
    // a hanging one, a pinned LSO.
    let d = fixture_dir().unwrap();
    fixture(d.path());
    cases(
        d.path(),
        &[
            ("doctor_fixture", &["doctor"]),
            ("doctor_fixture_json", &["doctor", "--json"]),
        ],
    );
    // A Prepare* entry left 40 s ago is stuck once the threshold is lower.
    cases(
        d.path(),
        &[("doctor_fixture_stuck_10s", &["doctor", "--stuck-after", "10s"])],
    );
    // Clocks: a heartbeat 30 s in the future, and live brokers 6 s apart.
    let c = fixture_dir().unwrap();
    let v = healthy(c.path());
    lease(&v, 1, NOW + 30_000);
    lease(&v, 2, NOW - 6_000);
    cases(c.path(), &[("doctor_clocks", &["doctor"])]);
    // A broker killed 7 s ago (session timeout 10 s) and one 12 s ago: stale, then
    // dead — neither is a clock that disagrees.
    let k = fixture_dir().unwrap();
    let v = healthy(k.path());
    lease(&v, 1, NOW - 300);
    lease(&v, 2, NOW - 7_000);
    lease(&v, 3, NOW - 12_000);
    cases(
        k.path(),
        &[
            ("doctor_killed_broker", &["doctor"]),
            ("brokers_stale_and_dead", &["brokers"]),
        ],
    );
    // Live brokers with different --authorizer settings.
    let a = fixture_dir().unwrap();
    let v = healthy(a.path());
    lease(&v, 1, NOW - 500);
    lease(&v, 2, NOW - 500);
    // Broker 2's lease is from before ACLs (no field): it authorizes nothing.
    for (id, authorizer) in [
        (0, "acls super-users=User:admin allow-everyone-if-no-acl-found=false"),
        (1, "none"),
    ] {
        let mut l = BrokerLease::read(&v, id).unwrap();
        l.authorizer = Some(authorizer.into());
        l.write(&v).unwrap();
    }
    cases(a.path(), &[("doctor_authorizers", &["doctor"])]);
    // An unreadable slot and an unreadable lease.
    let u = fixture_dir().unwrap();
    let v = healthy(u.path());
    let store = TxnStateStore::new(v.clone());
    let slot = slot_for("ok-tx");
    let bytes = std::fs::read(store.slot_path(slot)).unwrap();
    std::fs::write(store.slot_path(slot), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(v.broker_lease(3), b"{ not json").unwrap();
    cases(u.path(), &[("doctor_unreadable", &["doctor"])]);
    // A marker entry queued for a live broker five minutes ago: stuck.
    let m = fixture_dir().unwrap();
    let v = healthy(m.path());
    marker_queue::enqueue(
        &v,
        0,
        &MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "slow-tx".into(),
            producer_id: 300,
            producer_epoch: 1,
            result: MarkerResult::Abort,
            coordinator_epoch: 0,
            partitions: vec![tp("t", 0)],
            txn_seq: Some(4),
            enqueued_by: 0,
            enqueued_ms: NOW - 300_000,
            hanging_since: None,
        },
    )
    .unwrap();
    cases(m.path(), &[("doctor_stuck_marker", &["doctor"])]);
    // A volume no broker ever ran on.
    let e = fixture_dir().unwrap();
    std::fs::create_dir(e.path().join("__cluster")).unwrap();
    cases(e.path(), &[("doctor_empty", &["doctor"])]);
    // Broker 1 runs but stepped down (its renewals are too slow); broker 2 stepped
    // down and then died: its lease still carries the mark, but it is just dead.
    let s = fixture_dir().unwrap();
    let v = healthy(s.path());
    for (id, heartbeat) in [(1, NOW - 1_000), (2, NOW - 60_000)] {
        lease(&v, id, heartbeat);
        let mut l = BrokerLease::read(&v, id).unwrap();
        l.stepped_down_ms = Some(heartbeat - 2_000);
        l.write(&v).unwrap();
    }
    cases(
        s.path(),
        &[
            ("doctor_stepped_down", &["doctor"]),
            ("brokers_stepped_down", &["brokers"]),
        ],
    );
    // Broker 1 serves but has waited 40 s for broker 0 to route to it: broker 0's
    // lease names only itself (it cannot read broker 1's lease?). Broker 2 joined a
    // moment ago, which broker 0 names already.
    let j = fixture_dir().unwrap();
    let v = healthy(j.path());
    for (id, since) in [(1, NOW - 40_000), (2, NOW - 1_000)] {
        lease(&v, id, NOW - 300);
        let mut l = BrokerLease::read(&v, id).unwrap();
        l.joining_ms = Some(since);
        l.write(&v).unwrap();
    }
    let mut peer = BrokerLease::read(&v, 0).unwrap();
    peer.routes = Some(
        [0, 2]
            .iter()
            .map(|&id| kaas_core::broker::RoutedBroker {
                broker_id: id,
                incarnation: format!("incarnation-{id}"),
                renewal: 3,
            })
            .collect(),
    );
    peer.write(&v).unwrap();
    // A transaction past its timeout whose slot broker 1 owns: its reaper aborts it
    // only once broker 1 has joined.
    let late = (0..)
        .map(|n| format!("late-tx-{n}"))
        .find(|t| kaas_core::ownership::owner(&kaas_core::ownership::txn_slot_key(slot_for(t)), &[0, 1, 2]) == Some(1))
        .unwrap();
    put(
        &v,
        entry(&late, 400, 0, TxnState::Ongoing, &[tp("t", 0)], &[], NOW - 120_000),
    );
    cases(
        j.path(),
        &[("doctor_joining", &["doctor"]), ("brokers_joining", &["brokers"])],
    );
}

#[test]
fn doctor_measures_the_real_file_system() {
    let d = fixture_dir().unwrap();
    healthy(d.path());
    let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .args(["--data-dir", d.path().to_str().unwrap(), "doctor", "--json"])
        .env("KAASCTL_NOW_MS", NOW.to_string())
        .env_remove("KAASCTL_STATVFS")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let disk: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "disk")
        .collect();
    assert!(
        disk.iter()
            .any(|f| f["detail"].as_str().unwrap().starts_with("space: ")),
        "{report}"
    );
    assert!(
        disk.iter().all(|f| f["detail"].as_str().unwrap().contains("% free")),
        "{report}"
    );
}

/// --output json|yaml|table, --wide and --columns (like kubectl).
#[test]
fn output_formats_wide_and_columns() {
    let d = fixture_dir().unwrap();
    fixture(d.path());
    cases(
        d.path(),
        &[
            ("wide_brokers", &["brokers", "--wide"]),
            ("wide_txn_list", &["txn", "list", "--wide"]),
            (
                "columns_txn_list",
                &["txn", "list", "--columns", "transactional id,STATE,slot"],
            ),
            ("columns_without_state", &["txn", "list", "--columns", "pid,epoch"]),
            ("columns_unknown", &["txn", "list", "--columns", "state,nope"]),
            ("yaml_markers_list", &["markers", "list", "-o", "yaml"]),
            ("output_json_and_json_conflict", &["brokers", "--json", "-o", "yaml"]),
        ],
    );
    // YAML and JSON carry the same data, for every command that prints data.
    for args in [
        &["txn", "list"][..],
        &["brokers"],
        &["doctor"],
        &["topics"],
        &["groups"],
    ] {
        let json = run(d.path(), &[args, &["-o", "json"]].concat());
        let yaml = run(d.path(), &[args, &["-o", "yaml"]].concat());
        let body = |s: &str| {
            s.split("--- stdout\n")
                .nth(1)
                .unwrap()
                .split("--- stderr")
                .next()
                .unwrap()
                .to_string()
        };
        let from_json: serde_json::Value = serde_json::from_str(&body(&json)).unwrap();
        let from_yaml: serde_json::Value = serde_yaml_ng::from_str(&body(&yaml)).unwrap();
        assert_eq!(from_json, from_yaml, "{args:?}");
        assert!(
            !body(&yaml).trim_start().starts_with('{') && !body(&yaml).trim_start().starts_with('['),
            "{args:?} is YAML: {yaml}"
        );
    }
}

/// The audit journal is read later from anywhere: a relative --data-dir is recorded
/// as the absolute path it named.
#[test]
fn the_audit_journal_records_the_data_directory_absolutely() {
    let d = fixture_dir().unwrap();
    std::fs::create_dir(d.path().join("vol")).unwrap();
    let kaasctl = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kaasctl"))
            .current_dir(d.path())
            .args(["--data-dir", "vol"])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        kaasctl(&["quotas", "set", "--user", "alice", "producer_byte_rate=1024"])
            .status
            .success()
    );
    // Named by the environment, relative: the record's data_dir names it all the same.
    let by_env = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .current_dir(d.path())
        .env("KAAS_DATA_DIR", "vol")
        .args(["quotas", "set", "--user", "bob", "producer_byte_rate=2048"])
        .output()
        .unwrap();
    assert!(by_env.status.success(), "{by_env:?}");
    let audit = kaasctl(&["audit", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    let absolute = d.path().join("vol").display().to_string();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["command"][2], serde_json::json!(absolute), "{rows:?}");
    for row in rows {
        assert_eq!(row["data_dir"], serde_json::json!(absolute), "{row}");
    }
}

/// Issue 28: a transaction open for two minutes of its 15 pins the LSO of all six
/// partitions of a topic — no timeout passed, nothing hangs, yet read_committed
/// consumers wait. Doctor warns (past --lso-pinned-after), naming the transaction,
/// its partitions, the groups behind it and the command that ends it; `lso list` and
/// `lso explain TOPIC` show every pinned partition. A transaction open 20 s is listed,
/// not warned about.
#[test]
fn a_transaction_within_its_timeout_pinning_the_lso_is_shown() {
    let d = fixture_dir().unwrap();
    let v = healthy(d.path());
    topic(&v, "orders", 6, 20, &[]);
    topic(&v, "events", 1, 21, &[]);
    let cfg = LogConfig::default();
    for p in 0..6 {
        let mut s = PartitionState::open(&v.partition_dir("orders", p), cfg.clone(), NOW).unwrap();
        produce(&mut s, None, false, &["a", "b", "c"], NOW - 200_000);
        produce(&mut s, Some((300, 0, 0)), true, &["open-0", "open-1"], NOW - 120_000);
        produce(&mut s, None, false, &["after"], NOW - 60_000);
    }
    let mut e = PartitionState::open(&v.partition_dir("events", 0), cfg, NOW).unwrap();
    produce(&mut e, Some((301, 0, 0)), true, &["fresh"], NOW - 20_000);
    drop(e);
    let orders: Vec<TopicPartition> = (0..6).map(|p| tp("orders", p)).collect();
    let mut slow = entry("slow-sink", 300, 0, TxnState::Ongoing, &orders, &[], NOW - 120_000);
    slow.timeout_ms = 900_000;
    put(&v, slow);
    let mut fresh = entry(
        "fresh-tx",
        301,
        0,
        TxnState::Ongoing,
        &[tp("events", 0)],
        &[],
        NOW - 20_000,
    );
    fresh.timeout_ms = 900_000;
    put(&v, fresh);
    let co = |offset| CommittedOffset {
        offset,
        leader_epoch: -1,
        metadata: None,
        commit_ms: NOW - 30_000,
    };
    let mut billing = GroupOffsets::new("billing");
    for p in 0..6 {
        billing.set("orders", p, co(3));
    }
    billing.save(&v).unwrap();
    let mut audit = GroupOffsets::new("audit");
    audit.set("orders", 0, co(0));
    audit.save(&v).unwrap();
    cases(
        d.path(),
        &[
            ("lso_pinned_doctor", &["doctor"]),
            ("lso_pinned_list", &["lso", "list"]),
            ("lso_pinned_list_json", &["lso", "list", "--json"]),
            ("lso_pinned_explain_topic", &["lso", "explain", "orders"]),
            ("lso_pinned_doctor_5m", &["doctor", "--lso-pinned-after", "5m"]),
        ],
    );
    // A pin by a producer id the entry had before a rotation: aborting the entry's
    // transaction now would not move that LSO, so it is not reported as this
    // transaction's long pin (the transactions check judges the leftover). And a
    // partition no broker has opened yet (no directory): `lso explain TOPIC` goes on.
    topic(&v, "ledger", 2, 22, &[]);
    let mut l = PartitionState::open(&v.partition_dir("ledger", 0), LogConfig::default(), NOW).unwrap();
    produce(&mut l, Some((400, 0, 0)), true, &["left-over"], NOW - 300_000);
    drop(l);
    let mut rotated = entry(
        "rotated-tx",
        401,
        0,
        TxnState::Ongoing,
        &[tp("ledger", 0)],
        &[],
        NOW - 200_000,
    );
    rotated.last_producer_id = 400;
    rotated.timeout_ms = 900_000;
    put(&v, rotated);
    cases(d.path(), &[("lso_rotated_doctor", &["doctor"])]);
    std::fs::remove_dir_all(v.partition_dir("ledger", 1)).unwrap();
    cases(
        d.path(),
        &[("lso_explain_topic_unopened_partition", &["lso", "explain", "ledger"])],
    );
}

/// Issue 29: a KIP-848 consumer group's members, read from its offsets file (one
/// member stable, one still revoking a partition), above its committed offsets; the
/// JSON rows name each partition's owner.
#[test]
fn a_consumer_group_is_shown_with_its_members() {
    use kaas_core::consumer_group::{Assignment, ConsumerGroupRecord, ConsumerMemberRecord};
    let d = fixture_dir().unwrap();
    let v = healthy(d.path());
    topic(&v, "orders", 4, 21, &[]);
    let orders = uuid_from(21);
    let parts = |ps: &[i32]| -> Assignment { [(orders, ps.iter().copied().collect())].into_iter().collect() };
    let member = |client: &str, epoch: i32, state: &str, assigned: &[i32], revoking: &[i32]| ConsumerMemberRecord {
        instance_id: None,
        rack_id: None,
        client_id: client.into(),
        client_host: "/10.0.0.7".into(),
        subscribed_names: ["orders".to_string()].into_iter().collect(),
        subscribed_regex: None,
        regex_topics: Default::default(),
        server_assignor: None,
        rebalance_timeout_ms: 300_000,
        epoch,
        previous_epoch: epoch - 1,
        state: state.into(),
        assigned: parts(assigned),
        pending_revocation: parts(revoking),
    };
    let mut g = orders_committed("stream", 10);
    g.consumer = Some(ConsumerGroupRecord {
        group_epoch: 5,
        assignment_epoch: 5,
        members: [
            (
                "m-a".to_string(),
                member("rdkafka-a", 4, "unrevoked_partitions", &[0], &[1]),
            ),
            (
                "m-b".to_string(),
                member("rdkafka-b", 5, "unreleased_partitions", &[2, 3], &[]),
            ),
        ]
        .into_iter()
        .collect(),
        target: [("m-a".to_string(), parts(&[0, 2])), ("m-b".to_string(), parts(&[1, 3]))]
            .into_iter()
            .collect(),
        subscribed_topics: [(orders, 4)].into_iter().collect(),
    });
    g.save(&v).unwrap();
    cases(
        d.path(),
        &[
            ("consumer_group", &["groups", "stream"]),
            ("json_consumer_group", &["groups", "stream", "--json"]),
        ],
    );
}

/// A classic group's last stable generation, recorded on the volume by its coordinator
/// (a static leader owning two partitions, a member owning one, a member whose
/// assignment does not read as a consumer's; a group of another protocol type), above
/// its committed offsets;
/// the JSON rows name each partition's owner. Before, kaasctl said classic members
/// lived only in their coordinator's memory and showed none.
#[test]
fn a_classic_group_is_shown_with_its_recorded_members() {
    use kaas_core::offsets::{ClassicGroupRecord, ClassicMemberRecord, ClassicProtocol};
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as Assigned;
    use kafka_protocol::messages::{ConsumerProtocolAssignment, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let d = fixture_dir().unwrap();
    let v = healthy(d.path());
    topic(&v, "orders", 4, 21, &[]);
    let assignment = |version: i16, ps: &[i32]| -> Vec<u8> {
        let mut buf = bytes::BytesMut::new();
        buf.extend_from_slice(&version.to_be_bytes());
        ConsumerProtocolAssignment::default()
            .with_assigned_partitions(vec![Assigned::default()
                .with_topic(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(ps.to_vec())])
            .encode(&mut buf, version.min(3))
            .unwrap();
        buf.to_vec()
    };
    let member = |id: &str, instance: Option<&str>, assignment: Vec<u8>| ClassicMemberRecord {
        member_id: id.into(),
        instance_id: instance.map(str::to_string),
        client_id: "rdkafka".into(),
        client_host: "/10.0.0.7".into(),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 300_000,
        protocols: vec![ClassicProtocol {
            name: "range".into(),
            metadata: vec![0, 0, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's'],
        }],
        assignment,
    };
    let mut g = orders_committed("billing-app", 20);
    g.classic = Some(ClassicGroupRecord {
        generation: 7,
        protocol_type: "consumer".into(),
        protocol: "range".into(),
        leader: "rdkafka-1".into(),
        members: vec![
            member("rdkafka-1", Some("pod-1"), assignment(0, &[0, 1])),
            // A version newer than the codec's is read as its newest (Apache's rule).
            member("rdkafka-2", None, assignment(7, &[2])),
            member("connect-3", None, b"not a consumer's".to_vec()),
        ],
    });
    g.save(&v).unwrap();
    // Another protocol type's assignment is not read as a consumer's, even bytes that
    // would parse as one.
    let mut connect = GroupOffsets::new("connect-cluster");
    connect.classic = Some(ClassicGroupRecord {
        generation: 2,
        protocol_type: "connect".into(),
        protocol: "sessioned".into(),
        leader: "connect-1".into(),
        members: vec![member("connect-1", None, assignment(0, &[3]))],
    });
    connect.save(&v).unwrap();
    cases(
        d.path(),
        &[
            ("classic_group", &["groups", "billing-app"]),
            ("json_classic_group", &["groups", "billing-app", "--json"]),
            ("classic_group_of_another_protocol_type", &["groups", "connect-cluster"]),
        ],
    );
}

/// A quota on an empty user or client id names no principal or client (the default
/// is --default-user / --default-client-id): refused, as AlterClientQuotas refuses it,
/// and nothing is written.
#[test]
fn a_quota_on_an_empty_name_is_refused() {
    let d = fixture_dir().unwrap();
    std::fs::create_dir(d.path().join("vol")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kaasctl"))
        .current_dir(d.path())
        .args([
            "--data-dir",
            "vol",
            "quotas",
            "set",
            "--client-id",
            "",
            "producer_byte_rate=1024",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--default-client-id"), "{stderr}");
    assert!(!d.path().join("vol/__cluster/client-quotas.json").exists());
}
