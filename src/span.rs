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
///
/// It also records where the text's non-ASCII characters are, so that a column in
/// UTF-16 units or in Unicode scalar values is the byte column less what the wide
/// characters before it add: two binary searches per conversion, whatever the length
/// of the line (converting every position of a long line stays linear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    starts: Vec<usize>,
    len: usize,
    /// Byte offsets of the non-ASCII characters, ascending.
    wide: Vec<usize>,
    /// `surplus16[k]`: bytes beyond UTF-16 units of `wide[..k]` (UTF-8 length less
    /// UTF-16 length, summed); one entry more than `wide`.
    surplus16: Vec<usize>,
    /// `surplus_chars[k]`: bytes beyond one per character of `wide[..k]`.
    surplus_chars: Vec<usize>,
}

/// The offsets (from `base`) of the non-ASCII characters of `text`.
fn wide_chars(text: &str, base: usize) -> impl Iterator<Item = usize> + '_ {
    text.bytes()
        .enumerate()
        // A character starts at every byte that is not a continuation byte.
        .filter(|&(_, b)| b >= 0x80 && b & 0xC0 != 0x80)
        .map(move |(i, _)| base + i)
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
        let mut index = LineIndex {
            starts,
            len: text.len(),
            wide: if text.is_ascii() {
                Vec::new()
            } else {
                wide_chars(text, 0).collect()
            },
            surplus16: Vec::new(),
            surplus_chars: Vec::new(),
        };
        index.sum_surpluses(text);
        index
    }

    /// Recomputes the running surpluses from `wide` (`text` is the indexed text).
    fn sum_surpluses(&mut self, text: &str) {
        self.surplus16.clear();
        self.surplus_chars.clear();
        self.surplus16.push(0);
        self.surplus_chars.push(0);
        let (mut s16, mut chars) = (0, 0);
        for &at in &self.wide {
            let c = text.get(at..).and_then(|t| t.chars().next()).unwrap_or(' ');
            s16 += c.len_utf8() - c.len_utf16();
            chars += c.len_utf8() - 1;
            self.surplus16.push(s16);
            self.surplus_chars.push(chars);
        }
    }

    /// What the wide characters in `start..end` add to a byte count: `(bytes beyond
    /// UTF-16 units, bytes beyond characters)`.
    fn surplus(&self, start: usize, end: usize) -> (usize, usize) {
        let a = self.wide.partition_point(|&w| w < start);
        let b = self.wide.partition_point(|&w| w < end);
        (
            self.surplus16[b] - self.surplus16[a],
            self.surplus_chars[b] - self.surplus_chars[a],
        )
    }

    /// The index of `new`, which `edit` made of the text this indexes: the line
    /// starts before the edit are kept, those in the inserted text found, those after
    /// it moved. Only the inserted text is scanned.
    pub fn edited(&self, new: &str, edit: &TextEdit) -> Self {
        let mut index = self.clone();
        index.apply(new, edit);
        index
    }

    /// [`LineIndex::edited`] in place: for a caller that keeps the index of a text
    /// it edits, and so allocates nothing for an edit that adds no line.
    pub fn apply(&mut self, new: &str, edit: &TextEdit) {
        // A line starts just after a newline: the newlines before the edit are
        // the starts up to `edit.start`, those after it the starts past `old_end`.
        let before = self.starts.partition_point(|&s| s <= edit.start);
        let after = self.starts.partition_point(|&s| s <= edit.old_end);
        let inserted = new
            .as_bytes()
            .get(edit.start..edit.new_end)
            .unwrap_or_default();
        for s in self.starts.get_mut(after..).unwrap_or_default() {
            *s = *s - edit.old_end + edit.new_end;
        }
        let starts = memchr::memchr_iter(b'\n', inserted).map(|i| edit.start + i + 1);
        self.starts.splice(before..after.max(before), starts);
        self.len = new.len();
        // The wide characters: kept before the edit, found in the inserted text,
        // moved after it.
        let Some(inserted) = new.get(edit.start..edit.new_end) else {
            // Not on character boundaries: index the new text afresh.
            *self = LineIndex::new(new);
            return;
        };
        let before = self.wide.partition_point(|&w| w < edit.start);
        let after = self.wide.partition_point(|&w| w < edit.old_end);
        for w in self.wide.get_mut(after..).unwrap_or_default() {
            *w = *w - edit.old_end + edit.new_end;
        }
        self.wide
            .splice(before..after.max(before), wide_chars(inserted, edit.start));
        self.sum_surpluses(new);
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

    /// Where line `line` ends: before its `\n`, or before the `\r` of its `\r\n` (the
    /// end of the line an editor shows, where a position past it is clamped); the end
    /// of the text for the last line or one past it.
    pub fn line_end(&self, text: &str, line: usize) -> usize {
        match self.starts.get(line + 1) {
            Some(&next) => {
                let end = next - 1;
                let start = self.line_start(line);
                if end > start && text.as_bytes().get(end - 1) == Some(&b'\r') {
                    end - 1
                } else {
                    end
                }
            }
            None => self.len,
        }
    }

    /// 1-based line and column in Unicode scalar values.
    pub fn line_col(&self, text: &str, offset: usize) -> LineCol {
        let offset = before_crlf(text, clamp_to_char_boundary(text, offset));
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let column = offset - start - self.surplus(start, offset).1 + 1;
        LineCol {
            line: line + 1,
            column,
        }
    }

    /// 0-based line and UTF-16 column, as the language server protocol counts them.
    pub fn utf16_position(&self, text: &str, offset: usize) -> (u32, u32) {
        let offset = before_crlf(text, clamp_to_char_boundary(text, offset));
        let line = self.line_of(offset);
        let start = self.line_start(line);
        let col = offset - start - self.surplus(start, offset).0;
        (line as u32, col as u32)
    }

    /// [`LineIndex::utf16_position`] with the column in UTF-8 bytes.
    pub fn utf8_position(&self, text: &str, offset: usize) -> (u32, u32) {
        let offset = before_crlf(text, clamp_to_char_boundary(text, offset));
        let line = self.line_of(offset);
        let col = offset - self.line_start(line);
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(col).unwrap_or(u32::MAX),
        )
    }

    /// The byte offset of a 0-based line and UTF-16 column; out-of-range positions are
    /// clamped to the end of the line or of the text, never a panic.
    pub fn offset_of_utf16(&self, text: &str, line: u32, col: u32) -> usize {
        let line = line as usize;
        if line >= self.starts.len() {
            return self.len;
        }
        let start = self.starts[line];
        utf16_column(text, start, self.line_end(text, line), col)
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

/// `offset`, or the `\r` of a `\r\n` it points inside of: a position between the two
/// is the end of the line, where an editor shows it, not one column past it.
fn before_crlf(text: &str, offset: usize) -> usize {
    let b = text.as_bytes();
    if offset > 0 && b.get(offset) == Some(&b'\n') && b[offset - 1] == b'\r' {
        offset - 1
    } else {
        offset
    }
}

/// The largest char boundary not after `offset`.
pub fn clamp_to_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// One replacement of text: `old[start..old_end]` became `new[start..new_end]`;
/// what follows moved by `new_end - old_end` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextEdit {
    pub start: usize,
    pub old_end: usize,
    pub new_end: usize,
}

