//! The formatter's lexer: the source as tokens with their comments attached.
//!
//! Whitespace is dropped; every comment is kept and attached either to the token
//! before it (a *trailing* comment, on the same line) or to the token after it (a
//! *leading* comment, on a line of its own). Comments after the last token belong to
//! the end of the file. The lexer accepts any text and never panics: what it does not
//! recognise becomes a one-character [`Kind::Punct`] token.

/// What a token is. The printer dispatches on the kind and the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An identifier or a dotted path: `tool`, `ctx.user.tier`.
    Word,
    /// A `"..."` string (also JSON strings), quotes included.
    Str,
    /// A `"""..."""` string, quotes included.
    Triple,
    /// An integer or a float, with an optional sign, underscores and exponent.
    Number,
    /// `10%`, `12.5%`.
    Percent,
    /// Punctuation and operators: `{ } ( ) [ ] , : < > ? | == != <= >=`.
    Punct,
}

/// A comment, with whether a blank line separates it from what came before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// The comment, `//` included, trailing whitespace removed.
    pub text: String,
    pub blank_before: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token<'s> {
    pub kind: Kind,
    pub text: &'s str,
    /// Comments on their own lines directly before the token.
    pub leading: Vec<Comment>,
    /// A blank line directly before the token itself (after its leading comments).
    pub blank_before: bool,
    /// A comment after the token on the same line.
    pub trailing: Option<String>,
}

impl Token<'_> {
    /// Is there a blank line before this token or before its first leading comment?
    pub fn blank_before_all(&self) -> bool {
        self.leading
            .first()
            .map_or(self.blank_before, |c| c.blank_before)
    }

    pub fn is(&self, text: &str) -> bool {
        self.text == text
    }

    pub fn has_comments(&self) -> bool {
        !self.leading.is_empty() || self.trailing.is_some()
    }
}

/// The tokens of a file and the comments after its last token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tokens<'s> {
    pub tokens: Vec<Token<'s>>,
    pub end_comments: Vec<Comment>,
}

pub fn lex(source: &str) -> Tokens<'_> {
    let bytes = source.as_bytes();
    let mut out = Tokens::default();
    let mut pending: Vec<Comment> = Vec::new();
    // Newlines seen since the last token or comment.
    let mut newlines = 0usize;
    // Has anything (token or comment) been seen yet? Blank lines at the top of the
    // file are not "before" anything.
    let mut seen_any = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                newlines += 1;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        if source[i..].starts_with('\u{FEFF}') {
            i += '\u{FEFF}'.len_utf8();
            continue;
        }
        if source[i..].starts_with("//") {
            let end = source[i..].find('\n').map_or(source.len(), |n| i + n);
            let text = source[i..end].trim_end().to_owned();
            let after_token = out.tokens.last_mut().filter(|_| pending.is_empty());
            match after_token {
                Some(tok) if newlines == 0 && tok.trailing.is_none() => tok.trailing = Some(text),
                _ => pending.push(Comment {
                    text,
                    blank_before: seen_any && newlines >= 2,
                }),
            }
            seen_any = true;
            newlines = 0;
            i = end;
            continue;
        }
        let mut end = token_end(source, i).min(source.len());
        while !source.is_char_boundary(end) {
            end += 1;
        }
        let kind = classify(source, i, end);
        out.tokens.push(Token {
            kind,
            text: &source[i..end],
            leading: std::mem::take(&mut pending),
            blank_before: seen_any && newlines >= 2,
            trailing: None,
        });
        seen_any = true;
        newlines = 0;
        i = end;
    }
    out.end_comments = pending;
    out
}

fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The end of the token that starts at `i` (never `i` itself, never inside a char).
fn token_end(source: &str, i: usize) -> usize {
    let bytes = source.as_bytes();
    let b = bytes[i];
    if b == b'"' {
        return crate::syntax::skip_string(bytes, i);
    }
    if is_word_start(b) {
        let mut j = i;
        loop {
            while j < bytes.len() && is_word_char(bytes[j]) {
                j += 1;
            }
            // A dot continues a path only when a word follows it.
            if j + 1 < bytes.len() && bytes[j] == b'.' && is_word_start(bytes[j + 1]) {
                j += 1;
                continue;
            }
            return j;
        }
    }
    let digit_at = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_digit);
    if b.is_ascii_digit() || (b == b'-' && digit_at(i + 1)) {
        let mut j = i + 1;
        let digits = |mut j: usize| {
            while j < bytes.len() && (bytes[j].is_ascii_digit() || bytes[j] == b'_') {
                j += 1;
            }
            j
        };
        j = digits(j);
        if bytes.get(j) == Some(&b'.') && digit_at(j + 1) {
            j = digits(j + 1);
        }
        if matches!(bytes.get(j), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(j + 1), Some(b'+' | b'-')));
            if digit_at(j + 1 + sign) {
                j = digits(j + 1 + sign);
            }
        }
        if bytes.get(j) == Some(&b'%') {
            j += 1;
        }
        return j;
    }
    for op in ["==", "!=", "<=", ">="] {
        if source[i..].starts_with(op) {
            return i + 2;
        }
    }
    let mut end = i + 1;
    while !source.is_char_boundary(end) {
        end += 1;
    }
    end
}

fn classify(source: &str, start: usize, end: usize) -> Kind {
    let text = &source[start..end];
    let first = text.as_bytes().first().copied().unwrap_or(b' ');
    if text.starts_with("\"\"\"") {
        Kind::Triple
    } else if first == b'"' {
        Kind::Str
    } else if is_word_start(first) {
        Kind::Word
    } else if text.ends_with('%') && text.len() > 1 {
        Kind::Percent
    } else if first.is_ascii_digit() || (first == b'-' && text.len() > 1) {
        Kind::Number
    } else {
        Kind::Punct
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<(Kind, &str)> {
        lex(src).tokens.iter().map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn tokens() {
        assert_eq!(
            texts("a.b==-5 10.5% \"x\\\"y\" 1e-3 \"\"\"q\"\"\" {}"),
            vec![
                (Kind::Word, "a.b"),
                (Kind::Punct, "=="),
                (Kind::Number, "-5"),
                (Kind::Percent, "10.5%"),
                (Kind::Str, "\"x\\\"y\""),
                (Kind::Number, "1e-3"),
                (Kind::Triple, "\"\"\"q\"\"\""),
                (Kind::Punct, "{"),
                (Kind::Punct, "}"),
            ]
        );
    }

    #[test]
    fn comments_attach() {
        let t = lex("// head\n\na // trailing\n// lead\n\nb\n// end\n");
        assert_eq!(t.tokens[0].leading[0].text, "// head");
        assert!(t.tokens[0].blank_before);
        assert_eq!(t.tokens[0].trailing.as_deref(), Some("// trailing"));
        assert_eq!(t.tokens[1].leading[0].text, "// lead");
        assert!(!t.tokens[1].leading[0].blank_before);
        assert!(t.tokens[1].blank_before);
        assert_eq!(t.end_comments[0].text, "// end");
    }

    #[test]
    fn never_panics_on_odd_input() {
        for src in [
            "\"", "\"\"\"", "é", "-", "1.", "1e", "a.", "\u{FEFF}", "//", "\\",
        ] {
            let _ = lex(src);
        }
    }
}
