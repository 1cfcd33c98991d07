//! AWS Signature Version 4 for one kind of request: a POST of a JSON body to an endpoint's
//! root, the shape of every awsJson1.1 API (Secrets Manager's among them). The algorithm is
//! AWS's published one (<https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html>):
//! a canonical request, a string to sign under a date/Region/service scope, and an HMAC-SHA256
//! chain from the secret key. The tests check every signature against AWS's own signer
//! (`aws-sigv4`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// The headers to send beside `Content-Type` and `X-Amz-Target`: `X-Amz-Date`, the session
/// token when there is one, and `Authorization`.
pub fn sign(
    request: &JsonRequest<'_>,
    credentials: &Credentials,
    region: &str,
    service: &str,
    now: SystemTime,
) -> Vec<(&'static str, String)> {
    let amz_date = amz_date(now);
    let date = &amz_date[..8];
    // Canonical headers: lower-case names, sorted, values trimmed (ours have no inner runs of
    // spaces to fold).
    let mut headers: Vec<(&'static str, &str)> = vec![
        ("content-type", CONTENT_TYPE),
        ("host", request.host.trim()),
        ("x-amz-date", &amz_date),
        ("x-amz-target", request.target.trim()),
    ];
    if let Some(token) = &credentials.session_token {
        headers.push(("x-amz-security-token", token.trim()));
    }
    headers.sort_by_key(|(name, _)| *name);
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = format!(
        "POST\n{path}\n\n{canonical_headers}\n{signed_headers}\n{payload}",
        path = canonical_path(request.path),
        payload = hex(&Sha256::digest(request.body)),
    );
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical_request.as_bytes()))
    );
    let key = [date, region, service, "aws4_request"].iter().fold(
        format!("AWS4{}", credentials.secret_access_key).into_bytes(),
        |key, part| hmac(&key, part.as_bytes()),
    );
    let signature = hex(&hmac(&key, string_to_sign.as_bytes()));
    let mut out = vec![(
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            credentials.access_key_id
        ),
    )];
    out.push(("x-amz-date", amz_date.clone()));
    if let Some(token) = &credentials.session_token {
        out.push(("x-amz-security-token", token.clone()));
    }
    out
}

/// The URI path as SigV4 wants it for every service but S3: each segment URI-encoded (our
/// endpoints' paths are `/` or plain segments; anything else is encoded, never dropped).
fn canonical_path(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.split('/')
        .map(uri_encode)
        .collect::<Vec<_>>()
        .join("/")
}

fn uri_encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length: new_from_slice cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

/// `YYYYMMDDTHHMMSSZ` in UTC. A clock before 1970 signs as 1970 (AWS then refuses the
/// request as skewed, which is the truth about such a clock).
pub fn amz_date(now: SystemTime) -> String {
    let seconds = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    let of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = u32::try_from(day_of_year - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn dates_are_utc_in_the_basic_format() {
        assert_eq!(amz_date(at(0)), "19700101T000000Z");
        // AWS's SigV4 examples sign at 2015-08-30 12:36:00 UTC.
        assert_eq!(amz_date(at(1_440_938_160)), "20150830T123600Z");
        // A leap day, and the last second of a century leap year.
        assert_eq!(amz_date(at(1_709_208_000)), "20240229T120000Z");
        assert_eq!(amz_date(at(978_307_199)), "20001231T235959Z");
        assert_eq!(amz_date(at(4_107_542_400)), "21000301T000000Z");
    }

    #[test]
    fn paths_are_encoded_per_segment() {
        assert_eq!(canonical_path(""), "/");
        assert_eq!(canonical_path("/"), "/");
        assert_eq!(canonical_path("/a b/c~d"), "/a%20b/c~d");
    }

    /// The signature AWS's own signer computes for the same request, credentials and time.
    fn aws_signature(
        request: &JsonRequest<'_>,
        credentials: &Credentials,
        region: &str,
        now: SystemTime,
    ) -> Vec<(String, String)> {
        use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
        let identity = aws_credential_types::Credentials::new(
            &credentials.access_key_id,
            &credentials.secret_access_key,
            credentials.session_token.clone(),
            None,
            "test",
        )
        .into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name("secretsmanager")
            .time(now)
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let url = format!("https://{}{}", request.host, request.path);
        let headers = [
            ("content-type", CONTENT_TYPE),
            ("x-amz-target", request.target),
        ];
        let signable = SignableRequest::new(
            "POST",
            &url,
            headers.into_iter(),
            SignableBody::Bytes(request.body),
        )
        .unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        let mut out: Vec<(String, String)> = instructions
            .headers()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn signatures_match_aws_own_signer() {
        let with_token = Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("IQoJb3JpZ2luX2VjEXAMPLE//token+with/slashes=".into()),
        };
        let without_token = Credentials {
            session_token: None,
            ..with_token.clone()
        };
        let body = br#"{"SecretId":"wsdr/jwt-hs256"}"#;
        let cases = [
            ("secretsmanager.us-east-1.amazonaws.com", "/", &body[..]),
            ("127.0.0.1:4566", "/", &body[..]),
            ("secretsmanager.eu-west-1.amazonaws.com", "/", &b"{}"[..]),
            ("localhost:8080", "/prefix/a%20b~c", &b""[..]),
        ];
        for credentials in [&with_token, &without_token] {
            for (i, (host, path, body)) in cases.iter().enumerate() {
                let region = if i == 2 { "eu-west-1" } else { "us-east-1" };
                let now = at(1_440_938_160 + 86_399 * i as u64);
                let request = JsonRequest {
                    host,
                    path,
                    target: "secretsmanager.GetSecretValue",
                    body,
                };
                let mut ours: Vec<(String, String)> =
                    sign(&request, credentials, region, "secretsmanager", now)
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect();
                ours.sort();
                assert_eq!(
                    ours,
                    aws_signature(&request, credentials, region, now),
                    "{host}{path}, token: {}",
                    credentials.session_token.is_some()
                );
            }
        }
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
