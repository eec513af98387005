//! Completion. A heuristic over the tokens before the cursor: the enclosing block
//! (found by matching braces) and the last token or two decide what may come next.
//! It works on half-typed, unparsable text, which is the usual state of a file while
//! someone types.

use super::Analysis;
use crate::fmt::lexer::{lex, Kind, Token};
use crate::ir::scope::{resolve, BUILTINS};
use crate::ir::{SymbolKind, Ty};
use crate::span::{clamp_to_char_boundary, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    Keyword,
    /// A value from a fixed set: safety and approval modes, risk levels, ...
    Value,
    Type,
    Tool,
    Intent,
    Redactor,
    Bucket,
    Field,
    Builtin,
    EnumMember,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionItem {
    pub label: String,
    pub kind: CompletionKind,
    pub detail: Option<String>,
    /// The text to insert, replacing [`CompletionItem::replace`].
    pub insert: String,
    /// The partly typed word the completion replaces (may be empty).
    pub replace: Span,
}

/// The block the cursor is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Top,
    Context,
    Budget,
    Bucket,
    Tool,
    Input,
    Intent,
    IntentBudget,
    Policy,
    Json,
    Other,
}

use crate::syntax::ITEM_KEYWORDS;
const TOOL_KEYWORDS: &[&str] = &["description", "kind", "risk", "approval", "input"];
/// The word that follows a top-level item's head: `(keyword, how many tokens back it
/// is, what follows)` — `intent NAME fallback`, `block NAME in`, `redactor NAME
/// pattern`, `session directives`.
const FOLLOWERS: &[(&str, usize, &[&str])] = &[
    ("intent", 2, &["fallback"]),
    ("block", 2, &["in"]),
    ("redactor", 2, &["pattern"]),
    ("session", 1, &["directives"]),
];

const INTENT_KEYWORDS: &[&str] = &["description", "safety", "tools", "task", "budget"];
const POLICY_KEYWORDS: &[&str] = &[
    "when",
    "refuse",
    "escalate",
    "require_approval",
    "deny",
    "redact",
    "instruct",
];
/// The budget's fields declared once (`bucket` repeats).
const BUDGET_SINGLETONS: &[&str] = &["total", "tokenizer"];
const BUCKET_KEYWORDS: &[&str] = &["share", "priority", "min", "overflow"];
const SAFETY: &[&str] = &["autonomous", "supervised", "reviewed"];
const APPROVAL: &[&str] = &["auto", "confirm", "review"];
const RISK: &[&str] = &["low", "medium", "high", "critical"];
const OVERFLOW: &[&str] = &["drop", "truncate", "error"];
const TOKENIZERS: &[&str] = &["o200k", "cl100k", "approx"];
const TYPES: &[&str] = &[
    "string",
    "int",
    "float",
    "bool",
    "timestamp",
    "list",
    "enum",
];
const EXPR_WORDS: &[&str] = &["exists", "not", "json", "true", "false", "null"];

struct Ctx<'a> {
    analysis: &'a Analysis,
    replace: Span,
    items: Vec<CompletionItem>,
}

