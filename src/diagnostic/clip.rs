//! Long lines in the human report.
//!
//! miette pads a label out to its column with a formatting width, and the standard
//! library panics on a width over 65535: a label that far right on one line (a
//! generated pack, a whole policy on one line) would crash the report. Nobody reads
//! such a line whole anyway. A diagnostic whose excerpt shows a line longer than
//! [`LIMIT`] bytes is rendered from a *view* of the file: the lines its excerpts show,
//! each long one cut to a window marked with `…` (around the diagnostic's first label
//! on that line, or the line's head). The labels are moved into the view; the header
//! still gives the line and column in the file, as the machine formats do.

use std::ops::Range;

use crate::span::{LineIndex, Span};

use super::Diagnostic;

/// Lines longer than this, in bytes, are cut.
const LIMIT: usize = 240;
/// Bytes kept before the label a cut line is centred on.
const BEFORE: usize = 40;
/// Bytes kept of a cut line.
const WINDOW: usize = 160;
/// Lines of context miette shows around a label (its default).
const CONTEXT: usize = 1;
const ELLIPSIS: &str = "…";

/// A file and where its lines start (the index of the report's excerpts, borrowed).
pub struct Lines<'a> {
    text: &'a str,
    index: &'a LineIndex,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str, index: &'a LineIndex) -> Self {
        Lines { text, index }
    }

    /// The line holding byte `offset` (0-based).
    fn line_of(&self, offset: usize) -> usize {
        self.index.line_of(offset)
    }

    /// The bytes of line `line`, without its line feed.
    fn range(&self, line: usize) -> Range<usize> {
        let start = self.index.line_start(line);
        let end = match self.index.line_start(line + 1) {
            next if next > start && line + 1 < self.index.line_count() => next - 1,
            _ => self.text.len(),
        };
        start..end
    }

    fn last(&self) -> usize {
        self.index.line_count() - 1
    }
}

/// A window of a cut line: the bytes of the file it keeps, and the bytes of `…` put
/// before them in the view.
struct Window {
    kept: Range<usize>,
    lead: usize,
}

struct ViewLine {
    /// Where the line starts in the view.
    start: usize,
    /// The line's bytes in the file.
    file: Range<usize>,
    window: Option<Window>,
}

/// The lines a diagnostic's excerpts show, long ones cut.
pub struct View<'a> {
    name: &'a str,
    file: &'a str,
    index: &'a LineIndex,
    text: String,
    /// The file's line the view starts at.
    first: usize,
    lines: Vec<ViewLine>,
}

