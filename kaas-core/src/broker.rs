//! Broker leases (`__cluster/brokers/<id>.json`): who is alive and where to reach it.

use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use serde::{Deserialize, Serialize};

pub const LEASE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerLease {
    pub version: u32,
    pub broker_id: i32,
    pub host: String,
    pub port: u16,
    /// Changes at every process start, so a restarted broker is told apart.
    pub incarnation: String,
    pub started_ms: i64,
    pub heartbeat_ms: i64,
}

impl BrokerLease {
    pub fn write(&self, volume: &Volume) -> Result<(), VolumeError> {
        let path = volume.broker_lease(self.broker_id);
        write_json(&path, self).map_err(|e| VolumeError::io(&path, e))
    }
    pub fn read(volume: &Volume, id: i32) -> Result<BrokerLease, VolumeError> {
        read_versioned_json(&volume.broker_lease(id), "broker lease", LEASE_FORMAT_VERSION)
    }
    /// Alive when the last heartbeat is younger than `session_timeout_ms`.
    pub fn is_alive(&self, now_ms: i64, session_timeout_ms: i64) -> bool {
        now_ms - self.heartbeat_ms < session_timeout_ms
    }
}

/// Every lease file on the volume, unreadable ones as errors.
pub fn list_brokers(volume: &Volume) -> Result<Vec<Result<BrokerLease, VolumeError>>, VolumeError> {
    let dir = volume.brokers_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(VolumeError::io(&dir, e)),
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    Ok(paths
        .iter()
        .map(|p| read_versioned_json(p, "broker lease", LEASE_FORMAT_VERSION))
        .collect())
}
