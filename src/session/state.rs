//! The authoritative state, `{"premise", "policies", "version"}`: its canonical
//! export and its all-or-nothing import.
//!
//! Invariants, kept by construction: policy keys are canonical policy identities
//! (non-empty fixed points of [`policy_key`](crate::session::policy_key)); a premise is
//! sanitized and non-empty. So every exported state imports back to itself.

use std::collections::BTreeMap;
use std::fmt;

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::json::{member_path, write_ascii_string, Node};
use super::text::{policy_key, sanitize_premise};

/// The state schema version this engine reads and writes.
pub const SCHEMA_VERSION: u64 = 2;

/// One item's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Use,
    Prohibit,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Use => "use",
            Policy::Prohibit => "prohibit",
        }
    }
}

/// The premise and the per-item policies. Immutable values: the engine returns a new
/// state for every transition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct State {
    premise: Option<String>,
    /// Keyed by canonical policy identity; sorted, which is the export order.
    policies: BTreeMap<String, Policy>,
}

impl State {
    /// The empty state: no premise, no policies.
    pub fn new() -> Self {
        State::default()
    }

    pub fn premise(&self) -> Option<&str> {
        self.premise.as_deref()
    }

    /// The policies by canonical identity, in key order.
    pub fn policies(&self) -> &BTreeMap<String, Policy> {
        &self.policies
    }

    /// The policy for `item`, under its canonical identity (so `Docker` finds
    /// `docker`).
    pub fn policy(&self, item: &str) -> Option<Policy> {
        self.policies.get(&policy_key(item)).copied()
    }

    /// The items whose policy is `policy`, in key order.
    pub fn items(&self, policy: Policy) -> impl Iterator<Item = &str> {
        self.policies
            .iter()
            .filter(move |(_, p)| **p == policy)
            .map(|(k, _)| k.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.premise.is_none() && self.policies.is_empty()
    }

    pub(crate) fn set_premise(&mut self, value: Option<&str>) {
        self.premise = value.map(sanitize_premise);
    }

    pub(crate) fn policies_mut(&mut self) -> &mut BTreeMap<String, Policy> {
        &mut self.policies
    }

    /// The canonical export: keys sorted, no whitespace, every character outside
    /// printable ASCII escaped, as `{"policies":{...},"premise":...,"version":2}`.
    pub fn export_json(&self) -> String {
        let mut out = String::with_capacity(64);
        out.push_str("{\"policies\":{");
        for (i, (key, policy)) in self.policies.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_ascii_string(&mut out, key);
            out.push(':');
            write_ascii_string(&mut out, policy.as_str());
        }
        out.push_str("},\"premise\":");
        match &self.premise {
            Some(premise) => write_ascii_string(&mut out, premise),
            None => out.push_str("null"),
        }
        out.push_str(&format!(",\"version\":{SCHEMA_VERSION}}}"));
        out
    }

    /// The state as a JSON value (the same members as the export).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Imports exported JSON text. All or nothing: any problem refuses the whole
    /// payload, and the error names the member at fault.
    pub fn import_json(payload: &str) -> Result<State, ImportError> {
        let node: Node = serde_json::from_str(payload).map_err(|e| ImportError {
            kind: ImportErrorKind::InvalidJson,
            path: "$".into(),
            detail: e.to_string(),
        })?;
        validate(node)
    }

    /// Imports a state already parsed as a JSON value, with the same rules (duplicate
    /// members cannot be seen in a `Value`; members are checked in key order).
    pub fn from_value(value: &Value) -> Result<State, ImportError> {
        validate(Node::from_value(value))
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.export_json())
    }
}

/// The export's members, keys in sorted order.
impl Serialize for State {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("policies", &self.policies)?;
        map.serialize_entry("premise", &self.premise)?;
        map.serialize_entry("version", &SCHEMA_VERSION)?;
        map.end()
    }
}

/// Import through serde, with the import's validation; the error message carries the
/// member's path.
impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let node = Node::deserialize(deserializer)?;
        validate(node).map_err(serde::de::Error::custom)
    }
}

/// What kind of import failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImportErrorKind {
    /// The payload is not JSON.
    InvalidJson,
    /// JSON, but not a valid state.
    InvalidPayload,
    /// A `version` other than [`SCHEMA_VERSION`].
    UnsupportedVersion,
}

/// A refused import: nothing was imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError {
    kind: ImportErrorKind,
    /// JSONPath of the member at fault, from `$`, the payload's root.
    path: String,
    detail: String,
}

