//! Hover: what a name means, in Markdown.

use serde_json::Value;

use super::Analysis;
use crate::ir::scope::resolve;
use crate::ir::{EffectIr, SymbolKind};
use crate::span::{clamp_to_char_boundary, Span};
use crate::syntax::ast::{ItemKind, Role};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hover {
    pub markdown: String,
    /// What the hover is about.
    pub span: Span,
}

pub(super) fn hover(a: &Analysis, offset: usize) -> Option<Hover> {
    let offset = clamp_to_char_boundary(a.text(), offset);
    let mut sections: Vec<String> = Vec::new();
    let mut span: Option<Span> = None;

    if let Some(import) = a
        .checked()
        .pack
        .imports
        .iter()
        .find(|i| i.name_span.contains(offset))
    {
        sections.push(describe_import(a, import));
        span = Some(import.name_span);
    } else if let Some(o) = a.occurrence_at(offset) {
        let text = describe(a, o.kind, &o.name);
        if !text.is_empty() {
            sections.push(text);
            span = Some(o.span);
        }
    } else if let Some((path, at)) = path_at(a.text(), offset) {
        // Built-ins (`request.locale`) are not occurrences: describe them by type.
        if let Some(r) = resolve(&a.checked().pack, &path) {
            if r.field.is_none() {
                let optional = if r.optional { " (may be absent)" } else { "" };
                sections.push(format!(
                    "**built-in** `{path}`: `{}`{optional}",
                    r.ty.describe()
                ));
                span = Some(at);
            }
        }
    }
    if sections.is_empty() {
        if let Some((text, at)) = declaration_at(a, offset) {
            sections.push(text);
            span = Some(at);
        }
    }
    if sections.is_empty() {
        if let Some(p) = a
            .checked()
            .pack
            .policies
            .iter()
            .find(|p| p.when_span.contains(offset) && !p.when_span.is_empty())
        {
            sections.push(describe(a, SymbolKind::Policy, &p.name));
            span = Some(p.when_span);
        }
    }

    // The pages of the diagnostics under the cursor, each code's once.
    let mut shown: Vec<&str> = Vec::new();
    for d in a.diagnostics().iter().filter(|d| d.span.contains(offset)) {
        if let Some(info) = crate::codes::lookup(d.code) {
            span.get_or_insert(d.span);
            if !shown.contains(&d.code) {
                shown.push(d.code);
                sections.push(info.markdown());
            }
        }
    }
    if sections.is_empty() {
        return None;
    }
    Some(Hover {
        markdown: sections.join("\n\n---\n\n"),
        span: span.unwrap_or(Span::new(offset, offset)),
    })
}

/// Declarations no name refers to, so that no occurrence describes them: a tool's
/// input field (its type and doc comment) and a prompt (its doc comment).
fn declaration_at(a: &Analysis, offset: usize) -> Option<(String, Span)> {
    let text = a.text();
    let item = a
        .checked()
        .ast
        .items
        .iter()
        .find(|i| i.span.contains(offset))?;
    match &item.kind {
        ItemKind::Tool(t) => {
            let f = t
                .input
                .iter()
                .flatten()
                .find(|f| f.name.span.contains(offset))?;
            let ty = super::symbols::trim_trivia(text, f.ty.span);
            let ty = text.get(ty.start..ty.end).unwrap_or("");
            let mut out = format!(
                "**input field** `{}` of tool `{}`: `{ty}`",
                f.name.name, t.name.name
            );
            doc_and(f.doc.as_deref(), &mut out);
            Some((out, f.name.span))
        }
        ItemKind::Prompt(p) if item.keyword.to(p.role_span).contains(offset) => {
            let role = match p.role {
                Role::System => "system",
                Role::Developer => "developer",
            };
            let mut out = format!("**prompt** `{role}`");
            doc_and(item.doc.as_deref(), &mut out);
            Some((out, item.keyword.to(p.role_span)))
        }
        _ => None,
    }
}

/// The dotted path around `offset`, if any.
fn path_at(text: &str, offset: usize) -> Option<(String, Span)> {
    let bytes = text.as_bytes();
    let is_path = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.';
    let mut start = offset.min(bytes.len());
    while start > 0 && is_path(bytes[start - 1]) {
        start -= 1;
    }
    let mut end = offset.min(bytes.len());
    while end < bytes.len() && is_path(bytes[end]) {
        end += 1;
    }
    let path = text.get(start..end)?.trim_matches('.');
    (!path.is_empty()).then(|| (path.to_owned(), Span::new(start, end)))
}

fn doc_and(doc: Option<&str>, out: &mut String) {
    if let Some(doc) = doc.filter(|d| !d.is_empty()) {
        out.push_str("\n\n");
        out.push_str(doc);
    }
}

fn origin(a: &Analysis, kind: SymbolKind, name: &str, out: &mut String) {
    if let Some(from) = a.checked().pack.origins.get(&(kind, name.to_owned())) {
        out.push_str(&format!("\n\nimported from `{from}`"));
    }
}

