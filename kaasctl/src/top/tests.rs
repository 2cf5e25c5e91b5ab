//! Rendering tests with ratatui's TestBackend over fixture volumes written by
//! kaas-core's own writers, key handling, and the watcher's change detection.

use super::app::{Action, App, Mode, Shown, View};
use super::data::Watcher;
use super::render_text;
use kaas_core::batch::{build_batch, validate_all};
use kaas_core::broker::{BrokerLease, LEASE_FORMAT_VERSION};
use kaas_core::fence_log::FenceLog;
use kaas_core::log::LogConfig;
use kaas_core::marker_queue::{self, MarkerEntry, MarkerResult, MARKER_FORMAT_VERSION};
use kaas_core::offsets::{CommittedOffset, GroupOffsets};
use kaas_core::partition::PartitionState;
use kaas_core::topic::{PartitionOwner, TopicMeta};
use kaas_core::txn::{slot_for, TopicPartition, TxnEntry, TxnState};
use kaas_core::txn_store::TxnStateStore;
use kaas_core::Volume;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

const NOW: i64 = 1_800_000_000_000;

fn entry(id: &str, pid: i64, state: TxnState, parts: &[(&str, i32)], start: i64) -> TxnEntry {
    TxnEntry {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: 0,
        last_epoch: -1,
        last_producer_id: -1,
        state,
        timeout_ms: 60_000,
        partitions: parts
            .iter()
            .map(|(t, p)| TopicPartition {
                topic: t.to_string(),
                partition: *p,
            })
            .collect::<BTreeSet<_>>(),
        groups: BTreeSet::new(),
        txn_start_ms: start,
        txn_seq: 1,
        markers_queued: false,
        last_update_ms: start,
        history: VecDeque::new(),
    }
}

fn put(v: &Volume, e: TxnEntry) {
    TxnStateStore::new(v.clone())
        .update(slot_for(&e.transactional_id), NOW, |m| {
            m.insert(e.transactional_id.clone(), e.clone());
            ((), true)
        })
        .unwrap();
}

fn fixture(dir: &Path) -> Volume {
    let v = Volume::new(dir);
    BrokerLease {
        version: LEASE_FORMAT_VERSION,
        broker_id: 0,
        host: "h".into(),
        port: 9092,
        incarnation: "i".into(),
        started_ms: NOW - 10_000,
        heartbeat_ms: NOW - 300,
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
    let mut meta = TopicMeta::new("orders", 2, Default::default(), NOW);
    meta.topic_id = uuid::Uuid::from_u128(1);
    meta.write(&v).unwrap();
    for p in 0..2 {
        PartitionOwner {
            version: 1,
            broker: 0,
            leader_epoch: 0,
            released: false,
            updated_ms: NOW,
            topic_id: None,
        }
        .write(&PartitionOwner::path(&v, "orders", p))
        .unwrap();
    }
    let mut p0 = PartitionState::open(&v.partition_dir("orders", 0), LogConfig::default(), NOW).unwrap();
    let mut b = build_batch(0, NOW - 100_000, Some((7, 0, 0)), 0x10, &[(None, Some(b"open"))]);
    let h = validate_all(&b).unwrap();
    p0.append(&mut b, &h, 0, NOW).unwrap();
    let mut b = build_batch(0, NOW - 90_000, None, 0, &[(None, Some(b"plain"))]);
    let h = validate_all(&b).unwrap();
    p0.append(&mut b, &h, 0, NOW).unwrap();
    drop(p0);
    put(
        &v,
        entry("stuck-tx", 7, TxnState::Ongoing, &[("orders", 0)], NOW - 100_000),
    );
    put(&v, entry("done-tx", 8, TxnState::CompleteCommit, &[], -1));
    let mut f = FenceLog::empty(0);
    f.append(9, 3, Some("old-tx"), NOW - 5_000);
    f.save(&v).unwrap();
    marker_queue::enqueue(
        &v,
        0,
        &MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "queued-tx".into(),
            producer_id: 11,
            producer_epoch: 2,
            result: MarkerResult::Abort,
            coordinator_epoch: 0,
            partitions: vec![TopicPartition {
                topic: "orders".into(),
                partition: 1,
            }],
            txn_seq: Some(1),
            enqueued_by: -1,
            enqueued_ms: NOW - 3_000,
            hanging_since: None,
        },
    )
    .unwrap();
    let mut g = GroupOffsets::new("billing");
    g.set(
        "orders",
        0,
        CommittedOffset {
            offset: 0,
            leader_epoch: -1,
            metadata: None,
            commit_ms: NOW,
        },
    );
    g.stage(
        7,
        0,
        "stuck-tx",
        "orders",
        0,
        CommittedOffset {
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            commit_ms: NOW,
        },
    );
    g.save(&v).unwrap();
    v
}

