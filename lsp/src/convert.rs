//! Conversions between the core's byte offsets and spans and the protocol's
//! positions and ranges. All position arithmetic goes through [`Encoding`]: UTF-16
//! code units (the protocol's default) or UTF-8 bytes when the client offers them.

use ctxpack::span::{clamp_to_char_boundary, utf16_column, LineIndex, Span};
use tower_lsp_server::ls_types::{Position, Range};

/// How the `character` of a position is counted, negotiated at `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    #[default]
    Utf16,
    Utf8,
}

/// A text with its line index, for conversions.
pub struct Text<'a> {
    pub text: &'a str,
    pub lines: &'a LineIndex,
    pub encoding: Encoding,
}

impl Text<'_> {
    pub fn position(&self, offset: usize) -> Position {
        match self.encoding {
            Encoding::Utf16 => {
                let (line, character) = self.lines.utf16_position(self.text, offset);
                Position { line, character }
            }
            Encoding::Utf8 => {
                let (line, character) = self.lines.utf8_position(self.text, offset);
                Position { line, character }
            }
        }
    }

    pub fn range(&self, span: Span) -> Range {
        Range {
            start: self.position(span.start),
            end: self.position(span.end),
        }
    }

    /// The byte offset of a position; out-of-range positions are clamped to the end of
    /// their line or of the text.
    pub fn offset(&self, position: Position) -> usize {
        let line = position.line as usize;
        if line >= self.lines.line_count() {
            return self.text.len();
        }
        let start = self.lines.line_start(line);
        let end = self.lines.line_end(self.text, line);
        column(self.text, start, end, position.character, self.encoding)
    }

    pub fn span(&self, range: Range) -> Span {
        Span::new(self.offset(range.start), self.offset(range.end))
    }
}

/// The byte offset of `character` in the line `text[start..end]` (without its line
/// end), clamped to the line's end.
pub(crate) fn column(
    text: &str,
    start: usize,
    end: usize,
    character: u32,
    encoding: Encoding,
) -> usize {
    match encoding {
        Encoding::Utf16 => utf16_column(text, start, end, character),
        Encoding::Utf8 => {
            let offset = start.saturating_add(character as usize).min(end);
            clamp_to_char_boundary(text, offset)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` read in each encoding.
    fn in_each_encoding<'a>(text: &'a str, lines: &'a LineIndex) -> [Text<'a>; 2] {
        [Encoding::Utf16, Encoding::Utf8].map(|encoding| Text {
            text,
            lines,
            encoding,
        })
    }

    #[test]
    fn both_encodings_round_trip() {
        let text = "a😀b\né\n";
        let lines = LineIndex::new(text);
        for t in in_each_encoding(text, &lines) {
            let encoding = t.encoding;
            for offset in [0, 1, 5, 6, 7, 9, text.len()] {
                assert_eq!(
                    t.offset(t.position(offset)),
                    offset,
                    "{encoding:?} {offset}"
                );
            }
            let _ = t.offset(Position {
                line: 99,
                character: 99,
            });
        }
        let t = Text {
            text,
            lines: &lines,
            encoding: Encoding::Utf16,
        };
        assert_eq!(
            t.position(5),
            Position {
                line: 0,
                character: 3
            }
        );
    }

    /// An offset between the `\r` and the `\n` of a line end is the end of the line
    /// (its length), in both encodings, as the command line reports it.
    #[test]
    fn inside_a_crlf_is_the_end_of_the_line() {
        let text = "é\r\nb\r\n";
        let lines = LineIndex::new(text);
        for t in in_each_encoding(text, &lines) {
            let end = if t.encoding == Encoding::Utf8 { 2 } else { 1 };
            for offset in [2, 3] {
                assert_eq!(
                    t.position(offset),
                    Position {
                        line: 0,
                        character: end
                    },
                    "{:?} {offset}",
                    t.encoding
                );
            }
        }
    }
}
