//! What the failpoint test binaries share (each is a binary of its own: a failpoint is
//! process-wide).

use kaas_server::broker::Broker;
use std::sync::Arc;

/// A broker with the default flags on the volume at `dir`.
pub fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let config =
        <kaas_server::config::Config as clap::Parser>::parse_from(["kaas-server", "--data-dir", dir.to_str().unwrap()]);
    Broker::open(config, kaas_server::listeners::Endpoints::plaintext("127.0.0.1", 9092)).unwrap()
}
