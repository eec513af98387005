//! The IR: a pack with its names resolved, its expressions typed and its `when`
//! conditions lowered to JsonLogic.
//!
//! [`build`] turns an AST into a [`Pack`] and the diagnostics of name resolution and
//! typing (duplicates, singletons, unknown paths, type errors, templates). The checks
//! in [`crate::check`] then run over the `Pack`. Every definition and every reference
//! keeps its span, which is what the language server navigates by.

mod build;
pub mod expr;
mod reuse;
pub mod scope;
pub mod types;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

pub use crate::artifact::valid_pack_name;
pub use build::{build, build_unless, import_decls};
pub(crate) use build::{item_alone, ItemIr};
pub use reuse::EarlierBuild;
pub(crate) use reuse::{old_item, ItemRef};
pub use types::Ty;

use crate::artifact::{Approval, Overflow, Risk, SafetyMode, Tokenizer};
use crate::span::Span;

/// What a name refers to, for references, hover and navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SymbolKind {
    Tool,
    Intent,
    Policy,
    Redactor,
    Bucket,
    Block,
    Field,
}

impl SymbolKind {
    /// This kind's bit in a set of kinds.
    fn bit(self) -> u8 {
        1 << self as u8
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Tool => "tool",
            SymbolKind::Intent => "intent",
            SymbolKind::Policy => "policy",
            SymbolKind::Redactor => "redactor",
            SymbolKind::Bucket => "bucket",
            SymbolKind::Block => "block",
            SymbolKind::Field => "context field",
        }
    }
}

/// A use of a name: a tool in an intent's `tools`, a field path in an expression, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub kind: SymbolKind,
    /// The tool/intent/... name, or for fields the path below `ctx`.
    pub name: Arc<str>,
    pub span: Span,
}

/// A definition: where a name is declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    pub kind: SymbolKind,
    pub name: Arc<str>,
    pub span: Span,
}

#[derive(Debug, Clone, Default)]
pub struct Pack {
    pub name: String,
    pub version: String,
    pub library: bool,
    /// The header did not parse in full (E0001): whether this is a library is unknown,
    /// so the checks that depend on it (items an application needs, unused tools) are
    /// skipped.
    pub header_broken: bool,
    /// The header's `pack` keyword; item-level "missing" diagnostics point here.
    pub header_span: Span,
    pub description: Option<String>,
    pub imports: Vec<ImportDecl>,
    pub fields: Vec<Field>,
    pub system: Option<TemplateIr>,
    pub developer: Option<TemplateIr>,
    pub budget: Option<BudgetIr>,
    pub tools: Vec<ToolIr>,
    pub prohibitions: Vec<NameRef>,
    pub intents: Vec<IntentIr>,
    pub redactors: Vec<RedactorIr>,
    pub policies: Vec<PolicyIr>,
    pub blocks: Vec<BlockIr>,
    /// Names of items whose body failed to parse: declared, but not checked further.
    pub broken: Vec<Definition>,
    /// `session directives`: the pack keeps the user's standing constraints as
    /// session state (`session.premise`, `session.use`, `session.prohibit`).
    pub session: Option<Span>,
    /// Second (and later) definitions of a name, reported as E0101: still
    /// declarations of that name for the editor (a rename renames them too).
    pub duplicates: Vec<Definition>,
    pub definitions: Vec<Definition>,
    pub references: Vec<Reference>,
    /// `(kind, name)` → `scope/name@version` for items brought in by imports.
    pub origins: BTreeMap<(SymbolKind, String), String>,
    /// Prohibited tool → the imported pack that prohibited it.
    pub prohibition_origins: BTreeMap<String, String>,
    /// An import failed to resolve; unknown names may come from it, so they are not
    /// reported.
    pub unresolved_imports: bool,
    /// A `context` block failed to parse; uses of its fields are not reported.
    pub unresolved_fields: bool,
    /// The paths that the bad lines of a broken `context` block begin with: what
    /// they may have declared.
    pub field_holes: Vec<String>,
    /// A bad line of a broken `context` block begins with no path: any field may be
    /// missing.
    pub fields_unknown: bool,
    /// An intent failed to parse (named or not): the tools it permits are unknown.
    pub broken_intent: bool,
    pub(crate) field_index: foldhash::HashMap<Arc<str>, usize>,
    /// Every declared name with the kinds it is declared as (a bit per
    /// [`SymbolKind`]), broken items included; filled by [`build`].
    pub(crate) symbols: foldhash::HashMap<Arc<str>, u8>,
    pub(crate) tool_index: foldhash::HashMap<String, usize>,
    /// What each of the file's items added, for a later build to reuse.
    pub(crate) bodies: Vec<reuse::ItemBody>,
}

