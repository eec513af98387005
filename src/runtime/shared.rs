//! Types and helpers that several stages share. This module depends on no stage, so
//! stages depend on each other only in pipeline order (no import cycles).

use std::sync::{Arc, OnceLock};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tokens::{self, Tokenizer};

/// A runtime diagnostic in the envelope: `R0201` (an advisory policy skipped), `R0501`
/// (an optional template field without a value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// The BLAKE3 of a content, and the same as the envelope writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentHash {
    pub hash: blake3::Hash,
    /// `blake3:<hex>`.
    pub text: Arc<str>,
}

impl ContentHash {
    /// Hashes `content`.
    pub fn of(content: &str) -> ContentHash {
        let hash = blake3::hash(content.as_bytes());
        ContentHash {
            text: Arc::from(Blake3Text::new(&hash).as_str()),
            hash,
        }
    }
}

/// A value derived from the other fields of the item that holds it, kept with the item
/// as a cache. It takes no part in the item's equality or `Debug`, and is never
/// serialized: items that differ only in it are the same item.
#[derive(Clone, Default)]
pub struct Derived<T>(pub(crate) T);

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Derived<T>) -> bool {
        true
    }
}

impl<T> Eq for Derived<T> {}

impl<T> std::fmt::Debug for Derived<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("..")
    }
}

/// The BLAKE3 of one evidence, memory or history content, filled by the first compile
/// that needs it, so that an item of an input decoded once and shared by many compiles
/// (the prepared pack's document memo, a host that passes the same request again) is
/// hashed, or looked up, once.
pub type HashSlot = Derived<OnceLock<ContentHash>>;

/// A text without interpolation, rendered and counted once by the prepared pack.
#[derive(Debug)]
pub(crate) struct StaticText {
    pub text: Arc<str>,
    /// For the pack's tokenizer.
    pub tokens: usize,
}

impl StaticText {
    pub(crate) fn new(text: String, kind: Tokenizer) -> StaticText {
        let tokens = tokens::count(kind, &text);
        StaticText {
            text: Arc::from(text),
            tokens,
        }
    }
}

/// The JSON kind of a value, as error messages name it.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// A hash as the envelope writes it, `blake3:<hex>`, without allocating.
pub(crate) struct Blake3Text([u8; 7 + 64]);

impl Blake3Text {
    pub fn new(hash: &blake3::Hash) -> Blake3Text {
        let mut text = [0u8; 7 + 64];
        text[..7].copy_from_slice(b"blake3:");
        text[7..].copy_from_slice(hash.to_hex().as_bytes());
        Blake3Text(text)
    }

    pub fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// `blake3:<hex>`, as the ledger, turn ids and hashes of the envelope write a hash.
pub(crate) fn blake3_ref(hash: &blake3::Hash) -> String {
    Blake3Text::new(hash).as_str().to_owned()
}

/// Serializes a JSON value with object keys sorted by their UTF-8 bytes.
pub(crate) struct SortedValue<'a>(pub &'a Value);

impl Serialize for SortedValue<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut m = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &SortedValue(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&SortedValue(item))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(serializer),
        }
    }
}

/// Writes member `key` of a struct: `value`, through its canonical JSON when the
/// prepared pack made it (see [`crate::artifact::json::Raw`]).
pub(crate) fn raw_field<S, T>(
    st: &mut S,
    key: &'static str,
    value: &T,
    json: &Derived<Option<Arc<str>>>,
) -> Result<(), S::Error>
where
    S: serde::ser::SerializeStruct,
    T: Serialize + ?Sized,
{
    match &json.0 {
        Some(json) => st.serialize_field(key, &crate::artifact::json::Raw { value, json }),
        None => st.serialize_field(key, value),
    }
}

/// A list of values, each written as [`SortedValue`].
pub(crate) struct SortedValues<'a>(pub &'a [Value]);

impl Serialize for SortedValues<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&SortedValue(item))?;
        }
        seq.end()
    }
}

/// The role of a history turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    /// `ROLE: `, which starts a history turn's block text.
    pub fn prefix(self) -> &'static str {
        match self {
            Role::User => "user: ",
            Role::Assistant => "assistant: ",
        }
    }
}

/// What kind of block this is (`source` in the envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockSource {
    Block,
    Policy,
    Tool,
    Evidence,
    Memory,
    Session,
}

/// `trusted` text comes from the pack; `untrusted` text (evidence, memory and history
/// turns) comes from the caller and never renders into the system or developer text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Trusted,
    Untrusted,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextBlock {
    pub bucket: Arc<str>,
    pub id: Arc<str>,
    pub origin: Arc<str>,
    pub priority: i64,
    pub source: BlockSource,
    /// Shared with the prepared pack's cache (a kept block's text is built once).
    pub text: Arc<str>,
    pub tokens: u64,
    pub truncated: bool,
    pub trust: Trust,
    /// For a history turn, its role (see [`ContextBlock::turn_content`]).
    pub turn: Option<Role>,
    /// `text` as a JSON string literal, made once, when the block cache first kept the
    /// text, so that every later envelope copies it instead of escaping the text again
    /// (the texts of evidence blocks run to hundreds of kilobytes).
    pub(crate) json: Derived<Option<Arc<str>>>,
}

impl Serialize for ContextBlock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Members in sorted order, as the canonical envelope writes them.
        let mut st = s.serialize_struct("ContextBlock", 9)?;
        st.serialize_field("bucket", &self.bucket)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("origin", &self.origin)?;
        st.serialize_field("priority", &self.priority)?;
        st.serialize_field("source", &self.source)?;
        raw_field(&mut st, "text", &*self.text, &self.json)?;
        st.serialize_field("tokens", &self.tokens)?;
        st.serialize_field("truncated", &self.truncated)?;
        st.serialize_field("trust", &self.trust)?;
        st.end()
    }
}

impl ContextBlock {
    /// For a history turn: its role and content (redacted, possibly truncated), which
    /// is the text after its `ROLE: ` prefix. The provider renders send turns without
    /// the prefix.
    pub fn turn_content(&self) -> Option<(Role, &str)> {
        let role = self.turn?;
        let content = self.text.strip_prefix(role.prefix())?;
        Some((role, content))
    }
}