impl Ctx<'_> {
    fn push(&mut self, label: &str, kind: CompletionKind, detail: Option<String>) {
        self.push_insert(label, label, kind, detail);
    }

    fn push_insert(
        &mut self,
        label: &str,
        insert: &str,
        kind: CompletionKind,
        detail: Option<String>,
    ) {
        if self.items.iter().any(|i| i.label == label) {
            return;
        }
        self.items.push(CompletionItem {
            label: label.to_owned(),
            kind,
            detail,
            insert: insert.to_owned(),
            replace: self.replace,
        });
    }

    fn words(&mut self, words: &[&str], kind: CompletionKind) {
        for w in words {
            self.push(w, kind, None);
        }
    }

    fn names(&mut self, kind: SymbolKind, as_kind: CompletionKind) {
        let names: Vec<String> = self
            .analysis
            .checked()
            .pack
            .names(kind)
            .map(str::to_owned)
            .collect();
        for n in names {
            self.push(&n, as_kind, Some(kind.as_str().to_owned()));
        }
    }

    /// The typed path up to its last dot (`ctx.user.` of `ctx.user.ti`), or "" when
    /// no dot is typed yet.
    fn typed_scope(&self) -> &str {
        let text = self.analysis.text();
        let typed = text.get(self.replace.start..self.replace.end).unwrap_or("");
        typed.rfind('.').map_or("", |i| &typed[..=i])
    }

    /// Every path an expression or template may name; once a dot is typed, those
    /// below what is typed (`ctx.user.` offers `ctx.user.tier`, not `ctx.order.id`).
    fn paths(&mut self) {
        let scope = self.typed_scope().to_owned();
        let pack = &self.analysis.checked().pack;
        let fields: Vec<(String, String)> = pack
            .fields
            .iter()
            .map(|f| {
                let optional = if f.optional { "?" } else { "" };
                (
                    format!("ctx.{}", f.path),
                    format!("{}{optional}", f.ty.describe()),
                )
            })
            .collect();
        let mut builtins: Vec<(&str, Option<String>)> = BUILTINS
            .iter()
            .map(|(path, _, _)| *path)
            .chain(
                pack.session
                    .is_some()
                    .then_some(crate::ir::scope::SESSION_PATHS)
                    .into_iter()
                    .flatten()
                    .copied(),
            )
            .map(|path| (path, resolve(pack, path).map(|r| r.ty.describe())))
            .collect();
        builtins.retain(|(path, _)| path.starts_with(&scope));
        for (path, ty) in fields {
            if path.starts_with(&scope) {
                self.push(&path, CompletionKind::Field, Some(ty));
            }
        }
        for (path, ty) in builtins {
            self.push(path, CompletionKind::Builtin, ty);
        }
    }

    fn expression(&mut self) {
        self.paths();
        // After a dot only a path can follow.
        if self.typed_scope().is_empty() {
            self.words(EXPR_WORDS, CompletionKind::Keyword);
        }
    }

    /// The values a comparison with `lhs` may name: enum variants, or intent names for
    /// `request.intent`. `quote` wraps them in quotes; `close` adds only the closing
    /// one (typed in a string that the line does not close).
    fn comparison_values(&mut self, lhs: &str, quote: bool, close: bool) {
        let label = |s: &str| {
            if quote {
                format!("\"{s}\"")
            } else {
                s.to_owned()
            }
        };
        let q = |s: &str| {
            if close {
                format!("{s}\"")
            } else {
                label(s)
            }
        };
        if lhs == "request.intent" {
            let intents: Vec<String> = self
                .analysis
                .checked()
                .pack
                .names(SymbolKind::Intent)
                .map(str::to_owned)
                .collect();
            for n in intents {
                self.push_insert(
                    &label(&n),
                    &q(&n),
                    CompletionKind::Intent,
                    Some("intent".into()),
                );
            }
            return;
        }
        if let Some(r) = resolve(&self.analysis.checked().pack, lhs) {
            if let Ty::Enum(variants) = r.ty {
                for v in variants.iter() {
                    self.push_insert(
                        &label(v),
                        &q(v),
                        CompletionKind::EnumMember,
                        Some(lhs.to_owned()),
                    );
                }
            }
        }
    }
}

/// A word no pack holds, lexed after the text before the cursor to learn whether the
/// cursor is in a comment.
const CURSOR_PROBE: &str = "cursor_probe_x";

/// Where the word (a name or a dotted path) that ends at `offset` starts.
fn word_start(text: &str, offset: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = offset;
    while start > 0
        && (bytes[start - 1].is_ascii_alphanumeric() || matches!(bytes[start - 1], b'_' | b'.'))
    {
        start -= 1;
    }
    start
}

