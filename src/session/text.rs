//! The character-level rules the grammar and the state share: ASCII keyword matching
//! and separators (what the grammar may normalise), and the two storage
//! normalisations (policy identity keys and premise sanitation).
//!
//! The grammar side is ASCII-only on purpose: keywords match `A`–`Z` case-insensitively
//! and nothing else, so no Unicode normalisation or case folding can turn other text
//! into a directive. The storage side is Unicode-aware: it decides when two spellings
//! of an item are the same policy.

use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;

/// The ASCII whitespace trimmed from both ends of raw input.
pub(crate) fn is_ascii_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c')
}

/// A horizontal separator between tokens: space or tab.
pub(crate) fn is_separator(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Whitespace for operand content and storage normalisation: Unicode `White_Space`
/// plus the four ASCII information separators (U+001C–U+001F), which the reference
/// implementation's whitespace collapse also treats as whitespace.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `text` without leading and trailing ASCII whitespace.
pub(crate) fn trim_ascii_space(text: &str) -> &str {
    text.trim_matches(is_ascii_space)
}

/// Whether an operand has content: at least one character that is not whitespace.
pub(crate) fn has_content(operand: &str) -> bool {
    operand.chars().any(|c| !is_space(c))
}

/// `text` trimmed of ASCII whitespace, runs of spaces and tabs collapsed to one space,
/// and `A`–`Z` lowered: the form in which keywords and fixed separators are compared.
/// Only used for matching; operand text is never rewritten.
pub(crate) fn for_matching(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for part in trim_ascii_space(text)
        .split([' ', '\t'])
        .filter(|p| !p.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out.make_ascii_lowercase();
    out
}

/// Whether `operand`, as matched, is `token` or begins with `token` and a separator.
pub(crate) fn starts_with_token(operand: &str, token: &str) -> bool {
    let matched = for_matching(operand);
    matched == token
        || matched
            .strip_prefix(token)
            .is_some_and(|rest| rest.starts_with(' '))
}

/// NFKC, then the apostrophe variants `’` (U+2019) and `` ` `` mapped to `'`.
fn nfkc_apostrophes(text: &str) -> String {
    text.nfkc()
        .map(|c| if c == '\u{2019}' || c == '`' { '\'' } else { c })
        .collect()
}

/// Runs of whitespace collapsed to one space, none at either end.
fn collapse_space(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for part in text.split(is_space).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

/// One pass of the policy identity normalisation, in the specified order: NFKC,
/// apostrophes, Unicode default full case folding, whitespace collapse.
fn policy_key_once(item: &str) -> String {
    let folded: String = nfkc_apostrophes(item).chars().default_case_fold().collect();
    collapse_space(&folded)
}

/// The canonical policy identity of an item: the key policies are stored, looked up
/// and compared under.
///
/// One pass is the specified normalisation. A pass is not always idempotent: case
/// folding can produce a decomposed sequence that NFKC would then recompose (`ß`
/// followed by U+0301 folds to `s`, `s`, U+0301, which NFKC turns into `s`, `ś`).
/// Stored keys must be fixed points, or an exported state could fail to import (two
/// keys colliding) or change on import, so passes repeat until the key stops
/// changing. For almost all text that is after the first pass, and the key is exactly
/// the specified one.
pub(crate) fn policy_key(item: &str) -> String {
    let mut key = policy_key_once(item);
    // Two passes reach a fixed point for every input we know of; the bound only
    // guarantees termination.
    for _ in 0..8 {
        let next = policy_key_once(&key);
        if next == key {
            break;
        }
        key = next;
    }
    key
}

/// The stored form of a premise value: NFKC, apostrophes, whitespace collapse. No
/// case folding: a premise is an opaque string, not an identity.
pub(crate) fn sanitize_premise(value: &str) -> String {
    collapse_space(&nfkc_apostrophes(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_form_collapses_separators_and_lowers_ascii_only() {
        assert_eq!(for_matching("  Use\t\tDOCKER  x "), "use docker x");
        assert_eq!(for_matching("ÜSE"), "Üse");
        assert_eq!(for_matching("a\u{a0}b"), "a\u{a0}b");
    }

    #[test]
    fn token_prefix() {
        assert!(starts_with_token("to concise", "to"));
        assert!(starts_with_token("TO", "to"));
        assert!(starts_with_token("to\tx", "to"));
        assert!(!starts_with_token("tomorrow", "to"));
        assert!(!starts_with_token("to\u{a0}x", "to"));
    }

    #[test]
    fn policy_keys() {
        assert_eq!(policy_key("  The   Docker "), "the docker");
        assert_eq!(policy_key("don\u{2019}t"), "don't");
        assert_eq!(policy_key("don`t"), "don't");
        assert_eq!(policy_key("Straße"), "strasse");
        assert_eq!(policy_key("ſ"), "s");
        assert_eq!(policy_key("ς"), policy_key("σ"));
        assert_eq!(policy_key("cafe\u{301}"), "café");
        assert_ne!(policy_key("cafe"), policy_key("café"));
        assert_eq!(policy_key("ｄｏｃｋｅｒ"), "docker");
        assert_eq!(policy_key("a\u{3000}b\u{1c}c"), "a b c");
        assert_eq!(policy_key("\u{3000}"), "");
    }

    #[test]
    fn policy_key_is_a_fixed_point() {
        let once = policy_key_once("ß\u{301}");
        assert_ne!(policy_key_once(&once), once);
        let key = policy_key("ß\u{301}");
        assert_eq!(policy_key(&key), key);
    }

    #[test]
    fn premise_sanitation_keeps_case() {
        assert_eq!(sanitize_premise("  Concise\treplies \n"), "Concise replies");
        assert_eq!(sanitize_premise("it\u{2019}s"), "it's");
        assert_eq!(sanitize_premise(" \t "), "");
    }

    #[test]
    fn content() {
        assert!(has_content("x"));
        assert!(!has_content(" \u{3000}\u{a0}\u{1f}"));
        assert!(has_content("\u{200b}"));
    }
}