#[derive(Debug, Clone)]
pub struct ImportDecl {
    pub name: String,
    pub version: Option<String>,
    pub keyword: Span,
    pub name_span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRef {
    pub name: Arc<str>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Field {
    /// Below `ctx`: `user.tier`. Shared with the syntax tree.
    pub path: Arc<str>,
    pub ty: Ty,
    pub optional: bool,
    pub span: Span,
    pub doc: Option<String>,
}

/// A template: its parts and the spans of its interpolated paths. The text and parts
/// are shared with the analyses of later edits that keep the template as it was.
#[derive(Debug, Clone)]
pub struct TemplateIr {
    pub text: Arc<str>,
    pub parts: Arc<[crate::artifact::TemplatePart]>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct BudgetIr {
    pub keyword: Span,
    pub total: Option<(i64, Span)>,
    pub tokenizer: Tokenizer,
    pub buckets: Vec<BucketIr>,
}

#[derive(Debug, Clone)]
pub struct BucketIr {
    pub name: String,
    pub name_span: Span,
    pub share_ppm: Option<u64>,
    pub share_span: Option<Span>,
    pub priority: i64,
    pub min: Option<(i64, Span)>,
    pub overflow: Overflow,
    /// The `///` comment above the bucket.
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ToolIr {
    pub name: String,
    pub name_span: Span,
    pub description: Option<String>,
    pub kind: Option<String>,
    /// Where the kind is written; `None` for an imported tool.
    pub kind_span: Option<Span>,
    pub risk: Option<(Risk, Span)>,
    pub approval: Option<(Approval, Span)>,
    /// JSON Schema of the input; shared with the analyses of later edits that
    /// leave the tool as it was.
    pub input: Arc<Value>,
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub struct IntentIr {
    pub name: String,
    pub name_span: Span,
    pub fallback: bool,
    pub description: Option<String>,
    pub safety: SafetyMode,
    pub tools: Vec<NameRef>,
    pub task: Option<TemplateIr>,
    pub budget: Option<IntentBudgetIr>,
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub struct IntentBudgetIr {
    pub keyword: Span,
    pub overrides: Vec<(NameRef, u64)>,
}

#[derive(Debug, Clone)]
pub struct RedactorIr {
    pub name: String,
    pub name_span: Span,
    pub pattern: String,
    pub pattern_span: Span,
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PolicyIr {
    pub name: String,
    pub name_span: Span,
    pub priority: i64,
    pub advisory: bool,
    /// The condition lowered to JsonLogic; shared with the analyses of later edits
    /// that leave the policy as it was.
    pub when: Arc<Value>,
    pub when_span: Span,
    pub effects: Vec<EffectIr>,
    pub doc: Option<String>,
}

#[derive(Debug, Clone)]
pub enum EffectIr {
    Refuse(String),
    Escalate(String),
    RequireApproval(Vec<NameRef>),
    Deny(Vec<NameRef>),
    Redact(Vec<NameRef>),
    Instruct(TemplateIr),
}

#[derive(Debug, Clone)]
pub struct BlockIr {
    pub name: String,
    pub name_span: Span,
    pub bucket: NameRef,
    pub priority: i64,
    pub text: TemplateIr,
    pub doc: Option<String>,
}

impl Pack {
    /// Whether a broken `context` block may have declared `path` (below `ctx.`), so
    /// that a use of it is not reported as unknown: it is, extends or leads to a
    /// path a bad line begins with, or a bad line begins with none.
    pub fn may_declare(&self, path: &str) -> bool {
        let related = |hole: &str| {
            let under = |long: &str, short: &str| {
                long.strip_prefix(short)
                    .is_some_and(|r| r.is_empty() || r.starts_with('.'))
            };
            under(path, hole) || under(hole, path)
        };
        self.unresolved_fields
            && (self.fields_unknown || self.field_holes.iter().any(|h| related(h)))
    }

    /// The context field at `path` (below `ctx`).
    pub fn field(&self, path: &str) -> Option<&Field> {
        self.field_index.get(path).map(|&i| &self.fields[i])
    }

    pub fn tool(&self, name: &str) -> Option<&ToolIr> {
        self.tool_index.get(name).map(|&i| &self.tools[i])
    }

    /// Is `name` declared as a `kind` (fully or by a broken item)?
    pub fn declares(&self, kind: SymbolKind, name: &str) -> bool {
        self.symbols
            .get(name)
            .is_some_and(|kinds| kinds & kind.bit() != 0)
    }

    /// Fills the lookup tables from the collected items.
    pub(crate) fn index(&mut self) {
        let mut symbols = foldhash::HashMap::with_capacity_and_hasher(
            self.definitions.len() + self.broken.len(),
            Default::default(),
        );
        for d in self.definitions.iter().chain(self.broken.iter()) {
            *symbols.entry(d.name.clone()).or_insert(0) |= d.kind.bit();
        }
        self.symbols = symbols;
        self.index_tools();
    }

    /// Fills the tool table alone: once the bodies are built, the definitions are
    /// what they were and only the tools are new.
    pub(crate) fn index_tools(&mut self) {
        self.tool_index = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
    }

    /// Every declared name of a kind, for "did you mean" help.
    pub fn names(&self, kind: SymbolKind) -> impl Iterator<Item = &str> {
        self.definitions
            .iter()
            .chain(self.broken.iter())
            .filter(move |d| d.kind == kind)
            .map(|d| d.name.as_ref())
    }

    /// `scope/name@version`.
    pub fn provenance(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}
