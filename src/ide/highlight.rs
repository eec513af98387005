//! Semantic tokens: keywords, types, the names of tools, intents, buckets, redactors,
//! blocks and policies (declarations marked), paths, strings, numbers, operators and
//! comments — so that a client without the TextMate grammar still colours packs, and
//! one with it sees names by what they are.

use std::collections::HashMap;

use crate::fmt::lexer::{lex, Kind};
use crate::ir::SymbolKind;
use crate::span::Span;

use super::Analysis;

/// What a token is. The language server's legend lists these in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    Keyword,
    Type,
    Tool,
    Intent,
    Bucket,
    Redactor,
    Block,
    Policy,
    Path,
    Field,
    String,
    Number,
    Operator,
    Comment,
}

impl TokenType {
    /// Every type, in legend order.
    pub const ALL: [TokenType; 14] = [
        TokenType::Keyword,
        TokenType::Type,
        TokenType::Tool,
        TokenType::Intent,
        TokenType::Bucket,
        TokenType::Redactor,
        TokenType::Block,
        TokenType::Policy,
        TokenType::Path,
        TokenType::Field,
        TokenType::String,
        TokenType::Number,
        TokenType::Operator,
        TokenType::Comment,
    ];
}

/// One token: a byte span on one or more lines (the server splits multi-line ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemanticToken {
    pub span: Span,
    pub ty: TokenType,
    /// The declaration of a name (not a use).
    pub declaration: bool,
}

const KEYWORDS: &[&str] = &[
    "pack",
    "version",
    "library",
    "import",
    "description",
    "context",
    "prompt",
    "system",
    "developer",
    "budget",
    "total",
    "tokenizer",
    "bucket",
    "share",
    "priority",
    "min",
    "overflow",
    "tool",
    "kind",
    "risk",
    "approval",
    "input",
    "prohibit",
    "intent",
    "fallback",
    "safety",
    "tools",
    "task",
    "redactor",
    "pattern",
    "policy",
    "advisory",
    "when",
    "refuse",
    "escalate",
    "require_approval",
    "deny",
    "redact",
    "instruct",
    "block",
    "in",
    "and",
    "or",
    "not",
    "exists",
    "json",
    "true",
    "false",
    "null",
    "session",
    "directives",
];

const TYPES: &[&str] = &[
    "string",
    "int",
    "float",
    "bool",
    "timestamp",
    "list",
    "enum",
];

const OPERATORS: &[&str] = &["==", "!=", "<", "<=", ">", ">=", "|", "?"];

fn symbol_type(kind: SymbolKind) -> TokenType {
    match kind {
        SymbolKind::Tool => TokenType::Tool,
        SymbolKind::Intent => TokenType::Intent,
        SymbolKind::Policy => TokenType::Policy,
        SymbolKind::Redactor => TokenType::Redactor,
        SymbolKind::Bucket => TokenType::Bucket,
        SymbolKind::Block => TokenType::Block,
        SymbolKind::Field => TokenType::Field,
    }
}

impl Analysis {
    /// The semantic tokens in `range` (all when `None`), sorted and not overlapping.
    pub fn semantic_tokens(&self, range: Option<Span>) -> Vec<SemanticToken> {
        let text = self.text();
        let (from, to) = range.map_or((0, text.len()), |r| self.window(r));
        let names: HashMap<usize, (SymbolKind, bool, usize)> = self
            .occurrences()
            .iter()
            .filter(|o| o.span.start >= from && o.span.start < to)
            .map(|o| (o.span.start, (o.kind, o.is_definition, o.span.end)))
            .collect();
        let base = text.as_ptr() as usize;
        let mut out = Vec::new();
        let mut last_end = from;
        for t in lex(text.get(from..to).unwrap_or("")).tokens {
            let start = (t.text.as_ptr() as usize).saturating_sub(base);
            let span = Span::new(start, start + t.text.len());
            comments(text, last_end, start, &mut out);
            last_end = span.end;
            let token = |ty, declaration| SemanticToken {
                span,
                ty,
                declaration,
            };
            match t.kind {
                Kind::Str | Kind::Triple => {
                    // An intent named in a condition is a name, not just a string.
                    match names.get(&start) {
                        Some((SymbolKind::Intent, d, end)) if *end == span.end => {
                            out.push(token(TokenType::Intent, *d))
                        }
                        _ => out.push(token(TokenType::String, false)),
                    }
                }
                Kind::Number | Kind::Percent => out.push(token(TokenType::Number, false)),
                Kind::Punct if OPERATORS.contains(&t.text) => {
                    out.push(token(TokenType::Operator, false))
                }
                Kind::Punct => {}
                Kind::Word => out.push(word(t.text, span, &names)),
            }
        }
        comments(text, last_end, to, &mut out);
        out.retain(|t| range.is_none_or(|r| t.span.start < r.end && r.start < t.span.end));
        out
    }

