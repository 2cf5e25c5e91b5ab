//! Issue 26: Linux reports a writeback error once per open file, so after a failed
//! fsync of a segment, the next fsync of the same file (a roll's seal) returns Ok over
//! pages the disk never got. A seal after a failed fsync must fail instead: the
//! failure is sticky (`kaas_core::log::LogFile::sync`). Seen failing (the seal
//! succeeded) when the seal called `sync_all` on the file directly.
//! Its own test binary: the failpoint is process-wide.

use kaas_core::batch::{build_batch, validate_all};

mod support;
use support::broker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_after_a_failed_fsync_does_not_seal_the_segment_as_durable() {
    // This binary has this one test and nothing has read the failpoints yet: the
    // first fsync of a log file fails, as EIO would, once.
    std::env::set_var("KAAS_FAILPOINTS", "log-fsync=error*1");
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path());
    b.create_topic("t", 1, Default::default()).await.unwrap();
    let p = b.topic("t").unwrap().partition(0).unwrap().clone().unwrap();
    let mut batch = build_batch(0, 1, None, 0, &[(None, Some(b"lost"))]);
    let headers = validate_all(&batch).unwrap();
    b.append(&p, &mut batch, &headers, None).unwrap();
    let failed = p.wait_durable(1).await;
    assert!(failed.is_err(), "the fsync failed: {failed:?}");
    // A roll of the same log now (an append that was under way, a marker) seals the
    // segment with another fsync of the same file.
    let sealed = p.state().log.roll(kaas_core::now_ms());
    let err = sealed.expect_err("the seal must not succeed over the failed fsync");
    assert!(
        err.to_string().contains("an earlier fsync of this file failed"),
        "{err}"
    );
}
