//! The runtime's inputs: [`RunContext`], [`InvokeRequest`], [`Evidence`] and
//! [`MemoryItem`], typed with serde.
//!
//! Shapes are closed (`deny_unknown_fields`) except `request.context`, which is free
//! JSON checked against the pack's context schema by `validate`. Optional members may
//! be absent or `null`. [`decode_inputs`] turns parsed JSON/YAML documents into
//! [`CompileInputs`], naming the document (and the list index) in every shape error, so
//! that a well-formed file of the wrong shape is exit 4, never exit 3.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::artifact::{SafetyMode, Tokenizer};

use super::error::CompileError;
use super::shared::HashSlot;
pub use super::shared::Role;

/// Everything one compile consumes besides the pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileInputs {
    #[serde(deserialize_with = "object")]
    pub run: RunContext,
    /// Shared, like the lists: a host's request decoded once can serve several
    /// compiles.
    #[serde(deserialize_with = "shared_object")]
    pub request: Arc<InvokeRequest>,
    /// Shared: a list decoded once can serve many compiles (see
    /// [`crate::runtime::PreparedPack::decode_json_inputs`]).
    #[serde(default, deserialize_with = "shared_objects")]
    pub evidence: Arc<[Evidence]>,
    #[serde(default, deserialize_with = "shared_objects")]
    pub memory: Arc<[MemoryItem]>,
}

/// Who is running, in which safety mode, with which permissions and budget.
///
/// Fields are declared in sorted order: the run serializes canonically as part of the
/// ledger's inputs digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunContext {
    #[serde(default, deserialize_with = "optional_object")]
    pub budget: Option<RunBudget>,
    /// If present, surfaced tools are intersected with it.
    #[serde(default)]
    pub permissions: Option<Vec<String>>,
    #[serde(default)]
    pub prohibitions: Option<Vec<String>>,
    pub run_id: String,
    pub safety_mode: SafetyMode,
    #[serde(default)]
    pub tenant: Option<String>,
    /// Absent (or `null`) means an anonymous user with no roles.
    #[serde(default, deserialize_with = "object_or_default")]
    pub user: RunUser,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunUser {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub roles: Vec<String>,
}

/// Per-run overrides of the pack's budget (fields in sorted order, as for the run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunBudget {
    #[serde(default)]
    pub bucket_tokens: Option<BTreeMap<String, u64>>,
    #[serde(default)]
    pub tokenizer: Option<Tokenizer>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
}

impl CompileInputs {
    /// These inputs with `context` for the request's context.
    pub(crate) fn with_context(&self, context: Value) -> CompileInputs {
        let mut request = InvokeRequest::clone(&self.request);
        request.context = context;
        CompileInputs {
            run: self.run.clone(),
            request: Arc::new(request),
            evidence: Arc::clone(&self.evidence),
            memory: Arc::clone(&self.memory),
        }
    }
}

/// One invocation of the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvokeRequest {
    pub request_id: String,
    /// Missing or unknown means the fallback intent.
    #[serde(default)]
    pub intent: Option<String>,
    pub message: String,
    pub channel: String,
    pub locale: String,
    /// Free JSON, validated against the pack's context schema. Absent means `{}`.
    #[serde(default, deserialize_with = "super::document::document")]
    pub context: Value,
    #[serde(default, deserialize_with = "objects")]
    pub history: Vec<Turn>,
    /// The session state exported after the previous turn, for packs that declare
    /// `session directives` (refused by the others). Absent or `null` is the empty
    /// state.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::document::optional_document"
    )]
    pub session_state: Option<Value>,
}

/// One earlier turn of the conversation. Only `user` and `assistant` turns are
/// accepted: a caller-supplied `system` turn would let history speak with the pack's
/// authority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub role: Role,
    /// Read and set through [`Turn::content`] and [`Turn::set_content`].
    pub(crate) content: String,
    /// The BLAKE3 of `content`, once a compile has needed it.
    #[serde(skip)]
    pub(crate) hash: HashSlot,
}

impl Turn {
    /// A turn of `role` saying `content`.
    pub fn new(role: Role, content: impl Into<String>) -> Turn {
        Turn {
            role,
            content: content.into(),
            hash: HashSlot::default(),
        }
    }
}

/// One piece of retrieved evidence, untrusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Shared with the envelope, which names every evidence item several times.
    pub id: Arc<str>,
    pub source: Arc<str>,
    /// Read and set through [`Evidence::content`] and [`Evidence::set_content`].
    pub(crate) content: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub score: f64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub hops: u32,
    /// The BLAKE3 of `content`, once a compile has needed it.
    #[serde(skip)]
    pub(crate) hash: HashSlot,
}

