//! Where each key and list item of a YAML test file starts, so that a problem in a
//! case can name its line.
//!
//! The values themselves are read by the same YAML reader as every other input; this
//! walks the parser's events only to record lines, by path (`cases/3/expect/tools`).
//! A document the event parser cannot follow simply has no lines: messages then go
//! without one.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser};

/// 1-based lines by path. A mapping entry's path ends in its key, a list item's in
/// its index.
#[derive(Debug, Default, Clone)]
pub struct Lines {
    by_path: HashMap<String, usize>,
}

enum Frame {
    Map {
        path: String,
        /// The key whose value comes next, or `None` when a key comes next.
        key: Option<String>,
    },
    Seq {
        path: String,
        index: usize,
    },
}

fn join(parent: &str, segment: &str) -> String {
    if parent.is_empty() {
        segment.to_owned()
    } else {
        format!("{parent}/{segment}")
    }
}

impl Lines {
    /// The lines of the first document of `text`.
    pub fn of(text: &str) -> Lines {
        let mut lines = Lines::default();
        let mut stack: Vec<Frame> = Vec::new();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else {
                break;
            };
            let line = span.start.line();
            match event {
                Event::DocumentEnd => break,
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map {
                        path,
                        key: key @ None,
                    }) = stack.last_mut()
                    {
                        lines.by_path.insert(join(path, &value), line);
                        *key = Some(value.into_owned());
                    } else {
                        lines.value_at(&mut stack, line);
                        finish_value(&mut stack);
                    }
                }
                Event::Alias(_) => {
                    lines.value_at(&mut stack, line);
                    finish_value(&mut stack);
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = lines.value_at(&mut stack, line);
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map { path, key: None }
                    } else {
                        Frame::Seq { path, index: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                    finish_value(&mut stack);
                }
                _ => {}
            }
        }
        lines
    }

    /// Records where a value starts (for a list item) and returns its path. A
    /// complex mapping key (a mapping or list in key position) gets the path `?`.
    fn value_at(&mut self, stack: &mut [Frame], line: usize) -> String {
        match stack.last_mut() {
            None => String::new(),
            Some(Frame::Map {
                path,
                key: Some(key),
            }) => join(path, key),
            Some(Frame::Map { path, key: None }) => join(path, "?"),
            Some(Frame::Seq { path, index }) => {
                let item = join(path, &index.to_string());
                self.by_path.entry(item.clone()).or_insert(line);
                item
            }
        }
    }

    /// The line of `path` (`cases/2/expect/tools`), if the file has it.
    pub fn get(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }
}

/// A value of the innermost container is complete.
fn finish_value(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Map { key, .. }) => *key = None,
        Some(Frame::Seq { index, .. }) => *index += 1,
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_items_have_their_lines() {
        let text = "pack: p.json\ncases:\n  - name: a\n    expect:\n      tools: [x]\n  - name: b\n    expect: { tols: [] }\n";
        let l = Lines::of(text);
        assert_eq!(l.get("pack"), Some(1));
        assert_eq!(l.get("cases"), Some(2));
        assert_eq!(l.get("cases/0"), Some(3));
        assert_eq!(l.get("cases/0/name"), Some(3));
        assert_eq!(l.get("cases/0/expect/tools"), Some(5));
        assert_eq!(l.get("cases/1"), Some(6));
        assert_eq!(l.get("cases/1/expect/tols"), Some(7));
        assert_eq!(l.get("cases/2"), None);
    }

    #[test]
    fn nested_values_do_not_shift_the_items_after_them() {
        let text = "cases:\n  - name: a\n    request: { context: { user: { tier: pro } }, tags: [1, 2] }\n    expect: {}\n  - name: b\n";
        let l = Lines::of(text);
        assert_eq!(l.get("cases/0/expect"), Some(4));
        assert_eq!(l.get("cases/1/name"), Some(5));
    }

    #[test]
    fn a_broken_document_has_the_lines_before_the_break() {
        let l = Lines::of("pack: a\ncases: [\n");
        assert_eq!(l.get("pack"), Some(1));
        assert_eq!(Lines::of("").get("pack"), None);
    }
}