/// The largest character boundary of `text` at or below `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl<'a> View<'a> {
    /// The view `diagnostic` is rendered from, and the diagnostic with its spans moved
    /// into it; `None` when no line its excerpts show is long (the file is shown as is).
    pub fn of(
        name: &'a str,
        lines: &'a Lines<'a>,
        diagnostic: &Diagnostic,
    ) -> Option<(Self, Diagnostic)> {
        let spans: Vec<Span> = std::iter::once(diagnostic.span)
            .chain(diagnostic.labels.iter().map(|l| l.span))
            .collect();
        let len = lines.text.len();
        let at = |offset: usize| lines.line_of(offset.min(len));
        let shown = |line: usize| line.saturating_sub(CONTEXT)..=(line + CONTEXT).min(lines.last());
        let long = spans
            .iter()
            .flat_map(|s| [at(s.start), at(s.end)])
            .flat_map(shown)
            .any(|line| lines.range(line).len() > LIMIT);
        if !long {
            return None;
        }
        let first = spans
            .iter()
            .map(|s| at(s.start))
            .min()?
            .saturating_sub(CONTEXT);
        let last = (spans.iter().map(|s| at(s.end)).max()? + CONTEXT).min(lines.last());
        let mut view = View {
            name,
            file: lines.text,
            index: lines.index,
            text: String::new(),
            first,
            lines: Vec::with_capacity(last + 1 - first),
        };
        for line in first..=last {
            let file = lines.range(line);
            let anchor = spans
                .iter()
                .map(|s| s.start.min(len))
                .find(|&s| at(s) == line)
                .unwrap_or(file.start);
            view.push_line(file, anchor);
        }
        let mut moved = diagnostic.clone();
        moved.span = view.span(diagnostic.span);
        for label in &mut moved.labels {
            label.span = view.span(label.span);
        }
        Some((view, moved))
    }

    fn push_line(&mut self, file: Range<usize>, anchor: usize) {
        let start = self.text.len();
        let window = (file.len() > LIMIT).then(|| {
            let from = floor_boundary(self.file, anchor.saturating_sub(BEFORE).max(file.start));
            let to = floor_boundary(self.file, (from + WINDOW).min(file.end));
            let lead = if from > file.start { ELLIPSIS.len() } else { 0 };
            Window {
                kept: from..to,
                lead,
            }
        });
        match &window {
            None => self.text.push_str(&self.file[file.clone()]),
            Some(w) => {
                if w.lead > 0 {
                    self.text.push_str(ELLIPSIS);
                }
                self.text.push_str(&self.file[w.kept.clone()]);
                if w.kept.end < file.end {
                    self.text.push_str(ELLIPSIS);
                }
            }
        }
        if file.end < self.file.len() {
            self.text.push('\n');
        }
        self.lines.push(ViewLine {
            start,
            file,
            window,
        });
    }

    /// The view line holding the file's byte `offset`.
    fn line_at(&self, offset: usize) -> Option<&ViewLine> {
        let i = self
            .lines
            .partition_point(|l| l.file.start <= offset)
            .checked_sub(1)?;
        self.lines.get(i)
    }

    /// Where the file's byte `offset` is in the view (clamped into a cut line's window).
    fn offset(&self, offset: usize) -> usize {
        let Some(line) = self.line_at(offset) else {
            return 0;
        };
        match &line.window {
            None => line.start + offset.min(line.file.end) - line.file.start,
            Some(w) => {
                let kept = offset.clamp(w.kept.start, w.kept.end);
                line.start + w.lead + kept - w.kept.start
            }
        }
    }

    fn span(&self, span: Span) -> Span {
        Span::new(self.offset(span.start), self.offset(span.end))
    }

    /// The file's line and column (0-based, the column in Unicode scalar values, as
    /// the machine formats count it) of the view's byte `offset`.
    fn position(&self, offset: usize) -> (usize, usize) {
        let i = self
            .lines
            .partition_point(|l| l.start <= offset)
            .saturating_sub(1);
        let Some(line) = self.lines.get(i) else {
            return (self.first, 0);
        };
        let into = offset.saturating_sub(line.start);
        let at = match &line.window {
            None => line.file.start + into,
            Some(w) => (w.kept.start + into.saturating_sub(w.lead)).min(w.kept.end),
        };
        let at = self.index.line_col(self.file, at.min(line.file.end));
        (at.line - 1, at.column - 1)
    }
}