impl TextEdit {
    /// The smallest replacement that turns `old` into `new`: what lies between their
    /// common prefix and common suffix, on character boundaries.
    pub fn between(old: &str, new: &str) -> TextEdit {
        let prefix = common_prefix(old, new);
        let suffix = common_suffix(&old[prefix..], &new[prefix..]);
        TextEdit {
            start: prefix,
            old_end: old.len() - suffix,
            new_end: new.len() - suffix,
        }
    }

    /// How far the text after the edit moved.
    pub fn delta(&self) -> isize {
        self.new_end as isize - self.old_end as isize
    }

    /// Where a span of the old text is in the new one; `None` when it touches the
    /// replaced text (its content may have changed).
    pub fn forward(&self, s: Span) -> Option<Span> {
        if s.end < self.start || (s.end == self.start && self.start < self.old_end) {
            Some(s)
        } else if s.start > self.old_end || (s.start == self.old_end && self.start < self.old_end) {
            Some(Span::new(
                s.start - self.old_end + self.new_end,
                s.end - self.old_end + self.new_end,
            ))
        } else {
            None
        }
    }
}

/// How many bytes `a` and `b` share from the front: compared a large block at a time
/// (a `memcmp` each, at the speed of memory), then a small block at a time within
/// the first large block that differs, then byte by byte.
fn shared_front(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    for block in [4096, 64, 1] {
        while i + block <= n && a[i..i + block] == b[i..i + block] {
            i += block;
        }
    }
    i
}

