//! Client to server frames and their total parser.

use crate::error::{ErrorCode, ProtocolError};
use crate::ids::{Amount, AuctionId, BidId, OpId, Topic};
use crate::limits::{MAX_MESSAGE_BYTES, MAX_NESTING_DEPTH, MAX_SINCE_LOGS, SETTLE_BIDS_MAX};
use crate::server::Versions;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::hash_map::{Entry, HashMap};

/// A frame a client sends. API Gateway routes it by `action` (`$request.body.action`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "camelCase")]
pub enum ClientMessage {
    /// Application-level liveness probe; answered with `pong`. With `auctionId` (the
    /// auction the client watches), the pong carries that auction's version vector, so a
    /// client whose view fell behind (a lost or reordered push) resyncs within one heartbeat.
    /// With `topic` instead (any app's), the pong carries that topic's versions; a heartbeat
    /// names one or the other, never both.
    #[serde(rename_all = "camelCase")]
    Heartbeat {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auction_id: Option<AuctionId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topic: Option<Topic>,
    },
    /// Ask for the current state of an auction and of the caller's own bids in it. `bidIds`
    /// (at most [`SETTLE_BIDS_MAX`]) names bids the client is unsure of: the answer says for
    /// each whether it stands (`you.settled`), by a point read, however many bids the user has.
    #[serde(rename_all = "camelCase")]
    GetState {
        auction_id: AuctionId,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        bid_ids: Vec<BidId>,
    },
    /// Ask for a topic of any app (the kit's envelope; `getState{auctionId}` is the auction's
    /// alias): its view, the caller's own ops, a point read of each of `opIds` (at most
    /// [`SETTLE_BIDS_MAX`]) to settle them, and, for an app whose every op counts (a chat
    /// room), its ops: those past `since` (each log's position the client holds), or the
    /// newest ones without it. Answered with `topicState`. Sent on the `getState` route: the
    /// frame is told apart by `topic`.
    #[serde(rename = "getState", rename_all = "camelCase")]
    GetTopic {
        topic: Topic,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        op_ids: Vec<OpId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<Versions>,
    },
    /// Place a bid. `bid_id` is made by the client and makes the bid idempotent.
    #[serde(rename_all = "camelCase")]
    Bid {
        auction_id: AuctionId,
        amount: Amount,
        bid_id: BidId,
    },
    /// Write one op of any app to a topic (the kit's envelope; `bid` is the auction's alias of
    /// it: `{"action":"write","topic":"auction:<auctionId>","opId":<bidId>,"op":{"amount":n}}`
    /// is the same bid). `op_id` is made by the client and makes the write idempotent; `op`
    /// has a canonical JSON form (no fractions, no integer past 2^53 - 1), checked here.
    #[serde(rename_all = "camelCase")]
    Write {
        topic: Topic,
        op_id: OpId,
        op: Value,
    },
}

impl ClientMessage {
    /// The `action` value, which is also the API Gateway route key.
    pub fn action(&self) -> &'static str {
        match self {
            ClientMessage::Heartbeat { .. } => "heartbeat",
            ClientMessage::GetState { .. } | ClientMessage::GetTopic { .. } => "getState",
            ClientMessage::Bid { .. } => "bid",
            ClientMessage::Write { .. } => "write",
        }
    }

    /// The frame as JSON text. Serialising these types cannot fail (no maps with non-string
    /// keys, no floats), so this is infallible by construction.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Parse one client frame. Order of checks: size, UTF-8, nesting depth, JSON syntax, object
