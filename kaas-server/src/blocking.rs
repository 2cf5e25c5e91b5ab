//! Blocking file work (fsyncs, directory creation, whole-file reads) reached from
//! async request handlers. On the broker's multi-threaded runtime it runs through
//! `block_in_place`: the worker thread hands its other tasks to another thread first,
//! so a slow disk stalls only the request that needs it, never every connection or
//! the lease renewal. Elsewhere (single-threaded test runtimes, plain threads) it runs
//! inline.

/// Runs `f`, blocking, without holding up the runtime's other tasks.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