impl Evidence {
    /// An item with a score and hop count of 0.
    pub fn new(id: &str, source: &str, content: impl Into<String>) -> Evidence {
        Evidence {
            id: Arc::from(id),
            source: Arc::from(source),
            content: content.into(),
            score: 0.0,
            hops: 0,
            hash: HashSlot::default(),
        }
    }
}

/// One item of promoted memory, untrusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryItem {
    pub id: Arc<str>,
    /// Read and set through [`MemoryItem::content`] and [`MemoryItem::set_content`].
    pub(crate) content: String,
    /// Must be `true`: raw (unpromoted) memory is refused.
    #[serde(default)]
    pub promoted: Option<bool>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub score: f64,
    /// The BLAKE3 of `content`, once a compile has needed it.
    #[serde(skip)]
    pub(crate) hash: HashSlot,
}

impl MemoryItem {
    /// A promoted item with a score of 0.
    pub fn new(id: &str, content: impl Into<String>) -> MemoryItem {
        MemoryItem {
            id: Arc::from(id),
            content: content.into(),
            promoted: Some(true),
            score: 0.0,
            hash: HashSlot::default(),
        }
    }
}

/// `content()` and `set_content()` of the items that keep their content's hash.
macro_rules! content_methods {
    ($($item:ty),*) => {$(
        impl $item {
            pub fn content(&self) -> &str {
                &self.content
            }

            /// Replaces the content. The item keeps its content's hash once a compile
            /// has computed it, and a compile that finds the hash there trusts it: the
            /// content is set only here, which forgets the hash, so that a kept hash
            /// always belongs to the content beside it.
            pub fn set_content(&mut self, content: impl Into<String>) {
                self.content = content.into();
                self.hash = HashSlot::default();
            }
        }
    )*};
}

content_methods!(Turn, Evidence, MemoryItem);

/// A struct read from a JSON object only. serde's derived impls also fill a struct
/// from an array, member by member in declaration order; an input of that shape is
/// the wrong shape (exit 4), so every input struct is read through this.
#[derive(Debug)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // As serde's derived impls say it: `struct RunContext`.
                let name = std::any::type_name::<T>();
                write!(f, "struct {}", name.rsplit("::").next().unwrap_or(name))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(std::marker::PhantomData))
            .map(Object)
    }
}

/// A struct member read through [`Object`].
pub fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Object::<T>::deserialize(d).map(|o| o.0)
}

/// An optional struct member read through [`Object`].
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Object<T>>::deserialize(d)?.map(|o| o.0))
}

/// An optional struct member read through [`Object`], `null` being its default.
fn object_or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(optional_object(d)?.unwrap_or_default())
}

/// A list of structs, each read through [`Object`]; `null` is the empty list.
pub fn objects<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let items = Option::<Vec<Object<T>>>::deserialize(d)?.unwrap_or_default();
    Ok(items.into_iter().map(|o| o.0).collect())
}

/// [`object`] as a shared value.
pub fn shared_object<'de, D, T>(d: D) -> Result<Arc<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    object(d).map(Arc::new)
}

/// [`objects`] as a shared list.
pub fn shared_objects<'de, D, T>(d: D) -> Result<Arc<[T]>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    objects(d).map(Arc::from)
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Decodes parsed documents into typed inputs. `evidence` and `memory` are JSON arrays
/// (or `null`/absent for none). Shape errors name the document and the member:
/// `run: missing field `safety_mode``, `run.safety_mode: unknown variant `yolo``,
/// `evidence[3].scroe: unknown field `scroe``.
pub fn decode_inputs(
    run: Value,
    request: Value,
    evidence: Option<Value>,
    memory: Option<Value>,
) -> Result<CompileInputs, CompileError> {
    let run: RunContext = decode("run", run)?;
    let request: InvokeRequest = decode("request", request)?;
    let evidence = decode_list("evidence", evidence)?;
    let memory = decode_list("memory", memory)?;
    Ok(CompileInputs {
        run,
        request: Arc::new(request),
        evidence: evidence.into(),
        memory: memory.into(),
    })
}

