//! ApiVersions (key 18): the table of `handlers::APIS`.

use super::{RequestContext, APIS};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 4;

fn api_keys() -> Vec<ApiVersion> {
    APIS.iter()
        .map(|&(key, min, max)| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}

pub async fn handle(_broker: &Arc<Broker>, _ctx: &RequestContext, _req: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The KIP-511 answer to a too-new ApiVersions request (encoded as v0).
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_keys())
}
