//! A document's text as the client edits it.
//!
//! An editor sends a change per keystroke. Applied to the whole text, each change
//! moves every byte and every line start after it: on a 49,000-line pack that was
//! half of what handling a change cost, and a burst of typing paid it once per
//! keystroke. A [`Buffer`] keeps the changes made within one line in a copy of that
//! line (its window) and puts the line back into the text when the text is read
//! ([`Buffer::text`]): a burst of typing on a line costs one move of the text.
//! A change that spans lines, or types a line break, is applied to the text at once.
//!
//! The text is shared ([`Buffer::snapshot`]) with the work that reads it off the
//! documents' lock: typing goes on meanwhile in the window, and the text is copied
//! only if a change must be applied to it while it is shared.

use std::sync::Arc;

use ctxpack::span::{LineIndex, TextEdit};
use tower_lsp_server::ls_types::Range;

use crate::convert::{column, Encoding, Text};

pub struct Buffer {
    /// The text with every change applied but the window's, and its line index.
    text: Arc<String>,
    lines: LineIndex,
    window: Option<Window>,
}

/// Line `line`, `text[start..end]` without its line end, as the changes since it was
/// taken out made it.
struct Window {
    line: usize,
    start: usize,
    end: usize,
    current: String,
}

impl Buffer {
    pub fn new(text: String) -> Buffer {
        Buffer {
            lines: LineIndex::new(&text),
            text: Arc::new(text),
            window: None,
        }
    }

    /// The current text, shared.
    pub fn snapshot(&mut self) -> Arc<String> {
        self.close_window();
        Arc::clone(&self.text)
    }

    /// The current text with its line index.
    pub fn text(&mut self, encoding: Encoding) -> Text<'_> {
        self.close_window();
        Text {
            text: self.text.as_str(),
            lines: &self.lines,
            encoding,
        }
    }

    /// Applies a change of the protocol: `new_text` in place of `range`, or of the
    /// whole text when there is no range.
    pub fn change(&mut self, range: Option<Range>, new_text: String, encoding: Encoding) {
        let Some(range) = range else {
            *self = Buffer::new(new_text);
            return;
        };
        let line = range.start.line as usize;
        let within_a_line = range.end.line == range.start.line
            && line < self.lines.line_count()
            && !new_text.contains('\n');
        if !within_a_line {
            let t = self.text(encoding);
            let start = t.offset(range.start);
            let end = t.offset(range.end).max(start);
            self.replace(start, end, &new_text);
            return;
        }
        if self.window.as_ref().is_some_and(|w| w.line != line) {
            self.close_window();
        }
        let window = match &mut self.window {
            Some(w) => w,
            None => {
                let start = self.lines.line_start(line);
                // The line as an editor shows it: without its `\r\n`, so that a
                // position past its end is clamped before the `\r`.
                let end = self.lines.line_end(&self.text, line);
                self.window.insert(Window {
                    line,
                    start,
                    end,
                    current: self.text.get(start..end).unwrap_or_default().to_owned(),
                })
            }
        };
        let line_len = window.current.len();
        let start = column(
            &window.current,
            0,
            line_len,
            range.start.character,
            encoding,
        );
        let end = column(&window.current, 0, line_len, range.end.character, encoding).max(start);
        window.current.replace_range(start..end, &new_text);
    }

    /// Puts the window's line back into the text.
    fn close_window(&mut self) {
        if let Some(w) = self.window.take() {
            self.replace(w.start, w.end, &w.current);
        }
    }

    /// `text[start..end]` replaced by `new`, in the text and its line index.
    fn replace(&mut self, start: usize, end: usize, new: &str) {
        let text = Arc::make_mut(&mut self.text);
        text.replace_range(start..end, new);
        let edit = TextEdit {
            start,
            old_end: end,
            new_end: start + new.len(),
        };
        self.lines.apply(text, &edit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tower_lsp_server::ls_types::Position;

    /// A change as the protocol sends it, with the text it makes when applied to
    /// the whole text at once.
    fn applied(text: &str, range: Range, new_text: &str, encoding: Encoding) -> String {
        let lines = LineIndex::new(text);
        let t = Text {
            text,
            lines: &lines,
            encoding,
        };
        let start = t.offset(range.start);
        let end = t.offset(range.end).max(start);
        let mut out = text.to_owned();
        out.replace_range(start..end, new_text);
        out
    }

    fn position(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    proptest! {
        /// Whatever the changes (within a line or across lines, past the end, in
        /// either encoding, on text with multi-byte characters), the buffer's text
        /// and line index are those of the changes applied one by one.
        #[test]
        fn a_buffer_reads_as_its_changes_applied_one_by_one(
            text in "[ab\né😀]{0,40}",
            changes in prop::collection::vec(
                (0u32..8, 0u32..12, 0u32..8, 0u32..12, "[xé\n😀]{0,3}", any::<bool>()),
                1..12,
            ),
            utf8 in any::<bool>(),
        ) {
            let encoding = if utf8 { Encoding::Utf8 } else { Encoding::Utf16 };
            let mut buffer = Buffer::new(text.clone());
            let mut expected = text;
            for (l1, c1, dl, c2, new_text, read) in changes {
                let range = Range { start: position(l1, c1), end: position(l1 + dl % 2, c2) };
                expected = applied(&expected, range, &new_text, encoding);
                buffer.change(Some(range), new_text, encoding);
                if read {
                    prop_assert_eq!(buffer.text(encoding).text, expected.as_str());
                }
            }
            let t = buffer.text(encoding);
            prop_assert_eq!(t.text, expected.as_str());
            prop_assert_eq!(t.lines, &LineIndex::new(&expected));
        }
    }

    #[test]
    fn typing_on_a_line_keeps_the_text_until_it_is_read() {
        let mut buffer = Buffer::new("ab\ncd\n".to_owned());
        for (i, ch) in ["x", "y"].into_iter().enumerate() {
            let at = position(1, 1 + i as u32);
            let range = Range { start: at, end: at };
            buffer.change(Some(range), ch.to_owned(), Encoding::Utf16);
        }
        assert_eq!(*buffer.text, "ab\ncd\n", "not yet applied");
        let shared = buffer.snapshot();
        assert_eq!(*shared, "ab\ncxyd\n");
        let at = position(0, 0);
        let range = Range { start: at, end: at };
        buffer.change(Some(range), "\n".to_owned(), Encoding::Utf16);
        assert_eq!(*shared, "ab\ncxyd\n", "a shared text is not changed");
        assert_eq!(buffer.text(Encoding::Utf16).text, "\nab\ncxyd\n");
        let whole = None;
        buffer.change(whole, "new".to_owned(), Encoding::Utf16);
        assert_eq!(buffer.text(Encoding::Utf16).text, "new");
    }
}
