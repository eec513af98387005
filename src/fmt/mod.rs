//! The formatter: one canonical layout for `.ctxpack` files.
//!
//! [`format`] rewrites a file's layout and nothing else. It works on the file's token
//! stream (a small lexer in [`lexer`] that keeps every comment) and on the item
//! structure of the grammar (the printer in `printer`). It refuses files with syntax
//! errors: broken code is never reformatted.
//!
//! # The layout
//!
//! - Items stay in the order written, separated by exactly one blank line, except
//!   that a run of one-line imports, prohibitions or redactors that the author wrote
//!   on consecutive lines stays together.
//! - Two spaces of indentation inside braces; one entry per line (a context or input
//!   field, a tool, intent or budget entry, a `when` condition, an effect).
//! - Inside a block, a blank line the author left between two entries is kept (several
//!   collapse into one); none follows `{` or precedes `}`. This keeps the author's
//!   grouping of fields without letting vertical space drift.
//! - Single spaces between words; `path: type`, `list<T>`, `enum("a", "b")`, `T?`;
//!   `a, b` in lists; single spaces around comparison and boolean operators;
//!   `exists(path)`, `(expr)`, `[a, b]`; raw JSON as `{"key": value}` and `[a, b]`.
//!   A trailing comma before `)` or `]` is dropped.
//! - Buckets stay on one line, `bucket NAME { share 10% priority 90 }`, with the names
//!   of one budget padded to the longest so that the braces line up, and `share`
//!   values padded to the widest when more fields follow; so do an
//!   intent's share overrides, `budget { evidence 50% session 15% }`.
//! - A `"""` string whose text starts on the next line is re-indented: its lines sit
//!   two spaces deeper than the line it opens on, its closing quotes at that line's
//!   indentation. Its value (the dedented text) does not change. Plain strings,
//!   numbers (`16_000` stays `16_000`) and every other token are written as they are.
//! - Comments stay where they were: a comment on its own line stays on its own line
//!   above the same token (blank lines between comments are kept, collapsed to one);
//!   a comment at the end of a line stays at the end of the line after the same token.
//!   A comment inside a one-line construct (a bucket, a condition) forces a line break
//!   there; the construct continues two spaces deeper.
//! - Line endings become `\n`; a byte-order mark is dropped; the file ends with one
//!   newline.
//!
//! As a safety net, [`format`] checks its own output: the output must hold the same
//! tokens and comments, in the same order, as the input (triple-quoted strings compared
//! by value). If it does not, formatting fails instead of changing the pack.

pub mod lexer;
mod printer;

use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// Why a file could not be formatted.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FormatError {
    /// The file has syntax errors (E0001, or E0205 for `json { ... }` that is not
    /// JSON); it is not reformatted.
    #[error("the file has {} syntax error{}; fix {} before formatting", .0.len(), if .0.len() == 1 { "" } else { "s" }, if .0.len() == 1 { "it" } else { "them" })]
    Syntax(Vec<Diagnostic>),
    /// The formatter could not lay the file out without changing it (a bug).
    #[error("internal formatter error: {0}")]
    Internal(String),
}

/// Formats a whole file. Fails only when the file has syntax errors (or, defensively,
/// when the formatter would change more than the layout).
pub fn format(source: &str) -> Result<String, FormatError> {
    let (_, diagnostics) = crate::syntax::parse(source);
    let syntax: Vec<Diagnostic> = diagnostics
        .into_iter()
        .filter(|d| {
            d.code == "E0001"
                || (d.code == "E0205" && d.message.starts_with(crate::syntax::MALFORMED_JSON))
        })
        .collect();
    if !syntax.is_empty() {
        return Err(FormatError::Syntax(syntax));
    }
    let tokens = lexer::lex(source);
    let out = printer::Printer::new(&tokens)
        .file()
        .ok_or_else(|| FormatError::Internal("unexpected token structure".to_owned()))?;
    if signature(&tokens) != signature(&lexer::lex(&out)) {
        return Err(FormatError::Internal(
            "the formatted text would differ from the source in more than layout".to_owned(),
        ));
    }
    Ok(out)
}

/// Is the file already formatted? `Err` as for [`format`].
pub fn is_formatted(source: &str) -> Result<bool, FormatError> {
    format(source).map(|out| out == source)
}

/// What formatting must preserve: every token (triple strings by value) and every
/// comment, in order; trailing commas before `)` and `]` may be dropped.
fn signature(tokens: &lexer::Tokens<'_>) -> Vec<String> {
    let mut out = Vec::with_capacity(tokens.tokens.len());
    for (i, t) in tokens.tokens.iter().enumerate() {
        out.extend(t.leading.iter().map(|c| c.text.clone()));
        let next = tokens.tokens.get(i + 1).map(|n| n.text);
        let dropped_comma = t.text == "," && !t.has_comments() && matches!(next, Some(")" | "]"));
        if !dropped_comma {
            if t.kind == lexer::Kind::Triple {
                let mut ignored = Vec::new();
                let lit = crate::syntax::strings::decode(
                    t.text,
                    Span::new(0, t.text.len()),
                    true,
                    &mut ignored,
                );
                out.push(format!("\"\"\"{}", lit.value));
            } else {
                out.push(t.text.to_owned());
            }
        }
        out.extend(t.trailing.iter().cloned());
    }
    out.extend(tokens.end_comments.iter().map(|c| c.text.clone()));
    out
}

#[cfg(test)]
mod tests;