/// How many bytes `a` and `b` share at the back, as [`shared_front`] does.
fn shared_back(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (la, lb) = (a.len(), b.len());
    let mut i = 0;
    for block in [4096, 64, 1] {
        while i + block <= n && a[la - i - block..la - i] == b[lb - i - block..lb - i] {
            i += block;
        }
    }
    i
}

/// The length of the longest common prefix, on a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = shared_front(a.as_bytes(), b.as_bytes());
    while !a.is_char_boundary(n) || !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The length of the longest common suffix, on a character boundary.
fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = shared_back(a.as_bytes(), b.as_bytes());
    while !a.is_char_boundary(a.len() - n) || !b.is_char_boundary(b.len() - n) {
        n -= 1;
    }
    n
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

    /// A position past the end of a `\r\n` line is the end an editor shows: before
    /// the `\r`, never between it and the `\n`.
    #[test]
    fn a_crlf_line_ends_before_its_carriage_return() {
        let text = "ab\r\n\r\ncd\r\nef";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_end(text, 0), 2);
        assert_eq!(idx.line_end(text, 1), 4);
        assert_eq!(idx.line_end(text, 2), 8);
        assert_eq!(idx.line_end(text, 3), text.len());
        assert_eq!(idx.line_end(text, 9), text.len());
        assert_eq!(idx.offset_of_utf16(text, 0, 99), 2);
        assert_eq!(idx.offset_of_utf16(text, 1, 1), 4);
        assert_eq!(idx.offset_of_utf16(text, 2, 99), 8);
        // A lone `\r` inside a line is part of it.
        let text = "a\rb\n";
        assert_eq!(LineIndex::new(text).line_end(text, 0), 3);
    }

    #[test]
    fn an_edit_is_what_lies_between_prefix_and_suffix() {
        let e = TextEdit::between("abcdef", "abXYef");
        assert_eq!((e.start, e.old_end, e.new_end), (2, 4, 4));
        let e = TextEdit::between("aaa", "aaaa");
        assert_eq!((e.start, e.old_end, e.new_end), (3, 3, 4));
        let e = TextEdit::between("same", "same");
        assert_eq!((e.start, e.old_end, e.new_end), (4, 4, 4));
    }

    /// The block-wise scans find what a byte-by-byte scan finds, across the
    /// boundaries of large and small blocks and in multibyte text.
    #[test]
    fn block_scans_agree_with_a_byte_scan() {
        use proptest::prelude::*;
        let naive_front = |a: &[u8], b: &[u8]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let naive_back = |a: &[u8], b: &[u8]| {
            a.iter()
                .rev()
                .zip(b.iter().rev())
                .take_while(|(x, y)| x == y)
                .count()
        };
        let text = "[aé😀\n]{0,200}";
        // Repeated, so that the shared parts span several large blocks.
        proptest!(|(common in text, a in text, b in text, tail in text, k in 0usize..30, j in 0usize..30)| {
            let (common, tail) = (common.repeat(k), tail.repeat(j));
            let x = format!("{common}{a}{tail}");
            let y = format!("{common}{b}{tail}");
            let (x, y) = (x.as_bytes(), y.as_bytes());
            prop_assert_eq!(shared_front(x, y), naive_front(x, y));
            prop_assert_eq!(shared_back(x, y), naive_back(x, y));
            let e = TextEdit::between(
                std::str::from_utf8(x).unwrap_or_default(),
                std::str::from_utf8(y).unwrap_or_default(),
            );
            prop_assert!(e.start <= e.old_end && e.start <= e.new_end);
            prop_assert_eq!(x.len() - e.old_end, y.len() - e.new_end);
            prop_assert_eq!(&x[..e.start], &y[..e.start]);
            prop_assert_eq!(&x[e.old_end..], &y[e.new_end..]);
        });
    }

    /// The index of an edited text, from the index before the edit, is the index of
    /// the edited text.
    #[test]
    fn an_edited_line_index_is_the_index_of_the_edited_text() {
        use proptest::prelude::*;
        let text = "[a\né😀中\n]{0,60}";
        proptest!(|(old in text, inserted in text, at in 0usize..61, len in 0usize..20)| {
            let mut start = at.min(old.len());
            while !old.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(old.len());
            while !old.is_char_boundary(end) {
                end -= 1;
            }
            let end = end.max(start);
            let new = format!("{}{inserted}{}", &old[..start], &old[end..]);
            let edit = TextEdit { start, old_end: end, new_end: start + inserted.len() };
            prop_assert_eq!(LineIndex::new(&old).edited(&new, &edit), LineIndex::new(&new));
        });
    }

    #[test]
    fn a_position_inside_a_crlf_is_the_end_of_its_line() {
        let text = "ab\r\ncd";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_col(text, 3), LineCol { line: 1, column: 3 });
        assert_eq!(idx.line_col(text, 2), LineCol { line: 1, column: 3 });
        assert_eq!(idx.utf16_position(text, 3), (0, 2));
        assert_eq!(idx.utf16_position(text, 4), (1, 0));
    }

    /// Columns from the index's wide characters are the columns counted from the
    /// line's start, at every character boundary.
    #[test]
    fn columns_are_the_counted_columns() {
        use proptest::prelude::*;
        proptest!(|(text in "[a\né😀中\n]{0,80}")| {
            let idx = LineIndex::new(&text);
            for (offset, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
                let line = text[..offset].matches('\n').count();
                let chars = text[start..offset].chars().count();
                let units: usize = text[start..offset].chars().map(char::len_utf16).sum();
                prop_assert_eq!(idx.line_col(&text, offset), LineCol { line: line + 1, column: chars + 1 });
                prop_assert_eq!(idx.utf16_position(&text, offset), (line as u32, units as u32));
            }
        });
    }

    #[test]
    fn spans_move_unless_they_touch_the_edit() {
        // "0123456789": "45" replaced by "xyz".
        let e = TextEdit {
            start: 4,
            old_end: 6,
            new_end: 7,
        };
        assert_eq!(e.forward(Span::new(0, 4)), Some(Span::new(0, 4)));
        assert_eq!(e.forward(Span::new(6, 8)), Some(Span::new(7, 9)));
        assert_eq!(e.forward(Span::new(3, 5)), None);
        assert_eq!(e.forward(Span::new(5, 7)), None);
        assert_eq!(e.forward(Span::new(0, 10)), None);
        // An insertion at 4: a span ending there may grow, one starting there too.
        let ins = TextEdit {
            start: 4,
            old_end: 4,
            new_end: 5,
        };
        assert_eq!(ins.forward(Span::new(0, 4)), None);
        assert_eq!(ins.forward(Span::new(4, 6)), None);
        assert_eq!(ins.forward(Span::new(0, 3)), Some(Span::new(0, 3)));
        assert_eq!(ins.forward(Span::new(5, 6)), Some(Span::new(6, 7)));
    }
}
