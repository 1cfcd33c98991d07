//! Validated value types. A value of one of these types is known to be within the limits, so
//! the domain never checks them again ("parse, don't validate").

use crate::error::ProtocolError;
use crate::limits::{AUCTION_ID_MAX_LEN, BID_ID_MAX_LEN, BID_ID_MIN_LEN, MAX_AMOUNT};
use serde::{Deserialize, Deserializer, Serialize};

/// A bid amount in integer minor units, `1..=MAX_AMOUNT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Amount(u64);

impl Amount {
    pub fn new(value: u64) -> Result<Self, ProtocolError> {
        if value == 0 {
            return Err(ProtocolError::invalid_field(
                "amount must be greater than 0",
            ));
        }
        if value > MAX_AMOUNT {
            return Err(ProtocolError::invalid_field(format!(
                "amount must be at most {MAX_AMOUNT} minor units"
            )));
        }
        Ok(Self(value))
    }

    pub fn get(self) -> u64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = u64::deserialize(d)?;
        Amount::new(raw).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

fn check_id(
    field: &str,
    value: &str,
    min: usize,
    max: usize,
    extra: &[char],
) -> Result<(), ProtocolError> {
    let len = value.chars().count();
    if len < min || len > max {
        return Err(ProtocolError::invalid_field(format!(
            "{field} must be {min} to {max} characters"
        )));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-' || extra.contains(c)))
    {
        let shown = if bad.is_control() {
            format!("U+{:04X}", bad as u32)
        } else {
            format!("'{bad}'")
        };
        return Err(ProtocolError::invalid_field(format!(
            "{field} contains the character {shown}"
        )));
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $field:literal, $min:expr, $max:expr, $extra:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Result<Self, ProtocolError> {
                let value = value.into();
                check_id($field, &value, $min, $max, $extra)?;
                Ok(Self(value))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                $name::new(raw).map_err(serde::de::Error::custom)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = ProtocolError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::new(s)
            }
        }
    };
}

string_id!(
    /// A client-made, globally unique bid id: the idempotency key of a bid.
    BidId,
    "bidId",
    BID_ID_MIN_LEN,
    BID_ID_MAX_LEN,
    &[]
);
string_id!(
    /// The id of an auction.
    AuctionId,
    "auctionId",
    1,
    AUCTION_ID_MAX_LEN,
    &['.', ':']
);
string_id!(
    /// A client-made id of one write of any app: its idempotency key, scoped to its author and
    /// topic. A bid's [`BidId`] is its op id (the same rules).
    OpId,
    "opId",
    BID_ID_MIN_LEN,
    BID_ID_MAX_LEN,
    &[]
);
string_id!(
    /// The name of a topic within its app's namespace (an auction's is its [`AuctionId`]: the
    /// same rules).
    TopicName,
    "topic",
    1,
    AUCTION_ID_MAX_LEN,
    &['.', ':']
);
string_id!(
    /// An app's namespace: the first segment of its topics and of its keys in the state table.
    Namespace,
    "namespace",
    1,
    32,
    &[]
);

/// A topic: an app's namespace and a name in it, written `<namespace>:<name>` on the wire
/// (`auction:lot-1`, `chat:room:7`: the name may hold `:` itself; the namespace may not).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Topic {
    pub namespace: Namespace,
    pub name: TopicName,
}

impl Topic {
    pub fn new(namespace: Namespace, name: TopicName) -> Self {
        Self { namespace, name }
    }

    /// Parse `<namespace>:<name>`.
    pub fn parse(text: &str) -> Result<Self, ProtocolError> {
        let (namespace, name) = text
            .split_once(':')
            .ok_or_else(|| ProtocolError::invalid_field("topic must be `<namespace>:<name>`"))?;
        Ok(Self::new(Namespace::new(namespace)?, TopicName::new(name)?))
    }
}

impl std::fmt::Display for Topic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.namespace, self.name)
    }
}

impl Serialize for Topic {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Topic {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Topic::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl Namespace {
    /// The auction's namespace.
    pub fn auction() -> Self {
        Namespace("auction".to_owned())
    }
}

impl From<&BidId> for OpId {
    fn from(id: &BidId) -> Self {
        OpId(id.as_str().to_owned())
    }
}

impl From<&AuctionId> for TopicName {
    fn from(id: &AuctionId) -> Self {
        TopicName(id.as_str().to_owned())
    }
}
