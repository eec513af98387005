//! The document outline: items, with tool input fields, buckets and context fields as
//! children.

use super::Analysis;
use crate::span::Span;
use crate::syntax::ast::{BrokenKind, ItemKind, Role};

/// What an outline entry is; the language server maps it to its symbol kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutlineKind {
    Pack,
    Import,
    Description,
    Context,
    Field,
    Prompt,
    Budget,
    Bucket,
    Tool,
    Prohibit,
    Intent,
    Redactor,
    Policy,
    Block,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineSymbol {
    pub name: String,
    pub detail: Option<String>,
    pub kind: OutlineKind,
    /// The whole entry.
    pub span: Span,
    /// The name (or keyword) to select; inside `span`.
    pub selection: Span,
    pub children: Vec<OutlineSymbol>,
}

fn leaf(name: &str, kind: OutlineKind, span: Span, selection: Span) -> OutlineSymbol {
    OutlineSymbol {
        name: name.to_owned(),
        detail: None,
        kind,
        span: span.to(selection),
        selection,
        children: Vec::new(),
    }
}

/// `span` without the whitespace and `//` comment lines it ends with: a type's span
/// can run on over the doc comment of the next field.
pub(super) fn trim_trivia(text: &str, span: Span) -> Span {
    let mut end = span.end.min(text.len());
    loop {
        let Some(slice) = text.get(span.start..end) else {
            return span;
        };
        let trimmed = slice.trim_end();
        let last_line = trimmed.rfind('\n').map_or(0, |i| i + 1);
        if trimmed[last_line..].trim_start().starts_with("//") && last_line > 0 {
            end = span.start + last_line;
        } else {
            return Span::new(span.start, span.start + trimmed.len());
        }
    }
}

pub(super) fn outline(a: &Analysis) -> Vec<OutlineSymbol> {
    let file = &a.checked().ast;
    let text = a.text();
    let slice = |s: Span| text.get(s.start..s.end).unwrap_or("").to_owned();
    let trim = |s: Span| trim_trivia(text, s);
    // A context field or a tool's input field: its name, with its type as detail.
    let field = |name: &crate::syntax::ast::Ident, ty: &crate::syntax::ast::TypeExpr| {
        let mut c = leaf(
            &name.name,
            OutlineKind::Field,
            name.span.to(trim(ty.span)),
            name.span,
        );
        c.detail = Some(slice(trim(ty.span)));
        c
    };
    let field_symbols = |fields: &[crate::syntax::ast::FieldDecl]| -> Vec<OutlineSymbol> {
        fields.iter().map(|f| field(&f.path, &f.ty)).collect()
    };
    let mut out = Vec::new();
    if let Some(h) = &file.header {
        let mut s = leaf(&h.name.value, OutlineKind::Pack, h.span, h.name.span);
        s.detail = Some(h.version.value.clone());
        out.push(s);
    }
    for item in &file.items {
        let span = item.span;
        let kw = item.keyword;
        let sym = match &item.kind {
            ItemKind::Import(i) => {
                let mut s = leaf(&i.name.value, OutlineKind::Import, span, i.name.span);
                s.detail = i.version.as_ref().map(|v| v.value.clone());
                s
            }
            ItemKind::Description(_) => leaf("description", OutlineKind::Description, span, kw),
            ItemKind::Session(_) => leaf("session directives", OutlineKind::Description, span, kw),
            ItemKind::Context(fields) => {
                let mut s = leaf("context", OutlineKind::Context, span, kw);
                s.children = field_symbols(fields);
                s
            }
            ItemKind::Prompt(p) => {
                let role = match p.role {
                    Role::System => "prompt system",
                    Role::Developer => "prompt developer",
                };
                leaf(role, OutlineKind::Prompt, span, p.role_span)
            }
            ItemKind::Budget(b) => {
                let mut s = leaf("budget", OutlineKind::Budget, span, kw);
                s.detail = b.total.map(|t| format!("{} tokens", t.value));
                s.children = b
                    .buckets
                    .iter()
                    .map(|k| {
                        let mut c = leaf(&k.name.name, OutlineKind::Bucket, k.span, k.name.span);
                        c.detail = k.share.map(|sh| super::percent(sh.value));
                        c
                    })
                    .collect();
                s
            }
            ItemKind::Tool(t) => {
                let mut s = leaf(&t.name.name, OutlineKind::Tool, span, t.name.span);
                s.detail = t.kind.as_ref().map(|k| k.name.to_string());
                s.children = t
                    .input
                    .iter()
                    .flatten()
                    .map(|f| field(&f.name, &f.ty))
                    .collect();
                s
            }
            ItemKind::Prohibit(names) => {
                let list: Vec<&str> = names.iter().map(|n| n.name.as_ref()).collect();
                leaf(
                    &format!("prohibit {}", list.join(", ")),
                    OutlineKind::Prohibit,
                    span,
                    kw,
                )
            }
            ItemKind::Intent(i) => {
                let mut s = leaf(&i.name.name, OutlineKind::Intent, span, i.name.span);
                s.detail = i.fallback.map(|_| "fallback".to_owned());
                s
            }
            ItemKind::Redactor(r) => leaf(&r.name.name, OutlineKind::Redactor, span, r.name.span),
            ItemKind::Policy(p) => {
                let mut s = leaf(&p.name.name, OutlineKind::Policy, span, p.name.span);
                s.detail = p.priority.map(|p| format!("priority {}", p.value));
                s
            }
            ItemKind::Block(b) => {
                let mut s = leaf(&b.name.name, OutlineKind::Block, span, b.name.span);
                s.detail = Some(format!("in {}", b.bucket.name));
                s
            }
            ItemKind::Broken(b) => {
                // An item whose body does not parse still shows in the outline, by
                // name when its head parsed.
                let (kind, fallback) = match b.kind {
                    BrokenKind::Tool => (OutlineKind::Tool, "tool"),
                    BrokenKind::Intent => (OutlineKind::Intent, "intent"),
                    BrokenKind::Policy => (OutlineKind::Policy, "policy"),
                    BrokenKind::Redactor => (OutlineKind::Redactor, "redactor"),
                    BrokenKind::Block => (OutlineKind::Block, "block"),
                    BrokenKind::Bucket => (OutlineKind::Bucket, "bucket"),
                    BrokenKind::Budget => (OutlineKind::Budget, "budget"),
                    BrokenKind::Context => (OutlineKind::Context, "context"),
                    BrokenKind::Prompt => (OutlineKind::Prompt, "prompt"),
                    BrokenKind::Import => (OutlineKind::Import, "import"),
                    BrokenKind::Other => continue,
                };
                let mut s = match &b.name {
                    Some(name) => leaf(&name.name, kind, span, name.span),
                    None => leaf(fallback, kind, span, kw),
                };
                // A broken context block still lists the fields that parsed; its
                // entry reaches down to the last of them.
                s.children = field_symbols(&b.fields);
                if let Some(last) = s.children.last() {
                    s.span = s.span.to(last.span);
                }
                s
            }
        };
        out.push(sym);
    }
    trim_all(text, &mut out);
    out
}

/// Every range without the trivia it ends with (see [`trim_trivia`]).
fn trim_all(text: &str, symbols: &mut [OutlineSymbol]) {
    for s in symbols {
        s.span = trim_trivia(text, s.span).to(s.selection);
        trim_all(text, &mut s.children);
    }
}
