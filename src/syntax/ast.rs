//! The owned syntax tree of one `.ctxpack` file.
//!
//! Every node carries its byte span; nothing here borrows from pest. Optional fields
//! are `None` when the source did not write them; defaults are the IR's business.

use serde_json::Value;

use crate::artifact::{Approval, Overflow, Risk, SafetyMode, Tokenizer};
use crate::span::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub header: Option<Header>,
    /// The file starts with a `pack` header that did not parse (E0001 reported): what
    /// the header would have said (its name, whether it is a `library`) is unknown, so
    /// checks that depend on it are skipped.
    pub header_broken: bool,
    /// Shared: a reparse keeps the items before an edit without copying them.
    pub items: Vec<std::sync::Arc<Item>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    /// Shared: the IR's definitions and references to it clone it without copying.
    pub name: std::sync::Arc<str>,
    pub span: Span,
}

/// A string literal after escapes and (for `"""`) dedenting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrLit {
    pub value: String,
    /// The whole literal, quotes included.
    pub span: Span,
    /// For each byte of `value`, the source offset it came from, counted from
    /// `span.start`; one extra entry maps the end of the value. Template diagnostics
    /// use it to point inside strings ([`StrLit::sub_span`]). Relative and shared, so
    /// moving the literal (an edit before it) moves only its span.
    pub offsets: std::sync::Arc<[u32]>,
    /// Byte positions in `value` of `{{` pairs written `\{{`: literal braces, not
    /// interpolations.
    pub literal_braces: Vec<usize>,
}

impl StrLit {
    /// The source offset byte `i` of `value` came from (`value.len()`: the end of the
    /// value; past that, the end of the literal).
    pub fn offset(&self, i: usize) -> usize {
        self.offsets
            .get(i)
            .map_or(self.span.end, |&o| self.span.start + o as usize)
    }

    /// The source span of `value[start..end]`.
    pub fn sub_span(&self, start: usize, end: usize) -> Span {
        let at = |i: usize| self.offset(i);
        if end > start {
            // The end of a sub-span is just past the source of its last byte.
            let last = at(end - 1);
            Span::new(at(start), last + 1)
        } else {
            Span::new(at(start), at(start))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub keyword: Span,
    pub name: StrLit,
    pub version: StrLit,
    pub library: Option<Span>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: ItemKind,
    /// The whole item, doc comment excluded.
    pub span: Span,
    /// The item's leading keyword.
    pub keyword: Span,
    /// The `///` lines above the item, joined with newlines.
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ItemKind {
    Import(Import),
    Description(StrLit),
    Context(Vec<FieldDecl>),
    Prompt(Prompt),
    Budget(Budget),
    Tool(Tool),
    Prohibit(Vec<Ident>),
    Intent(Intent),
    Redactor(Redactor),
    Policy(Policy),
    Block(Block),
    /// `session directives`: the span of `directives`.
    Session(Span),
    /// An item whose body failed to parse. Its name, when its head parsed, is still
    /// declared so that references to it are not reported as unknown.
    Broken(Broken),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenKind {
    Tool,
    Intent,
    Policy,
    Redactor,
    Block,
    Bucket,
    Budget,
    Context,
    Prompt,
    Import,
    Other,
}

/// What a broken item is, when its keyword is spelt out (not misspelt): enough for
/// the checks that need no body, E0105 (a singleton declared twice) and E0107 (an
/// item a library may not hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declares {
    Description,
    /// `prompt system`, `prompt developer`, or a `prompt` whose role did not parse.
    Prompt(Option<Role>),
    Budget,
    Intent,
    Session,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub kind: BrokenKind,
    /// A singleton or an application-only item, by its keyword.
    pub declares: Option<Declares>,
    pub name: Option<Ident>,
    /// A broken `context` block's field declarations that parsed, each on its own:
    /// they stay declared and typed, so one bad line does not hide the checks of the
    /// others. Empty for every other kind.
    pub fields: Vec<FieldDecl>,
    /// A broken intent whose head says `fallback`: it still counts for E0106.
    pub fallback: bool,
    /// A broken `context` block's lines that did not parse: the paths they begin
    /// with (`customer.age` of `customer.age int`), which they may have meant to
    /// declare.
    pub holes: Vec<String>,
    /// A line of a broken `context` block that does not even begin with a path: what
    /// it declares is anyone's guess.
    pub unknown_fields: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub name: StrLit,
    pub version: Option<StrLit>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDecl {
    /// Dotted path below `ctx`.
    pub path: Ident,
    pub ty: TypeExpr,
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeExpr {
    pub kind: TypeKind,
    pub optional: bool,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeKind {
    String,
    Int,
    Float,
    Bool,
    Timestamp,
    List(Box<TypeKind>),
    /// The variants as written, and their values (shared with the IR's type).
    Enum(Vec<StrLit>, std::sync::Arc<[String]>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    Developer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub role: Role,
    pub role_span: Span,
    pub text: StrLit,
}

/// A value with the span it was written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub total: Option<Spanned<i64>>,
    pub tokenizer: Option<Spanned<Tokenizer>>,
    pub buckets: Vec<BucketDecl>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketDecl {
    pub name: Ident,
    /// Parts per million.
    pub share: Option<Spanned<u64>>,
    pub priority: Option<Spanned<i64>>,
    pub min: Option<Spanned<i64>>,
    pub overflow: Option<Spanned<Overflow>>,
    pub span: Span,
    /// The `///` comment above the bucket.
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: Ident,
    pub description: Option<StrLit>,
    pub kind: Option<Ident>,
    pub risk: Option<Spanned<Risk>>,
    pub approval: Option<Spanned<Approval>>,
    pub input: Option<Vec<InputDecl>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    pub doc: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Intent {
    pub name: Ident,
    pub fallback: Option<Span>,
    pub description: Option<StrLit>,
    pub safety: Option<Spanned<SafetyMode>>,
    pub tools: Vec<Ident>,
    pub task: Option<StrLit>,
    pub budget: Option<IntentBudget>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentBudget {
    pub keyword: Span,
    pub overrides: Vec<(Ident, Spanned<u64>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redactor {
    pub name: Ident,
    pub pattern: StrLit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: Ident,
    pub priority: Option<Spanned<i64>>,
    pub advisory: Option<Span>,
    pub when: Expr,
    pub effects: Vec<Effect>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub kind: EffectKind,
    pub keyword: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffectKind {
    Refuse(StrLit),
    Escalate(StrLit),
    RequireApproval(Vec<Ident>),
    Deny(Vec<Ident>),
    Redact(Vec<Ident>),
    Instruct(StrLit),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub name: Ident,
    pub bucket: Ident,
    pub priority: Option<Spanned<i64>>,
    pub text: StrLit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Not(Box<Expr>),
    Cmp {
        op: CmpOp,
        op_span: Span,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Str(StrLit),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
    Path(String),
    List(Vec<Expr>),
    /// `exists(path)`; the span is the path's.
    Exists(String, Span),
    /// `json { ... }`; `None` when the text is not valid JSON (reported by the parser).
    /// With the string literals written without escapes and the spans of their text,
    /// in source order, so that a diagnostic on a path or name inside points at it.
    Json(Option<Value>, Vec<(String, Span)>),
    /// `( expr )`, kept so that spans and formatting stay faithful.
    Paren(Box<Expr>),
    /// A number literal out of range, reported by the parser (E0001); it types as an
    /// error so that nothing further up the expression reports it again.
    Invalid,
}
