//! kaas-server: the broker. The network layer (`server`), one handler per Kafka API
//! (`handlers`), the consumer-group coordinator (`groups`) and the shared broker state
//! (`broker`). Every volume format is kaas-core's; nothing here writes a file itself.

pub mod alloc;
pub mod authz;
pub mod blocking;
pub mod broker;
pub mod cluster;
pub mod config;
pub mod groups;
pub mod handlers;
pub mod http;
pub mod listeners;
pub mod metrics;
pub mod peers;
pub mod quotas;
pub mod registry;
pub mod runtime;
pub mod sasl;
pub mod server;
pub mod tls;
pub mod txn_coordinator;

/// The log target of the fence and marker watchers (`RUST_LOG=info,kaas_server::watchers=debug`
/// shows each marker applied from the queue), whichever module they live in.
pub const WATCHERS_LOG_TARGET: &str = "kaas_server::watchers";

#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: alloc::GuardedAlloc = alloc::GuardedAlloc;