/// [`decode_inputs`] straight from JSON text, without building a `Value` for each
/// document first: the fast path for hosts that hold their inputs as JSON bytes
/// (evidence lists run to hundreds of kilobytes). `None` on any failure, syntax or
/// shape: the caller then parses the documents and calls [`decode_inputs`], which
/// names the offending member. Whenever this succeeds, its result is exactly what
/// that slower path gives (both use the same `Deserialize` impls on the same parser).
pub fn decode_json_inputs(
    run: &[u8],
    request: &[u8],
    evidence: Option<&[u8]>,
    memory: Option<&[u8]>,
) -> Option<CompileInputs> {
    decode_json_with_lists(
        run,
        json_request(request),
        json_list(evidence),
        json_list(memory),
    )
}

/// The request of [`decode_json_inputs`], shared.
pub fn json_request(bytes: &[u8]) -> Option<Arc<InvokeRequest>> {
    from_json_bytes::<Object<_>>(bytes).map(|o| Arc::new(o.0))
}

/// [`decode_json_inputs`] of the run, with the request and the evidence and memory
/// lists the caller decoded (or `None` when they did not decode).
pub fn decode_json_with_lists(
    run: &[u8],
    request: Option<Arc<InvokeRequest>>,
    evidence: Option<Arc<[Evidence]>>,
    memory: Option<Arc<[MemoryItem]>>,
) -> Option<CompileInputs> {
    Some(CompileInputs {
        run: from_json_bytes::<Object<_>>(run)?.0,
        request: request?,
        evidence: evidence?,
        memory: memory?,
    })
}

/// A list document (evidence or memory) from JSON bytes, read as a member with
/// `deserialize_with = "objects"` is; absent is the empty list. `None` on any failure.
pub(crate) fn json_list<T: for<'de> Deserialize<'de>>(bytes: Option<&[u8]>) -> Option<Arc<[T]>> {
    /// The document as a whole, read through [`objects`].
    struct Objects<T>(Vec<T>);
    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Objects<T> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            objects(d).map(Objects)
        }
    }
    match bytes {
        None => Some(Arc::from([])),
        Some(b) => from_json_bytes::<Objects<T>>(b).map(|o| o.0.into()),
    }
}

/// Decodes one JSON document from bytes, or `None` on any failure. The bytes are
/// checked for UTF-8 in one pass over the whole document, then parsed as text, so the
/// parser reads each string without checking it again (`from_slice` checks every
/// string on its own, which costs more than one pass). Bytes that are not UTF-8 are
/// not JSON either: `None`, as for any other failure of a fast path.
pub fn from_json_bytes<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Option<T> {
    let text = std::str::from_utf8(bytes).ok()?;
    serde_json::from_str(text).ok()
}

/// Decodes one document; a shape error names the member it is about
/// (`run.safety_mode: unknown variant ...`, `request.history[1].role: ...`).
fn decode<T: for<'de> Deserialize<'de>>(path: &str, value: Value) -> Result<T, CompileError> {
    serde_path_to_error::deserialize(value)
        .map(|o: Object<T>| o.0)
        .map_err(|e| {
            let inner = e.path().to_string();
            let at = match inner.as_str() {
                "." => path.to_owned(),
                member if member.starts_with('[') => format!("{path}{member}"),
                member => format!("{path}.{member}"),
            };
            CompileError::input(at, e.into_inner().to_string())
        })
}

