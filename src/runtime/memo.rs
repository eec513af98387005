//! The BLAKE3 of caller contents, remembered across compiles.
//!
//! The ledger records the BLAKE3 of every evidence and memory content, and a history
//! turn's id is the BLAKE3 of its content, so a compile must know the hash of several
//! hundred kilobytes of caller text. Hosts send the same evidence again and again (a
//! retrieval result, a session's history), and hashing it anew was a third of a warm
//! compile. This memo maps a content, *compared in full*, to its BLAKE3.
//!
//! A lookup hashes a *sample* of the content (its length and three 32-byte windows:
//! head, middle and tail; all of it when shorter) with a seeded fast hash, then
//! compares the content in full with the few entries that share the sample: one
//! `memcmp` in the usual case, several times cheaper than BLAKE3 of the same bytes.
//!
//! Correctness never rests on the sample: a hit requires byte equality with the stored
//! content. Contents that share a sample share a slot of at most four entries; once a
//! slot is full, further contents with that sample are simply not remembered (they
//! are hashed every time, which is what a compile without the memo does), so crafted
//! look-alike contents can cost their own memoisation but never more than four
//! comparisons per lookup. Like the block cache, the memo changes how fast a result
//! comes, never the result.
//!
//! It is bounded by the bytes of content it holds: when an insertion would exceed the
//! bound it is cleared (no recency tracking, so a hit stays one lookup).
//!
//! Each hash is kept with its envelope form, `blake3:<hex>`, which the ledger and the
//! turn ids share rather than format anew.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;

use super::inputs::CompileInputs;

/// Contents remembered per sample, at most.
const SLOT_ENTRIES: usize = 4;

/// Bytes in each sampled window.
const WINDOW: usize = 32;

/// Content bytes held at most, by default (contents are stored once each).
pub const DEFAULT_MEMO_BYTES: usize = 64 << 20;

/// The BLAKE3 of a content, and the same as the envelope writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentHash {
    pub hash: blake3::Hash,
    /// `blake3:<hex>`.
    pub text: Arc<str>,
}

impl ContentHash {
    /// Hashes `content`.
    pub fn of(content: &str) -> ContentHash {
        let hash = blake3::hash(content.as_bytes());
        ContentHash {
            text: Arc::from(super::shared::Blake3Text::new(&hash).as_str()),
            hash,
        }
    }
}

/// Content → BLAKE3, bounded by total content bytes.
#[derive(Debug)]
pub struct HashMemo {
    /// Sample hash → the contents with that sample and their hashes.
    map: HashMap<u64, Vec<(Box<str>, ContentHash)>, RandomState>,
    /// Seeds the sample hash.
    sampler: RandomState,
    entries: usize,
    bytes: usize,
    capacity_bytes: usize,
}

impl Default for HashMemo {
    fn default() -> Self {
        HashMemo::with_capacity_bytes(DEFAULT_MEMO_BYTES)
    }
}

impl HashMemo {
    /// An empty memo that holds at most `capacity_bytes` of content.
    pub fn with_capacity_bytes(capacity_bytes: usize) -> Self {
        HashMemo {
            map: HashMap::default(),
            sampler: RandomState::default(),
            entries: 0,
            bytes: 0,
            capacity_bytes,
        }
    }

    /// The hash of `content`'s sample: its length and head, middle and tail windows.
    fn sample(&self, content: &str) -> u64 {
        let b = content.as_bytes();
        if b.len() <= 3 * WINDOW {
            return self.sampler.hash_one(b);
        }
        let mid = b.len() / 2 - WINDOW / 2;
        let windows = (
            b.len(),
            b.get(..WINDOW),
            b.get(mid..mid + WINDOW),
            b.get(b.len() - WINDOW..),
        );
        self.sampler.hash_one(windows)
    }

    /// The remembered hash of `content`.
    pub fn get(&self, content: &str) -> Option<ContentHash> {
        let slot = self.map.get(&self.sample(content))?;
        slot.iter()
            .find(|(known, _)| **known == *content)
            .map(|(_, hash)| hash.clone())
    }

    /// Remembers `hash` as the BLAKE3 of `content`. Contents larger than the whole
    /// bound are not kept, nor a fifth content with the sample of four others.
    pub fn insert(&mut self, content: &str, hash: ContentHash) {
        if content.len() > self.capacity_bytes {
            return;
        }
        let sample = self.sample(content);
        if let Some(slot) = self.map.get(&sample) {
            if slot.len() >= SLOT_ENTRIES || slot.iter().any(|(c, _)| **c == *content) {
                return;
            }
        }
        if self.bytes + content.len() > self.capacity_bytes {
            self.clear();
        }
        self.bytes += content.len();
        self.entries += 1;
        self.map
            .entry(sample)
            .or_default()
            .push((content.into(), hash));
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.map.clear();
        self.entries = 0;
        self.bytes = 0;
    }

