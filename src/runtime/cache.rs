//! Token counts and block texts remembered across compiles.
//!
//! A block is looked up by its *key material*: bytes that determine its text exactly,
//! for one tokenizer. Equal material means equal text, so a hit returns exactly what
//! building and counting the text would (the cache changes how fast a result comes,
//! never the result):
//!
//! | block | material |
//! | --- | --- |
//! | plain text (trusted blocks, the fixed prompts, truncation trials) | `TOKENIZER 'T'` then the text |
//! | lane (evidence, memory, session turn) | `TOKENIZER 'L'`, the prefix's length (u64 LE) and bytes, the content's BLAKE3, the suffix, `0`, the active redactor names each NUL-terminated |
//!
//! The encoding is injective: the tag separates the two forms, the caller-controlled
//! prefix is length-prefixed, the suffix comes from a fixed set that never contains
//! `0`, and redactor names are NUL-terminated identifiers. Lane content stands by its
//! BLAKE3 (which the ledger computes anyway), so two lane blocks share an entry only
//! through a BLAKE3 collision. Lookups compare the material in full; the map's fast
//! hash only picks the slot.
//!
//! An entry holds the count and, once the block has been kept, its text as an
//! `Arc<str>` that the envelope shares, with its JSON string literal: a warm compile
//! neither redacts, escapes nor copies the blocks it keeps, and the canonical envelope
//! copies the literal instead of escaping the text again. The cache is bounded by the
//! bytes it holds (material plus texts); an insertion that would exceed the bound
//! clears it first (no recency tracking, so a hit stays one lookup).

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;

use crate::tokens::Tokenizer;

/// Bytes held at most, by default.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// What the cache knows of one block.
#[derive(Debug, Clone)]
pub(crate) struct Cached {
    pub tokens: usize,
    /// The text, once a compile has kept the block.
    pub text: Option<Arc<str>>,
    /// That text as a JSON string literal (made once, when it is stored).
    pub json: Option<Arc<str>>,
}

/// Key material → count and text, bounded by bytes.
#[derive(Debug)]
pub(crate) struct BlockCache {
    map: HashMap<Box<[u8]>, Cached, RandomState>,
    bytes: usize,
    capacity_bytes: usize,
    hits: u64,
    misses: u64,
}

impl Default for BlockCache {
    fn default() -> Self {
        BlockCache::with_capacity_bytes(DEFAULT_CACHE_BYTES)
    }
}

impl BlockCache {
    pub fn with_capacity_bytes(capacity_bytes: usize) -> Self {
        BlockCache {
            map: HashMap::default(),
            bytes: 0,
            capacity_bytes,
            hits: 0,
            misses: 0,
        }
    }

    pub fn get(&mut self, key: &[u8]) -> Option<Cached> {
        let found = self.map.get(key).cloned();
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    /// Records the count of `key` and, if given, its text with the text's JSON literal
    /// (an entry that has a text keeps it).
    pub fn insert(&mut self, key: &[u8], tokens: usize, text: Option<(&Arc<str>, &Arc<str>)>) {
        // The text and its literal, counted together.
        let text_len = text.map_or(0, |(t, j)| t.len() + j.len());
        if let Some(entry) = self.map.get_mut(key) {
            if let (None, Some((t, j))) = (&entry.text, text) {
                if self.bytes + text_len <= self.capacity_bytes {
                    self.bytes += text_len;
                    entry.text = Some(Arc::clone(t));
                    entry.json = Some(Arc::clone(j));
                }
            }
            return;
        }
        let size = key.len() + text_len;
        if size > self.capacity_bytes {
            return;
        }
        if self.bytes + size > self.capacity_bytes {
            self.clear();
        }
        self.bytes += size;
        self.map.insert(
            key.into(),
            Cached {
                tokens,
                text: text.map(|(t, _)| Arc::clone(t)),
                json: text.map(|(_, j)| Arc::clone(j)),
            },
        );
    }

    /// Forgets every entry (the statistics stay).
    pub fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Bytes of material and text held.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `(hits, misses)` since the cache was made.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

/// The first byte of all material: which tokenizer the count is for.
fn tokenizer_tag(kind: Tokenizer) -> u8 {
    match kind {
        Tokenizer::O200k => b'o',
        Tokenizer::Cl100k => b'c',
        Tokenizer::Approx => b'a',
    }
}

/// Writes the material of a plain text into `out` (cleared first).
pub(crate) fn text_key(out: &mut Vec<u8>, kind: Tokenizer, text: &str) {
    out.clear();
    out.reserve(2 + text.len());
    out.extend_from_slice(&[tokenizer_tag(kind), b'T']);
    out.extend_from_slice(text.as_bytes());
}

/// Writes the material of a lane block into `out` (cleared first).
pub(crate) fn lane_key(
    out: &mut Vec<u8>,
    kind: Tokenizer,
    prefix: &str,
    content: &blake3::Hash,
    suffix: &str,
    redaction: &[u8],
) {
    out.clear();
    out.extend_from_slice(&[tokenizer_tag(kind), b'L']);
    out.extend_from_slice(&(prefix.len() as u64).to_le_bytes());
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(content.as_bytes());
    out.extend_from_slice(suffix.as_bytes());
    out.push(0);
    out.extend_from_slice(redaction);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::json;

    #[test]
    fn material_is_injective_across_forms_and_fields() {
        let h = blake3::hash(b"content");
        let mut keys = Vec::new();
        let mut push = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut k = Vec::new();
            f(&mut k);
            keys.push(k);
        };
        push(&|k| text_key(k, Tokenizer::O200k, "x"));
        push(&|k| text_key(k, Tokenizer::Cl100k, "x"));
        push(&|k| lane_key(k, Tokenizer::O200k, "<a>", &h, "</a>", b""));
        // The same bytes moved from the prefix into the suffix.
        push(&|k| lane_key(k, Tokenizer::O200k, "<a", &h, "></a>", b""));
        push(&|k| lane_key(k, Tokenizer::O200k, "<a>", &h, "</a>", b"pii\0"));
        push(&|k| lane_key(k, Tokenizer::Approx, "<a>", &h, "</a>", b""));
        let unique: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len());
    }

    #[test]
    fn texts_are_added_to_counts_and_bounded() {
        let mut cache = BlockCache::with_capacity_bytes(40);
        cache.insert(b"k1", 3, None);
        let text: Arc<str> = Arc::from("hello");
        cache.insert(b"k1", 3, Some((&text, &json::literal(&text))));
        let hit = cache.get(b"k1").expect("a hit");
        assert_eq!((hit.tokens, hit.text.as_deref()), (3, Some("hello")));
        assert_eq!(hit.json.as_deref(), Some("\"hello\""));
        // The key, the text and its literal.
        assert_eq!(cache.bytes(), 2 + 5 + 7);
        assert!(cache.get(b"k2").is_none());
        assert_eq!(cache.stats(), (1, 1));
        // Larger than the whole bound: never kept.
        cache.insert(&[b'x'; 41], 1, None);
        assert_eq!(cache.len(), 1);
        // Over the bound: the cache starts over.
        cache.insert(&[b'y'; 35], 1, None);
        assert_eq!((cache.len(), cache.bytes()), (1, 35));
    }
}
