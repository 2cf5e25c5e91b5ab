//! SaslAuthenticate (key 36) once a connection needs none: on a listener without
//! SASL, or after the connection authenticated and without a SaslHandshake v1 first
//! (a re-authentication, KIP-368, starts with one). The exchange itself is the
//! connection's ([`crate::sasl`], [`crate::server`]).

use super::{sb, RequestContext};
use crate::broker::Broker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 2;

pub async fn handle(
    _broker: &Arc<Broker>,
    ctx: &RequestContext,
    _req: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(sb(format!(
            "no SASL exchange is due on listener {} for {}",
            ctx.listener, ctx.principal
        ))))
}
