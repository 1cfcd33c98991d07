//! The authorizer's token handling: a `$connect` request carrying arbitrary bytes as the
//! `?token=` value or in `Sec-WebSocket-Protocol`. Every input ends in Allow or Deny; a
//! token nobody signed with the configured secret is never allowed.
#![no_main]

use authorizer::{Authorizer, Config};
use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fn authorizer() -> &'static Authorizer {
    static AUTH: OnceLock<Authorizer> = OnceLock::new();
    AUTH.get_or_init(|| {
        let config = Config::from_lookup(|name| match name {
            "JWT_ISSUER" => Some("https://issuer.example".into()),
            "JWT_AUDIENCE" => Some("wsdr".into()),
            "JWT_HS256_SECRET" => Some("fuzz-secret-fuzz-secret-fuzz-secret!".into()),
            _ => None,
        })
        .expect("config");
        runtime().block_on(Authorizer::new(&config))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (in_header, token) = match text.split_first_char() {
        Some(('h', rest)) => (true, rest),
        Some((_, rest)) => (false, rest),
        None => return,
    };
    let event = if in_header {
        serde_json::json!({"type": "REQUEST", "methodArn": "arn:aws:execute-api:us-east-1:1:api/prod/$connect",
            "headers": {"sec-websocket-protocol": format!("wsdr, {token}")}})
    } else {
        serde_json::json!({"type": "REQUEST", "methodArn": "arn:aws:execute-api:us-east-1:1:api/prod/$connect",
            "queryStringParameters": {"token": token}})
    };
    let Ok(request) = serde_json::from_value::<ApiGatewayCustomAuthorizerRequestTypeRequest>(event) else {
        return;
    };
    let response = runtime().block_on(authorizer().authorize(&request));
    assert!(!response.is_allow(), "an unsigned token was allowed: {token:?}");
});

trait SplitFirst {
    fn split_first_char(&self) -> Option<(char, &str)>;
}

impl SplitFirst for str {
    fn split_first_char(&self) -> Option<(char, &str)> {
        let mut chars = self.chars();
        let first = chars.next()?;
        Some((first, chars.as_str()))
    }
}
