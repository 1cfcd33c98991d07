use crate::deny::DenyReason;
use crate::policy::AuthorizerResponse;
use crate::verify::Verifier;
use crate::Config;
use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use lambda_runtime::LambdaEvent;

/// The Lambda: a verifier built once per cold start.
#[derive(Debug)]
pub struct Authorizer {
    verifier: Verifier,
    subprotocol: String,
}

/// Where the token came from, for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    QueryString,
    Subprotocol,
}

/// The token: `?token=` first, else the first `Sec-WebSocket-Protocol` entry that is not our
/// protocol name (`Sec-WebSocket-Protocol: wsdr, <token>`).
pub fn token_from_request<'a>(
    request: &'a ApiGatewayCustomAuthorizerRequestTypeRequest,
    subprotocol: &str,
) -> Option<(&'a str, TokenSource)> {
    if let Some(token) = request.query_string_parameters.first("token") {
        return Some((token, TokenSource::QueryString));
    }
    let header = request
        .headers
        .get("sec-websocket-protocol")?
        .to_str()
        .ok()?;
    header
        .split(',')
        .map(str::trim)
        .find(|p| !p.is_empty() && *p != subprotocol)
        .map(|t| (t, TokenSource::Subprotocol))
}

impl Authorizer {
    pub async fn new(config: &Config) -> Self {
        Self {
            verifier: Verifier::new(config).await,
            subprotocol: config.subprotocol.clone(),
        }
    }

    /// The authorizer of a cold start whose JWKS are fetched by `fetcher` (the lab's
    /// identity provider, in its Region).
    pub async fn with_jwks_fetcher(
        config: &Config,
        fetcher: std::sync::Arc<dyn crate::jwks::FetchJwks>,
    ) -> Self {
        Self {
            verifier: Verifier::with_fetcher(config, fetcher).await,
            subprotocol: config.subprotocol.clone(),
        }
    }

    /// Judge token times by `now_secs` instead of the system clock (the lab's simulations).
    pub fn with_clock(mut self, now_secs: crate::verify::NowSecs) -> Self {
        self.verifier.set_clock(now_secs);
        self
    }

    pub async fn handle(
        &self,
        event: LambdaEvent<ApiGatewayCustomAuthorizerRequestTypeRequest>,
    ) -> Result<AuthorizerResponse, lambda_runtime::Error> {
        Ok(self.authorize(&event.payload).await)
    }

    /// Allow or Deny. Logs the outcome and its reason, never the token.
    pub async fn authorize(
        &self,
        request: &ApiGatewayCustomAuthorizerRequestTypeRequest,
    ) -> AuthorizerResponse {
        let method_arn = request.method_arn.as_deref();
        let request_id = request.request_context.request_id.as_deref().unwrap_or("-");
        let Some(method_arn) = method_arn.filter(|arn| arn.starts_with("arn:")) else {
            tracing::warn!(request_id, "deny: event has no method ARN");
            return AuthorizerResponse::deny(None);
        };
        let (token, source) = match token_from_request(request, &self.subprotocol) {
            Some(found) => found,
            None => return self.deny(method_arn, request_id, DenyReason::MissingToken, None),
        };
        match self.verifier.verify(token).await {
            Ok(identity) => {
                tracing::info!(request_id, user = %identity.sub, canary = identity.canary, source = ?source, "allow");
                AuthorizerResponse::allow(&identity, method_arn)
            }
            Err(reason) => self.deny(method_arn, request_id, reason, Some(source)),
        }
    }

    fn deny(
        &self,
        method_arn: &str,
        request_id: &str,
        reason: DenyReason,
        source: Option<TokenSource>,
    ) -> AuthorizerResponse {
        tracing::warn!(request_id, %reason, source = ?source, "deny");
        AuthorizerResponse::deny(Some(method_arn))
    }
}
