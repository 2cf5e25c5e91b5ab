//! SaslHandshake (key 17) once a connection needs none: on a listener without SASL, or
//! after the connection authenticated. The exchange itself is the connection's
//! ([`crate::sasl`]); here it is ILLEGAL_SASL_STATE, as Kafka answers.

use super::RequestContext;
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 1;

pub async fn handle(_broker: &Arc<Broker>, _ctx: &RequestContext, _req: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}