fn app_for(dir: &Path) -> (App, Watcher) {
    let mut w = Watcher::default();
    let mut app = App::new();
    app.on_snapshot(w.refresh(dir, 10_000, NOW));
    (app, w)
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn screen(app: &App) -> String {
    render_text(app, 120, 30)
}

#[test]
fn overview_shows_brokers_counts_queue_fences_and_lagging_partitions() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (app, _) = app_for(d.path());
    let s = screen(&app);
    assert!(s.contains("1 Overview") && s.contains("6 Groups"), "{s}");
    assert!(s.contains("broker 0   alive  lease 0.3s"), "{s}");
    assert!(s.contains("Ongoing               1"), "{s}");
    assert!(s.contains("CompleteCommit        1"), "{s}");
    assert!(s.contains("overdue               1"), "{s}");
    assert!(s.contains("oldest Ongoing: stuck-tx (1m40s)"), "{s}");
    assert!(s.contains("marker queue depth   1 (oldest 3.0s)"), "{s}");
    assert!(s.contains("fence events/min     1"), "{s}");
    assert!(s.contains("partitions LSO < HW  1 of 2"), "{s}");
    assert!(s.contains("unreadable files     0"), "{s}");
}

#[test]
fn each_view_lists_its_rows() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.view, View::Transactions);
    let s = screen(&app);
    assert!(
        s.contains("stuck-tx") && s.contains("Ongoing") && s.contains("late 40.0s") && s.contains("done-tx"),
        "{s}"
    );
    app.on_key(key(KeyCode::Tab));
    let s = screen(&app);
    assert!(
        s.contains("queued-tx") && s.contains("11/2") && s.contains("Abort") && s.contains("orders-1"),
        "{s}"
    );
    app.on_key(key(KeyCode::Tab));
    let s = screen(&app);
    assert!(s.contains("old-tx") && s.contains("5.0s"), "{s}");
    app.on_key(key(KeyCode::Tab));
    let s = screen(&app);
    assert!(s.contains("orders-0") && s.contains("orders-1"), "{s}");
    let line = s.lines().find(|l| l.contains("orders-0")).unwrap();
    let nums: Vec<&str> = line.split_whitespace().collect();
    // leader 0, HW 2, LSO 0 (pinned), 1 open transaction, pinned by stuck-tx.
    assert_eq!(&nums[1..5], &["0", "2", "0", "1"], "{line}");
    assert!(line.contains("stuck-tx (Ongoing 1m40s)"), "{line}");
    app.on_key(key(KeyCode::Tab));
    let s = screen(&app);
    let line = s.lines().find(|l| l.contains("billing")).unwrap();
    // committed 0, lag 2, real 0, blocked 2 (behind stuck-tx), 1 staged.
    assert_eq!(
        line.split_whitespace()
            .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
            .collect::<Vec<_>>(),
        vec!["0", "2", "0", "2", "1"],
        "{line}"
    );
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.view, View::Overview);
}

#[test]
fn filter_sort_detail_and_back() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Char('2')));
    app.on_key(key(KeyCode::Char('/')));
    for c in "stuck".chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.visible_len(), 1);
    assert!(screen(&app).contains("filter \"stuck\""));
    app.on_key(key(KeyCode::Char('s')));
    assert!(screen(&app).contains("sorted by state"));
    app.on_key(key(KeyCode::Enter));
    assert_eq!(app.mode, Mode::Detail("stuck-tx".into()));
    let s = screen(&app);
    assert!(s.contains("orders-0  leader 0  HW 2  LSO 0  marker pending"), "{s}");
    assert!(s.contains("billing: orders-0 -> 1"), "{s}");
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.mode, Mode::Normal);
    app.on_key(key(KeyCode::Esc));
    assert!(app.filter.is_empty());
}

