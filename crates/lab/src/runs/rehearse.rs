//! `wsdr rehearse` against a running lab: the rehearsal engine (`wsdr_rehearse`) with the lab's
//! control API as its deployment. The lab deploys the rehearsal pair as template.yaml does
//! (`world::rehearsal`): the same checks on the health functions' `/rehearsal/*` paths, read
//! by the same checkers, and the test name's answer from its own caching resolver.

use crate::world::control::ControlClient;
use crate::world::rehearsal::RehearsalState;
use crate::world::RegionId;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::time::Duration;
use wsdr_rehearse::{Answer, Error, Observation, Result, Settings, Target, View};

/// A running lab, through its control API.
#[derive(Debug)]
pub struct LabTarget {
    client: ControlClient,
}

impl LabTarget {
    pub fn new(client: ControlClient) -> Self {
        Self { client }
    }

    /// The rehearsal's settings on this lab's clock: one AWS second lasts 1/scale seconds;
    /// the pair looked at every AWS second.
    pub async fn settings(&self, dry_run: bool) -> Result<Settings> {
        let (status, body) = self.client.get("/api/config").await.map_err(peer)?;
        if status != 200 {
            return Err(Error::Peer(format!(
                "GET /api/config: HTTP {status}: {body}"
            )));
        }
        let config: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| Error::Peer(format!("/api/config: {e}")))?;
        let scale = config["time_scale"]
            .as_f64()
            .filter(|s| *s > 0.0)
            .ok_or_else(|| Error::Peer("/api/config has no time_scale".into()))?;
        Ok(Settings {
            aws_second: Duration::from_secs_f64(1.0 / scale),
            poll: Duration::from_secs(1),
            dry_run,
            ..Settings::aws()
        })
    }

    async fn state(&self) -> Result<RehearsalState> {
        let (status, body) = self.client.get("/api/rehearsal").await.map_err(peer)?;
        match status {
            200 => {
                serde_json::from_str(&body).map_err(|e| Error::Peer(format!("/api/rehearsal: {e}")))
            }
            _ => Err(Error::Peer(format!(
                "GET /api/rehearsal: HTTP {status}: {body}"
            ))),
        }
    }
}

fn peer(error: anyhow::Error) -> Error {
    Error::Peer(format!("the lab's control API: {error:#}"))
}

#[async_trait]
impl Target for LabTarget {
    async fn check_statuses(&self) -> Result<BTreeMap<String, bool>> {
        Ok(self.state().await?.checks)
    }

    async fn write(&self, view: View, serve: bool) -> Result<()> {
        let body = serde_json::json!({"view": view, "serve": serve}).to_string();
        let (status, answer) = self
            .client
            .post_json("/api/rehearsal/verdict", &body)
            .await
            .map_err(peer)?;
        match status {
            200..=299 => Ok(()),
            _ => Err(Error::Peer(format!(
                "writing the {view:?} rehearsal verdict: HTTP {status}: {answer}"
            ))),
        }
    }

    async fn observe(&self) -> Result<Observation> {
        let state = self.state().await?;
        Ok(Observation {
            primary_healthy: state.primary_healthy,
            answer: match state.answer {
                RegionId::Primary => Answer::Primary,
                RegionId::Secondary => Answer::Secondary,
            },
        })
    }
}