pub(super) fn complete(a: &Analysis, offset: usize) -> Vec<CompletionItem> {
    let text = a.text();
    let offset = clamp_to_char_boundary(text, offset);
    let start = word_start(text, offset);
    let prefix = &text[start..offset];
    let mut ctx = Ctx {
        analysis: a,
        replace: Span::new(start, offset),
        items: Vec::new(),
    };
    let tokens = lex(&text[..start]).tokens;
    let last = tokens.last();

    if let Some(t) = last.filter(|t| unterminated(t)) {
        in_string(&mut ctx, &tokens, t);
        return ctx.items;
    }
    // Inside a `//` comment nothing is offered: a word written at the cursor would be
    // part of the comment, not the next token.
    let probe = format!("{} {CURSOR_PROBE}", &text[..start]);
    if lex(&probe).tokens.last().map(|t| t.text) != Some(CURSOR_PROBE) {
        return ctx.items;
    }

    let stack = blocks(&tokens);
    let top = stack.last().copied().unwrap_or(Block::Top);
    let tok = |back: usize| -> Option<&Token<'_>> {
        tokens.len().checked_sub(back).and_then(|i| tokens.get(i))
    };
    let prev = tok(1).map_or("", |t| t.text);
    let prev2 = tok(2).map_or("", |t| t.text);
    let line_start = text[..start]
        .rsplit('\n')
        .next()
        .is_some_and(|l| l.trim().is_empty());

    if ["ctx.", "request.", "run.", "session."]
        .iter()
        .any(|p| prefix.starts_with(p))
    {
        ctx.paths();
        return ctx.items;
    }
    match prev {
        "safety" => ctx.words(SAFETY, CompletionKind::Value),
        "approval" => ctx.words(APPROVAL, CompletionKind::Value),
        "risk" => ctx.words(RISK, CompletionKind::Value),
        "overflow" => ctx.words(OVERFLOW, CompletionKind::Value),
        "tokenizer" => ctx.words(TOKENIZERS, CompletionKind::Value),
        "kind" if top == Block::Tool => ctx.words(crate::check::TOOL_KINDS, CompletionKind::Value),
        "prompt" if top == Block::Top => {
            ctx.words(&["system", "developer"], CompletionKind::Keyword)
        }
        ":" if matches!(top, Block::Context | Block::Input) => {
            ctx.words(TYPES, CompletionKind::Type)
        }
        "<" if matches!(top, Block::Context | Block::Input) => {
            ctx.words(TYPES, CompletionKind::Type)
        }
        "==" | "!=" => {
            ctx.comparison_values(prev2, true, false);
            ctx.expression();
        }
        _ => {}
    }
    if !ctx.items.is_empty() {
        return ctx.items;
    }
    // Name lists: `tools a, b`, `prohibit`, `require_approval`, `deny`, `redact`.
    if let Some((list, listed)) = list_keyword(&tokens) {
        match list {
            "tools" | "prohibit" | "require_approval" | "deny" => {
                ctx.names(SymbolKind::Tool, CompletionKind::Tool)
            }
            "redact" => ctx.names(SymbolKind::Redactor, CompletionKind::Redactor),
            _ => {}
        }
        // Not what the list already names, and an intent cannot use a tool the pack
        // prohibits.
        let pack = &ctx.analysis.checked().pack;
        let prohibited: Vec<&str> = match list {
            "tools" => pack.prohibitions.iter().map(|p| p.name.as_ref()).collect(),
            _ => Vec::new(),
        };
        ctx.items.retain(|i| {
            !listed.contains(&i.label.as_str()) && !prohibited.contains(&i.label.as_str())
        });
        if !ctx.items.is_empty() {
            return ctx.items;
        }
    }
    let prev_is_value = tok(1).is_some_and(|t| t.kind != Kind::Punct);
    match top {
        Block::Top => {
            if prev == "in" && tok(3).is_some_and(|t| t.is("block")) {
                ctx.names(SymbolKind::Bucket, CompletionKind::Bucket);
            } else if let Some((_, _, next)) = FOLLOWERS.iter().find(|(word, back, _)| {
                if *back == 1 {
                    prev == *word
                } else {
                    prev2 == *word
                }
            }) {
                ctx.words(next, CompletionKind::Keyword);
            } else if prev2 == "policy"
                || (prev2 == "priority" && tok(4).is_some_and(|t| t.is("policy")))
            {
                ctx.words(&["priority", "advisory"], CompletionKind::Keyword);
            } else if matches!(prev2, "pack" | "import")
                && tok(1).is_some_and(|t| t.kind == Kind::Str)
            {
                ctx.words(&["version"], CompletionKind::Keyword);
            } else if line_start || tokens.is_empty() {
                if tokens.is_empty() {
                    ctx.words(&["pack"], CompletionKind::Keyword);
                }
                ctx.words(ITEM_KEYWORDS, CompletionKind::Keyword);
            }
        }
        Block::Tool | Block::Intent | Block::Budget if line_start || prev == "{" => ctx.words(
            &fields_left(top, &tokens, &text[offset..]),
            CompletionKind::Keyword,
        ),
        Block::Bucket if !matches!(prev, "share" | "priority" | "min") => ctx.words(
            &fields_left(top, &tokens, &text[offset..]),
            CompletionKind::Keyword,
        ),
        Block::IntentBudget
            if prev == "{" || tok(1).is_some_and(|t| t.kind == Kind::Percent) || line_start =>
        {
            ctx.names(SymbolKind::Bucket, CompletionKind::Bucket);
        }
        Block::Policy => {
            let expr_position = matches!(
                prev,
                "when" | "and" | "or" | "not" | "(" | "[" | "," | "<" | "<=" | ">" | ">=" | "in"
            );
            if expr_position {
                ctx.expression();
            } else if prev == "{" {
                ctx.words(&["when"], CompletionKind::Keyword);
            } else if line_start || prev_is_value {
                ctx.words(&["and", "or"], CompletionKind::Keyword);
                ctx.words(&POLICY_KEYWORDS[1..], CompletionKind::Keyword);
            }
        }
        _ => {}
    }
    ctx.items
}