#[test]
fn abort_asks_first_and_only_for_open_transactions() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Char('2')));
    // Rows are sorted by age, the open ones first: stuck-tx, done-tx.
    app.on_key(key(KeyCode::Char('j')));
    assert_eq!(app.on_key(key(KeyCode::Char('a'))), Action::None);
    assert!(app.status.as_deref().unwrap().contains("no open transaction"));
    app.on_key(key(KeyCode::Char('k')));
    app.on_key(key(KeyCode::Char('a')));
    let shown = Shown {
        id: "stuck-tx".into(),
        producer_id: 7,
        epoch: 0,
        txn_seq: 1,
        partitions: 1,
    };
    assert_eq!(app.mode, Mode::Confirm(shown.clone()));
    assert!(screen(&app).contains("Force-abort stuck-tx?"));
    assert!(screen(&app).contains("producer 7 epoch 0 -> 1, transaction 1"));
    assert_eq!(app.on_key(key(KeyCode::Char('n'))), Action::None);
    assert_eq!(app.mode, Mode::Normal);
    app.on_key(key(KeyCode::Char('a')));
    assert_eq!(app.on_key(key(KeyCode::Char('y'))), Action::Abort(shown));
}

/// The dialog asked about one transaction; by the time the operator says yes it may
/// have ended (the reaper aborted it) and the application's restarted producer opened
/// another under the same id. That one is healthy: fencing it is fatal to a Java or
/// Streams producer. The abort acts on the confirmed transaction or on nothing.
#[test]
fn a_confirmed_abort_never_touches_a_transaction_that_began_after_the_dialog() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Char('2')));
    app.on_key(key(KeyCode::Char('a')));
    assert!(matches!(app.mode, Mode::Confirm(_)));
    // Meanwhile: the reaper's abort (epoch 1), the restarted producer's
    // InitProducerId (epoch 2) and its next transaction, Ongoing.
    let mut next = entry("stuck-tx", 7, TxnState::Ongoing, &[("orders", 0)], NOW - 1_000);
    next.producer_epoch = 2;
    next.txn_seq = 2;
    put(&v, next);
    let Action::Abort(shown) = app.on_key(key(KeyCode::Char('y'))) else {
        panic!("confirmed")
    };
    let refused = super::abort(d.path(), &shown, 10_000).expect_err("a transaction that began after the dialog");
    assert!(refused.contains("changed since it was confirmed"), "{refused}");
    let now = TxnStateStore::new(v.clone()).get("stuck-tx").unwrap().unwrap();
    assert_eq!(
        (now.state, now.producer_epoch, now.txn_seq),
        (TxnState::Ongoing, 2, 2),
        "left alone"
    );
    // The transaction shown, still open, is aborted.
    let mut shown_again = shown;
    shown_again.epoch = 2;
    shown_again.txn_seq = 2;
    let done = super::abort(d.path(), &shown_again, 10_000).unwrap();
    assert!(done.contains("epoch 2 -> 3"), "{done}");
}

#[test]
fn help_pause_and_quit_keys() {
    let mut app = App::new();
    app.on_key(key(KeyCode::Char('?')));
    assert!(render_text(&app, 100, 30).contains("force-abort the selected transaction"));
    app.on_key(key(KeyCode::Char('x')));
    assert_eq!(app.mode, Mode::Normal);
    app.on_key(key(KeyCode::Char('p')));
    assert!(app.paused && render_text(&app, 100, 30).contains("[PAUSED]"));
    assert_eq!(app.on_key(key(KeyCode::Char('q'))), Action::Quit);
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
}

#[test]
fn corrupt_files_are_error_rows_not_crashes() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    let store = TxnStateStore::new(v.clone());
    std::fs::write(store.slot_path(slot_for("stuck-tx")), b"{ torn").unwrap();
    std::fs::write(kaas_core::fence_log::fence_log_path(&v, 0), b"[").unwrap();
    std::fs::write(
        v.partition_dir("orders", 1).join("producer-state.snapshot"),
        b"{\"version\": 5}",
    )
    .unwrap();
    let (mut app, _) = app_for(d.path());
    let s = screen(&app);
    assert!(s.contains("unreadable files     2"), "{s}");
    assert!(s.contains("slot-"), "{s}");
    app.on_key(key(KeyCode::Char('5')));
    let s = screen(&app);
    assert!(
        s.lines()
            .any(|l| l.contains("orders-1") && l.contains("unknown format version 5")),
        "{s}"
    );
}