/// An import: what it resolved to, from where, and what it brings in.
fn describe_import(a: &Analysis, import: &crate::ir::ImportDecl) -> String {
    let version = import.version.as_deref().unwrap_or("?");
    let mut out = format!("**import** `{}@{version}`", import.name);
    let resolved = a
        .imports()
        .iter()
        .find(|r| r.name == import.name && Some(r.version.as_str()) == import.version.as_deref());
    let Some(r) = resolved else {
        out.push_str("\n\nnot resolved (see the diagnostics)");
        return out;
    };
    out.push_str(&format!("\n\n`{}`", r.hash));
    if let Some(location) = &r.location {
        out.push_str(&format!("\n\nfrom `{location}`"));
    }
    out.push_str(if r.locked {
        " · pinned in `ctxpack.lock`"
    } else {
        " · not in `ctxpack.lock`"
    });
    let origin = format!("{}@{}", r.name, r.version);
    let mut brought: Vec<String> = a
        .checked()
        .pack
        .origins
        .iter()
        .filter(|(_, from)| **from == origin)
        .map(|((kind, name), _)| match kind {
            SymbolKind::Field => format!("{} `ctx.{name}`", kind.as_str()),
            _ => format!("{} `{name}`", kind.as_str()),
        })
        .collect();
    brought.sort();
    if brought.is_empty() {
        out.push_str("\n\nbrings in nothing this pack can name");
    } else {
        out.push_str("\n\nbrings in:\n");
        for b in brought {
            out.push_str(&format!("\n- {b}"));
        }
    }
    out
}

/// What to say of a name that is not declared: that, and the nearest declared name
/// of the same kind.
fn not_declared(a: &Analysis, kind: SymbolKind, name: &str) -> String {
    let shown = match kind {
        SymbolKind::Field => format!("ctx.{name}"),
        _ => name.to_owned(),
    };
    let mut out = format!("**{}** `{shown}` is not declared", kind.as_str());
    let nearest = a
        .checked()
        .pack
        .definitions
        .iter()
        .filter(|d| d.kind == kind)
        .map(|d| (strsim::damerau_levenshtein(name, &d.name), &d.name))
        .filter(|(dist, candidate)| *dist <= 2.max(candidate.len() / 3))
        .min();
    if let Some((_, candidate)) = nearest {
        let candidate = match kind {
            SymbolKind::Field => format!("ctx.{candidate}"),
            _ => candidate.to_string(),
        };
        out.push_str(&format!("\n\ndid you mean `{candidate}`?"));
    }
    out
}