    /// The part of the text to lex for `range`: from the end of the last item before
    /// it to the start of the first item after it, so that a range costs what it
    /// covers. Items start and end on token boundaries when the file parses; when it
    /// does not (an unterminated string may run over later items), the whole text.
    fn window(&self, range: Span) -> (usize, usize) {
        let text = self.text();
        if !self.parse_diagnostics.is_empty() {
            return (0, text.len());
        }
        let items = &self.checked().ast.items;
        let from = items
            .iter()
            .map(|i| i.span.end)
            .filter(|end| *end <= range.start)
            .max()
            .unwrap_or(0);
        let to = items
            .iter()
            .map(|i| i.span.start)
            .filter(|start| *start >= range.end && *start >= from)
            .min()
            .unwrap_or(text.len());
        if text.is_char_boundary(from) && text.is_char_boundary(to) && from <= to {
            (from, to)
        } else {
            (0, text.len())
        }
    }
}

fn word(w: &str, span: Span, names: &HashMap<usize, (SymbolKind, bool, usize)>) -> SemanticToken {
    let (ty, declaration) = match names.get(&span.start) {
        Some((kind, d, _)) => (symbol_type(*kind), *d),
        None if w.contains('.') => (TokenType::Path, false),
        None if KEYWORDS.contains(&w) => (TokenType::Keyword, false),
        None if TYPES.contains(&w) => (TokenType::Type, false),
        None => (TokenType::Path, false),
    };
    // A field used as `ctx.user.tier` is a path; its declaration is a field.
    let ty = if ty == TokenType::Field && !declaration {
        TokenType::Path
    } else {
        ty
    };
    SemanticToken {
        span,
        ty,
        declaration,
    }
}

/// The `//` comments in the gap `[from, to)` between two tokens.
fn comments(text: &str, from: usize, to: usize, out: &mut Vec<SemanticToken>) {
    let Some(gap) = text.get(from..to) else {
        return;
    };
    let mut at = 0;
    while let Some(i) = gap[at..].find("//") {
        let start = at + i;
        let end = gap[start..].find('\n').map_or(gap.len(), |n| start + n);
        out.push(SemanticToken {
            span: Span::new(from + start, from + end),
            ty: TokenType::Comment,
            declaration: false,
        });
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keywords_paths_and_comments() {
        let text = "pack \"a/b\" version \"1.0.0\"\n// note\ntool t {\n  kind read\n}\nintent i {\n  tools t\n  task \"x\"\n}\npolicy p {\n  when request.intent == \"i\" and ctx.a == 1\n  deny t\n}\ncontext {\n  a: int\n}\n";
        let a = Analysis::new(text);
        let tokens = a.semantic_tokens(None);
        let at = |needle: &str, nth: usize| {
            let i = text.match_indices(needle).nth(nth).unwrap().0;
            tokens.iter().find(|t| t.span.start == i).copied().unwrap()
        };
        assert_eq!(at("pack", 0).ty, TokenType::Keyword);
        assert_eq!(at("// note", 0).ty, TokenType::Comment);
        let decl = at("t {", 0);
        assert_eq!((decl.ty, decl.declaration), (TokenType::Tool, true));
        let used = at("t\n  task", 0);
        assert_eq!((used.ty, used.declaration), (TokenType::Tool, false));
        assert_eq!(at("\"i\"", 0).ty, TokenType::Intent);
        assert_eq!(at("request.intent", 0).ty, TokenType::Path);
        assert_eq!(at("==", 0).ty, TokenType::Operator);
        assert_eq!(at("int\n", 0).ty, TokenType::Type);
        assert_eq!(at("1\n", 0).ty, TokenType::Number);
        // Sorted, never overlapping.
        for w in tokens.windows(2) {
            assert!(w[0].span.end <= w[1].span.start, "{w:?}");
        }
        let ranged = a.semantic_tokens(Some(Span::new(0, 10)));
        assert!(ranged.iter().all(|t| t.span.start < 10));
    }

    /// A range lexes only the items around it, and answers what the whole file's
    /// tokens say of it; a file that does not parse is lexed whole.
    #[test]
    fn a_range_is_the_whole_files_tokens_in_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("packs/support/support.ctxpack")).unwrap();
        let broken = text.replacen("\"\"\"", "\"", 3);
        for text in [text, broken] {
            let a = Analysis::new(text.as_str());
            let all = a.semantic_tokens(None);
            for start in (0..text.len()).step_by(211) {
                for len in [0, 1, 40, 900] {
                    let r = Span::new(start, (start + len).min(text.len()));
                    let want: Vec<SemanticToken> = all
                        .iter()
                        .filter(|t| t.span.start < r.end && r.start < t.span.end)
                        .copied()
                        .collect();
                    assert_eq!(a.semantic_tokens(Some(r)), want, "{r:?}");
                }
            }
            for (start, end) in [(usize::MAX, 0), (0, usize::MAX), (5, 2)] {
                let _ = a.semantic_tokens(Some(Span { start, end }));
            }
        }
    }
}
