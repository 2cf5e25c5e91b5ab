//! Blocking file work (fsyncs, directory creation, whole-file reads) reached from
//! async request handlers. On the broker's multi-threaded runtime it runs through
//! `block_in_place`: the worker thread hands its other tasks to another thread first,
//! so a slow disk stalls only the request that needs it, never every connection or
//! the lease renewal. Elsewhere (single-threaded test runtimes, plain threads) it runs
//! inline.
//!
//! Handing a worker's tasks to another thread costs a thread wake-up or two each
//! time: on this project's 2-core virtual machine, the three `block_in_place` calls of
//! every cross-broker transaction (queue entries written, notice's leadership check,
//! entries removed) took about a tenth of a 3-broker cluster's throughput
//! (docs/performance.md). Work on the hot paths that can hand over owned data goes to
//! the blocking pool instead ([`run_blocking_held`]: it ends before the caller's locks
//! are let go, even if the caller is dropped), and what memory alone can answer never
//! leaves the worker.

/// Runs `f`, blocking, without holding up the runtime's other tasks.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Runs `f` on the blocking pool and waits for it: for blocking file work reached
/// from an async task that can hand its closure over (owned data). Unlike
/// [`off_worker`], the worker keeps its place and runs other tasks meanwhile; the
/// pool's thread wakes this task when `f` is done. A pool that cannot run it (the
/// runtime shutting down) is an I/O error on `path()`.
async fn run_blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, kaas_core::error::VolumeError> + Send + 'static,
    path: impl FnOnce() -> std::path::PathBuf,
) -> Result<R, kaas_core::error::VolumeError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(kaas_core::error::VolumeError::io(path(), std::io::Error::other(e))),
    }
}

/// Runs `f` on the blocking pool and waits for it, for work that must not outlive
/// what its caller holds (a slot lock): should the awaiting future be dropped before
/// `f` ends (its caller cancelled: a connection aborted at shutdown), the drop waits
/// for `f` to end, so the caller's locks are let go only after it. A pool that cannot
/// run it (the runtime shutting down) is an I/O error on `path()`.
pub async fn run_blocking_held<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, kaas_core::error::VolumeError> + Send + 'static,
    path: impl FnOnce() -> std::path::PathBuf,
) -> Result<R, kaas_core::error::VolumeError> {
    /// Waits, when dropped, until the blocking work has ended (its end of the channel
    /// is dropped when `f` returns or unwinds, or when it never ran).
    struct EndOfWork(Option<std::sync::mpsc::Receiver<()>>);
    impl Drop for EndOfWork {
        fn drop(&mut self) {
            if let Some(ended) = self.0.take() {
                off_worker(|| {
                    let _ = ended.recv();
                });
            }
        }
    }
    let (running, ended) = std::sync::mpsc::sync_channel::<()>(0);
    let mut end = EndOfWork(Some(ended));
    let result = run_blocking(
        move || {
            let _running = running;
            f()
        },
        path,
    )
    .await;
    // Ended (the task's result is in): nothing to wait for.
    end.0 = None;
    result
}

/// `f` over every item, on at most `workers` threads at once (plain threads, scoped:
/// all done when it returns), results in the items' order. For blocking work that
/// waits on the disk more than it computes: a fail-over's partitions, each recovered
/// from its files (fsyncs, a CRC scan), side by side.
pub fn parallel_map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 || workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> = items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..workers.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every item was mapped (a panic in `f` propagates out of the scope)")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// A caller dropped while its blocking work runs (cancelled) waits for the work
    /// to end before anything it holds is let go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_blocking_work_is_waited_for_when_its_caller_is_dropped() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let started = std::sync::Arc::new(tokio::sync::Notify::new());
        let (d, s) = (done.clone(), started.clone());
        let work = super::run_blocking_held(
            move || {
                s.notify_one();
                std::thread::sleep(std::time::Duration::from_millis(300));
                d.store(true, Ordering::SeqCst);
                Ok(())
            },
            || "x".into(),
        );
        tokio::select! {
            _ = work => panic!("the work ended before its caller was dropped"),
            _ = started.notified() => {}
        }
        // `work` is dropped here, at the end of the select.
        assert!(done.load(Ordering::SeqCst), "the drop waited for the work to end");
        // Finished normally, nothing is waited for twice.
        assert_eq!(super::run_blocking_held(|| Ok(7), || "x".into()).await.unwrap(), 7);
    }

    #[test]
    fn parallel_map_keeps_the_order_and_bounds_the_threads() {
        let running = std::sync::atomic::AtomicUsize::new(0);
        let most = std::sync::atomic::AtomicUsize::new(0);
        let items: Vec<u64> = (0..40).collect();
        let out = super::parallel_map(&items, 4, |&i| {
            let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let most = most.into_inner();
        assert!((2..=4).contains(&most), "{most} at once");
    }
}