    /// Number of contents remembered.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes of content held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The BLAKE3 of each of `contents`, in order, from `memo` where it knows them.
///
/// The memo is locked twice (to look up, then to record what was missing) and never
/// while hashing, so concurrent compiles only contend for map operations.
fn hash_all<'a>(
    memo: &std::sync::Mutex<HashMemo>,
    contents: impl Iterator<Item = &'a str> + Clone,
) -> Vec<ContentHash> {
    let known: Vec<Option<ContentHash>> = {
        let memo = memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        contents.clone().map(|c| memo.get(c)).collect()
    };
    let mut fresh = Vec::new();
    let hashes: Vec<ContentHash> = contents
        .zip(known)
        .map(|(c, known)| {
            known.unwrap_or_else(|| {
                let h = ContentHash::of(c);
                fresh.push((c, h.clone()));
                h
            })
        })
        .collect();
    if !fresh.is_empty() {
        let mut memo = memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (c, h) in fresh {
            memo.insert(c, h);
        }
    }
    hashes
}

/// The content hashes of one compile's caller contents (stages 4 and 5 take evidence
/// and memory as given; the ledger records these, turn ids are made of them, and lane
/// blocks key the block cache with them).
#[derive(Debug, Clone)]
pub(crate) struct Contents {
    pub evidence: Vec<ContentHash>,
    pub memory: Vec<ContentHash>,
    /// History turns, in input order.
    pub turns: Vec<ContentHash>,
}

impl Contents {
    /// Hashes every evidence, memory and history content of `inputs`, once, through
    /// `memo`.
    pub fn hash(memo: &std::sync::Mutex<HashMemo>, inputs: &CompileInputs) -> Contents {
        let mut evidence = hash_all(
            memo,
            inputs
                .evidence
                .iter()
                .map(|e| e.content.as_str())
                .chain(inputs.memory.iter().map(|m| m.content.as_str()))
                .chain(inputs.request.history.iter().map(|t| t.content.as_str())),
        );
        let turns = evidence.split_off(inputs.evidence.len() + inputs.memory.len());
        let memory = evidence.split_off(inputs.evidence.len());
        Contents {
            evidence,
            memory,
            turns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn hashes_equal_blake3_hit_or_miss() {
        let memo = Mutex::new(HashMemo::default());
        let contents = ["alpha", "beta", "alpha", ""];
        for _ in 0..2 {
            let got = hash_all(&memo, contents.iter().copied());
            let want: Vec<_> = contents
                .iter()
                .map(|c| {
                    let hash = blake3::hash(c.as_bytes());
                    (hash, format!("blake3:{}", hash.to_hex()))
                })
                .collect();
            let got: Vec<_> = got
                .into_iter()
                .map(|h| (h.hash, h.text.to_string()))
                .collect();
            assert_eq!(got, want);
        }
        assert_eq!(memo.lock().unwrap().len(), 3);
    }

    #[test]
    fn look_alikes_are_compared_in_full_and_capped_per_sample() {
        let mut memo = HashMemo::default();
        // Same length, head, middle and tail: one sample, six different contents.
        let look_alike = |i: usize| {
            let mut s = "h".repeat(40) + &"x".repeat(200) + &"t".repeat(40);
            s.replace_range(60 + i..61 + i, "y");
            s
        };
        let contents: Vec<String> = (0..6).map(look_alike).collect();
        assert!(contents
            .windows(2)
            .all(|w| memo.sample(&w[0]) == memo.sample(&w[1])));
        for c in &contents {
            memo.insert(c, ContentHash::of(c));
        }
        assert_eq!(memo.len(), SLOT_ENTRIES);
        for c in &contents[..SLOT_ENTRIES] {
            assert_eq!(memo.get(c), Some(ContentHash::of(c)));
        }
        // Not remembered, and never mistaken for a look-alike that is.
        for c in &contents[SLOT_ENTRIES..] {
            assert_eq!(memo.get(c), None);
        }
        let hashes = hash_all(
            &std::sync::Mutex::new(memo),
            contents.iter().map(String::as_str),
        );
        let want: Vec<_> = contents.iter().map(|c| ContentHash::of(c)).collect();
        assert_eq!(hashes, want);
    }

    #[test]
    fn bounded_by_bytes() {
        let mut memo = HashMemo::with_capacity_bytes(10);
        for c in ["12345", "678"] {
            memo.insert(c, ContentHash::of(c));
        }
        assert_eq!(memo.bytes(), 8);
        // Would exceed the bound: the memo starts over.
        memo.insert("abcd", ContentHash::of("abcd"));
        assert_eq!((memo.len(), memo.bytes()), (1, 4));
        // Larger than the whole bound: never kept.
        memo.insert("this is too long", ContentHash::of("this is too long"));
        assert_eq!(memo.get("this is too long"), None);
        assert_eq!(memo.get("abcd"), Some(ContentHash::of("abcd")));
    }
}
