//! String literals: escapes, and the dedenting of triple-quoted strings.
//!
//! Each output byte remembers the source offset it came from, so that a diagnostic
//! about a template path can point inside the string.

use super::ast::StrLit;
use crate::diagnostic::Diagnostic;
use crate::span::Span;

/// Decodes the string literal at `span` (quotes included). `triple` selects the `"""`
/// form. Escapes were validated by the grammar; an escape naming no Unicode scalar
/// value is reported here.
pub fn decode(source: &str, span: Span, triple: bool, diags: &mut Vec<Diagnostic>) -> StrLit {
    let quote = if triple { 3 } else { 1 };
    let inner_start = (span.start + quote).min(span.end);
    let inner_end = span.end.saturating_sub(quote).max(inner_start);
    let raw = &source[inner_start..inner_end];

    // The raw bytes we keep, with their source offsets.
    let mut kept: Vec<(usize, &str)> = Vec::new();
    if triple {
        dedent(raw, inner_start, &mut kept);
    } else {
        kept.push((inner_start, raw));
    }

    let mut value = String::with_capacity(raw.len());
    let mut offsets = Vec::with_capacity(raw.len() + 1);
    let mut literal_braces = Vec::new();
    for (base, piece) in kept {
        let mut chars = piece.char_indices().peekable();
        while let Some((i, ch)) = chars.next() {
            let at = base + i;
            if ch != '\\' {
                push(&mut value, &mut offsets, ch, at);
                continue;
            }
            match chars.next() {
                Some((_, '"')) => push(&mut value, &mut offsets, '"', at),
                Some((_, '\\')) => push(&mut value, &mut offsets, '\\', at),
                Some((_, 'n')) => push(&mut value, &mut offsets, '\n', at),
                Some((_, 't')) => push(&mut value, &mut offsets, '\t', at),
                Some((_, '{')) => {
                    // `\{{`: the grammar guarantees the second brace.
                    chars.next();
                    literal_braces.push(value.len());
                    push(&mut value, &mut offsets, '{', at);
                    push(&mut value, &mut offsets, '{', at + 2);
                }
                Some((_, 'u')) => {
                    let mut hex = String::new();
                    let mut end = at + 2;
                    for (j, c) in chars.by_ref() {
                        end = base + j + 1;
                        if c == '}' {
                            break;
                        }
                        if c != '{' {
                            hex.push(c);
                        }
                    }
                    match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        Some(c) => push(&mut value, &mut offsets, c, at),
                        None => diags.push(
                            Diagnostic::new(
                                "E0001",
                                Span::new(at, end),
                                format!("`\\u{{{hex}}}` is not a Unicode scalar value"),
                            )
                            .with_label("invalid escape")
                            .with_help(
                                "write a code point between 0 and 10FFFF, outside D800–DFFF",
                            ),
                        ),
                    }
                }
                // The grammar admits no other escape; keep the text rather than panic.
                Some((j, other)) => {
                    push(&mut value, &mut offsets, '\\', at);
                    push(&mut value, &mut offsets, other, base + j);
                }
                None => push(&mut value, &mut offsets, '\\', at),
            }
        }
    }
    offsets.push(inner_end);
    let relative = |at: usize| u32::try_from(at - span.start).unwrap_or(u32::MAX);
    StrLit {
        value,
        span,
        offsets: offsets.into_iter().map(relative).collect(),
        literal_braces,
    }
}

fn push(value: &mut String, offsets: &mut Vec<usize>, ch: char, at: usize) {
    value.push(ch);
    for _ in 0..ch.len_utf8() {
        offsets.push(at);
    }
}

/// The spec's dedent: drop the first newline after `"""`, remove the common leading
/// indentation of the non-blank lines, drop trailing whitespace before the closing
/// `"""`. Pushes the kept slices with their source offsets.
fn dedent<'a>(raw: &'a str, base: usize, kept: &mut Vec<(usize, &'a str)>) {
    let mut start = 0;
    if raw.starts_with("\r\n") {
        start = 2;
    } else if raw.starts_with('\n') {
        start = 1;
    }
    let body = &raw[start..];
    let body = body.trim_end_matches([' ', '\t', '\r', '\n']);
    let indent = body
        .split('\n')
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    let mut offset = base + start;
    let mut lines = body.split('\n').peekable();
    while let Some(line) = lines.next() {
        let cut = indent.min(line.len() - line.trim_start_matches([' ', '\t']).len());
        let text = line[cut..].strip_suffix('\r').unwrap_or(&line[cut..]);
        kept.push((offset + cut, text));
        if lines.peek().is_some() {
            kept.push((offset + line.len(), "\n"));
        }
        offset += line.len() + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(src: &str, triple: bool) -> StrLit {
        let mut d = Vec::new();
        let s = decode(src, Span::new(0, src.len()), triple, &mut d);
        assert!(d.is_empty(), "{d:?}");
        s
    }

    #[test]
    fn escapes() {
        let s = lit(r#""a\"b\\c\n\t\u{1F600}\{{x}}""#, false);
        assert_eq!(s.value, "a\"b\\c\n\t😀{{x}}");
        assert_eq!(s.literal_braces, vec![11]);
        assert_eq!(s.offsets.len(), s.value.len() + 1);
    }

    #[test]
    fn triple_dedent() {
        let src = "\"\"\"\n    You are\n      indented\n\n    done  \n  \"\"\"";
        let s = lit(src, true);
        assert_eq!(s.value, "You are\n  indented\n\ndone");
        // The `d` of `done` maps back to its source position.
        let d = s.value.find("done").unwrap();
        assert_eq!(&src[s.offset(d)..s.offset(d) + 4], "done");
    }

    #[test]
    fn offsets_are_relative_to_the_literal_and_survive_a_move() {
        use crate::syntax::shift::Shift;
        let src = "prefix \"x{{ a }}\\ny\"";
        let mut d = Vec::new();
        let mut s = decode(src, Span::new(7, src.len()), false, &mut d);
        let a = s.value.find('a').unwrap();
        assert_eq!(&src[s.offset(a)..s.offset(a) + 1], "a");
        assert_eq!(s.sub_span(a, a + 1), Span::new(12, 13));
        // Moved by an edit before it: the same characters, further on.
        s.shift(5);
        let moved = format!("12345{src}");
        assert_eq!(&moved[s.offset(a)..s.offset(a) + 1], "a");
        assert_eq!(s.offset(s.value.len() + 1), s.span.end);
    }

    #[test]
    fn bad_unicode_escape_is_reported() {
        let src = r#""\u{D800}""#;
        let mut d = Vec::new();
        decode(src, Span::new(0, src.len()), false, &mut d);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, "E0001");
    }
}