impl ImportError {
    pub fn kind(&self) -> ImportErrorKind {
        self.kind
    }

    /// The member at fault as a JSONPath (`$`, `$.premise`, `$.policies["The Docker"]`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path with `$` replaced by `root` (`request.session_state.premise`).
    pub fn path_under(&self, root: &str) -> String {
        format!(
            "{root}{}",
            self.path.strip_prefix('$').unwrap_or(&self.path)
        )
    }

    /// What is wrong with the member, without the path.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    fn payload(path: impl Into<String>, detail: impl Into<String>) -> Self {
        ImportError {
            kind: ImportErrorKind::InvalidPayload,
            path: path.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ImportErrorKind::InvalidJson => write!(f, "Invalid JSON payload: {}", self.detail),
            ImportErrorKind::InvalidPayload => {
                write!(f, "Invalid state payload at {}: {}", self.path, self.detail)
            }
            ImportErrorKind::UnsupportedVersion => write!(
                f,
                "Unsupported state version: {} at {} (this engine reads version {SCHEMA_VERSION})",
                self.detail, self.path
            ),
        }
    }
}

impl std::error::Error for ImportError {}

const MEMBERS: [&str; 3] = ["premise", "policies", "version"];

/// The import rules, in order: an object with exactly the three members, each once;
/// `version` 2; `premise` a string or null; `policies` an object; a premise that is
/// not empty once sanitized; then each policy in document order: `"use"` or
/// `"prohibit"`, a key that is not empty once normalised, and no two keys with the
/// same identity.
fn validate(root: Node) -> Result<State, ImportError> {
    let Node::Object(members) = root else {
        return Err(ImportError::payload(
            "$",
            format!("expected an object, found {}", root.type_name()),
        ));
    };
    let mut found: [Option<Node>; 3] = [None, None, None];
    for (key, value) in members {
        let path = member_path("$", &key);
        let Some(slot) = MEMBERS.iter().position(|m| *m == key) else {
            return Err(ImportError::payload(
                path,
                format!("unknown member `{key}`"),
            ));
        };
        if found[slot].is_some() {
            return Err(ImportError::payload(path, "duplicate member"));
        }
        found[slot] = Some(value);
    }
    let absent: Vec<&str> = MEMBERS
        .iter()
        .zip(&found)
        .filter(|(_, v)| v.is_none())
        .map(|(m, _)| *m)
        .collect();
    let [Some(premise), Some(policies), Some(version)] = found else {
        return Err(ImportError::payload(
            "$",
            format!("missing member `{}`", absent.join("`, `")),
        ));
    };
    check_version(&version)?;
    let premise = match premise {
        Node::Null => None,
        Node::String(s) => Some(s),
        other => {
            return Err(ImportError::payload(
                "$.premise",
                format!("expected a string or null, found {}", other.type_name()),
            ))
        }
    };
    let Node::Object(entries) = policies else {
        return Err(ImportError::payload(
            "$.policies",
            format!("expected an object, found {}", policies.type_name()),
        ));
    };
    let premise = match premise.map(|p| sanitize_premise(&p)) {
        Some(p) if p.is_empty() => {
            return Err(ImportError::payload(
                "$.premise",
                "the premise is empty once whitespace is collapsed",
            ))
        }
        other => other,
    };
    Ok(State {
        premise,
        policies: import_policies(entries)?,
    })
}

fn check_version(version: &Node) -> Result<(), ImportError> {
    let supported = matches!(version, Node::Number(n) if n.as_u64() == Some(SCHEMA_VERSION));
    if supported {
        return Ok(());
    }
    Err(ImportError {
        kind: ImportErrorKind::UnsupportedVersion,
        path: "$.version".into(),
        detail: version.brief(),
    })
}

