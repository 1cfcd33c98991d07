//! The rehearsal against AWS: the rehearsal verdicts written with `PutItem` in each Region's
//! replica of the state table (the primary's own view in the primary's Region, the judge's in
//! the secondary's: where the health function that serves each reads it), the checks read
//! with Route 53's `GetHealthCheckStatus` ([`crate::route53`]), and the test name resolved by
//! the operating system's resolver, as a client's would.
//!
//! With local endpoints (`--dynamodb-endpoint`, `--route53-endpoint`: DynamoDB Local and a
//! local Route 53 peer) it runs the same calls against them with placeholder credentials: the
//! dry run `make test` makes.

use crate::route53::{HealthCheckStatus, Observations};
use crate::{Answer, Error, Observation, Result, Target, View};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use wsdr_core::HealthLedger;

/// What a rehearsal in AWS reads and writes (the stacks' outputs; `make rehearse` reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    pub primary_region: String,
    pub secondary_region: String,
    /// The state table (a global table: one name in both Regions).
    pub state_table: String,
    /// The primary's API id (the verdicts' key).
    pub primary_api_id: String,
    /// Health check ids by the template's names: the three the failover needs
    /// ([`crate::REQUIRED_CHECKS`]) and the rehearsal pair's `RehearsalVerdictCheck` and
    /// `RehearsalSelfCheck`.
    pub checks: BTreeMap<String, String>,
    /// The test name, and the two Regions' regional domain names its records point at.
    pub rehearsal_name: String,
    pub primary_target: String,
    pub secondary_target: String,
    /// Local peers instead of AWS's endpoints (a dry run).
    pub dynamodb_endpoint: Option<String>,
    pub route53_endpoint: Option<String>,
}

/// The rehearsal pair's two view checks.
pub const REHEARSAL_CHECKS: [&str; 2] = ["RehearsalVerdictCheck", "RehearsalSelfCheck"];

/// A deployment in AWS.
pub struct AwsTarget {
    config: AwsConfig,
    route53: HealthCheckStatus,
    tables: [wsdr_aws::HealthRecords; 2],
}

impl std::fmt::Debug for AwsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsTarget")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AwsTarget {
    /// Clients for both Regions and Route 53, with the environment's credentials (or
    /// placeholders for local peers).
    pub async fn connect(config: AwsConfig) -> Result<Self> {
        let local = config.dynamodb_endpoint.is_some() || config.route53_endpoint.is_some();
        let (credentials, sdk) = if local {
            (
                wsdr_secrets::sigv4::Credentials {
                    access_key_id: "local".into(),
                    secret_access_key: "local".into(),
                    session_token: None,
                },
                None,
            )
        } else {
            let sdk = wsdr_aws::load_sdk_config()
                .await
                .map_err(|e| Error::Setting(format!("the AWS configuration: {e}")))?;
            (credentials_of(&sdk).await?, Some(sdk))
        };
        let table = |region: &str| {
            let client = match (&config.dynamodb_endpoint, &sdk) {
                (Some(endpoint), _) => wsdr_aws::local::dynamo_client(endpoint, region),
                (None, Some(sdk)) => wsdr_aws::dynamo_client(
                    &sdk.to_builder()
                        .region(wsdr_aws::Region::new(region.to_owned()))
                        .build(),
                ),
                (None, None) => wsdr_aws::local::dynamo_client("http://127.0.0.1:8000", region),
            };
            wsdr_aws::HealthRecords::new(client, &config.state_table)
        };
        let tables = [
            table(&config.primary_region),
            table(&config.secondary_region),
        ];
        let route53 = HealthCheckStatus::new(
            config
                .route53_endpoint
                .clone()
                .unwrap_or_else(|| crate::route53::ENDPOINT.to_owned()),
            credentials,
        );
        Ok(Self {
            config,
            route53,
            tables,
        })
    }

    async fn observations(&self, name: &str) -> Result<Observations> {
        let id = self
            .config
            .checks
            .get(name)
            .ok_or_else(|| Error::Setting(format!("no health check id for {name}")))?;
        self.route53.observations(id).await
    }
}

async fn credentials_of(sdk: &wsdr_aws::SdkConfig) -> Result<wsdr_secrets::sigv4::Credentials> {
    use aws_credential_types::provider::ProvideCredentials;
    let provider = sdk
        .credentials_provider()
        .ok_or_else(|| Error::Setting("no AWS credentials in the environment".into()))?;
    let found = provider
        .provide_credentials()
        .await
        .map_err(|e| Error::Setting(format!("AWS credentials: {e}")))?;
    Ok(wsdr_secrets::sigv4::Credentials {
        access_key_id: found.access_key_id().to_owned(),
        secret_access_key: found.secret_access_key().to_owned(),
        session_token: found.session_token().map(str::to_owned),
    })
}

async fn addresses(name: &str) -> Option<HashSet<IpAddr>> {
    let found = tokio::net::lookup_host((name, 443)).await.ok()?;
    let addresses: HashSet<IpAddr> = found.map(|a| a.ip()).collect();
    (!addresses.is_empty()).then_some(addresses)
}

#[async_trait]
impl Target for AwsTarget {
    async fn check_statuses(&self) -> Result<BTreeMap<String, bool>> {
        let mut statuses = BTreeMap::new();
        for name in crate::REQUIRED_CHECKS.iter().chain(REHEARSAL_CHECKS.iter()) {
            if self.config.checks.contains_key(*name) {
                statuses.insert((*name).to_owned(), self.observations(name).await?.healthy());
            }
        }
        Ok(statuses)
    }

    async fn write(&self, view: View, serve: bool) -> Result<()> {
        let table = match view {
            View::Inside => &self.tables[0],
            View::Judge => &self.tables[1],
        };
        let now = wsdr_core::Clock::now_ms(&wsdr_core::SystemClock);
        table
            .put_verdict(&self.config.primary_api_id, view.source(), serve, now)
            .await?;
        Ok(())
    }

    async fn observe(&self) -> Result<Observation> {
        let mut primary_healthy = false;
        for name in REHEARSAL_CHECKS {
            primary_healthy |= self.observations(name).await?.healthy();
        }
        let (answered, primary, secondary) = tokio::join!(
            addresses(&self.config.rehearsal_name),
            addresses(&self.config.primary_target),
            addresses(&self.config.secondary_target),
        );
        let meets = |target: &Option<HashSet<IpAddr>>| {
            answered
                .as_ref()
                .zip(target.as_ref())
                .is_some_and(|(a, t)| !a.is_disjoint(t))
        };
        let answer = if meets(&primary) {
            Answer::Primary
        } else if meets(&secondary) {
            Answer::Secondary
        } else {
            Answer::Neither
        };
        Ok(Observation {
            primary_healthy,
            answer,
        })
    }
}
