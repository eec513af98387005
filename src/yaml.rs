//! YAML text read through serde_norway, with its nesting bounded first.
//!
//! serde_norway refuses a document nested deeper than 128 collections ("recursion
//! limit exceeded"), but only once libyaml, under it, has read the whole document, and
//! libyaml revisits every open flow collection at each token: `[[[[…]]]]` costs time
//! quadratic in its depth (80,000 levels took 12 s to be refused). Every YAML text a
//! user hands ctxpack (compile inputs, test files, the test files the language server
//! checks as they are typed) is read through [`from_str`] or [`from_slice`], which
//! refuse a document nested deeper than [`MAX_DEPTH`] with the same message, in time
//! linear in its length.
//!
//! Only flow collections (`[`, `{`) can nest deeply in few bytes (block collections
//! need their indentation), so a text with at most [`MAX_DEPTH`] of `[` and `{` in all
//! is read as it is. Any other is first walked by saphyr-parser's event stream, which
//! stops at the first collection past the limit (when its scanner, reading ahead,
//! stops at a 256th open flow collection first, the text up to there is walked). When
//! saphyr-parser finds any other error before that, the text goes to serde_norway all
//! the same, which reports its own error: the guard never refuses a document that
//! serde_norway would read.

use serde::de::DeserializeOwned;

/// The deepest nesting of collections read, as serde_norway allows.
pub const MAX_DEPTH: usize = 128;

/// Why a YAML text could not be read: serde_norway's error, or the nesting limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    location: Option<Location>,
}

/// Where an error is: a byte offset, and a line and column counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    index: usize,
    line: usize,
    column: usize,
}

impl Location {
    /// The byte offset in the text.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The line, from 1.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column in characters, from 1.
    pub fn column(&self) -> usize {
        self.column
    }
}

impl Error {
    /// Where the error is, when it has a place.
    pub fn location(&self) -> Option<Location> {
        self.location
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<serde_norway::Error> for Error {
    fn from(e: serde_norway::Error) -> Error {
        Error {
            message: e.to_string(),
            location: e.location().map(|l| Location {
                index: l.index(),
                line: l.line(),
                column: l.column(),
            }),
        }
    }
}

/// Reads a YAML (or JSON) text as `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    if let Some(e) = too_deep(text) {
        return Err(e);
    }
    Ok(serde_norway::from_str(text)?)
}

/// Reads YAML (or JSON) bytes as `T`. The nesting is bounded in the longest prefix of
/// the bytes that is UTF-8 (serde_norway refuses the rest).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    if let Some(e) = too_deep(text) {
        return Err(e);
    }
    Ok(serde_norway::from_slice(bytes)?)
}

/// The error for the first collection of `text` nested deeper than [`MAX_DEPTH`], if
/// saphyr-parser reaches one before any error of its own.
fn too_deep(text: &str) -> Option<Error> {
    let openers = memchr::memchr2_iter(b'[', b'{', text.as_bytes()).count();
    if openers <= MAX_DEPTH {
        return None;
    }
    match walk(text) {
        Walk::TooDeep(at) => Some(recursion_limit(text, at)),
        // The scanner reads ahead of the events it has given, and refuses a 256th open
        // flow collection before the parser has given the 129th level. The text up to
        // that collection holds at most 255 open ones, so its walk reaches the 129th
        // level (where serde_norway names it) before the end of the cut text.
        Walk::Overflow(at) => {
            let cut = &text[..byte_index(text, at)];
            Some(match walk(cut) {
                Walk::TooDeep(level) => recursion_limit(text, level),
                _ => recursion_limit(text, at),
            })
        }
        Walk::Within => None,
    }
}

/// What the walk of a text's events found.
enum Walk {
    /// A collection deeper than [`MAX_DEPTH`] opens here.
    TooDeep(saphyr_parser::Marker),
    /// The scanner refused a 256th open flow collection here.
    Overflow(saphyr_parser::Marker),
    /// Neither, before the end of the text or saphyr-parser's first other error (which
    /// serde_norway reports in its own words; see the module docs).
    Within,
}

fn walk(text: &str) -> Walk {
    use saphyr_parser::{Event, Parser};
    let mut depth = 0usize;
    for event in Parser::new_from_str(text) {
        match event {
            Ok((Event::SequenceStart(..) | Event::MappingStart(..), span)) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Walk::TooDeep(span.start);
                }
            }
            Ok((Event::SequenceEnd | Event::MappingEnd, _)) => depth = depth.saturating_sub(1),
            Ok(_) => {}
            Err(e) if e.info() == "recursion limit exceeded" => return Walk::Overflow(*e.marker()),
            Err(_) => return Walk::Within,
        }
    }
    Walk::Within
}

