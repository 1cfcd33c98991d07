//! The re-checks on AWS ([`crate::order::Checks`]): the judge's verdict in this Region's
//! replica of the state table (the item the health function answers `/primary` from), the
//! primary's own view at its health function URL (the request Route 53's checkers make), and
//! DNS as the function's resolver answers (an ordinary lookup, not Route 53's API, whose
//! control plane is in one Region).

use crate::order::Checks;
use async_trait::async_trait;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::{Clock, HealthLedger, VerdictAnswer, VerdictSource};

/// How long the primary's health function may take to answer (Route 53's checkers give it
/// four seconds to connect and two to answer).
const SELF_CHECK_TIMEOUT: Duration = Duration::from_secs(4);

/// What the re-checks read, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecheckConfig {
    /// `STATE_TABLE`: this Region's replica, where the judge's verdict is written.
    pub state_table: String,
    /// `PRIMARY_API_ID`: the primary's API (the verdict's key).
    pub primary_api_id: String,
    /// `PRIMARY_SELF_URL`: the primary's health function `/self` (unset or `none`: alarm
    /// checks, no function; the primary's own view is not checked).
    pub primary_self_url: Option<String>,
    /// `GLOBAL_NAME` and `DESTINATION_NAME`: the failover name, and the destination's regional
    /// name it must resolve to (by address) before anyone is moved through it.
    pub global_name: Option<String>,
    pub destination_name: Option<String>,
}

impl RecheckConfig {
    /// `None` without `STATE_TABLE` (a planned evacuator).
    pub fn from_env(
        env: &wsdr_lambda::env::Env<impl Fn(&str) -> Option<String>>,
    ) -> Result<Option<Self>, wsdr_lambda::env::EnvError> {
        let Some(state_table) = env.optional("STATE_TABLE") else {
            return Ok(None);
        };
        Ok(Some(Self {
            state_table,
            primary_api_id: env
                .optional("PRIMARY_API_ID")
                .ok_or(wsdr_lambda::env::EnvError::Missing("PRIMARY_API_ID"))?,
            primary_self_url: env.optional("PRIMARY_SELF_URL"),
            global_name: env.optional("GLOBAL_NAME"),
            destination_name: env.optional("DESTINATION_NAME"),
        }))
    }
}

/// The re-checks with their adapters.
pub struct AwsChecks {
    config: RecheckConfig,
    ledger: Arc<dyn HealthLedger>,
    clock: Arc<dyn Clock>,
    resolve: Arc<dyn Resolve>,
}

impl std::fmt::Debug for AwsChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsChecks")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Name resolution (the operating system's resolver in Lambda; a table in tests).
#[async_trait]
pub trait Resolve: Send + Sync {
    async fn addresses(&self, name: &str) -> Option<HashSet<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn addresses(&self, name: &str) -> Option<HashSet<IpAddr>> {
        let found = tokio::net::lookup_host((name, 443)).await.ok()?;
        let addresses: HashSet<IpAddr> = found.map(|a| a.ip()).collect();
        (!addresses.is_empty()).then_some(addresses)
    }
}

impl AwsChecks {
    pub fn new(config: RecheckConfig, ledger: Arc<dyn HealthLedger>) -> Self {
        Self {
            config,
            ledger,
            clock: Arc::new(wsdr_core::SystemClock),
            resolve: Arc::new(SystemResolver),
        }
    }

    /// Another clock and resolver (tests).
    pub fn with(mut self, clock: Arc<dyn Clock>, resolve: Arc<dyn Resolve>) -> Self {
        self.clock = clock;
        self.resolve = resolve;
        self
    }
}

#[async_trait]
impl Checks for AwsChecks {
    async fn judge_answer(&self) -> VerdictAnswer {
        let read = self
            .ledger
            .verdict(&self.config.primary_api_id, VerdictSource::Judge)
            .await
            .map_err(|error| tracing::warn!(%error, "the judge's verdict unreadable"));
        VerdictAnswer::of(read, self.clock.now_ms(), wsdr_core::STALE_AFTER_MS)
    }

    async fn primary_self_serves(&self) -> Option<bool> {
        let url = self.config.primary_self_url.as_deref()?;
        let endpoint = wsdr_secrets::transport::Endpoint::parse(
            url,
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .map_err(|error| tracing::warn!(%error, url, "PRIMARY_SELF_URL unusable"))
        .ok()?;
        match endpoint.get(SELF_CHECK_TIMEOUT).await {
            Ok(answer) => {
                Some(answer.status.is_success() && answer.body.contains(wsdr_core::SEARCH_STRING))
            }
            Err(error) => {
                tracing::info!(%error, "the primary's health function did not answer");
                None
            }
        }
    }

    async fn dns_answers_destination(&self) -> Option<bool> {
        let (global, destination) = (
            self.config.global_name.as_deref()?,
            self.config.destination_name.as_deref()?,
        );
        let (answered, expected) = tokio::join!(
            self.resolve.addresses(global),
            self.resolve.addresses(destination)
        );
        Some(!answered?.is_disjoint(&expected?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn the_system_resolver_answers_an_address_with_itself() {
        // An address literal: resolved without a query to any name server.
        let found = SystemResolver.addresses("127.0.0.1").await;
        assert_eq!(found, Some(HashSet::from(["127.0.0.1".parse().unwrap()])));
    }

    #[test]
    fn the_rechecks_debug_shows_their_configuration() {
        let config = RecheckConfig {
            state_table: "state".into(),
            primary_api_id: "prim4567ab".into(),
            primary_self_url: None,
            global_name: Some("ws.example.com".into()),
            destination_name: None,
        };
        let checks = AwsChecks::new(
            config,
            Arc::new(wsdr_core::memory::MemoryHealthLedger::default()),
        );
        let shown = format!("{checks:?}");
        assert!(
            shown.starts_with("AwsChecks { config: RecheckConfig {"),
            "{shown}"
        );
        assert!(
            shown.contains("prim4567ab") && shown.ends_with(".. }"),
            "{shown}"
        );
    }
}