fn decode_list<T: for<'de> Deserialize<'de>>(
    path: &str,
    value: Option<Value>,
) -> Result<Vec<T>, CompileError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| decode(&format!("{path}[{i}]"), item))
            .collect(),
        Some(other) => Err(CompileError::input(
            path,
            format!(
                "expected a list, found {}",
                super::shared::json_kind(&other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run() -> Value {
        json!({"run_id": "r", "safety_mode": "supervised"})
    }
    fn request() -> Value {
        json!({"request_id": "q", "message": "m", "channel": "web", "locale": "en"})
    }

    #[test]
    fn minimal_inputs_decode_with_defaults() {
        let i = decode_inputs(run(), request(), None, None).unwrap();
        assert_eq!(i.run.user.roles, Vec::<String>::new());
        assert_eq!(i.request.context, Value::Null);
        assert!(i.evidence.is_empty());
    }

    #[test]
    fn shape_errors_name_the_document() {
        let e = decode_inputs(json!({"run_id": "r"}), request(), None, None).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(
            e.to_string()
                .starts_with("run: missing field `safety_mode`"),
            "{e}"
        );
        let e = decode_inputs(
            run(),
            request(),
            Some(json!([{"id": "a", "source": "s", "content": "c", "scroe": 1}])),
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("evidence[0].scroe: unknown field `scroe`"),
            "{e}"
        );
        let e = decode_inputs(
            json!({"run_id": "r", "safety_mode": "yolo"}),
            request(),
            None,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown variant `yolo`"), "{e}");
    }

    #[test]
    fn the_json_fast_path_agrees_with_decode_inputs() {
        let ev = json!([{"id": "a", "source": "s", "content": "c", "score": 1, "hops": null}]);
        let mem = json!([{"id": "m", "content": "x", "promoted": true}]);
        let text = |v: &Value| serde_json::to_vec(v).unwrap();
        let fast = decode_json_inputs(
            &text(&run()),
            &text(&request()),
            Some(&text(&ev)),
            Some(&text(&mem)),
        );
        let slow = decode_inputs(run(), request(), Some(ev), Some(mem)).unwrap();
        assert_eq!(fast, Some(slow));
        // Nulls and absent lists are empty; any failure is left to the slow path.
        let none = decode_json_inputs(&text(&run()), &text(&request()), Some(b"null"), None);
        assert_eq!(none.map(|i| i.evidence.len()), Some(0));
        assert!(decode_json_inputs(b"{", &text(&request()), None, None).is_none());
        assert!(decode_json_inputs(&text(&run()), &text(&request()), Some(b"{}"), None).is_none());
        let dup = br#"{"run_id": "r", "run_id": "s", "safety_mode": "supervised"}"#;
        assert!(decode_json_inputs(dup, &text(&request()), None, None).is_none());
        // Bytes that are not UTF-8, inside a string or out of one, are not JSON:
        // the slow path names them.
        let mut bad = br#"[{"id": "a", "source": "s", "content": "c"}]"#.to_vec();
        let at = bad.iter().position(|&b| b == b'c').unwrap();
        bad[at] = 0xff;
        assert!(decode_json_inputs(&text(&run()), &text(&request()), Some(&bad), None).is_none());
        assert!(serde_json::from_slice::<Value>(&bad).is_err());
        assert!(decode_json_inputs(b"\xff{}", &text(&request()), None, None).is_none());
        // Escapes, multibyte text and an escaped surrogate pair read as the slow path
        // reads them.
        let ev =
            json!([{"id": "é\u{1F600}", "source": "\"s\"\n", "content": "日本\\", "score": 0.1}]);
        let escaped = r#"[{"id": "\u00e9\ud83d\ude00", "source": "\"s\"\n", "content": "日本\\", "score": 0.1}]"#;
        let fast = decode_json_inputs(
            &text(&run()),
            &text(&request()),
            Some(escaped.as_bytes()),
            None,
        );
        let slow = decode_inputs(run(), request(), Some(ev), None).unwrap();
        assert_eq!(fast, Some(slow));
    }

    #[test]
    fn arrays_are_not_objects_on_either_path() {
        let text = |v: &Value| serde_json::to_vec(v).unwrap();
        let positional = json!(["r", "supervised"]);
        let e = decode_inputs(positional.clone(), request(), None, None).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(
            e.to_string()
                .starts_with("run: invalid type: sequence, expected struct RunContext"),
            "{e}"
        );
        assert!(decode_json_inputs(&text(&positional), &text(&request()), None, None).is_none());
        let ev = json!([["a", "s", "c", 0.5, 1]]);
        let e = decode_inputs(run(), request(), Some(ev.clone()), None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("evidence[0]: invalid type: sequence"),
            "{e}"
        );
        assert!(
            decode_json_inputs(&text(&run()), &text(&request()), Some(&text(&ev)), None).is_none()
        );
        let mut q = request();
        q["history"] = json!([["user", "hi"]]);
        let e = decode_inputs(run(), q.clone(), None, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("request.history[0]: invalid type"),
            "{e}"
        );
        assert!(decode_json_inputs(&text(&run()), &text(&q), None, None).is_none());
        // Other wrong types read as before: serde's words for the struct.
        let e = decode_inputs(json!("r"), request(), None, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("run: invalid type: string \"r\", expected struct RunContext"),
            "{e}"
        );
    }

    #[test]
    fn nulls_mean_absent() {
        let ev = json!([{"id": "a", "source": "s", "content": "c", "score": null, "hops": null}]);
        let i = decode_inputs(run(), request(), Some(ev), Some(Value::Null)).unwrap();
        assert_eq!((i.evidence[0].score, i.evidence[0].hops), (0.0, 0));
    }
}