#[test]
fn an_empty_volume_and_a_missing_one_render() {
    let d = tempfile::tempdir().unwrap();
    // An empty directory is not a volume yet.
    let (app, _) = app_for(d.path());
    assert!(screen(&app).contains("not a kaas volume (yet)"));
    std::fs::create_dir(d.path().join("__cluster")).unwrap();
    let (app, _) = app_for(d.path());
    let s = screen(&app);
    assert!(s.contains("none registered") && s.contains("Transactions (0)"), "{s}");
    let (app, _) = app_for(&d.path().join("missing"));
    assert!(screen(&app).contains("not a kaas volume (yet)"));
}

#[test]
fn any_terminal_size_renders_without_panicking() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (mut app, _) = app_for(d.path());
    for view in 0..6 {
        app.on_key(key(KeyCode::Char((b'1' + view) as char)));
        for (w, h) in [(1, 1), (10, 3), (39, 9), (40, 10), (55, 14), (80, 24), (200, 60)] {
            let s = render_text(&app, w, h);
            if w < 40 || h < 10 {
                assert!(s.contains("too") || w < 12, "{w}x{h}: {s}");
            }
        }
    }
    app.on_key(key(KeyCode::Char('?')));
    render_text(&app, 20, 10);
}

#[test]
fn the_watcher_rereads_only_changed_files_and_counts_commits() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    let (mut app, mut w) = app_for(d.path());
    let first = w.reads();
    app.on_snapshot(w.refresh(d.path(), 10_000, NOW));
    assert_eq!(w.reads(), first, "nothing changed, nothing re-read");
    // The transaction commits: its slot file is rewritten.
    let mut done = entry("stuck-tx", 7, TxnState::CompleteCommit, &[], -1);
    done.producer_epoch = 0;
    put(&v, done);
    app.on_snapshot(w.refresh(d.path(), 10_000, NOW + 1_000));
    assert_eq!(w.reads(), first + 1, "only the changed slot file");
    assert_eq!(app.commits.back(), Some(&1));
    assert_eq!(app.snap.count(TxnState::Ongoing), 0);
    assert!(app.changes["stuck-tx"][0].1.contains("Ongoing -> CompleteCommit"));
}

/// The frame cost over 100,000 transactional ids: not a timed test, a benchmark.
/// `cargo test --release -p kaasctl -- --ignored bench_frame_cost --nocapture`
#[test]
#[ignore]
fn bench_frame_cost() {
    let d = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO"))
        .args([
            "run",
            "--release",
            "-q",
            "-p",
            "kaasctl",
            "--example",
            "gen_txn_volume",
            "--",
        ])
        .arg(d.path())
        .arg("100000")
        .status()
        .unwrap();
    assert!(status.success());
    let mut w = Watcher::default();
    let mut app = App::new();
    let t = std::time::Instant::now();
    app.on_snapshot(w.refresh(d.path(), 10_000, kaas_core::now_ms()));
    render_text(&app, 160, 50);
    let first = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..10 {
        app.on_snapshot(w.refresh(d.path(), 10_000, kaas_core::now_ms()));
        render_text(&app, 160, 50);
    }
    println!(
        "frame over 100,000 ids: first {:?}, steady {:?} per frame",
        first,
        t.elapsed() / 10
    );
}

/// Review finding: transactional producer ids (2^48 and up, 15 digits) are shown
/// whole, not clipped to a column too narrow for them.
#[test]
fn a_transactional_range_producer_id_is_shown_whole() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    let pid = kaas_core::producer_ids::TRANSACTIONAL_BASE + 7;
    put(
        &v,
        entry("big-tx", pid, TxnState::Ongoing, &[("orders", 0)], NOW - 1_000),
    );
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Tab));
    let s = screen(&app);
    assert!(s.contains(&pid.to_string()), "{s}");
}

