//! Issue 26: an fsync that succeeds while an append fails and cuts the log back must
//! acknowledge nothing the cut removed. The waiter's fsync is held back by a failpoint
//! delay; meanwhile the next append's write fails (a failpoint, as EIO half-way), the
//! partition is failed and its log cut back to the last fsync that succeeded here,
//! removing the record the waiter waits for; the delayed fsync then succeeds over the
//! cut file. Seen failing (Ok over the cut record) without the check of `failed` under
//! `synced` in `Partition::wait_durable`.
//! Its own test binary: the failpoints are process-wide.

use kaas_core::batch::{build_batch, validate_all};

mod support;
use support::broker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fsync_that_succeeds_over_a_cut_back_log_acknowledges_nothing() {
    // This binary has this one test and nothing has read the failpoints yet. The
    // third segment write is the one that fails.
    std::env::set_var("KAAS_FAILPOINTS", "log-fsync=delay:2000,segment-write=error@3");
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let append = |value: &[u8]| {
        let mut batch = build_batch(0, 1, None, 0, &[(None, Some(value))]);
        let headers = validate_all(&batch).unwrap();
        b.append(&p, &mut batch, &headers, None).map(|_| ())
    };
    append(b"a").unwrap();
    p.wait_durable(1).await.unwrap();
    let segment = p.state().log.segments().last().unwrap().log_path().to_path_buf();
    let synced_len = std::fs::metadata(&segment).unwrap().len();
    append(b"b").unwrap();
    let started = std::time::Instant::now();
    let waiter = {
        let p = p.clone();
        tokio::spawn(async move { p.wait_durable(2).await })
    };
    // The waiter has taken its sync point (with "b") and sleeps before its fsync.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the waiter is in its fsync");
    let refused = tokio::task::block_in_place(|| append(b"c"));
    assert!(refused.is_err(), "the write failed");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        synced_len,
        "the log was cut back to its last good fsync, without \"b\""
    );
    // The delayed fsync now succeeds, over a file that no longer holds "b".
    let answer = waiter.await.unwrap();
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1900),
        "the waiter went through the delayed fsync (not a check of the failed log before it)"
    );
    assert!(
        answer.is_err(),
        "nothing the cut removed is acknowledged (got {answer:?})"
    );
    assert_eq!(p.confirmed_end(), 1, "nor confirmed to readers");
}