/// The first value of `text` whose tag is one of YAML's own that has no JSON form
/// (`!!binary`, `!!set`, `!!omap`, `!!timestamp`, ...): its tag as written and its
/// line and column. serde_norway reads such a value as its plain text — the base64 of
/// `!!binary` as a string — so a reader that wants JSON values refuses it instead.
/// Local tags (`!foo`) need no walk: serde_norway refuses them itself.
pub fn foreign_tag(text: &str) -> Option<(String, usize, usize)> {
    use saphyr_parser::{Event, Parser};
    const CORE: &str = "tag:yaml.org,2002:";
    let bytes = text.as_bytes();
    if memchr::memmem::find(bytes, b"!!").is_none()
        && memchr::memmem::find(bytes, CORE.as_bytes()).is_none()
    {
        return None;
    }
    const JSON: [&str; 7] = ["str", "int", "float", "bool", "null", "seq", "map"];
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return None;
        };
        let tag = match &event {
            Event::Scalar(_, _, _, tag)
            | Event::SequenceStart(_, tag)
            | Event::MappingStart(_, tag) => tag.as_deref(),
            _ => None,
        };
        // `!!binary` and its verbatim spelling `!<tag:yaml.org,2002:binary>` alike.
        let core = tag.and_then(|t| {
            let full = format!("{}{}", t.handle, t.suffix);
            let at = full.find(CORE)?;
            Some(full[at + CORE.len()..].trim_end_matches('>').to_owned())
        });
        if let Some(name) = core.filter(|n| !JSON.contains(&n.as_str())) {
            // saphyr-parser counts the column from 0.
            return Some((format!("!!{name}"), span.start.line(), span.start.col() + 1));
        }
    }
    None
}

/// The byte offset of a marker (saphyr-parser counts the offset in characters).
fn byte_index(text: &str, at: saphyr_parser::Marker) -> usize {
    text.char_indices()
        .nth(at.index())
        .map_or(text.len(), |(i, _)| i)
}

/// serde_norway's error for a collection nested too deep, at `at`.
fn recursion_limit(text: &str, at: saphyr_parser::Marker) -> Error {
    // saphyr-parser counts the column from 0.
    let index = byte_index(text, at);
    let (line, column) = (at.line(), at.col() + 1);
    Error {
        message: format!("recursion limit exceeded at line {line} column {column}"),
        location: Some(Location {
            index,
            line,
            column,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::time::{Duration, Instant};

    fn nested(prefix: &str, open: &str, close: &str, depth: usize) -> String {
        format!("{prefix}{}x{}\n", open.repeat(depth), close.repeat(depth))
    }

    /// The guard's refusal is serde_norway's, word for word and at the same place, and
    /// a document at the limit reads the same through both.
    #[test]
    fn the_limit_and_its_message_are_serde_norways() {
        for (prefix, open, close) in [
            ("a: ", "[", "]"),
            ("é: b\nc: ", "[", "]"),
            ("a: ", "{k: ", "}"),
            ("- ", "[", "]"),
            ("a:\n  - b: ", "[ \"]\", ", "]"),
        ] {
            for depth in [
                MAX_DEPTH - 2,
                MAX_DEPTH - 1,
                MAX_DEPTH,
                MAX_DEPTH + 5,
                300,
                1000,
            ] {
                let text = nested(prefix, open, close, depth);
                let ours = from_str::<Value>(&text);
                let theirs = serde_norway::from_str::<Value>(&text).map_err(Error::from);
                assert_eq!(ours, theirs, "{prefix:?} {open:?} at depth {depth}");
                let ours = from_slice::<Value>(text.as_bytes());
                assert_eq!(ours, theirs, "{prefix:?} {open:?} at depth {depth} (bytes)");
            }
        }
    }

    /// Deep nesting is refused in time linear in the text, however deep.
    #[test]
    fn deep_flow_nesting_is_refused_at_once() {
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let text = nested("a: ", open, close, 200_000);
            let started = Instant::now();
            let e = from_str::<Value>(&text).map(|_| ()).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("recursion limit exceeded at line 1 column"),
                "{e}"
            );
            assert_eq!(e.location().map(|l| l.line()), Some(1));
            let e = from_slice::<Value>(text.as_bytes())
                .map(|_| ())
                .unwrap_err();
            assert!(e.to_string().starts_with("recursion limit exceeded"), "{e}");
            // 200,000 levels took minutes unguarded; the guard stops at level 129.
            assert!(started.elapsed() < Duration::from_secs(2), "{open}");
        }
        // Past invalid UTF-8 at the end, the nesting before it is still bounded.
        let mut bytes = nested("a: ", "[", "]", 200_000).into_bytes();
        bytes.push(0xff);
        let e = from_slice::<Value>(&bytes).map(|_| ()).unwrap_err();
        assert!(e.to_string().starts_with("recursion limit exceeded"), "{e}");
    }

    /// Brackets that are text, not collections, are no nesting: a document with many
    /// of them reads as serde_norway reads it.
    #[test]
    fn brackets_in_scalars_are_not_nesting() {
        let many = "[{".repeat(5_000);
        let text = format!(
            "a: \"{many}\"\nb: '{many}'\nc: |\n  {many}\nd: [\"{many}\", [1, [2]]]\n# {many}\n"
        );
        let ours = from_str::<Value>(&text);
        assert_eq!(
            ours,
            serde_norway::from_str::<Value>(&text).map_err(Error::from)
        );
        assert!(ours.is_ok());
    }

    /// A text saphyr-parser refuses goes to serde_norway, whose error is reported.
    #[test]
    fn other_errors_are_serde_norways() {
        let text = format!("a: b: c\nd: {}\n", "[".repeat(200));
        let ours = from_str::<Value>(&text);
        assert_eq!(
            ours,
            serde_norway::from_str::<Value>(&text).map_err(Error::from)
        );
        assert!(ours.is_err());
        let text = "a: [1, 2\n";
        assert_eq!(
            from_str::<Value>(text),
            serde_norway::from_str::<Value>(text).map_err(Error::from)
        );
    }
}
