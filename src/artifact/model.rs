//! The typed model of a `ctxpack.pack/v1` artifact.
//!
//! Field order here is irrelevant to the bytes: canonical JSON sorts keys. Every
//! collection is a `Vec` in a documented order (or a `BTreeMap`), never a hash map, so
//! the same pack always gives the same artifact.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format tag every v1 artifact carries.
pub const ARTIFACT_FORMAT: &str = "ctxpack.pack/v1";

/// Shares are stored as integer parts per million of the budget (`10%` = 100_000), so
/// that allocation is exact integer arithmetic in every implementation.
pub const PPM: u64 = 1_000_000;

/// A whole artifact. `hash` is `None` while the artifact is being built and is filled in
/// over the canonical bytes of everything else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    pub format: String,
    /// `scope/name`.
    pub name: String,
    /// A semantic version.
    pub version: String,
    /// A library pack holds shared definitions; the runtime refuses to compile it.
    pub library: bool,
    pub description: Option<String>,
    pub compiler: Compiler,
    /// Every import, transitively, sorted by name then version.
    pub dependencies: Vec<Dependency>,
    /// Context fields sorted by path.
    pub context: Vec<ContextField>,
    /// `None` for a library pack.
    pub prompts: Option<Prompts>,
    /// `None` for a library pack.
    pub budget: Option<Budget>,
    /// Tools sorted by name.
    pub tools: Vec<Tool>,
    /// Prohibited tool names, sorted and unique.
    pub prohibitions: Vec<Prohibition>,
    /// Intents sorted by name.
    pub intents: Vec<Intent>,
    /// Redactors sorted by name.
    pub redactors: Vec<Redactor>,
    /// Policies in evaluation order: priority descending, then name ascending.
    pub policies: Vec<Policy>,
    /// Static blocks sorted by name.
    pub blocks: Vec<Block>,
    /// Present when the pack declares `session directives`; absent otherwise (so the
    /// bytes of packs without it are unchanged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Session>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// What `session directives` turns on: the request may carry `session_state`, the
/// compile steps it with the message, renders it as trusted text and exposes it to
/// conditions and templates as `session.*`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Always `true`: the form leaves room for options.
    pub directives: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compiler {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    pub name: String,
    pub version: String,
    pub hash: String,
}

/// Where an item was defined: `scope/name@version`. For a policy this is its bundle.
pub type Provenance = String;

/// A value type of the context schema or a tool input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Type {
    String,
    Int,
    Float,
    Bool,
    /// An RFC 3339 string.
    Timestamp,
    List {
        items: Box<Type>,
    },
    Enum {
        variants: Vec<String>,
    },
}

impl std::fmt::Display for Type {
    /// The type as a pack writes it: `string`, `list<int>`, `enum("a", "b")`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Type::String => f.write_str("string"),
            Type::Int => f.write_str("int"),
            Type::Float => f.write_str("float"),
            Type::Bool => f.write_str("bool"),
            Type::Timestamp => f.write_str("timestamp"),
            Type::List { items } => write!(f, "list<{items}>"),
            Type::Enum { variants } => {
                f.write_str("enum(")?;
                for (i, v) in variants.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v:?}")?;
                }
                f.write_str(")")
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextField {
    /// The path below `ctx`, e.g. `user.tier`.
    pub path: String,
    #[serde(rename = "type")]
    pub ty: Type,
    pub optional: bool,
    pub doc: Option<String>,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompts {
    pub system: Template,
    pub developer: Option<Template>,
}

/// A template: its text as written (escapes other than `\{{` resolved) and the parsed
/// parts that a renderer walks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub text: String,
    pub parts: Vec<TemplatePart>,
}

