//! Issue 25 item 4: an fsync error on a partition log fails the partition. After EIO
//! the kernel may drop the dirty pages (on NFS: leave a hole) while the process still
//! holds the records in memory; an idempotent retry must not then be answered as a
//! duplicate over the gap. The partition is opened again from its files instead.
//! Its own test binary: the failpoint is process-wide.

use kaas_core::batch::{build_batch, validate_all};
use kaas_core::partition::AppendOutcome;
use kaas_server::broker::Broker;

mod support;
use support::broker;

/// What a client's idempotent produce with acks=all gets: the append, then the wait
/// for durability (as the Produce handler does). Ok: acknowledged.
async fn produce(b: &Broker, batch: &[u8]) -> Result<AppendOutcome, String> {
    let p = match b.topic("t").unwrap().partition(0).unwrap() {
        Ok(p) => p.clone(),
        Err(o) => return Err(o.to_string()),
    };
    let mut records = batch.to_vec();
    let headers = validate_all(&records).unwrap();
    let (outcome, _) = b.append(&p, &mut records, &headers, None).map_err(|e| e.to_string())?;
    let next = p.log_end_offset();
    p.wait_durable(next).await.map_err(|e| e.to_string())?;
    Ok(outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_fsync_fails_the_partition_and_the_retry_is_written_again() {
    // This binary has this one test and nothing has read the failpoints yet.
    std::env::set_var("KAAS_FAILPOINTS", "log-fsync=error*1");
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let pid = 4000;
    let batch = build_batch(0, 1, Some((pid, 0, 0)), 0, &[(None, Some(b"only"))]);
    let (segment, before) = {
        let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
        let state = p.state();
        let seg = state.log.segments().last().unwrap().log_path().to_path_buf();
        let len = std::fs::metadata(&seg).unwrap().len();
        (seg, len)
    };

    let first = produce(&b, &batch).await;
    assert!(first.is_err(), "the fsync failed: not acknowledged ({first:?})");
    // Linux reports a writeback error once per open file: a second fsync of the same
    // file succeeds over the lost pages. The failure is sticky instead: nothing more
    // is confirmed by this copy of the partition (another waiter, the flusher,
    // ListOffsets).
    let failed = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let again = failed.wait_durable(failed.log_end_offset()).await;
    assert!(
        again.is_err(),
        "a later wait is not confirmed over the failure ({again:?})"
    );
    assert_eq!(failed.confirmed_end(), 0);
    drop(failed);
    // The kernel dropped the dirty pages: the record never reached the disk.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(before)
        .unwrap();

    // The client retries until it is acknowledged; between tries the volume sync runs.
    let mut answers = Vec::new();
    for _ in 0..10 {
        let answer = produce(&b, &batch).await;
        answers.push(format!("{answer:?}"));
        if answer.is_ok() {
            break;
        }
        tokio::task::block_in_place(|| b.sync_with_volume());
    }
    assert!(answers.last().unwrap().starts_with("Ok"), "{answers:?}");

    // What was acknowledged is on disk: a broker opening the files finds it.
    drop(b);
    let b = broker(dir.path());
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    assert_eq!(
        p.log_end_offset(),
        1,
        "the acknowledged record is in the log (answers: {answers:?})"
    );
}
