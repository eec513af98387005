//! Input documents (JSON, or YAML) read into JSON values, with two rules serde_json's
//! own `Value` does not keep:
//!
//! - **A key given twice in one object is refused.** The last one would otherwise win
//!   silently, so a second `safety_mode` in a run, or a second `tier` in a request's
//!   context, would override the first unseen. YAML 1.2 forbids duplicate keys; JSON
//!   says names should be unique. Every document a compile reads is parsed this way:
//!   by the CLI, the service and the Python package alike.
//! - **Numbers read as JSON reads them**, whatever the format, so the format of a
//!   file never changes what it means: an integer that does not fit 64 bits is a
//!   float (as `serde_json` reads it from JSON text) instead of a YAML parse failure.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value read from an input document (see the module docs).
pub struct Document(pub Value);

/// For `deserialize_with`: a member holding free JSON, read as a [`Document`].
pub fn document<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    Document::deserialize(d).map(|v| v.0)
}

/// [`document`] for an optional member (absent or `null` is `None`).
pub fn optional_document<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Option::<Document>::deserialize(d).map(|v| v.map(|v| v.0))
}

/// `v` as JSON would hold it: a non-finite float has no JSON form and is `null`, as
/// `serde_json` makes it (callers refuse `.nan` and `.inf` before they get here).
fn float(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(Document)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| float(v as f64), Value::from))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Document::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Document(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{key}` is given twice in one object"
                )));
            }
            let Document(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::Document;
    use serde_json::json;

    fn read(yaml: &str) -> serde_json::Value {
        match serde_norway::from_str::<Document>(yaml) {
            Ok(v) => v.0,
            Err(e) => panic!("{e}"),
        }
    }

    /// The same numbers as JSON text gives: 64-bit integers stay integers, larger ones
    /// are floats, whatever their sign.
    #[test]
    fn numbers_read_as_json_reads_them() {
        for text in [
            "1",
            "-1",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "2.5",
        ] {
            let from_json: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
            assert_eq!(read(text), from_json, "{text}");
        }
        assert_eq!(
            read("a: [1, x, ~, true, {b: 2}]\n"),
            json!({"a": [1, "x", null, true, {"b": 2}]})
        );
    }

    /// A key given twice is refused at any depth, in JSON and in YAML; the same text
    /// without the repeat reads as serde_json reads it.
    #[test]
    fn a_key_given_twice_is_refused() {
        let json_err = |text: &str| match serde_json::from_str::<Document>(text) {
            Ok(v) => panic!("accepted: {}", v.0),
            Err(e) => e.to_string(),
        };
        let yaml_err = |text: &str| match serde_norway::from_str::<Document>(text) {
            Ok(v) => panic!("accepted: {}", v.0),
            Err(e) => e.to_string(),
        };
        let e = json_err(r#"{"safety_mode": "autonomous", "safety_mode": "reviewed"}"#);
        assert!(e.contains("the key `safety_mode` is given twice"), "{e}");
        let e = json_err(r#"{"context": {"user": {"tier": "free", "tier": "pro"}}}"#);
        assert!(e.contains("the key `tier` is given twice"), "{e}");
        let e = json_err(r#"[{"a": 1}, {"b": 1, "b": 1}]"#);
        assert!(e.contains("the key `b` is given twice"), "{e}");
        let e = yaml_err("safety_mode: autonomous\nuser:\n  id: a\n  id: b\n");
        assert!(e.contains("the key `id` is given twice"), "{e}");
        // The same key in two objects is no repeat.
        let text = r#"{"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}]}"#;
        let strict = serde_json::from_str::<Document>(text).map(|d| d.0).ok();
        assert_eq!(strict, serde_json::from_str(text).ok());
    }
}
