//! The digest of an op: how the kit settles "does my write with this op id stand, with this
//! payload?" for any app. A copy stands for a write when its op id *and* its digest match: the
//! same op id with another digest is the id reused with another payload. The server, the Rust
//! client and the browser client compute it alike (`conformance/digest.json` holds the shared
//! vectors; `web/wsdr-client.js` has `canonicalJson` and `opDigest`).
//!
//! The canonical form is the JSON text of the value with no whitespace, object members sorted
//! by key (Unicode code point order), strings escaped as ECMAScript's `JSON.stringify` escapes
//! them (`"`, `\`, and the control characters below U+0020: `\b \t \n \f \r` by name, the others
//! as `\u00xx`; everything else as is), and numbers restricted to integers JavaScript holds
//! exactly (|n| <= 2^53 - 1; an integral float such as `1.0` is that integer, because a browser
//! cannot tell `1.0` from `1`). A fraction or a larger integer has no canonical form: an op
//! carrying one is refused, never digested two ways. For the values this allows it is RFC 8785
//! (JCS) except for key order, which is by code point rather than UTF-16 unit (the two differ
//! only between keys above U+FFFF and keys in U+E000..U+FFFF).
//!
//! The hash is 128-bit FNV-1a over the canonical form's UTF-8 bytes, written as 32 lower-case
//! hex digits. Not cryptographic, and it needs not be: it only ever compares one author's own
//! payloads under one op id (their copies are keyed by the verified author), so nobody gains by
//! forging a collision with their own write.

use crate::error::ProtocolError;
use serde_json::Value;

/// The largest integer an op may carry: JavaScript's `Number.MAX_SAFE_INTEGER`.
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// Deepest nesting the canonical form walks (the protocol's own frame limit is lower; this
/// only keeps a value built in code from exhausting the stack).
pub const MAX_DEPTH: usize = 64;

const FNV_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

/// An op's digest: 128-bit FNV-1a of its canonical JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(u128);

impl Digest {
    /// The digest of `value`'s canonical form; an error if it has none.
    pub fn of(value: &Value) -> Result<Self, ProtocolError> {
        Ok(Self::of_canonical(&canonical_json(value)?))
    }

    /// The digest of text already in canonical form.
    pub fn of_canonical(canonical: &str) -> Self {
        let hash = canonical.bytes().fold(FNV_OFFSET, |hash, byte| {
            (hash ^ u128::from(byte)).wrapping_mul(FNV_PRIME)
        });
        Self(hash)
    }

    /// Parse 32 lower-case hex digits (the wire form).
    pub fn parse(hex: &str) -> Result<Self, ProtocolError> {
        let well_formed = hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !well_formed {
            return Err(ProtocolError::invalid_field(
                "a digest is 32 lower-case hex digits",
            ));
        }
        u128::from_str_radix(hex, 16)
            .map(Self)
            .map_err(|_| ProtocolError::invalid_field("a digest is 32 lower-case hex digits"))
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(d)?;
        Digest::parse(&hex).map_err(serde::de::Error::custom)
    }
}

/// The digest of a bid's op, `{"amount": n}` (its canonical form, written out: an amount is a
/// safe integer by [`crate::limits::MAX_AMOUNT`]).
pub fn bid_digest(amount: crate::Amount) -> Digest {
    Digest::of_canonical(&format!("{{\"amount\":{}}}", amount.get()))
}

/// The canonical JSON text of `value` (see the module's documentation), or why it has none.
pub fn canonical_json(value: &Value) -> Result<String, ProtocolError> {
    let mut out = String::new();
    write_value(value, 0, &mut out)?;
    Ok(out)
}

fn write_value(value: &Value, depth: usize, out: &mut String) -> Result<(), ProtocolError> {
    if depth > MAX_DEPTH {
        return Err(ProtocolError::invalid_field(format!(
            "an op nests deeper than {MAX_DEPTH} levels"
        )));
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&safe_integer(n)?.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, depth + 1, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            // Sorted here, whatever order the map keeps (serde_json's `preserve_order`
            // feature, if anything in a build turns it on, keeps insertion order).
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                if let Some(member) = members.get(key) {
                    write_value(member, depth + 1, out)?;
                }
            }
            out.push('}');
        }
    }
    Ok(())
}

