//! YAML input documents read into JSON values with JSON's number rules, so that the
//! format of a file never changes what it means: an integer that does not fit 64 bits
//! is a float (as `serde_json` reads it from JSON text) instead of a parse failure.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A JSON value read from YAML (see the module docs).
pub(crate) struct YamlValue(pub Value);

/// `v` as JSON would hold it: a non-finite float has no JSON form and is `null`, as
/// `serde_json` makes it (callers refuse `.nan` and `.inf` before they get here).
fn float(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

impl<'de> Deserialize<'de> for YamlValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor).map(YamlValue)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a YAML value")
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
        YamlValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(YamlValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some((k, YamlValue(v))) = map.next_entry::<String, YamlValue>()? {
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::YamlValue;
    use serde_json::json;

    fn read(yaml: &str) -> serde_json::Value {
        match serde_norway::from_str::<YamlValue>(yaml) {
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
}
