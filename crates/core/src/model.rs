//! The kit's values every app shares: who a user is, who sent a frame, a connection, and how
//! the state table replicates.

use crate::Error;

/// The authenticated user: the JWT `sub`. All user state is keyed by this, never by a
/// connection id (which changes on every reconnect and means nothing in the other Region).
/// Written as its string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct UserId(String);

impl UserId {
    /// Longest `sub` accepted, in characters (docs/AUTH.md). OIDC does not bound it;
    /// Cognito's are 36 characters. At 4 UTF-8 bytes a character the longest op-copy
    /// partition key (`OPS#<ns>#<topic>#<author>`) stays near 1.1 KB, under DynamoDB's
    /// 2,048-byte limit.
    pub const MAX_LEN: usize = 255;

    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        if value.is_empty() || value.chars().count() > Self::MAX_LEN {
            return Err(Error::BadRequest(format!(
                "user id must be 1 to {} characters",
                Self::MAX_LEN
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(Error::BadRequest(
                "user id contains a control character".into(),
            ));
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who sent a frame, as the authorizer verified it: the principal is (issuer, subject).
/// A user's state is keyed by their subject; a probe (the canary) may check liveness and read
/// an auction's public state, but never reads or writes anyone's bids. The two cannot share a
/// key: probe subjects are exactly the `canary:*` ones (the authorizer enforces it for both
/// issuers, and [`Principal::from_authorizer`] checks it again).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Principal {
    User(UserId),
    Probe(UserId),
}

impl Principal {
    /// The principal from the authorizer's context: its `sub` and its `canary` flag. A flag
    /// and a subject that disagree (a probe flag on a user's subject, or a `canary:*` subject
    /// without the flag) name no principal: refused rather than guessed.
    pub fn from_authorizer(sub: &str, probe: bool) -> Result<Self, Error> {
        let id = UserId::new(sub)?;
        match (
            probe,
            sub.starts_with(wsdr_protocol::limits::PROBE_SUBJECT_PREFIX),
        ) {
            (false, false) => Ok(Principal::User(id)),
            (true, true) => Ok(Principal::Probe(id)),
            _ => Err(Error::BadRequest(
                "the identity's issuer and subject disagree (probe subjects are canary:*)".into(),
            )),
        }
    }

    /// The subject, for logs and connection records.
    pub fn subject(&self) -> &UserId {
        match self {
            Principal::User(id) | Principal::Probe(id) => id,
        }
    }

    /// The user whose state this principal may read and write, if any.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Principal::User(id) => Some(id),
            Principal::Probe(_) => None,
        }
    }
}

impl From<&UserId> for Principal {
    fn from(user: &UserId) -> Self {
        Principal::User(user.clone())
    }
}

impl From<UserId> for Principal {
    fn from(user: UserId) -> Self {
        Principal::User(user)
    }
}

/// An API Gateway connection id. Regional: it means nothing in the other Region.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(String);

impl ConnectionId {
    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        if value.is_empty() || value.len() > 128 || value.chars().any(char::is_control) {
            return Err(Error::BadRequest("connection id is malformed".into()));
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the state table replicates between Regions, and therefore how bids are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Global Tables MREC (two Regions): each Region decides bids against what it has seen
    /// and keeps its own summary; Regions converge (docs/DATA_MODEL.md).
    #[default]
    Eventual,
    /// Global Tables MRSC (three Regions, or two and a witness): every bid is one conditional
    /// write on the auction's ledger head, checked against the latest version everywhere; a
    /// Region cut off from the quorum decides nothing.
    Strong,
}

impl Consistency {
    pub fn as_str(self) -> &'static str {
        match self {
            Consistency::Eventual => "eventual",
            Consistency::Strong => "strong",
        }
    }
}

impl std::str::FromStr for Consistency {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "eventual" => Ok(Consistency::Eventual),
            "strong" => Ok(Consistency::Strong),
            other => Err(Error::BadRequest(format!(
                "consistency must be `eventual` or `strong`, not `{other}`"
            ))),
        }
    }
}

impl std::fmt::Display for Consistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The summary label of a strong-mode ledger head: in strong mode one summary serves every
/// Region, so `versions` has this one entry.
pub const LEDGER: &str = "global";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consistency_mode_reads_back_from_its_name_and_nothing_else_parses() {
        for mode in [Consistency::Eventual, Consistency::Strong] {
            assert_eq!(mode.as_str().parse::<Consistency>().ok(), Some(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(Consistency::Eventual.as_str(), "eventual");
        assert_eq!(Consistency::Strong.as_str(), "strong");
        assert!(matches!(
            "mrsc".parse::<Consistency>(),
            Err(Error::BadRequest(message)) if message.contains("mrsc")
        ));
    }

    #[test]
    fn a_principal_is_a_user_or_a_probe_only_when_its_flag_and_subject_agree() {
        let user = Principal::from_authorizer("ann", false).expect("a user");
        assert_eq!(user.user().map(UserId::as_str), Some("ann"));
        assert_eq!(user.subject().to_string(), "ann");
        let probe = Principal::from_authorizer("canary:us-east-1", true).expect("a probe");
        assert_eq!(
            probe.user(),
            None,
            "a probe reads and writes nobody's state"
        );
        assert_eq!(probe.subject().as_str(), "canary:us-east-1");
        assert!(Principal::from_authorizer("canary:x", false).is_err());
        assert!(Principal::from_authorizer("ann", true).is_err());
    }
}
