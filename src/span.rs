//! Byte spans into a source text, and the line index that turns them into 1-based
//! lines and columns (Unicode scalar values, as the machine output promises) or
//! UTF-16 code units (for the language server).

use serde::Serialize;

/// A half-open byte range `[start, end)` into one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start,
            end: end.max(start),
        }
    }

    pub fn len(self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }

    pub fn contains(self, offset: usize) -> bool {
        self.start <= offset && offset <= self.end
    }
}

impl From<Span> for miette::SourceSpan {
    fn from(span: Span) -> Self {
        miette::SourceSpan::new(span.start.into(), span.len())
    }
}

/// Line starts of a text, for offset ↔ position conversions.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
    len: usize,
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex {
            starts,
            len: text.len(),
        }
    }

    /// 0-based line of a byte offset (clamped to the text).
    pub fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.len);
        match self.starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    pub fn line_start(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.len)
    }

    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// 1-based line and column in Unicode scalar values.
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = clamp_to_char_boundary(text, offset);
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let column = text[start..offset].chars().count() + 1;
        LineCol {
            line: line + 1,
            column,
        }
    }

    /// 0-based line and UTF-16 column, as the language server protocol counts them.
    pub fn utf16_position(&self, text: &str, offset: usize) -> (u32, u32) {
        let offset = clamp_to_char_boundary(text, offset);
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let col: usize = text[start..offset].chars().map(char::len_utf16).sum();
        (line as u32, col as u32)
    }

    /// The byte offset of a 0-based line and UTF-16 column; out-of-range positions are
    /// clamped to the end of the line or of the text, never a panic.
    pub fn offset_of_utf16(&self, text: &str, line: u32, col: u32) -> usize {
        let line = line as usize;
        if line >= self.starts.len() {
            return self.len;
        }
        let start = self.starts[line];
        let end = self.starts.get(line + 1).map_or(self.len, |next| next - 1);
        utf16_column(text, start, end, col)
    }
}

/// The byte offset of UTF-16 column `col` in the line `text[start..end]` (without
/// its line end), clamped to `end`.
pub fn utf16_column(text: &str, start: usize, end: usize, col: u32) -> usize {
    let mut units = 0usize;
    for (i, ch) in text[start..end].char_indices() {
        if units >= col as usize {
            return start + i;
        }
        units += ch.len_utf16();
    }
    end
}

/// The largest char boundary not after `offset`.
pub fn clamp_to_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_scalar_values_and_utf16_units() {
        let text = "ab\n😀é x\n";
        let idx = LineIndex::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(idx.line_col(text, x), LineCol { line: 2, column: 4 });
        assert_eq!(idx.utf16_position(text, x), (1, 4));
        assert_eq!(idx.offset_of_utf16(text, 1, 4), x);
        assert_eq!(idx.offset_of_utf16(text, 99, 99), text.len());
        assert_eq!(idx.offset_of_utf16(text, 0, 99), 2);
    }
}