/// Inside a string: template paths after an open `{{`, and comparison values being
/// typed in quotes.
fn in_string(ctx: &mut Ctx<'_>, tokens: &[Token<'_>], t: &Token<'_>) {
    if let Some(open) = t.text.rfind("{{") {
        if !t.text[open..].contains("}}") {
            ctx.paths();
            return;
        }
    }
    let before = tokens.len().checked_sub(3).and_then(|i| tokens.get(i));
    let op = tokens.len().checked_sub(2).and_then(|i| tokens.get(i));
    if let (Some(lhs), Some(op)) = (before, op) {
        if matches!(op.text, "==" | "!=") && t.kind == Kind::Str {
            let text = ctx.analysis.text();
            let rest = &text[ctx.replace.end..];
            let rest = &rest[..rest.find('\n').unwrap_or(rest.len())];
            ctx.comparison_values(lhs.text, false, !closes(rest));
        }
    }
}

/// Does this rest of a line close the string the cursor is in (an unescaped `"`)?
fn closes(rest: &str) -> bool {
    let mut escaped = false;
    for c in rest.chars() {
        match c {
            '"' if !escaped => return true,
            '\\' => escaped = !escaped,
            _ => escaped = false,
        }
    }
    false
}

/// Is this the last token of text that ends inside a string?
fn unterminated(t: &Token<'_>) -> bool {
    match t.kind {
        Kind::Triple => t.text.len() < 6 || !t.text.ends_with("\"\"\""),
        Kind::Str => t.text.len() < 2 || !t.text.ends_with('"') || t.text.ends_with("\\\""),
        _ => false,
    }
}