fn import_policies(entries: Vec<(String, Node)>) -> Result<BTreeMap<String, Policy>, ImportError> {
    let mut policies = BTreeMap::new();
    // The source key each canonical key came from, to name both in a collision.
    let mut sources: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in entries {
        let path = member_path("$.policies", &key);
        let policy = match &value {
            Node::String(s) if s == "use" => Policy::Use,
            Node::String(s) if s == "prohibit" => Policy::Prohibit,
            other => {
                return Err(ImportError::payload(
                    path,
                    format!("expected \"use\" or \"prohibit\", found {}", other.brief()),
                ))
            }
        };
        let canonical = policy_key(&key);
        if canonical.is_empty() {
            return Err(ImportError::payload(
                path,
                "the policy item is empty once normalised",
            ));
        }
        if let Some(source) = sources.get(&canonical) {
            let detail = if *source == key {
                "duplicate member".to_owned()
            } else {
                format!(
                    "{} and {} are the same policy item, {}",
                    quoted(source),
                    quoted(&key),
                    quoted(&canonical)
                )
            };
            return Err(ImportError::payload(path, detail));
        }
        sources.insert(canonical.clone(), key);
        policies.insert(canonical, policy);
    }
    Ok(policies)
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn import(payload: &str) -> Result<State, String> {
        State::import_json(payload).map_err(|e| e.to_string())
    }

    #[test]
    fn export_is_canonical_and_ascii() {
        assert_eq!(
            State::new().export_json(),
            r#"{"policies":{},"premise":null,"version":2}"#
        );
        let state = import(r#"{"version":2,"premise":" Café  au lait ","policies":{"Zeta":"use","alpha":"prohibit"}}"#).unwrap();
        assert_eq!(
            state.export_json(),
            r#"{"policies":{"alpha":"prohibit","zeta":"use"},"premise":"Caf\u00e9 au lait","version":2}"#
        );
        assert_eq!(import(&state.export_json()).unwrap(), state);
        assert_eq!(
            serde_json::from_str::<Value>(&state.export_json()).unwrap(),
            state.to_value()
        );
    }

    #[test]
    fn refusals_name_the_member() {
        let cases = [
            ("{", "Invalid JSON payload"),
            (
                "[]",
                "Invalid state payload at $: expected an object, found an array",
            ),
            (
                r#"{"premise":null,"policies":{}}"#,
                "at $: missing member `version`",
            ),
            (
                r#"{"premise":null,"policies":{},"version":2,"x":1}"#,
                "at $.x: unknown member",
            ),
            (
                r#"{"premise":null,"premise":null,"policies":{},"version":2}"#,
                "at $.premise: duplicate member",
            ),
            (
                r#"{"premise":null,"policies":{},"version":1}"#,
                "Unsupported state version: 1 at $.version",
            ),
            (
                r#"{"premise":null,"policies":{},"version":2.0}"#,
                "Unsupported state version: 2.0",
            ),
            (
                r#"{"premise":null,"policies":{},"version":"2"}"#,
                "Unsupported state version: \"2\"",
            ),
            (
                r#"{"premise":3,"policies":{},"version":2}"#,
                "at $.premise: expected a string or null",
            ),
            (
                r#"{"premise":null,"policies":[],"version":2}"#,
                "at $.policies: expected an object",
            ),
            (
                r#"{"premise":"\u3000","policies":{},"version":2}"#,
                "at $.premise: the premise is empty",
            ),
            (
                r#"{"premise":null,"policies":{"a b":"deny"},"version":2}"#,
                "at $.policies[\"a b\"]: expected \"use\" or \"prohibit\", found \"deny\"",
            ),
            (
                r#"{"premise":null,"policies":{" ":"use"},"version":2}"#,
                "policy item is empty",
            ),
            (
                r#"{"premise":null,"policies":{"Docker":"use","docker ":"use"},"version":2}"#,
                "\"Docker\" and \"docker \" are the same policy item, \"docker\"",
            ),
            (
                r#"{"premise":null,"policies":{"x":"use","x":"use"},"version":2}"#,
                "at $.policies.x: duplicate member",
            ),
        ];
        for (payload, expected) in cases {
            let err = import(payload).unwrap_err();
            assert!(err.contains(expected), "{payload}: {err}");
        }
    }

    #[test]
    fn deserialize_validates() {
        let err =
            serde_json::from_str::<State>(r#"{"premise":null,"policies":{"x":"no"},"version":2}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("$.policies.x"), "{err}");
        let state: State =
            serde_json::from_str(r#"{"premise":"p","policies":{"X":"use"},"version":2}"#).unwrap();
        assert_eq!(state.policy("x"), Some(Policy::Use));
        assert_eq!(State::from_value(&state.to_value()).unwrap(), state);
    }

    #[test]
    fn path_under_a_root() {
        let err = State::import_json(r#"{"premise":1,"policies":{},"version":2}"#).unwrap_err();
        assert_eq!(
            err.path_under("request.session_state"),
            "request.session_state.premise"
        );
    }
}