#[test]
fn the_overview_lists_what_needs_attention_the_worst_first() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    // A second broker killed 6 s ago (stale at a 10 s session timeout), and a third
    // long dead with entries still queued for it.
    for (id, heartbeat) in [(1, NOW - 6_000), (2, NOW - 60_000)] {
        BrokerLease {
            version: LEASE_FORMAT_VERSION,
            broker_id: id,
            host: "h".into(),
            port: 9092 + id as u16,
            incarnation: format!("i{id}"),
            started_ms: NOW - 100_000,
            heartbeat_ms: heartbeat,
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
    marker_queue::enqueue(
        &v,
        2,
        &MarkerEntry {
            version: MARKER_FORMAT_VERSION,
            transactional_id: "orphan-tx".into(),
            producer_id: 12,
            producer_epoch: 0,
            result: MarkerResult::Commit,
            coordinator_epoch: 0,
            partitions: vec![TopicPartition {
                topic: "orders".into(),
                partition: 1,
            }],
            txn_seq: Some(1),
            enqueued_by: 0,
            enqueued_ms: NOW - 50_000,
            hanging_since: None,
        },
    )
    .unwrap();
    let (app, _) = app_for(d.path());
    let items: Vec<String> = app.snap.needs_attention().into_iter().map(|a| a.text).collect();
    assert_eq!(
        items,
        vec![
            "1 marker entries queued for broker 2, which is not live (oldest 50.0s)".to_string(),
            "broker 2 is dead (no heartbeat for 1m00s): what it led is taken over by the live brokers".to_string(),
            "broker 1 is stale: heartbeat 6.0s old (killed or frozen?), judged dead soon".to_string(),
            "\"stuck-tx\" is 40.0s past its timeout (1m00s) and pins the LSO of 1 partition(s), 2 records: orders-0: `kaasctl txn abort stuck-tx`".to_string(),
            "group \"billing\" is blocked behind open transactions: 2 records held back (lag 2)".to_string(),
        ],
    );
    let s = render_text(&app, 160, 45);
    assert!(s.contains("Needs attention (1 problem(s), 4 warning(s))"), "{s}");
    assert!(s.contains("! 1 marker entries queued for broker 2"), "{s}");
    assert!(s.contains("• broker 1 is stale"), "{s}");
    assert!(s.contains("broker 1   stale  lease 6.0s"), "{s}");
    // Too little room: the rest is counted, not cut off silently.
    let s = render_text(&app, 100, 19);
    assert!(s.contains(" more"), "{s}");
}

#[test]
fn the_status_line_never_cuts_a_result() {
    let d = tempfile::tempdir().unwrap();
    fixture(d.path());
    let (mut app, _) = app_for(d.path());
    app.on_key(key(KeyCode::Char('2')));
    let result = "aborted a-transactional-id-of-some-length: Ongoing -> CompleteAbort (epoch 4 -> 5), markers written to 12 partitions";
    app.status = Some(result.into());
    for width in [60, 80, 120, 250] {
        let s = render_text(&app, width, 30);
        let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(result), "{width} columns:\n{s}");
    }
}

#[test]
fn a_pin_whose_entry_says_the_transaction_ended_is_hanging() {
    let d = tempfile::tempdir().unwrap();
    let v = fixture(d.path());
    // The coordinator says stuck-tx committed, but orders-0 still has it open: a
    // marker that never landed. Not an open transaction with time left.
    put(
        &v,
        entry("stuck-tx", 7, TxnState::CompleteCommit, &[("orders", 0)], NOW - 100_000),
    );
    let (mut app, _) = app_for(d.path());
    let items = app.snap.needs_attention();
    let first = &items[0];
    assert_eq!(first.severity, super::data::Severity::Problem, "{items:?}");
    assert!(
        first.text.starts_with("producer 7 (hanging: \"stuck-tx\"'s coordinator entry has no open transaction of it, it is CompleteCommit there)"),
        "{items:?}"
    );
    assert!(first.text.ends_with("`kaasctl txn repair --fix`"), "{items:?}");
    app.on_key(key(KeyCode::Char('5')));
    let s = screen(&app);
    let line = s.lines().find(|l| l.contains("orders-0")).unwrap();
    assert!(
        line.contains("producer 7 (hanging: stuck-tx is CompleteCommit"),
        "{line}"
    );
}
