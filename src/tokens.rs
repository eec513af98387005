//! Token counting for the pack's tokenizer: exact BPE counts for `o200k` and `cl100k`,
//! and `approx` (`ceil(utf8 bytes / 4)`).
//!
//! The BPE tokenizers are `bpe-openai`'s: the same vocabularies and pre-tokenization as
//! OpenAI's tiktoken, so the same counts (`tests/tokenizer_parity.rs` holds them to
//! tiktoken's on the reference workload and on adversarial texts), built faster and
//! counting faster, with a pre-tokenizer on finite automata that cannot backtrack.
//!
//! This module owns the only process-wide state of the toolchain: the lazily built BPE
//! encoders. Each is built once, on first use, and shared by every thread. The encoders
//! are immutable once built, so sharing them does not make any result depend on what
//! ran before.
//!
//! Counting is *ordinary* encoding: special-token text such as `<|endoftext|>` inside
//! caller content counts as the plain text it is, never as a control token.
//!
//! Counts are cached by the runtime's prepared pack (see `runtime::PreparedPack`), so
//! repeated evidence is not re-tokenized.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bpe_openai::Tokenizer as Bpe;

pub use crate::artifact::Tokenizer;

/// The tokenizer kinds a pack can name; the artifact's [`Tokenizer`] under the name
/// the rest of the toolchain uses.
pub type TokenizerKind = Tokenizer;

/// Pieces longer than this are tokenized in chunks if the encoder fails on them.
/// See [`encode`].
const FALLBACK_CHUNK_BYTES: usize = 4096;

fn encoder(kind: Tokenizer) -> Option<&'static Bpe> {
    // The vocabularies are compiled into the binary, so building an encoder depends on
    // no input.
    match kind {
        Tokenizer::O200k => Some(bpe_openai::o200k_base()),
        Tokenizer::Cl100k => Some(bpe_openai::cl100k_base()),
        Tokenizer::Approx => None,
    }
}

/// Builds the encoder for `kind` now rather than on first use. Hosts call this at
/// start-up so that the first compile does not pay for it; benchmarks call it to
/// measure construction apart from compiling.
pub fn warm(kind: Tokenizer) {
    if let Some(bpe) = encoder(kind) {
        let _ = bpe.count("warm");
    }
}

/// The token ids of `text`, or `None` if the encoder failed on it.
///
/// Evidence is untrusted: should the encoder ever panic on some input, the panic is
/// caught here instead of bringing the process down, and callers fall back to chunked
/// counting.
fn encode(bpe: &Bpe, text: &str) -> Option<Vec<u32>> {
    catch_unwind(AssertUnwindSafe(|| bpe.encode(text))).ok()
}

fn count_bpe(bpe: &Bpe, text: &str) -> Option<usize> {
    catch_unwind(AssertUnwindSafe(|| bpe.count(text))).ok()
}

/// The number of tokens of `text` under `kind`.
pub fn count(kind: Tokenizer, text: &str) -> usize {
    match encoder(kind) {
        None => approx_count(text),
        Some(bpe) => match count_bpe(bpe, text) {
            Some(n) => n,
            None => chunks(text).map(|c| count(kind, c)).sum(),
        },
    }
}

fn approx_count(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Splits `text` at char boundaries into pieces of at most [`FALLBACK_CHUNK_BYTES`]
/// (a single char is never split). Only used when the encoder failed on the whole text;
/// the sum of the pieces' counts is then the count, which is deterministic, close to
/// exact, and never smaller than the true count by more than one token per chunk.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len().min(FALLBACK_CHUNK_BYTES);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (head, tail) = rest.split_at(cut);
        rest = tail;
        Some(head)
    })
}

/// The longest prefix of `text` that has at most `max_tokens` tokens, cut at a token
/// boundary and never inside a UTF-8 character. For `approx`, the cut is at the last
/// char boundary at or before `max_tokens * 4` bytes.
///
/// The result is verified by counting it again: re-tokenizing a prefix can merge
/// differently at its end, so we step back a token at a time until the prefix fits.
pub fn truncate_to(kind: Tokenizer, text: &str, max_tokens: usize) -> &str {
    let Some(bpe) = encoder(kind) else {
        let mut cut = text.len().min(max_tokens.saturating_mul(4));
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        return &text[..cut];
    };
    let Some(tokens) = encode(bpe, text) else {
        // The encoder failed on the whole text; keep whole chunks while they fit.
        let mut used = 0;
        let mut end = 0;
        for chunk in chunks(text) {
            let n = count(kind, chunk);
            if used + n > max_tokens {
                let head = truncate_to(kind, chunk, max_tokens - used);
                return &text[..end + head.len()];
            }
            used += n;
            end += chunk.len();
        }
        return text;
    };
    if tokens.len() <= max_tokens {
        return text;
    }
    let mut keep = max_tokens;
    loop {
        if keep == 0 {
            return "";
        }
        // Ordinary encoding is a segmentation of the bytes, so the bytes of the first
        // `keep` tokens are exactly a prefix of `text`.
        let bytes: usize = tokens[..keep].iter().map(|&t| bpe.bpe.token_len(t)).sum();
        let mut cut = bytes.min(text.len());
        // A token may end inside a multi-byte character; back off to its start.
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let prefix = &text[..cut];
        if count(kind, prefix) <= max_tokens {
            return prefix;
        }
        keep -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approx_is_ceil_bytes_over_four() {
        assert_eq!(count(Tokenizer::Approx, ""), 0);
        assert_eq!(count(Tokenizer::Approx, "abcd"), 1);
        assert_eq!(count(Tokenizer::Approx, "abcde"), 2);
        // "é" is two bytes.
        assert_eq!(count(Tokenizer::Approx, "ééé"), 2);
    }

    #[test]
    fn bpe_counts_are_exact() {
        assert_eq!(count(Tokenizer::O200k, "hello world"), 2);
        assert_eq!(count(Tokenizer::Cl100k, "hello world"), 2);
        assert_eq!(count(Tokenizer::O200k, ""), 0);
    }

    #[test]
    fn special_tokens_count_as_text() {
        assert!(count(Tokenizer::O200k, "<|endoftext|>") > 1);
    }

    #[test]
    fn truncate_respects_tokens_and_chars() {
        for kind in [Tokenizer::O200k, Tokenizer::Cl100k, Tokenizer::Approx] {
            let text = "Ünïcödé text with émojis 😀😀😀 and more words here.";
            for max in 0..30 {
                let cut = truncate_to(kind, text, max);
                assert!(text.starts_with(cut));
                assert!(count(kind, cut) <= max, "{kind:?} {max} {cut:?}");
            }
            assert_eq!(truncate_to(kind, text, 1000), text);
        }
    }

    #[test]
    fn approx_truncation_cuts_at_char_boundary() {
        // Four bytes allowed, but "é" would straddle byte 4.
        assert_eq!(truncate_to(Tokenizer::Approx, "abcé", 1), "abc");
    }

    #[test]
    fn pathological_input_does_not_panic() {
        let text = "^".repeat(200_000);
        let n = count(Tokenizer::Cl100k, &text);
        assert!(n > 0);
        let cut = truncate_to(Tokenizer::Cl100k, &text, 10);
        assert!(count(Tokenizer::Cl100k, cut) <= 10);
    }
}
