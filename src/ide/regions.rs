//! Folding: every item that spans lines, the multi-line strings inside items (prompt
//! and block texts), and runs of comment lines.

use crate::span::Span;

use super::Analysis;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldKind {
    Region,
    Comment,
}

/// A foldable range of lines (0-based, inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    pub start_line: usize,
    pub end_line: usize,
    pub kind: FoldKind,
}

impl Analysis {
    /// The folding ranges, by start line.
    pub fn folding_ranges(&self) -> Vec<Fold> {
        let lines = self.line_index();
        let line = |offset: usize| lines.line_of(offset);
        let mut out = Vec::new();
        let region = |span: Span, out: &mut Vec<Fold>| {
            let (start_line, end_line) = (line(span.start), line(span.end.saturating_sub(1)));
            if end_line > start_line {
                out.push(Fold {
                    start_line,
                    end_line,
                    kind: FoldKind::Region,
                });
            }
        };
        let text = self.text();
        // An item's span may run on over the blank lines and comments after it.
        for item in &self.checked().ast.items {
            region(super::symbols::trim_trivia(text, item.span), &mut out);
        }
        // Triple-quoted strings: `"""` to `"""`.
        let mut at = 0;
        while let Some(open) = text[at..].find("\"\"\"").map(|i| at + i) {
            let Some(close) = text[open + 3..].find("\"\"\"").map(|i| open + 3 + i) else {
                break;
            };
            region(Span::new(open, close + 3), &mut out);
            at = close + 3;
        }
        comment_runs(text, &mut out);
        out.sort_by_key(|f| (f.start_line, std::cmp::Reverse(f.end_line)));
        out.dedup();
        out
    }
}

/// Runs of two or more lines that are only a `//` comment.
fn comment_runs(text: &str, out: &mut Vec<Fold>) {
    let mut run: Option<(usize, usize)> = None;
    let flush = |run: &mut Option<(usize, usize)>, out: &mut Vec<Fold>| {
        if let Some((start, end)) = run.take() {
            if end > start {
                out.push(Fold {
                    start_line: start,
                    end_line: end,
                    kind: FoldKind::Comment,
                });
            }
        }
    };
    for (i, l) in text.lines().enumerate() {
        if l.trim_start().starts_with("//") {
            run = Some(run.map_or((i, i), |(s, _)| (s, i)));
        } else {
            flush(&mut run, out);
        }
    }
    flush(&mut run, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_strings_and_comment_runs_fold() {
        let text = "pack \"a/b\" version \"1.0.0\"\n\n/// one\n/// two\ntool t {\n  kind read\n}\n\nprompt system \"\"\"\n  a\n  b\n\"\"\"\n";
        let folds = Analysis::new(text).folding_ranges();
        assert!(
            folds.contains(&Fold {
                start_line: 2,
                end_line: 3,
                kind: FoldKind::Comment
            }),
            "{folds:?}"
        );
        assert!(
            folds.contains(&Fold {
                start_line: 4,
                end_line: 6,
                kind: FoldKind::Region
            }),
            "{folds:?}"
        );
        assert!(
            folds.contains(&Fold {
                start_line: 8,
                end_line: 11,
                kind: FoldKind::Region
            }),
            "{folds:?}"
        );
        // A one-line item folds nothing, whatever blank lines and comments follow it.
        let text = "pack \"a/b\" version \"1.0.0\"\n\nprohibit x\n\n\n\n// next\ntool x {\n  kind read\n}\n";
        assert_eq!(
            Analysis::new(text).folding_ranges(),
            [Fold {
                start_line: 7,
                end_line: 9,
                kind: FoldKind::Region
            }]
        );
        // Unbalanced text folds what it can and does not panic.
        let _ = Analysis::new("tool t {\n\"\"\"\n").folding_ranges();
    }
}
