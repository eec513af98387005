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
                let offset = clamp_to_char_boundary(self.text, offset);
                let line = self.lines.line_of(offset);
                let start = self.lines.line_start(line);
                Position {
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    character: u32::try_from(offset - start).unwrap_or(u32::MAX),
                }
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
        let end = if line + 1 < self.lines.line_count() {
            self.lines.line_start(line + 1).saturating_sub(1)
        } else {
            self.text.len()
        };
        column(self.text, start, end, position.character, self.encoding)
    }

    pub fn span(&self, range: Range) -> Span {
        Span::new(self.offset(range.start), self.offset(range.end))
    }
}

/// [`Text::offset`] without a line index: the line is found by scanning for line
/// ends, which costs a fraction of building an index of a large text. For applying
/// an edit to a document, whose text is about to change.
pub fn offset_in(text: &str, position: Position, encoding: Encoding) -> usize {
    offset_from(text, (0, 0), position, encoding)
}

/// The byte offsets of a range's two ends ([`offset_in`]); the end's line is found
/// from the start's, so the text before the range is scanned once.
pub fn range_in(text: &str, start: Position, end: Position, encoding: Encoding) -> (usize, usize) {
    let from = offset_in(text, start, encoding);
    let line_start = text[..from].rfind('\n').map_or(0, |i| i + 1);
    let to = match end.line.checked_sub(start.line) {
        Some(_) => offset_from(text, (start.line, line_start), end, encoding),
        None => offset_in(text, end, encoding),
    };
    (from, to.max(from))
}

/// [`offset_in`], scanning from `(line, offset)`: a line and the offset where it
/// starts, at or before `position`'s line.
fn offset_from(
    text: &str,
    (line, offset): (u32, usize),
    position: Position,
    encoding: Encoding,
) -> usize {
    let bytes = text.as_bytes();
    let start = match position.line.saturating_sub(line) {
        0 => offset,
        n => match after_newlines(&bytes[offset..], n as usize) {
            Some(past) => offset + past,
            None => return text.len(),
        },
    };
    let end = memchr::memchr(b'\n', &bytes[start..]).map_or(text.len(), |i| start + i);
    column(text, start, end, position.character, encoding)
}

/// The offset just past the `n`th newline of `bytes` (`n` ≥ 1). Newlines are counted
/// a block at a time (a count the compiler vectorizes), and only the block holding
/// the `n`th is searched for it: a pack's short lines make a newline-by-newline
/// search slow.
fn after_newlines(bytes: &[u8], n: usize) -> Option<usize> {
    const BLOCK: usize = 4096;
    let mut seen = 0;
    for (k, block) in bytes.chunks(BLOCK).enumerate() {
        let here = block.iter().filter(|&&b| b == b'\n').count();
        if seen + here >= n {
            let at = memchr::memchr_iter(b'\n', block).nth(n - seen - 1)?;
            return Some(k * BLOCK + at + 1);
        }
        seen += here;
    }
    None
}

/// The byte offset of `character` in the line `text[start..end]` (without its line
/// end), clamped to the line's end.
fn column(text: &str, start: usize, end: usize, character: u32, encoding: Encoding) -> usize {
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

    /// Over block boundaries too, and for ranges: a text of many short lines and
    /// a few long ones.
    #[test]
    fn ranges_without_an_index_are_the_indexed_ones() {
        let mut text = String::new();
        for i in 0..3000 {
            text.push_str(if i % 97 == 0 {
                "😀é long line of text that goes on and on\n"
            } else {
                "ab\n"
            });
        }
        let lines = LineIndex::new(&text);
        for t in in_each_encoding(&text, &lines) {
            for (a, b) in [
                (0, 0),
                (5, 5),
                (1400, 1401),
                (1399, 2999),
                (2999, 3001),
                (10, 3),
            ] {
                for character in [0, 1, 3, 40] {
                    let start = Position { line: a, character };
                    let end = Position {
                        line: b,
                        character: 2,
                    };
                    let (s, e) = range_in(&text, start, end, t.encoding);
                    assert_eq!(s, t.offset(start), "{:?} {start:?}", t.encoding);
                    assert_eq!(e, t.offset(end).max(s), "{:?} {end:?}", t.encoding);
                }
            }
        }
    }

    #[test]
    fn offsets_without_an_index_are_the_indexed_ones() {
        let text = "a😀b\né\n\nxyz é😀\nlast";
        let lines = LineIndex::new(text);
        for t in in_each_encoding(text, &lines) {
            for line in 0..7 {
                for character in 0..9 {
                    let p = Position { line, character };
                    assert_eq!(
                        offset_in(text, p, t.encoding),
                        t.offset(p),
                        "{:?} {p:?}",
                        t.encoding
                    );
                }
            }
        }
    }
}
