//! Templates: `{{ PATH }}` and `{{ PATH | "default" }}` inside prompt, task, instruct
//! and block strings. A `{{` written `\{{` is literal.

use super::ast::StrLit;
use crate::diagnostic::Diagnostic;
use crate::span::Span;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpolation {
    pub path: String,
    pub path_span: Span,
    pub default: Option<String>,
    /// The whole `{{ ... }}`.
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Interp(Interpolation),
}

/// Splits a template string into literal text and interpolations. Malformed
/// interpolations are reported (E0207) and kept as literal text.
pub fn parse(lit: &StrLit, diags: &mut Vec<Diagnostic>) -> Vec<Piece> {
    let value = &lit.value;
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < value.len() {
        let rest = &value[i..];
        let Some(found) = rest.find("{{") else {
            text.push_str(rest);
            break;
        };
        let open = i + found;
        text.push_str(&value[i..open]);
        if lit.literal_braces.contains(&open) {
            text.push_str("{{");
            i = open + 2;
            continue;
        }
        let Some(close_rel) = value[open + 2..].find("}}") else {
            diags.push(
                Diagnostic::new(
                    "E0207",
                    lit.sub_span(open, open + 2),
                    "unclosed `{{` in template",
                )
                .with_label("this `{{` is never closed")
                .with_help("close the interpolation with `}}`, or write a literal `{{` as `\\{{`"),
            );
            text.push_str(&value[open..]);
            break;
        };
        let close = open + 2 + close_rel;
        let whole = lit.sub_span(open, close + 2);
        match interpolation(lit, open + 2, close) {
            Ok((path, path_span, default)) => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Interp(Interpolation {
                    path,
                    path_span,
                    default,
                    span: whole,
                }));
            }
            Err(message) => {
                diags.push(
                    Diagnostic::new("E0207", whole, message)
                        .with_label("malformed interpolation")
                        .with_help("write `{{ ctx.path }}` or `{{ ctx.path | \"default\" }}`"),
                );
                text.push_str(&value[open..close + 2]);
            }
        }
        i = close + 2;
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

type Parsed = (String, Span, Option<String>);

/// Parses the inside of `{{ ... }}`: `value[start..end]`.
fn interpolation(lit: &StrLit, start: usize, end: usize) -> Result<Parsed, String> {
    let inner = &lit.value[start..end];
    let (path_part, default_part) = match inner.find('|') {
        Some(bar) => (&inner[..bar], Some(&inner[bar + 1..])),
        None => (inner, None),
    };
    let path = path_part.trim();
    if path.is_empty() {
        return Err("empty path in template interpolation".to_owned());
    }
    if !is_path(path) {
        return Err(format!("`{path}` is not a field path"));
    }
    let lead = path_part.len() - path_part.trim_start().len();
    let path_start = start + lead;
    let path_span = lit.sub_span(path_start, path_start + path.len());
    let default = match default_part {
        None => None,
        Some(d) => Some(default_string(d.trim())?),
    };
    Ok((path.to_owned(), path_span, default))
}

/// A default is a double-quoted string; `\"` and `\\` are its escapes.
fn default_string(text: &str) -> Result<String, String> {
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|_| text.len() >= 2)
        .ok_or_else(|| format!("the default `{text}` must be a quoted string"))?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('"' | '\\')) => out.push(e),
                _ => return Err(format!("the default `{text}` has an unknown escape")),
            },
            '"' => return Err(format!("the default `{text}` has an unescaped quote")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `IDENT ("." IDENT)*` with identifiers `[a-z_][a-z0-9_]*`.
pub fn is_path(path: &str) -> bool {
    path.split('.').all(|seg| {
        let mut bytes = seg.bytes();
        matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
            && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::strings::decode;

    fn pieces(src: &str) -> (Vec<Piece>, Vec<Diagnostic>) {
        let mut d = Vec::new();
        let lit = decode(src, Span::new(0, src.len()), false, &mut d);
        let p = parse(&lit, &mut d);
        (p, d)
    }

    #[test]
    fn interpolations_and_defaults() {
        let (p, d) = pieces(r#""Hi {{ ctx.user.name | \"friend\" }}, {{request.locale}} \{{x}}""#);
        assert!(d.is_empty());
        assert_eq!(p.len(), 5);
        match &p[1] {
            Piece::Interp(i) => {
                assert_eq!(i.path, "ctx.user.name");
                assert_eq!(i.default.as_deref(), Some("friend"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(p[4], Piece::Text(" {{x}}".into()));
    }

    #[test]
    fn malformed() {
        assert_eq!(pieces(r#""{{ }}""#).1[0].code, "E0207");
        assert_eq!(pieces(r#""{{ ctx.a""#).1[0].code, "E0207");
        assert_eq!(pieces(r#""{{ ctx.A }}""#).1[0].code, "E0207");
        assert_eq!(pieces(r#""{{ ctx.a | x }}""#).1[0].code, "E0207");
    }
}
