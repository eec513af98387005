//! Pack source text as the toolchain reads it from a file: UTF-8, without a leading
//! byte-order mark.
//!
//! A BOM is not part of the text: spans, lines and columns (in every output format)
//! count from the first character after it, as SARIF §3.30.2 requires of regions.
//! `fmt` reads the raw text instead, so that it sees the mark and drops it.
//!
//! Wherever a command reads a file, `-` names standard input.

use std::io::Read;
use std::path::Path;

/// The UTF-8 byte-order mark, U+FEFF.
pub const BOM: char = '\u{FEFF}';

/// `text` without a leading byte-order mark.
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// Whether `path` is `-`, standard input.
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new("-")
}

/// The largest file (or standard input) a command reads: far above any pack or
/// request, and a bound on what a never-ending input (`/dev/zero`, a pipe that does
/// not close) costs before it is refused.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// The bytes of `path`, or of standard input for `-`; the error says which and why
/// (an input over [`MAX_INPUT_BYTES`] included).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    let (name, read) = if is_stdin(path) {
        let mut bytes = Vec::new();
        let read = std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes);
        ("standard input".to_owned(), read)
    } else {
        let read = std::fs::File::open(path).and_then(|f| {
            let mut bytes = Vec::new();
            f.take(MAX_INPUT_BYTES + 1)
                .read_to_end(&mut bytes)
                .map(|_| bytes)
        });
        (format!("`{}`", path.display()), read)
    };
    let bytes = read.map_err(|e| format!("cannot read {name}: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!(
            "cannot read {name}: it is larger than {} MiB",
            MAX_INPUT_BYTES >> 20
        ));
    }
    Ok(bytes)
}

/// Reads `path` (or standard input for `-`) as UTF-8, byte-order mark included; the
/// error says which file and why.
pub fn read_raw(path: &Path) -> Result<String, String> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|_| format!("`{}` is not valid UTF-8", path.display()))
}

/// Reads `path` as UTF-8 and drops a leading byte-order mark.
pub fn read(path: &Path) -> Result<String, String> {
    let mut text = read_raw(path)?;
    if text.starts_with(BOM) {
        text.drain(..BOM.len_utf8());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A never-ending input is refused once it passes the limit.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_endless_input_is_refused_at_the_limit() {
        let e = read_bytes(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(e, "cannot read `/dev/zero`: it is larger than 256 MiB");
    }

    #[test]
    fn strips_one_leading_mark_only() {
        assert_eq!(strip_bom("\u{FEFF}pack"), "pack");
        assert_eq!(strip_bom("pack\u{FEFF}"), "pack\u{FEFF}");
        assert_eq!(strip_bom("\u{FEFF}\u{FEFF}x"), "\u{FEFF}x");
    }
}