/// The keyword of a name list the cursor continues (`tools a, b, |`), if any, and the
/// names the list already holds.
fn list_keyword<'s>(tokens: &[Token<'s>]) -> Option<(&'s str, Vec<&'s str>)> {
    let mut i = tokens.len();
    let mut listed = Vec::new();
    loop {
        let t = tokens.get(i.checked_sub(1)?)?;
        match t.text {
            "tools" | "prohibit" | "require_approval" | "deny" | "redact" => {
                return Some((t.text, listed))
            }
            "," => {
                // `, NAME` pairs continue the list.
                let name = tokens.get(i.checked_sub(2)?)?;
                if name.kind != Kind::Word {
                    return None;
                }
                listed.push(name.text);
                i -= 2;
            }
            _ => return None,
        }
    }
}

/// The fields a tool, intent, budget or bucket around the cursor does not declare yet
/// (a budget's `bucket` repeats, so it is always offered).
fn fields_left(block: Block, before: &[Token<'_>], after: &str) -> Vec<&'static str> {
    match block {
        Block::Tool => absent_in_block(before, after, TOOL_KEYWORDS),
        Block::Intent => absent_in_block(before, after, INTENT_KEYWORDS),
        Block::Budget => {
            let mut left = absent_in_block(before, after, BUDGET_SINGLETONS);
            left.push("bucket");
            left
        }
        Block::Bucket => absent_in_block(before, after, BUCKET_KEYWORDS),
        _ => Vec::new(),
    }
}

/// The `keywords` (each a field declared once) that the block around the cursor
/// does not hold yet, before the cursor (`before`, the tokens up to it) or after it
/// (`after`, the text from it). A keyword counts where a field starts, not where a
/// value is expected (`kind input` names a kind).
fn absent_in_block<'k>(before: &[Token<'_>], after: &str, keywords: &[&'k str]) -> Vec<&'k str> {
    const VALUE_AFTER: &[&str] = &["kind", "risk", "approval", "safety", "tools", ",", ":"];
    let mut present: Vec<&str> = Vec::new();
    let mut depth = 0usize;
    for (i, t) in before.iter().enumerate().rev() {
        match t.text {
            "}" => depth += 1,
            "{" if depth == 0 => break,
            "{" => depth -= 1,
            word if depth == 0 => {
                let prev = i.checked_sub(1).and_then(|j| before.get(j)).map(|p| p.text);
                if !prev.is_some_and(|p| VALUE_AFTER.contains(&p)) {
                    present.push(word);
                }
            }
            _ => {}
        }
    }
    let after = lex(after).tokens;
    let mut depth = 0usize;
    let mut prev: Option<&str> = before.last().map(|t| t.text);
    for t in &after {
        match t.text {
            "{" => depth += 1,
            "}" if depth == 0 => break,
            "}" => depth -= 1,
            word if depth == 0 && !prev.is_some_and(|p| VALUE_AFTER.contains(&p)) => {
                present.push(word)
            }
            _ => {}
        }
        prev = Some(t.text);
    }
    keywords
        .iter()
        .copied()
        .filter(|k| !present.contains(k))
        .collect()
}

/// The stack of blocks open at the end of `tokens`.
fn blocks(tokens: &[Token<'_>]) -> Vec<Block> {
    let mut stack: Vec<Block> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        match t.text {
            "{" => {
                let back = |k: usize| {
                    i.checked_sub(k)
                        .and_then(|j| tokens.get(j))
                        .map_or("", |t| t.text)
                };
                let top = stack.last().copied().unwrap_or(Block::Top);
                let kind = if top == Block::Json || back(1) == "json" {
                    Block::Json
                } else if back(1) == "context" {
                    Block::Context
                } else if back(1) == "input" {
                    Block::Input
                } else if back(1) == "budget" {
                    if top == Block::Intent {
                        Block::IntentBudget
                    } else {
                        Block::Budget
                    }
                } else if back(2) == "bucket" {
                    Block::Bucket
                } else if back(2) == "tool" {
                    Block::Tool
                } else if back(2) == "intent" || (back(1) == "fallback" && back(3) == "intent") {
                    Block::Intent
                } else if top == Block::Top && (1..=5).any(|k| back(k) == "policy") {
                    Block::Policy
                } else {
                    Block::Other
                };
                stack.push(kind);
            }
            "}" => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack
}
