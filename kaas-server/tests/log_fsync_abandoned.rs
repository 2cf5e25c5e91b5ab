//! A failed fsync of a partition log fails the partition (issue 25, rule 4) also when
//! nobody waits for it any more: an acks=all produce whose request timed out, or a
//! marker whose notice timed out, drops its wait while the fsync still runs on the
//! blocking pool. The failure was only recorded as `failed` then: the partition was
//! not retired, so it took acks=0/1 appends after the failed fsync, was never cut back
//! to what the disk has, and the volume sync (which opens again only retired
//! partitions) never opened it again — every later acks=all produce answered
//! KAFKA_STORAGE_ERROR until the process restarted. Found by a review (2026-12-06).
//! Its own test binary: the failpoint is process-wide.

use kaas_core::batch::{build_batch, validate_all};
use kaas_server::broker::AppendRejected;
use std::time::Duration;

mod support;
use support::broker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_fsync_nobody_waits_for_any_more_still_fails_and_reopens_the_partition() {
    // This binary has this one test and nothing has read the failpoints yet: every
    // fsync of a log takes 300 ms, and the first fails.
    std::env::set_var("KAAS_FAILPOINTS", "log-fsync=delay:300,log-fsync=error*1");
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let epoch = p.leader_epoch;
    let append = |p, value: &'static [u8]| {
        let mut records = build_batch(0, 1, None, 0, &[(None, Some(value))]);
        let headers = validate_all(&records).unwrap();
        b.append(p, &mut records, &headers, None).map(|_| ())
    };
    append(&p, b"lost").unwrap();

    // The request's timeout drops the wait; the fsync goes on, and fails.
    let waited = tokio::time::timeout(Duration::from_millis(50), p.wait_durable(1)).await;
    assert!(waited.is_err(), "the wait timed out: {waited:?}");
    tokio::time::sleep(Duration::from_millis(600)).await;

    // Nothing more is appended to this copy of the partition.
    let after = append(&p, b"after the failure");
    assert!(
        matches!(after, Err(AppendRejected::NotLeader)),
        "no append after a failed fsync: {after:?}"
    );
    assert_eq!(p.confirmed_end(), 0);

    // The volume sync opens it again from its files (once this copy's last reference,
    // which holds `owner.lock`, is gone), at a new leader epoch, with nothing no fsync
    // made durable.
    drop(p);
    let mut reopened = None;
    for _ in 0..5 {
        tokio::task::block_in_place(|| b.sync_with_volume());
        if let Some(Ok(p)) = b.topic("t").unwrap().partition(0) {
            reopened = Some(p.clone());
            break;
        }
    }
    let reopened = reopened.expect("the partition is opened again by the volume sync");
    assert!(
        reopened.leader_epoch > epoch,
        "opened again: leader epoch {} after {epoch}",
        reopened.leader_epoch
    );
    assert_eq!(reopened.log_end_offset(), 0, "cut back to what an fsync made durable");
}