/// The Markdown description of a declared name.
fn describe(a: &Analysis, kind: SymbolKind, name: &str) -> String {
    let pack = &a.checked().pack;
    if !pack.declares(kind, name) {
        return not_declared(a, kind, name);
    }
    let mut out = String::new();
    match kind {
        SymbolKind::Tool => {
            let Some(t) = pack.tool(name) else {
                return format!("**tool** `{name}` (its body has errors)");
            };
            out.push_str(&format!("**tool** `{name}`"));
            doc_and(t.doc.as_deref(), &mut out);
            if let Some(d) = &t.description {
                out.push_str(&format!("\n\n*{d}*"));
            }
            let kind = t.kind.as_deref().unwrap_or("—");
            let risk = t.risk.map_or("—", |r| r.0.as_str());
            let approval = t.approval.map_or("—", |r| r.0.as_str());
            out.push_str(&format!(
                "\n\n| kind | risk | approval |\n| --- | --- | --- |\n| {kind} | {risk} | {approval} |"
            ));
            let inputs = schema_fields(&t.input);
            if !inputs.is_empty() {
                out.push_str("\n\n**input**\n");
                for (field, ty) in inputs {
                    out.push_str(&format!("\n- `{field}: {ty}`"));
                }
            }
            if pack.prohibitions.iter().any(|p| &*p.name == name) {
                out.push_str("\n\n**prohibited** in this pack");
            }
        }
        SymbolKind::Intent => {
            let Some(i) = pack.intents.iter().find(|i| i.name == name) else {
                return format!("**intent** `{name}`");
            };
            let fallback = if i.fallback { " (fallback)" } else { "" };
            out.push_str(&format!("**intent** `{name}`{fallback}"));
            doc_and(i.doc.as_deref(), &mut out);
            if let Some(d) = &i.description {
                out.push_str(&format!("\n\n*{d}*"));
            }
            out.push_str(&format!("\n\nsafety `{}`", i.safety.as_str()));
            let tools: Vec<String> = i.tools.iter().map(|t| format!("`{}`", t.name)).collect();
            if !tools.is_empty() {
                out.push_str(&format!(" · tools {}", tools.join(", ")));
            }
        }
        SymbolKind::Bucket => {
            let Some(b) = pack.budget.as_ref() else {
                return format!("**bucket** `{name}`");
            };
            let Some(k) = b.buckets.iter().find(|k| k.name == name) else {
                return format!("**bucket** `{name}`");
            };
            out.push_str(&format!("**bucket** `{name}`"));
            doc_and(k.doc.as_deref(), &mut out);
            out.push_str("\n\n");
            match (k.share_ppm, b.total) {
                (Some(ppm), Some((total, _))) if total > 0 => {
                    let tokens = (total as u128 * ppm as u128 / 1_000_000) as u64;
                    out.push_str(&format!(
                        "share {} of {total} → **{tokens} tokens** ({})",
                        super::percent(ppm),
                        b.tokenizer.as_str()
                    ));
                }
                (Some(ppm), _) => out.push_str(&format!("share {}", super::percent(ppm))),
                (None, _) => out.push_str("no share"),
            }
            let min = k.min.map_or(0, |m| m.0);
            out.push_str(&format!(
                "\n\npriority {} · min {min} · overflow {}",
                k.priority,
                overflow(k.overflow)
            ));
        }
        SymbolKind::Field => {
            let Some(f) = pack.field(name) else {
                return format!("**context field** `ctx.{name}`");
            };
            let optional = if f.optional { "?" } else { "" };
            out.push_str(&format!(
                "**context field** `ctx.{name}: {}{optional}`",
                f.ty.describe()
            ));
            doc_and(f.doc.as_deref(), &mut out);
        }
        SymbolKind::Redactor => {
            let Some(r) = pack.redactors.iter().find(|r| r.name == name) else {
                return format!("**redactor** `{name}`");
            };
            out.push_str(&format!("**redactor** `{name}`"));
            doc_and(r.doc.as_deref(), &mut out);
            out.push_str(&format!("\n\npattern `{}`", r.pattern.replace('`', "\\`")));
        }
        SymbolKind::Block => {
            let Some(b) = pack.blocks.iter().find(|b| b.name == name) else {
                return format!("**block** `{name}`");
            };
            out.push_str(&format!(
                "**block** `{name}` in bucket `{}` · priority {}",
                b.bucket.name, b.priority
            ));
            doc_and(b.doc.as_deref(), &mut out);
        }
        SymbolKind::Policy => {
            let Some(p) = pack.policies.iter().find(|p| p.name == name) else {
                return format!("**policy** `{name}`");
            };
            let advisory = if p.advisory { " · advisory" } else { "" };
            out.push_str(&format!(
                "**policy** `{name}` · priority {}{advisory}",
                p.priority
            ));
            doc_and(p.doc.as_deref(), &mut out);
            let logic = serde_json::to_string_pretty(&p.when).unwrap_or_default();
            out.push_str(&format!(
                "\n\n`when` as JsonLogic:\n\n```json\n{logic}\n```"
            ));
            let effects: Vec<String> = p.effects.iter().map(effect).collect();
            if !effects.is_empty() {
                out.push_str("\n\neffects: ");
                out.push_str(&effects.join(", "));
            }
        }
    }
    origin(a, kind, name, &mut out);
    out
}

fn overflow(o: crate::artifact::Overflow) -> &'static str {
    match o {
        crate::artifact::Overflow::Drop => "drop",
        crate::artifact::Overflow::Truncate => "truncate",
        crate::artifact::Overflow::Error => "error",
    }
}

fn effect(e: &EffectIr) -> String {
    let names = |n: &[crate::ir::NameRef]| {
        n.iter()
            .map(|r| r.name.as_ref())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match e {
        EffectIr::Refuse(_) => "`refuse`".to_owned(),
        EffectIr::Escalate(q) => format!("`escalate` to `{q}`"),
        EffectIr::RequireApproval(n) => format!("`require_approval {}`", names(n)),
        EffectIr::Deny(n) => format!("`deny {}`", names(n)),
        EffectIr::Redact(n) => format!("`redact {}`", names(n)),
        EffectIr::Instruct(_) => "`instruct`".to_owned(),
    }
}

/// `name: type` pairs of a tool's input JSON Schema, in the language's type syntax.
fn schema_fields(schema: &Value) -> Vec<(String, String)> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(k, v)| {
            let optional = if required.contains(&k.as_str()) {
                ""
            } else {
                "?"
            };
            (k.clone(), format!("{}{optional}", schema_type(v)))
        })
        .collect()
}

fn schema_type(v: &Value) -> String {
    if let Some(variants) = v.get("enum").and_then(Value::as_array) {
        let quoted: Vec<String> = variants.iter().map(ToString::to_string).collect();
        return format!("enum({})", quoted.join(", "));
    }
    match v.get("type").and_then(Value::as_str) {
        Some("integer") => "int".to_owned(),
        Some("number") => "float".to_owned(),
        Some("boolean") => "bool".to_owned(),
        Some("array") => format!(
            "list<{}>",
            v.get("items")
                .map_or_else(|| "string".to_owned(), schema_type)
        ),
        Some("string") if v.get("format").and_then(Value::as_str) == Some("date-time") => {
            "timestamp".to_owned()
        }
        _ => "string".to_owned(),
    }
}
