//! The state table's stream records, decoded once for every reader: the handler's stream
//! mapping (the stream's one reader: it starts pushes and forwards fail-over orders) and the
//! evacuator (which receives a forwarded order as an SQS message whose body is the record).
//! Typed by `aws_lambda_events` (`dynamodb::EventRecord`, whose keys and images are
//! DynamoDB items), never walked as JSON by hand.

use aws_lambda_events::dynamodb::{Event, EventRecord};
use aws_lambda_events::sqs::SqsMessage;
use serde_dynamo::AttributeValue;
use wsdr_core::{TopicKey, VerdictSource};

/// A fail-over order: the judge's verdict on the primary (`api_id`) changed to fail over,
/// recorded at `at_ms` by the judge's clock. One change is one order, whichever way and
/// however often it is delivered: [`FailoverOrder::id`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverOrder {
    pub api_id: String,
    pub at_ms: u64,
}

impl FailoverOrder {
    /// The order's identity: the same for every delivery of one change (a stream batch
    /// retried, an SQS message received twice), different for the next change.
    pub fn id(&self) -> String {
        format!("{}@{}", self.api_id, self.at_ms)
    }

    /// The order a stream record carries, if it is one: the judge's `CHANGE` item
    /// (`JUDGE#<apiId>` / `CHANGE`) whose new image says `serve` false. A change written by
    /// anyone else (a Region's own canary's, under `HEALTH#`) is no order.
    pub fn of_record(record: &EventRecord) -> Option<Self> {
        let (pk, sk) = keys(record)?;
        let api_id = pk.strip_prefix(VerdictSource::Judge.key_prefix())?;
        if sk != "CHANGE" || api_id.is_empty() {
            return None;
        }
        let image = &record.change.new_image;
        let serve = match image.get("serve")? {
            AttributeValue::Bool(serve) => *serve,
            _ => return None,
        };
        let at_ms = match image.get("atMs")? {
            AttributeValue::N(n) => n.parse().ok()?,
            _ => return None,
        };
        (!serve).then(|| Self {
            api_id: api_id.to_owned(),
            at_ms,
        })
    }

    /// The order an SQS message carries: its body is the stream record the handler forwarded.
    pub fn of_message(message: &SqsMessage) -> Option<Self> {
        let record: EventRecord = serde_json::from_str(message.body.as_deref()?).ok()?;
        Self::of_record(&record)
    }
}

/// A record's partition and sort keys, when both are strings.
fn keys(record: &EventRecord) -> Option<(&str, &str)> {
    let text = |name: &str| match record.change.keys.get(name) {
        Some(AttributeValue::S(s)) => Some(s.as_str()),
        _ => None,
    };
    Some((text("pk")?, text("sk")?))
}

/// The topic of every summary item (or strong-mode head) the batch's records touched, from
/// the keys alone (a stream record always carries `Keys`; images depend on the view type).
pub fn summary_topics(event: &Event) -> Vec<TopicKey> {
    event
        .records
        .iter()
        .filter_map(|record| {
            let (pk, sk) = keys(record)?;
            let (topic, _) = crate::keys::summary_of_keys(pk, sk)?;
            Some(topic)
        })
        .collect()
}

/// The fail-over orders among a batch's records, each with the record it came from (what the
/// handler forwards as the message body).
pub fn failover_orders(event: &Event) -> Vec<(FailoverOrder, &EventRecord)> {
    event
        .records
        .iter()
        .filter_map(|record| FailoverOrder::of_record(record).map(|order| (order, record)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pk: &str, sk: &str, serve: bool) -> serde_json::Value {
        serde_json::json!({
            "eventID": "1", "eventName": "MODIFY", "eventSource": "aws:dynamodb",
            "awsRegion": "us-west-2",
            "dynamodb": {
                "Keys": {"pk": {"S": pk}, "sk": {"S": sk}},
                "NewImage": {"pk": {"S": pk}, "sk": {"S": sk},
                             "serve": {"BOOL": serve}, "atMs": {"N": "1767225600000"}},
                "SizeBytes": 120, "StreamViewType": "NEW_AND_OLD_IMAGES"
            }
        })
    }

    fn decode(value: serde_json::Value) -> EventRecord {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn only_the_judges_change_to_fail_over_is_an_order() {
        let order = FailoverOrder::of_record(&decode(record("JUDGE#abc", "CHANGE", false)));
        assert_eq!(
            order,
            Some(FailoverOrder {
                api_id: "abc".into(),
                at_ms: 1_767_225_600_000
            })
        );
        assert_eq!(order.map(|o| o.id()).as_deref(), Some("abc@1767225600000"));
        for (pk, sk, serve) in [
            ("JUDGE#abc", "CHANGE", true),
            ("HEALTH#abc", "CHANGE", false),
            ("JUDGE#abc", "VERDICT", false),
            ("JUDGE#", "CHANGE", false),
            ("SUMMARY#auction#lot-1", "us-east-1", false),
        ] {
            assert_eq!(
                FailoverOrder::of_record(&decode(record(pk, sk, serve))),
                None,
                "{pk} {sk} {serve}"
            );
        }
    }

    #[test]
    fn a_forwarded_order_decodes_from_its_message_body_the_same() {
        let body = record("JUDGE#abc", "CHANGE", false).to_string();
        let message: SqsMessage = serde_json::from_value(serde_json::json!({
            "messageId": "m-1", "eventSource": "aws:sqs", "body": body
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            FailoverOrder::of_message(&message).map(|o| o.api_id),
            Some("abc".into())
        );
        for body in ["not json", "{}", ""] {
            let message: SqsMessage = serde_json::from_value(serde_json::json!({
                "messageId": "m-1", "body": body
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(FailoverOrder::of_message(&message), None, "{body:?}");
        }
    }

    #[test]
    fn summaries_are_found_by_their_keys() {
        let event: Event = serde_json::from_value(serde_json::json!({"Records": [
            record("SUMMARY#auction#lot-1", "us-east-1", true),
            record("JUDGE#abc", "CHANGE", false),
            record("SUMMARY#chat#room-2", "LEDGER", true),
            record("SUMMARY#lot-3", "us-west-2", true),
        ]}))
        .unwrap_or_else(|e| panic!("{e}"));
        let topics: Vec<String> = summary_topics(&event)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(topics, ["auction:lot-1", "chat:room-2"]);
        assert_eq!(failover_orders(&event).len(), 1);
    }
}