/// The integer a JSON number stands for, if JavaScript holds it exactly.
fn safe_integer(n: &serde_json::Number) -> Result<i64, ProtocolError> {
    let out_of_range = || {
        ProtocolError::invalid_field(format!(
            "an op's numbers are integers of at most {MAX_SAFE_INTEGER} in magnitude"
        ))
    };
    if let Some(i) = n.as_i64() {
        return if i.unsigned_abs() <= MAX_SAFE_INTEGER.unsigned_abs() {
            Ok(i)
        } else {
            Err(out_of_range())
        };
    }
    if n.as_u64().is_some() {
        return Err(out_of_range());
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64 => {
            // Integral and within ±(2^53 - 1), so exact as an i64; -0.0 is 0, as in JS.
            Ok(f as i64)
        }
        Some(f) if f.is_finite() && f.fract() == 0.0 => Err(out_of_range()),
        _ => Err(ProtocolError::invalid_field(
            "an op's numbers are integers (a fraction has no canonical form)",
        )),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_empty_input_hashes_to_the_offset_basis() {
        // FNV-1a of no bytes is the offset basis: the constant is the published one.
        assert_eq!(
            Digest::of_canonical("").to_string(),
            "6c62272e07bb014262b821756295c58d"
        );
        // One byte: (basis ^ 'a') * prime, the published FNV-1a-128 of "a".
        assert_eq!(
            Digest::of_canonical("a").to_string(),
            "d228cb696f1a8caf78912b704e4a8964"
        );
    }

    #[test]
    fn member_order_and_whitespace_do_not_change_the_digest() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [true, null, "x"]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[true,null,"x"],"b":1}"#).unwrap();
        assert_eq!(
            canonical_json(&a).unwrap(),
            r#"{"a":[true,null,"x"],"b":1}"#
        );
        assert_eq!(Digest::of(&a).unwrap(), Digest::of(&b).unwrap());
        assert_ne!(
            Digest::of(&json!({"amount": 100})).unwrap(),
            Digest::of(&json!({"amount": 101})).unwrap()
        );
    }

    #[test]
    fn numbers_outside_javascripts_exact_integers_have_no_canonical_form() {
        assert_eq!(canonical_json(&json!(1.0)).unwrap(), "1");
        assert_eq!(canonical_json(&json!(-0.0)).unwrap(), "0");
        assert_eq!(
            canonical_json(&json!(MAX_SAFE_INTEGER)).unwrap(),
            "9007199254740991"
        );
        assert_eq!(
            canonical_json(&json!(-MAX_SAFE_INTEGER)).unwrap(),
            "-9007199254740991"
        );
        // The error says which rule the number broke: its size, or its fraction.
        for too_large in [
            json!(MAX_SAFE_INTEGER + 1),
            json!(-MAX_SAFE_INTEGER - 1),
            json!(u64::MAX),
            json!(9_007_199_254_740_992.0_f64),
            json!(1e300),
        ] {
            let error = canonical_json(&too_large).unwrap_err();
            assert!(error.message.contains("at most"), "{too_large}: {error}");
        }
        for fraction in [json!(1.5), json!(-0.25), json!(1e-300)] {
            let error = canonical_json(&fraction).unwrap_err();
            assert!(error.message.contains("fraction"), "{fraction}: {error}");
        }
    }

    #[test]
    fn strings_are_escaped_as_json_stringify_escapes_them() {
        let s = "q\"b\\\u{8}\t\n\u{c}\r\u{1}\u{1f} \u{7f}é😀";
        assert_eq!(
            canonical_json(&json!(s)).unwrap(),
            "\"q\\\"b\\\\\\b\\t\\n\\f\\r\\u0001\\u001f \u{7f}é😀\""
        );
    }

    #[test]
    fn a_value_nested_past_the_bound_is_refused_not_walked() {
        let mut v = json!(0);
        for _ in 0..=MAX_DEPTH {
            v = json!([v]);
        }
        assert!(canonical_json(&v).is_err());
        let mut ok = json!(0);
        for _ in 0..MAX_DEPTH {
            ok = json!([ok]);
        }
        assert!(canonical_json(&ok).is_ok());
        // Objects count as levels too.
        let mut deep = json!(0);
        for _ in 0..=MAX_DEPTH {
            deep = json!({ "k": deep });
        }
        assert!(canonical_json(&deep).is_err());
    }

    #[test]
    fn digests_round_trip_through_their_wire_form() {
        let d = Digest::of(&json!({"text": "hi"})).unwrap();
        assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
        for bad in ["", "0", &"A".repeat(32), &"g".repeat(32), &"0".repeat(33)] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Digest::parse(&"0".repeat(32)).unwrap(), Digest(0));
    }
}