/// shape with unique keys, `action`, then the fields of that action.
pub fn parse_client_message(bytes: &[u8]) -> Result<ClientMessage, ProtocolError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(ProtocolError::new(
            ErrorCode::TooLarge,
            format!(
                "message is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ProtocolError::bad_json("message is not valid UTF-8"))?;
    check_depth(text)?;
    let object: TopLevel = serde_json::from_str(text).map_err(|e| {
        if e.is_data() {
            ProtocolError::bad_json("message must be a JSON object")
        } else {
            ProtocolError::bad_json(format!(
                "message is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            ))
        }
    })?;
    if let Some(key) = object.duplicate {
        return Err(ProtocolError::invalid_field(format!(
            "field `{}` is given more than once",
            truncate(&key)
        )));
    }
    let action = match object.get("action") {
        None => {
            return Err(ProtocolError::new(
                ErrorCode::UnknownAction,
                "message has no `action`",
            ))
        }
        Some(Value::String(action)) => action.as_str(),
        Some(_) => return Err(ProtocolError::invalid_field("`action` must be a string")),
    };
    match action {
        "heartbeat" => {
            object.one_of("auctionId", "topic")?;
            Ok(ClientMessage::Heartbeat {
                auction_id: object.optional_auction_id()?,
                topic: object.optional_topic()?,
            })
        }
        "getState" if object.present("topic") => {
            object.one_of("auctionId", "topic")?;
            object.one_of("bidIds", "topic")?;
            Ok(ClientMessage::GetTopic {
                topic: Topic::parse(object.string("topic")?)?,
                op_ids: object.op_ids()?,
                since: object.since()?,
            })
        }
        "getState" => Ok(ClientMessage::GetState {
            auction_id: object.auction_id()?,
            bid_ids: object.bid_ids()?,
        }),
        "bid" => Ok(ClientMessage::Bid {
            auction_id: object.auction_id()?,
            amount: object.amount()?,
            bid_id: object.bid_id()?,
        }),
        "write" => Ok(ClientMessage::Write {
            topic: Topic::parse(object.string("topic")?)?,
            op_id: OpId::new(object.string("opId")?)?,
            op: object.op()?,
        }),
        other => Err(ProtocolError::new(
            ErrorCode::UnknownAction,
            format!("unknown action `{}`", truncate(other)),
        )),
    }
}

/// Echo at most 32 characters of client text back, with control characters escaped.
fn truncate(s: &str) -> String {
    let mut out: String = s.chars().take(32).flat_map(char::escape_debug).collect();
    if s.chars().count() > 32 {
        out.push('…');
    }
    out
}

/// Reject nesting deeper than [`MAX_NESTING_DEPTH`] with one linear scan that skips strings,
/// so a 128 KB `[[[[...` costs nothing and never reaches the recursive parser.
fn check_depth(text: &str) -> Result<(), ProtocolError> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING_DEPTH {
                    return Err(ProtocolError::bad_json(format!(
                        "message is nested deeper than {MAX_NESTING_DEPTH} levels"
                    )));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The top-level object, keeping every key so that duplicates are seen (serde_json's `Value`
/// keeps only the last one, which would let `{"amount":1,"amount":999}` pass unnoticed).
struct TopLevel {
    fields: HashMap<String, Value>,
    duplicate: Option<String>,
}

impl TopLevel {
    fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    fn string(&self, key: &str) -> Result<&str, ProtocolError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(ProtocolError::invalid_field(format!(
                "`{key}` must be a string"
            ))),
            None => Err(ProtocolError::invalid_field(format!("`{key}` is required"))),
        }
    }

    fn auction_id(&self) -> Result<AuctionId, ProtocolError> {
        AuctionId::new(self.string("auctionId")?)
    }

    fn bid_id(&self) -> Result<BidId, ProtocolError> {
        BidId::new(self.string("bidId")?)
    }

    /// `auctionId` if present (a heartbeat's watched auction); `null` counts as absent.
    fn optional_auction_id(&self) -> Result<Option<AuctionId>, ProtocolError> {
        match self.get("auctionId") {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.auction_id().map(Some),
        }
    }

    /// Whether `key` is given (`null` counts as absent).
    fn present(&self, key: &str) -> bool {
        !matches!(self.get(key), None | Some(Value::Null))
    }

    /// At most one of two fields that name the same thing two ways.
    fn one_of(&self, a: &str, b: &str) -> Result<(), ProtocolError> {
        if self.present(a) && self.present(b) {
            return Err(ProtocolError::invalid_field(format!(
                "give `{a}` or `{b}`, not both"
            )));
        }
        Ok(())
    }

    /// `topic` if present (a heartbeat's watched topic).
    fn optional_topic(&self) -> Result<Option<Topic>, ProtocolError> {
        if !self.present("topic") {
            return Ok(None);
        }
        Topic::parse(self.string("topic")?).map(Some)
    }

    /// `bidIds`: absent or an array of at most [`SETTLE_BIDS_MAX`] valid bidIds; repeats
    /// are folded (each is one point read on the server).
    fn bid_ids(&self) -> Result<Vec<BidId>, ProtocolError> {
        self.ids("bidIds", "bids", |id| BidId::new(id))
    }

    /// `opIds`: as `bidIds`, for any app's ops.
    fn op_ids(&self) -> Result<Vec<OpId>, ProtocolError> {
        self.ids("opIds", "ops", |id| OpId::new(id))
    }

    /// An array of at most [`SETTLE_BIDS_MAX`] ids under `key`, repeats folded.
    fn ids<T: PartialEq>(
        &self,
        key: &str,
        what: &str,
        parse: impl Fn(&str) -> Result<T, ProtocolError>,
    ) -> Result<Vec<T>, ProtocolError> {
        let not_ids = || ProtocolError::invalid_field(format!("`{key}` must be an array of ids"));
        let items = match self.get(key) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(not_ids()),
        };
        if items.len() > SETTLE_BIDS_MAX {
            return Err(ProtocolError::invalid_field(format!(
                "`{key}` names {} {what}; at most {SETTLE_BIDS_MAX} per getState",
                items.len()
            )));
        }
        let mut ids: Vec<T> = Vec::with_capacity(items.len());
        for item in items {
            let Value::String(text) = item else {
                return Err(not_ids());
            };
            let id = parse(text)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// `since`: absent, or an object of log names (Regions) to positions, at most
    /// [`MAX_SINCE_LOGS`] of them.
    fn since(&self) -> Result<Option<Versions>, ProtocolError> {
        let not_positions = || {
            ProtocolError::invalid_field(
                "`since` must be an object of Region names to positions (integers >= 0)",
            )
        };
        let fields = match self.get("since") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(fields)) => fields,
            Some(_) => return Err(not_positions()),
        };
        if fields.len() > MAX_SINCE_LOGS {
            return Err(ProtocolError::invalid_field(format!(
                "`since` names {} logs; at most {MAX_SINCE_LOGS}",
                fields.len()
            )));
        }
        let mut since = Versions::new();
        for (log, position) in fields {
            if log.is_empty() || log.len() > 64 || log.chars().any(char::is_control) {
                return Err(not_positions());
            }
            let position = position.as_u64().ok_or_else(not_positions)?;
            since.insert(log.clone(), position);
        }
        Ok(Some(since))
    }

    /// `op`: any JSON value with a canonical form (the digest both sides take of it).
    fn op(&self) -> Result<Value, ProtocolError> {
        let op = self
            .get("op")
            .ok_or_else(|| ProtocolError::invalid_field("`op` is required"))?;
        crate::digest::canonical_json(op)
            .map_err(|e| ProtocolError::invalid_field(format!("`op`: {}", e.message)))?;
        Ok(op.clone())
    }

    fn amount(&self) -> Result<Amount, ProtocolError> {
        let number = match self.get("amount") {
            Some(Value::Number(n)) => n,
            Some(_) => {
                return Err(ProtocolError::invalid_field(
                    "`amount` must be an integer number of minor units",
                ))
            }
            None => return Err(ProtocolError::invalid_field("`amount` is required")),
        };
        if let Some(value) = number.as_u64() {
            return Amount::new(value);
        }
        let message = if number.as_i64().is_some_and(|v| v < 0) {
            "`amount` must be greater than 0"
        } else if number.is_f64() && number.as_f64().is_some_and(|v| v.fract() != 0.0) {
            "`amount` must be an integer number of minor units, not a fraction"
        } else {
            "`amount` must be an integer within range (minor units, no exponent or decimal point)"
        };
        Err(ProtocolError::invalid_field(message))
    }
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = TopLevel;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
                let mut fields = HashMap::new();
                let mut duplicate = None;
                while let Some(key) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    match fields.entry(key) {
                        Entry::Occupied(seen) => {
                            duplicate.get_or_insert_with(|| seen.key().clone());
                        }
                        Entry::Vacant(slot) => {
                            slot.insert(value);
                        }
                    }
                }
                Ok(TopLevel { fields, duplicate })
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}
