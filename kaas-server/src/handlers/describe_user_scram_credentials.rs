//! DescribeUserScramCredentials (key 50): each user's SCRAM mechanisms and iteration
//! counts, from `__cluster/scram-credentials.json` (never a salt or key). No users
//! named: every user. An unknown user is RESOURCE_NOT_FOUND, a user named twice
//! DUPLICATE_RESOURCE, as Kafka answers.

use super::{sb, RequestContext};
use crate::broker::Broker;
use kaas_core::scram::Credentials;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse};
use std::sync::Arc;

pub const MIN: i16 = 0;
pub const MAX: i16 = 0;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // Kafka's check: DESCRIBE on the cluster; without an authorizer, the same rule as
    // changing credentials (the user list is what the made-up answers for unknown
    // users hide).
    if !broker.authz.may_see_credentials(ctx) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb(format!(
                "{} may not describe SCRAM credentials",
                ctx.principal
            ))));
    }
    let creds = match crate::blocking::off_worker(|| Credentials::read(&broker.volume)) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot read SCRAM credentials");
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::KafkaStorageError.code())
                .with_error_message(Some(sb(e.to_string())));
        }
    };
    let named: Vec<String> = req.users.iter().flatten().map(|u| u.name.to_string()).collect();
    let mut times_named: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for n in &named {
        *times_named.entry(n.as_str()).or_default() += 1;
    }
    // One result per user, also for a user named twice (as Kafka answers).
    let users: Vec<String> = if named.is_empty() {
        creds.users.keys().cloned().collect()
    } else {
        let mut seen = std::collections::HashSet::new();
        named.iter().filter(|n| seen.insert(n.as_str())).cloned().collect()
    };
    let results = users
        .into_iter()
        .map(|user| {
            let result = DescribeUserScramCredentialsResult::default().with_user(sb(user.clone()));
            if times_named.get(user.as_str()).is_some_and(|n| *n > 1) {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(sb(format!("user {user} is named more than once"))));
            }
            let mechanisms = creds.mechanisms_of(&user);
            if mechanisms.is_empty() {
                return result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(sb(format!(
                        "attempt to describe a user credential that does not exist: {user}"
                    ))));
            }
            result.with_credential_infos(
                mechanisms
                    .into_iter()
                    .map(|(m, iterations)| {
                        CredentialInfo::default()
                            .with_mechanism(m.code())
                            .with_iterations(iterations as i32)
                    })
                    .collect(),
            )
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
