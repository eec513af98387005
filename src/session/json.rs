//! The JSON the state needs beyond serde_json's `Value`: a document tree that keeps
//! members in document order and keeps duplicate members (so that import can refuse
//! them, with their path), and the ASCII-only string escaping of the canonical export.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

/// A JSON value as import reads it. Arrays keep no elements: no member of the state
/// is an array, so only the type matters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array,
    /// Members in document order, duplicates included.
    Object(Vec<(String, Node)>),
}

impl Node {
    /// What a message calls the value's type.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::String(_) => "a string",
            Node::Array => "an array",
            Node::Object(_) => "an object",
        }
    }

    /// A short rendering for messages: scalars in full (strings quoted), containers
    /// elided.
    pub(crate) fn brief(&self) -> String {
        match self {
            Node::Null => "null".into(),
            Node::Bool(b) => b.to_string(),
            Node::Number(n) => n.to_string(),
            Node::String(s) => serde_json::to_string(s).unwrap_or_default(),
            Node::Array => "[...]".into(),
            Node::Object(_) => "{...}".into(),
        }
    }

    /// The node for a parsed `Value`. Only the first levels matter to the state (the
    /// root, `policies`, its values), so deeper objects are kept empty: a value built
    /// in memory can be nested arbitrarily deep, and this must not recurse with it.
    pub(crate) fn from_value(value: &Value) -> Node {
        Self::from_value_at(value, 0)
    }

    fn from_value_at(value: &Value, depth: usize) -> Node {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(s.clone()),
            Value::Array(_) => Node::Array,
            Value::Object(_) if depth >= 2 => Node::Object(Vec::new()),
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Self::from_value_at(v, depth + 1)))
                    .collect(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value::<Node>()?;
            members.push((key, value));
        }
        Ok(Node::Object(members))
    }
}

/// `parent.key` for a key that reads as an identifier, else `parent["key"]`.
pub(crate) fn member_path(parent: &str, key: &str) -> String {
    let mut chars = key.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        format!("{parent}.{key}")
    } else {
        format!(
            "{parent}[{}]",
            serde_json::to_string(key).unwrap_or_default()
        )
    }
}

/// Appends `s` as a JSON string with every character outside printable ASCII escaped
/// (`\uXXXX`, lowercase hex, surrogate pairs beyond the BMP), `"` and `\` escaped, and
/// the short escapes for backspace, form feed, newline, carriage return and tab: the
/// bytes the reference implementation's canonical export writes, so that exports
/// compare equal across implementations.
pub(crate) fn write_ascii_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_duplicates() {
        let node: Node =
            serde_json::from_str(r#"{"b": 1, "a": [1, {"x": 2}], "b": null}"#).unwrap();
        let Node::Object(members) = node else {
            panic!()
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
        assert_eq!(members[1].1, Node::Array);
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "[".repeat(100_000);
        assert!(serde_json::from_str::<Node>(&deep).is_err());
        let deep = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
        assert!(serde_json::from_str::<Node>(&deep).is_err());
    }

    #[test]
    fn ascii_escaping() {
        let mut out = String::new();
        write_ascii_string(&mut out, "a\"\\\n\t\u{1}\u{7f}é😀/");
        assert_eq!(out, r#""a\"\\\n\t\u0001\u007f\u00e9\ud83d\ude00/""#);
    }

    #[test]
    fn paths() {
        assert_eq!(member_path("$", "premise"), "$.premise");
        assert_eq!(
            member_path("$.policies", "The Docker"),
            "$.policies[\"The Docker\"]"
        );
        assert_eq!(member_path("$.policies", ""), "$.policies[\"\"]");
    }
}
