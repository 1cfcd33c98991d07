//! The fail-over orders' log ([`wsdr_core::OrderLog`]) as one item per order in the
//! evacuator's Regional connections table: whichever delivery of an order claims it first
//! runs it, by a conditional put; a claim whose run died (older than the function's timeout,
//! never finished) may be taken over by a redelivery.
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | an order | `#order#<apiId>@<atMs>` | `ORDER` | claimedMs, done, expiresAt |

use crate::classify::classify;
use crate::schema::{EXPIRES_AT, PK, SK};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use wsdr_core::Result;

const ORDER_SK: &str = "ORDER";
/// How long an order's item is kept: a week (every redelivery is long over by then).
const ORDER_TTL_SECS: u64 = 7 * 24 * 60 * 60;

/// [`wsdr_core::OrderLog`] on a Regional table.
#[derive(Debug, Clone)]
pub struct DynamoOrderLog {
    client: Client,
    table: String,
}

impl DynamoOrderLog {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn key(id: &str) -> AttributeValue {
        AttributeValue::S(format!("#order#{id}"))
    }

    fn put(
        &self,
        id: &str,
        now_ms: u64,
        done: bool,
    ) -> aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, Self::key(id))
            .item(SK, AttributeValue::S(ORDER_SK.into()))
            .item("claimedMs", AttributeValue::N(now_ms.to_string()))
            .item("done", AttributeValue::Bool(done))
            .item(
                EXPIRES_AT,
                AttributeValue::N((now_ms / 1000 + ORDER_TTL_SECS).to_string()),
            )
    }
}

#[async_trait]
impl wsdr_core::OrderLog for DynamoOrderLog {
    async fn claim(&self, id: &str, now_ms: u64, stale_ms: u64) -> Result<bool> {
        let outcome = self
            .put(id, now_ms, false)
            .condition_expression(
                "attribute_not_exists(#pk) OR (#done = :no AND #claimed < :stale)",
            )
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#done", "done")
            .expression_attribute_names("#claimed", "claimedMs")
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .expression_attribute_values(
                ":stale",
                AttributeValue::N(now_ms.saturating_sub(stale_ms).to_string()),
            )
            .send()
            .await;
        match outcome {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(false)
            }
            Err(e) => Err(classify(&e)),
        }
    }

    async fn finish(&self, id: &str, now_ms: u64) -> Result<()> {
        self.put(id, now_ms, true)
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }
}
