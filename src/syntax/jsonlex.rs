//! The string literals of raw JSON text (`json { ... }`) with their spans. The parser
//! keeps a condition's JSON as a value, which has no positions: these let a
//! diagnostic about a name inside it point at the name, and the editor find names.

use crate::span::Span;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A string literal: its value when it has no escapes, and its span (quotes
    /// included).
    Str(Option<String>, Span),
    Punct(u8),
}

/// The string literals and punctuation of JSON text starting at `base`.
pub(crate) fn lex(source: &str, base: usize) -> Vec<Tok> {
    let bytes = source.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                let mut escaped = false;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        escaped = true;
                        i += 1;
                    }
                    i += 1;
                }
                let end = (i + 1).min(bytes.len());
                let value = (!escaped)
                    .then(|| source.get(start + 1..end.saturating_sub(1)))
                    .flatten()
                    .map(str::to_owned);
                toks.push(Tok::Str(value, Span::new(base + start, base + end)));
                i = end;
            }
            c @ (b'{' | b'}' | b'[' | b']' | b':' | b',') => {
                toks.push(Tok::Punct(c));
                i += 1;
            }
            _ => i += 1,
        }
    }
    toks
}

/// The string literals written without escapes, each with the span of its text
/// inside the quotes: for diagnostics on a name in the JSON.
pub fn strings(source: &str, base: usize) -> Vec<(String, Span)> {
    lex(source, base)
        .into_iter()
        .filter_map(|t| match t {
            Tok::Str(Some(value), span) => {
                Some((value, Span::new(span.start + 1, span.end.saturating_sub(1))))
            }
            _ => None,
        })
        .collect()
}
