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

/// The bytes of `path`, or of standard input for `-`; the error says which and why.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, String> {
    if is_stdin(path) {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))
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

    #[test]
    fn strips_one_leading_mark_only() {
        assert_eq!(strip_bom("\u{FEFF}pack"), "pack");
        assert_eq!(strip_bom("pack\u{FEFF}"), "pack\u{FEFF}");
        assert_eq!(strip_bom("\u{FEFF}\u{FEFF}x"), "\u{FEFF}x");
    }
}
