//! Broker leases (`__cluster/brokers/<id>.json`): who is alive and where to reach it.

use crate::error::{read_versioned_json, VolumeError};
use crate::fsutil::write_json;
use crate::layout::Volume;
use serde::{Deserialize, Serialize};

crate::versioned!(BrokerLease, ClusterMeta);

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
    Ok(crate::error::json_files(&volume.brokers_dir())?
        .iter()
        .map(|p| read_versioned_json(p, "broker lease", LEASE_FORMAT_VERSION))
        .collect())
}

pub const CLUSTER_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMeta {
    pub version: u32,
    pub cluster_id: String,
    pub created_ms: i64,
}

/// The cluster id in `__cluster/cluster.json`, created on first start. Creation links a
/// fully written temporary file into place, so two brokers starting at once cannot
/// both win: the loser reads the winner's id.
pub fn cluster_id(volume: &Volume) -> Result<String, VolumeError> {
    let path = volume.cluster_dir().join("cluster.json");
    match read_versioned_json::<ClusterMeta>(&path, "cluster metadata", CLUSTER_FORMAT_VERSION) {
        Ok(m) => return Ok(m.cluster_id),
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    let meta = ClusterMeta {
        version: CLUSTER_FORMAT_VERSION,
        cluster_id: uuid::Uuid::new_v4().simple().to_string(),
        created_ms: crate::now_ms(),
    };
    let tmp = volume
        .cluster_dir()
        .join(format!("cluster.json.{}.tmp", std::process::id()));
    write_json(&tmp, &meta).map_err(|e| VolumeError::io(&tmp, e))?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            crate::fsutil::sync_dir(&volume.cluster_dir()).map_err(|e| VolumeError::io(&path, e))?;
            Ok(meta.cluster_id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_versioned_json::<ClusterMeta>(&path, "cluster metadata", CLUSTER_FORMAT_VERSION).map(|m| m.cluster_id)
        }
        Err(e) => Err(VolumeError::io(&path, e)),
    }
}