impl Template {
    /// The text an artifact records beside `parts`, written from them: literal text
    /// with each `{{` escaped as `\{{`, each interpolation as `{{ path }}` or
    /// `{{ path | "default" }}` (the default as a JSON string). The runtime renders
    /// `parts` and reviews read `text` (`diff`), so readers refuse an artifact whose
    /// two disagree.
    pub fn text_of(parts: &[TemplatePart]) -> String {
        let mut text = String::new();
        for part in parts {
            match part {
                TemplatePart::Text(t) => text.push_str(&t.replace("{{", "\\{{")),
                TemplatePart::Path {
                    path,
                    default: Some(d),
                } => text.push_str(&format!(
                    "{{{{ {path} | {} }}}}",
                    serde_json::Value::from(d.as_str())
                )),
                TemplatePart::Path {
                    path,
                    default: None,
                } => text.push_str(&format!("{{{{ {path} }}}}")),
            }
        }
        text
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TemplatePart {
    /// Literal text, rendered as is.
    Text(String),
    /// An interpolation `{{ path | "default" }}`.
    Path {
        /// Full path: `ctx.order.id`, `request.locale`, `run.user.id`.
        path: String,
        default: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    O200k,
    Cl100k,
    /// `ceil(utf8 bytes / 4)`.
    Approx,
}

impl Tokenizer {
    pub fn as_str(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k",
            Tokenizer::Cl100k => "cl100k",
            Tokenizer::Approx => "approx",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "o200k" => Some(Tokenizer::O200k),
            "cl100k" => Some(Tokenizer::Cl100k),
            "approx" => Some(Tokenizer::Approx),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub total: u64,
    pub tokenizer: Tokenizer,
    /// Buckets sorted by name.
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    Drop,
    Truncate,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    pub name: String,
    /// Parts per million of the available budget.
    pub share_ppm: u64,
    pub priority: i64,
    pub min: u64,
    pub overflow: Overflow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

/// Approval modes are ordered: `auto < confirm < review`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    Auto,
    Confirm,
    Review,
}

/// Safety modes, each honoring approval modes up to its ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SafetyMode {
    Autonomous,
    Supervised,
    Reviewed,
}

impl SafetyMode {
    /// The highest approval mode this safety mode honors.
    pub fn ceiling(self) -> Approval {
        match self {
            SafetyMode::Autonomous => Approval::Auto,
            SafetyMode::Supervised => Approval::Confirm,
            SafetyMode::Reviewed => Approval::Review,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SafetyMode::Autonomous => "autonomous",
            SafetyMode::Supervised => "supervised",
            SafetyMode::Reviewed => "reviewed",
        }
    }
}

impl Approval {
    pub fn as_str(self) -> &'static str {
        match self {
            Approval::Auto => "auto",
            Approval::Confirm => "confirm",
            Approval::Review => "review",
        }
    }
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    /// Empty when the pack gave none (the checker warns, W0402).
    pub description: String,
    pub kind: String,
    pub risk: Risk,
    pub approval: Approval,
    /// A JSON Schema object for the tool's input.
    pub input: Value,
    pub doc: Option<String>,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prohibition {
    pub tool: String,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    pub name: String,
    pub description: Option<String>,
    pub safety: SafetyMode,
    /// Permitted tools in the order written.
    pub tools: Vec<String>,
    pub task: Template,
    /// Bucket share overrides (parts per million) for this intent.
    pub budget: BTreeMap<String, u64>,
    pub fallback: bool,
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redactor {
    pub name: String,
    pub pattern: String,
    pub doc: Option<String>,
    pub provenance: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub name: String,
    pub priority: i64,
    /// `false` for an `advisory` policy.
    pub enforcing: bool,
    /// The condition as JsonLogic, over `{ "ctx", "request", "run" }`.
    pub when: Value,
    /// Effects in the order written.
    pub effects: Vec<Effect>,
    /// `scope/name@version` of the pack that defined it.
    pub bundle: Provenance,
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Effect {
    Refuse(String),
    Escalate(String),
    RequireApproval(Vec<String>),
    Deny(Vec<String>),
    Redact(Vec<String>),
    Instruct(Template),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub name: String,
    pub bucket: String,
    pub priority: i64,
    pub text: Template,
    pub doc: Option<String>,
    pub provenance: Provenance,
}