impl miette::SourceCode for View<'_> {
    fn read_span<'b>(
        &'b self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'b> + 'b>, miette::MietteError> {
        let inner =
            self.text
                .as_str()
                .read_span(span, context_lines_before, context_lines_after)?;
        // The header (`file:line:col`) is read with no context lines: the position in
        // the file. Excerpts are numbered from the view's first line.
        let (line, column) = match context_lines_before {
            0 => self.position(span.offset()),
            _ => (self.first + inner.line(), inner.column()),
        };
        Ok(super::excerpt(
            self.name.to_owned(),
            inner.data(),
            *inner.span(),
            line,
            column,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{Lines, View, LIMIT, WINDOW};
    use crate::diagnostic::{Diagnostic, FileReport, Label};
    use crate::span::{LineIndex, Span};

    fn at(text: &str, needle: &str) -> Span {
        let start = text.find(needle).unwrap_or(0);
        Span::new(start, start + needle.len())
    }

    fn view<'a>(lines: &'a Lines<'a>, d: &Diagnostic) -> (View<'a>, Diagnostic) {
        View::of("t", lines, d).expect("a long line is shown")
    }

    #[test]
    fn short_lines_are_shown_as_they_are() {
        let text = "a\nbb\nccc\n";
        let d = Diagnostic::new("E0201", at(text, "bb"), "m");
        let index = LineIndex::new(text);
        assert!(View::of("t", &Lines::new(text, &index), &d).is_none());
    }

    #[test]
    fn a_label_keeps_its_text_and_its_file_position() {
        let long = format!("{}TARGET{}", "é".repeat(500), "x".repeat(500));
        let text = format!("first\n{long}\nlast");
        let index = LineIndex::new(&text);
        let lines = Lines::new(&text, &index);
        let d = Diagnostic::new("E0201", at(&text, "TARGET"), "m");
        let (v, moved) = view(&lines, &d);
        assert_eq!(&v.text[moved.span.start..moved.span.end], "TARGET");
        // Line 2 (0-based 1), after 500 `é`.
        assert_eq!(v.position(moved.span.start), (1, 500));
        let shown: Vec<&str> = v.text.lines().collect();
        assert_eq!(shown.len(), 3);
        assert_eq!(shown[0], "first");
        assert_eq!(shown[2], "last");
        assert!(
            shown[1].starts_with('…') && shown[1].ends_with('…'),
            "{}",
            shown[1]
        );
        assert!(shown[1].len() <= WINDOW + 2 * '…'.len_utf8());
    }

    #[test]
    fn a_label_longer_than_the_window_is_cut_at_its_end() {
        let text = format!("head\n{}\n", "y".repeat(LIMIT * 4));
        let index = LineIndex::new(&text);
        let lines = Lines::new(&text, &index);
        let d = Diagnostic::new("E0201", Span::new(5, 5 + LIMIT * 4), "m");
        let (v, moved) = view(&lines, &d);
        assert_eq!(moved.span.start, 5);
        assert_eq!(moved.span.len(), WINDOW);
        assert_eq!(v.position(moved.span.start), (1, 0));
    }

    #[test]
    fn labels_on_two_long_lines_each_get_a_window() {
        let a = format!("{}ONE{}", "a".repeat(400), "a".repeat(400));
        let b = format!("{}TWO{}", "b".repeat(300), "b".repeat(400));
        let text = format!("{a}\nmiddle\n{b}\n");
        let index = LineIndex::new(&text);
        let lines = Lines::new(&text, &index);
        let mut d = Diagnostic::new("E0101", at(&text, "TWO"), "m");
        d.labels.push(Label {
            span: at(&text, "ONE"),
            message: "first".into(),
        });
        let (v, moved) = view(&lines, &d);
        assert_eq!(&v.text[moved.span.start..moved.span.end], "TWO");
        assert_eq!(
            &v.text[moved.labels[0].span.start..moved.labels[0].span.end],
            "ONE"
        );
        assert_eq!(v.position(moved.span.start), (2, 300));
        assert_eq!(v.position(moved.labels[0].span.start), (0, 400));
    }

    #[test]
    fn a_long_context_line_is_cut_at_its_head() {
        let text = format!("short label\n{}\n", "z".repeat(LIMIT + 1));
        let index = LineIndex::new(&text);
        let lines = Lines::new(&text, &index);
        let d = Diagnostic::new("E0201", at(&text, "label"), "m");
        let (v, moved) = view(&lines, &d);
        assert_eq!(&v.text[moved.span.start..moved.span.end], "label");
        assert_eq!(
            v.text.lines().nth(1),
            Some(format!("{}…", "z".repeat(WINDOW)).as_str())
        );
    }

    #[test]
    fn the_report_renders_windows_without_panicking() {
        // Multi-byte characters, a CRLF line and a label at the very end of the text.
        let text = format!("{}\r\n{}end", "🦀".repeat(20_000), "ü".repeat(40_000));
        let end = text.len();
        let mut d = Diagnostic::new("E0001", Span::new(end, end), "m");
        d.labels.push(Label {
            span: Span::new(4 * 10_000, 4 * 10_001),
            message: "crab".into(),
        });
        let report = FileReport {
            path: "t".into(),
            source: text,
            diagnostics: vec![d],
        };
        let human = crate::diagnostic::to_human(&report, false);
        assert!(human.contains("[t:2:40004]"), "{human}");
        assert!(human.contains("crab"), "{human}");
    }
}
