//! The REQUEST authorizer's answer, in the exact shape API Gateway reads.

use crate::verify::Identity;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Statement {
    #[serde(rename = "Action")]
    pub action: String,
    #[serde(rename = "Effect")]
    pub effect: String,
    #[serde(rename = "Resource")]
    pub resource: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyDocument {
    #[serde(rename = "Version")]
    pub version: String,
    #[serde(rename = "Statement")]
    pub statement: Vec<Statement>,
}

/// `{"principalId":..,"policyDocument":{..},"context":{..}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizerResponse {
    pub principal_id: String,
    pub policy_document: PolicyDocument,
    /// String values only: API Gateway passes them to the handler as
    /// `requestContext.authorizer.<key>`.
    pub context: BTreeMap<String, String>,
}

impl AuthorizerResponse {
    /// Allow `execute-api:Invoke` on exactly `method_arn` (the `$connect` route's ARN).
    pub fn allow(identity: &Identity, method_arn: &str) -> Self {
        let mut context = BTreeMap::new();
        context.insert("sub".to_owned(), identity.sub.clone());
        context.insert("iss".to_owned(), identity.issuer.clone());
        context.insert("canary".to_owned(), identity.canary.to_string());
        Self::new(&identity.sub, "Allow", method_arn, context)
    }

    /// Deny. The resource is the method ARN when known; `*` otherwise.
    pub fn deny(method_arn: Option<&str>) -> Self {
        Self::new(
            "unauthorized",
            "Deny",
            method_arn.unwrap_or("*"),
            BTreeMap::new(),
        )
    }

    fn new(
        principal: &str,
        effect: &str,
        resource: &str,
        context: BTreeMap<String, String>,
    ) -> Self {
        Self {
            principal_id: principal.to_owned(),
            policy_document: PolicyDocument {
                version: "2012-10-17".into(),
                statement: vec![Statement {
                    action: "execute-api:Invoke".into(),
                    effect: effect.into(),
                    resource: resource.into(),
                }],
            },
            context,
        }
    }

    pub fn is_allow(&self) -> bool {
        self.policy_document
            .statement
            .iter()
            .all(|s| s.effect == "Allow")
    }
}
