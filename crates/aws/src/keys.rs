//! Key shapes of the state table that readers outside the adapter need (the stream handler
//! learns from a record's keys alone what changed). No SDK here. The kit writes every app's
//! items under these keys; `<ns>` is the app's namespace, `<topic>` the topic's name in it.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | topic seed | `TOPIC#<ns>#<topic>` | `META` |
//! | op copy | `OPS#<ns>#<topic>#<author>` | `<opId>#<region>` |
//! | summary | `SUMMARY#<ns>#<topic>` | `<region>` |
//! | strong-mode head | `SUMMARY#<ns>#<topic>` | `LEDGER` |
//!
//! A namespace and a topic name have no `#`, and the author segment is percent-encoded
//! ([`author_segment`]), so every key splits one way only.

use wsdr_core::TopicKey;
use wsdr_protocol::{Namespace, TopicName};

/// Partition key prefix of a topic's seed.
pub const TOPIC_PREFIX: &str = "TOPIC#";
/// Partition key prefix of one topic's per-Region summaries (one partition per topic).
pub const SUMMARY_PREFIX: &str = "SUMMARY#";
/// Partition key prefix of one author's op copies in one topic (one partition per topic and
/// author, so a hot topic's ops spread over many partitions).
pub const OPS_PREFIX: &str = "OPS#";
/// The sort key of a strong-mode topic's head, in the topic's summary partition: upper case,
/// so no Region name can be it.
pub const LEDGER_SK: &str = "LEDGER";

/// The author (a `sub`) as a key segment: `%` and `#` percent-encoded (a `sub` has no control
/// characters, and after this no `#`).
pub fn author_segment(sub: &str) -> String {
    sub.replace('%', "%25").replace('#', "%23")
}

/// A topic as a key segment: `<ns>#<topic>`.
pub fn topic_segment(topic: &TopicKey) -> String {
    format!("{}#{}", topic.namespace, topic.name)
}

/// The topic a `<ns>#<topic>` segment names (the whole rest of a key after its prefix).
fn topic_of_segment(segment: &str) -> Option<TopicKey> {
    let (namespace, name) = segment.split_once('#')?;
    Some(TopicKey::new(
        Namespace::new(namespace).ok()?,
        TopicName::new(name).ok()?,
    ))
}

/// The topic of a seed's partition key (`TOPIC#<ns>#<topic>`), if it is one.
pub fn topic_of_meta_key(pk: &str) -> Option<TopicKey> {
    topic_of_segment(pk.strip_prefix(TOPIC_PREFIX)?)
}

/// The (topic, Region or `LEDGER`) of a summary's keys (`SUMMARY#<ns>#<topic>`, `<region>`),
/// if they are a summary's: the stream handler learns from the keys alone that a Region's
/// summary changed.
pub fn summary_of_keys<'a>(pk: &str, sk: &'a str) -> Option<(TopicKey, &'a str)> {
    let topic = topic_of_segment(pk.strip_prefix(SUMMARY_PREFIX)?)?;
    (!sk.is_empty()).then_some((topic, sk))
}

/// The topic of an op copy's partition key (`OPS#<ns>#<topic>#<author>`).
pub fn topic_of_ops_key(pk: &str) -> Option<TopicKey> {
    let rest = pk.strip_prefix(OPS_PREFIX)?;
    let (namespace, rest) = rest.split_once('#')?;
    let (name, _author) = rest.split_once('#')?;
    Some(TopicKey::new(
        Namespace::new(namespace).ok()?,
        TopicName::new(name).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_one_way_only() {
        assert_eq!(author_segment("a#b%c"), "a%23b%25c");
        let (topic, region) = summary_of_keys("SUMMARY#auction#lot-1", "us-east-1").unwrap();
        assert_eq!(topic.to_string(), "auction:lot-1");
        assert_eq!(region, "us-east-1");
        assert!(summary_of_keys("TOPIC#auction#lot-1", "META").is_none());
        assert!(summary_of_keys("SUMMARY#auction#lot-1", "").is_none());
        assert!(summary_of_keys("SUMMARY#lot-1", "us-east-1").is_none());
        assert_eq!(
            topic_of_ops_key("OPS#chat#room:1#a%23b")
                .unwrap()
                .to_string(),
            "chat:room:1"
        );
        assert!(topic_of_ops_key("OPS#auction#lot-1").is_none());
        assert_eq!(
            topic_of_meta_key("TOPIC#auction#lot-1")
                .unwrap()
                .to_string(),
            "auction:lot-1"
        );
        assert!(topic_of_meta_key("TOPIC#auction").is_none());
        assert!(topic_of_meta_key("TOPIC#auction#lot#1").is_none());
    }
}
