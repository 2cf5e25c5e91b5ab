//! Helpers shared by kaas-core's test binaries.

use kaas_core::txn::{init_producer_id, Actor, InitOutcome, TxnEntry};

/// A fresh entry for transactional id `id`, as InitProducerId creates it.
pub fn entry(id: &str) -> TxnEntry {
    match init_producer_id(None, id, 60_000, (-1, -1), 1, &Actor::Broker { id: 0 }, &mut || 7) {
        InitOutcome::Ready { entry, .. } => entry,
        other => panic!("{other:?}"),
    }
}
