//! Names inside raw JsonLogic (`when json { ... }`): `{"var": "ctx.user.tier"}` paths
//! and the intent names compared with `{"var": "request.intent"}`. The parser keeps
//! only the JSON value, so this lexes the condition's source text again for the
//! spans of its string literals.
//!
//! A literal written with escapes is not reported: its source text is not its value,
//! so no edit of it could be exact. A rename that misses one is caught by the
//! re-check every rename goes through.

use crate::span::Span;
use crate::syntax::ast::{Expr, ExprKind, File, ItemKind};
use crate::syntax::jsonlex::{lex, Tok};

/// A name found in raw JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A `var` path (`ctx.user.tier`), the span being the path inside the quotes.
    Var(String, Span),
    /// An intent name compared with `request.intent`, the span quotes included.
    Intent(String, Span),
}

/// The names in every raw JSON condition of `file`.
pub(crate) fn find(text: &str, file: &File) -> Vec<Found> {
    let mut out = Vec::new();
    for item in &file.items {
        if let ItemKind::Policy(p) = &item.kind {
            walk(text, &p.when, &mut out);
        }
    }
    out
}

fn walk(text: &str, e: &Expr, out: &mut Vec<Found>) {
    match &e.kind {
        ExprKind::Or(items) | ExprKind::And(items) | ExprKind::List(items) => {
            for i in items {
                walk(text, i, out);
            }
        }
        ExprKind::Not(inner) | ExprKind::Paren(inner) => walk(text, inner, out),
        ExprKind::Cmp { lhs, rhs, .. } => {
            walk(text, lhs, out);
            walk(text, rhs, out);
        }
        ExprKind::Json(Some(_), _) => {
            if let Some(source) = text.get(e.span.start..e.span.end) {
                out.extend(names(&lex(source, e.span.start)));
            }
        }
        _ => {}
    }
}

fn str_at(toks: &[Tok], i: usize) -> Option<(&str, Span)> {
    match toks.get(i) {
        Some(Tok::Str(Some(v), span)) => Some((v.as_str(), *span)),
        _ => None,
    }
}

fn punct_at(toks: &[Tok], i: usize, c: u8) -> bool {
    toks.get(i) == Some(&Tok::Punct(c))
}

/// `"var" : "PATH"` or `"var" : [ "PATH"`: the index of PATH's token.
fn var_path(toks: &[Tok], i: usize) -> Option<usize> {
    let (key, _) = str_at(toks, i)?;
    if key != "var" || !punct_at(toks, i + 1, b':') {
        return None;
    }
    if str_at(toks, i + 2).is_some() {
        Some(i + 2)
    } else if punct_at(toks, i + 2, b'[') && str_at(toks, i + 3).is_some() {
        Some(i + 3)
    } else {
        None
    }
}

fn names(toks: &[Tok]) -> Vec<Found> {
    let mut out = Vec::new();
    for i in 0..toks.len() {
        let Some(p) = var_path(toks, i) else {
            continue;
        };
        let Some((path, span)) = str_at(toks, p) else {
            continue;
        };
        out.push(Found::Var(
            path.to_owned(),
            Span::new(span.start + 1, span.end.saturating_sub(1)),
        ));
        if path != "request.intent" {
            continue;
        }
        // `{"var": "request.intent"}` then `, "name"` or `, ["a", "b"]` ...
        let close = if p == i + 3 {
            // The list form: after its closing bracket.
            (p + 1..toks.len())
                .find(|&j| punct_at(toks, j, b']'))
                .map_or(toks.len(), |j| j + 1)
        } else {
            p + 1
        };
        if punct_at(toks, close, b'}') && punct_at(toks, close + 1, b',') {
            intents_from(toks, close + 2, &mut out);
        }
        // ... or `"name", ` before `{"var": "request.intent"}`.
        if i >= 4 && punct_at(toks, i - 1, b'{') && punct_at(toks, i - 2, b',') {
            if let Some((name, span)) = str_at(toks, i - 3) {
                out.push(Found::Intent(name.to_owned(), span));
            }
        }
    }
    out
}

/// A string literal at `i`, or each one of a list of them.
fn intents_from(toks: &[Tok], i: usize, out: &mut Vec<Found>) {
    if let Some((name, span)) = str_at(toks, i) {
        out.push(Found::Intent(name.to_owned(), span));
        return;
    }
    if !punct_at(toks, i, b'[') {
        return;
    }
    let mut j = i + 1;
    while let Some((name, span)) = str_at(toks, j) {
        out.push(Found::Intent(name.to_owned(), span));
        if !punct_at(toks, j + 1, b',') {
            break;
        }
        j += 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(json: &str) -> Vec<(String, String)> {
        names(&lex(json, 0))
            .into_iter()
            .map(|f| match f {
                Found::Var(p, s) => (format!("var {p}"), json[s.start..s.end].to_owned()),
                Found::Intent(n, s) => (format!("intent {n}"), json[s.start..s.end].to_owned()),
            })
            .collect()
    }

    #[test]
    fn vars_and_intents_with_their_spans() {
        let got = found(
            r#"json {"and": [{">=": [{"var": "ctx.user.age"}, 75]}, {"==": [{"var": "request.intent"}, "refund"]}, {"in": [{"var": ["request.intent", null]}, ["a", "b"]]}, {"==": ["c", {"var": "request.intent"}]}]}"#,
        );
        assert_eq!(
            got,
            [
                ("var ctx.user.age".into(), "ctx.user.age".into()),
                ("var request.intent".into(), "request.intent".into()),
                ("intent refund".into(), "\"refund\"".into()),
                ("var request.intent".into(), "request.intent".into()),
                ("intent a".into(), "\"a\"".into()),
                ("intent b".into(), "\"b\"".into()),
                ("var request.intent".into(), "request.intent".into()),
                ("intent c".into(), "\"c\"".into()),
            ]
        );
    }

    #[test]
    fn escaped_and_broken_text_is_skipped_without_panicking() {
        assert!(found(r#"{"var": "ctx.a\u0062"}"#).is_empty());
        for text in ["{\"var\": \"ctx.a", "\"", "{\"var\":", "\"\\"] {
            let _ = found(text);
        }
    }
}
