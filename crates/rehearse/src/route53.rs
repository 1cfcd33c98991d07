//! Route 53's `GetHealthCheckStatus`, signed with AWS's own signer and read without the SDK:
//! `GET /2013-04-01/healthcheck/<id>/status` on the global endpoint, signed for `us-east-1`
//! ("Route 53 API Reference", GetHealthCheckStatus). Each checker's last observation comes
//! back; the check is healthy when more than 18% of them report success ("If more than 18% of
//! health checkers report that an endpoint is healthy, Route 53 considers it healthy",
//! Route 53 Developer Guide, "How Amazon Route 53 determines whether a health check is
//! healthy"). `GetHealthCheckStatus` answers for endpoint checks only, not calculated ones.

use crate::{Error, Result};
use std::sync::Arc;
use std::time::Duration;
use wsdr_secrets::sigv4::Credentials;
use wsdr_secrets::transport::Endpoint;

/// Route 53's global endpoint, and the Region its requests are signed for.
pub const ENDPOINT: &str = "https://route53.amazonaws.com";
pub const SIGNING_REGION: &str = "us-east-1";

/// The share of checkers that must report success, exclusive (Route 53's rule).
pub const HEALTHY_SHARE: f64 = 0.18;

/// One check's observations: how many checkers report success, of how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observations {
    pub success: usize,
    pub total: usize,
}

impl Observations {
    /// Healthy as Route 53 counts it (none observed: not healthy).
    pub fn healthy(self) -> bool {
        self.total > 0 && self.success as f64 > HEALTHY_SHARE * self.total as f64
    }

    /// Read a `GetHealthCheckStatusResponse`: every `<Status>` of every observation; a status
    /// that starts with `Success` is a success ("Success: HTTP Status Code 200. ...").
    pub fn of_response(xml: &str) -> Result<Self> {
        if !xml.contains("GetHealthCheckStatusResponse") {
            return Err(Error::Peer(format!(
                "not a GetHealthCheckStatus answer: {}",
                xml.chars().take(200).collect::<String>()
            )));
        }
        let statuses: Vec<&str> = xml
            .split("<Status>")
            .skip(1)
            .filter_map(|rest| rest.split("</Status>").next())
            .collect();
        Ok(Self {
            success: statuses
                .iter()
                .filter(|s| s.trim_start().starts_with("Success"))
                .count(),
            total: statuses.len(),
        })
    }
}

/// A Route 53 reader with its credentials.
pub struct HealthCheckStatus {
    endpoint: String,
    credentials: Credentials,
    crypto: Arc<rustls::crypto::CryptoProvider>,
}

impl std::fmt::Debug for HealthCheckStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCheckStatus")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl HealthCheckStatus {
    /// `endpoint`: [`ENDPOINT`], or a local peer's URL (a dry run).
    pub fn new(endpoint: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            endpoint: endpoint.into(),
            credentials,
            crypto: Arc::new(rustls::crypto::ring::default_provider()),
        }
    }

    /// The observations of health check `id`.
    pub async fn observations(&self, id: &str) -> Result<Observations> {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(Error::Setting(format!("`{id}` is not a health check id")));
        }
        let path = format!("/2013-04-01/healthcheck/{id}/status");
        let url = format!("{}{path}", self.endpoint.trim_end_matches('/'));
        let endpoint = Endpoint::parse(&url, self.crypto.clone()).map_err(Error::Peer)?;
        let headers = wsdr_secrets::sigv4::sign_get(
            &endpoint.authority(),
            &path,
            &self.credentials,
            SIGNING_REGION,
            "route53",
            std::time::SystemTime::now(),
        )
        .map_err(Error::Peer)?;
        let answer = endpoint
            .get_with(Duration::from_secs(10), &headers)
            .await
            .map_err(|e| Error::Peer(format!("GetHealthCheckStatus {id}: {e}")))?;
        if !answer.status.is_success() {
            return Err(Error::Peer(format!(
                "GetHealthCheckStatus {id}: HTTP {}: {}",
                answer.status,
                answer.body.chars().take(300).collect::<String>()
            )));
        }
        Observations::of_response(&answer.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(statuses: &[&str]) -> String {
        let observations: String = statuses
            .iter()
            .map(|s| {
                format!(
                    "<HealthCheckObservation><Region>us-east-1</Region><IPAddress>192.0.2.1</IPAddress>\
                     <StatusReport><Status>{s}</Status><CheckedTime>2026-12-06T00:00:00Z</CheckedTime></StatusReport>\
                     </HealthCheckObservation>"
                )
            })
            .collect();
        format!(
            "<?xml version=\"1.0\"?><GetHealthCheckStatusResponse xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">\
             <HealthCheckObservations>{observations}</HealthCheckObservations></GetHealthCheckStatusResponse>"
        )
    }

    #[test]
    fn more_than_18_percent_of_checkers_reporting_success_is_healthy() {
        let ok = "Success: HTTP Status Code 200. Resolved IP: 192.0.2.1. OK";
        let bad = "Failure: The string `verdict=serve` did not appear in the first 5120 bytes";
        // 2 of 8 (25%) healthy; 1 of 8 (12.5%) not; 0 of 0 not.
        let two = Observations::of_response(&response(&[ok, ok, bad, bad, bad, bad, bad, bad]));
        assert_eq!(
            two.as_ref().ok(),
            Some(&Observations {
                success: 2,
                total: 8
            })
        );
        assert!(two.is_ok_and(Observations::healthy));
        let one = Observations::of_response(&response(&[ok, bad, bad, bad, bad, bad, bad, bad]));
        assert!(one.is_ok_and(|o| !o.healthy()));
        assert!(Observations::of_response(&response(&[])).is_ok_and(|o| !o.healthy()));
        assert!(
            Observations::of_response("<Error><Code>NoSuchHealthCheck</Code></Error>").is_err()
        );
    }
}
