//! Signature Version 4 for one kind of request, a POST of a JSON body (the shape of every
//! awsJson1.1 API, Secrets Manager's among them), by AWS's own signer (`aws-sigv4`): the
//! signing, without the SDK's configuration loading, client construction and runtime, which
//! were what a cold start paid for (BENCHMARKS.md, section 3).

use std::time::SystemTime;

/// The credentials a request is signed with. Lambda puts the function's role credentials in
/// its environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key id names the credentials; the secret and the token are never printed.
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// What is signed: the request's host (with its port when not the scheme's default), its
/// path, its `X-Amz-Target` and its body. The content type is awsJson1.1's.
#[derive(Debug, Clone, Copy)]
pub struct JsonRequest<'a> {
    pub host: &'a str,
    pub path: &'a str,
    pub target: &'a str,
    pub body: &'a [u8],
}

/// The awsJson1.1 content type, signed and sent.
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// The headers to send beside `Content-Type` and `X-Amz-Target` (`Authorization`,
/// `X-Amz-Date`, and the session token when there is one), or why the request cannot be
/// signed (a host or header value that is not a valid URI or header).
pub fn sign(
    request: &JsonRequest<'_>,
    credentials: &Credentials,
    region: &str,
    service: &str,
    now: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let url = format!("https://{}{}", request.host, request.path);
    let headers = [
        ("content-type", CONTENT_TYPE),
        ("x-amz-target", request.target),
    ];
    let scope = Scope {
        credentials,
        region,
        service,
        now,
    };
    signed_headers("POST", &url, &headers, request.body, &scope)
}

/// The headers that sign a GET of `host` + `path_and_query` (a REST API's read, such as
/// Route 53's `GetHealthCheckStatus`): `Authorization`, `X-Amz-Date`, and the session token
/// when there is one.
pub fn sign_get(
    host: &str,
    path_and_query: &str,
    credentials: &Credentials,
    region: &str,
    service: &str,
    now: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let url = format!("https://{host}{path_and_query}");
    let scope = Scope {
        credentials,
        region,
        service,
        now,
    };
    signed_headers("GET", &url, &[], &[], &scope)
}

/// Who signs, for which Region and service, at which instant.
struct Scope<'a> {
    credentials: &'a Credentials,
    region: &'a str,
    service: &'a str,
    now: SystemTime,
}

/// One request signed by AWS's own signer: the headers it adds, lower-cased.
fn signed_headers(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    scope: &Scope<'_>,
) -> Result<Vec<(String, String)>, String> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings};
    let identity = aws_credential_types::Credentials::new(
        &scope.credentials.access_key_id,
        &scope.credentials.secret_access_key,
        scope.credentials.session_token.clone(),
        None,
        "wsdr-secrets",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(scope.region)
        .name(scope.service)
        .time(scope.now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("signing parameters: {e}"))?
        .into();
    let signable = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("unsignable request to {url}: {e}"))?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|e| format!("signing: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// A GET signed as AWS's Signature Version 4 test suite signs `get-vanilla` (GET / on
    /// example.amazonaws.com at 20150830T123600Z, service `service`): the same signature,
    /// over exactly `host` and `x-amz-date`; with a session token, the token is sent and signed.
    #[test]
    fn a_get_is_signed_as_the_sigv4_test_suite_signs_get_vanilla() {
        let mut credentials = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let sign = |credentials: &Credentials| {
            sign_get(
                "example.amazonaws.com",
                "/",
                credentials,
                "us-east-1",
                "service",
                now,
            )
            .unwrap()
        };
        let headers = sign(&credentials);
        let get = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get(&headers, "x-amz-date").as_deref(),
            Some("20150830T123600Z")
        );
        assert_eq!(
            get(&headers, "authorization").as_deref(),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                 SignedHeaders=host;x-amz-date, \
                 Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            )
        );
        credentials.session_token = Some("IQoJb3JpZ2luX2VjEXAMPLE".into());
        let with_token = sign(&credentials);
        assert_eq!(
            get(&with_token, "x-amz-security-token").as_deref(),
            Some("IQoJb3JpZ2luX2VjEXAMPLE")
        );
        let authorization = get(&with_token, "authorization").unwrap();
        assert!(
            authorization.contains("SignedHeaders=host;x-amz-date;x-amz-security-token"),
            "{authorization}"
        );
    }

    /// AWS's published example: the same key, date and scope give this signing key's
    /// signature shape; here, what matters is that every header AWS needs is there and that
    /// a session token is sent and signed.
    #[test]
    fn a_signed_request_carries_the_date_the_token_and_a_scoped_authorization() {
        let credentials = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("IQoJb3JpZ2luX2VjEXAMPLE//token+with/slashes=".into()),
        };
        let request = JsonRequest {
            host: "secretsmanager.us-east-1.amazonaws.com",
            path: "/",
            target: "secretsmanager.GetSecretValue",
            body: br#"{"SecretId":"wsdr/canary"}"#,
        };
        let now = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let headers = sign(&request, &credentials, "us-east-1", "secretsmanager", now).unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            get("x-amz-security-token"),
            credentials.session_token.as_deref()
        );
        let authorization = get("authorization").unwrap();
        assert!(authorization.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/secretsmanager/aws4_request, SignedHeaders="
        ));
        assert!(authorization.contains("x-amz-target"), "{authorization}");
        assert!(
            authorization.contains("x-amz-security-token"),
            "{authorization}"
        );
        // The same request an hour later is signed differently.
        let later = sign(
            &request,
            &credentials,
            "us-east-1",
            "secretsmanager",
            now + Duration::from_secs(3600),
        )
        .unwrap();
        assert_ne!(headers, later);
    }

    #[test]
    fn secrets_never_print() {
        let credentials = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "very-secret".into(),
            session_token: Some("token-secret".into()),
        };
        let printed = format!("{credentials:?}");
        assert!(printed.contains("AKIDEXAMPLE"));
        assert!(!printed.contains("very-secret") && !printed.contains("token-secret"));
    }
}
