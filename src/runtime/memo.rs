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

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use foldhash::fast::RandomState;

use super::inputs::{CompileInputs, Evidence, MemoryItem};
pub use super::shared::{ContentHash, HashSlot};

/// Contents remembered per sample, at most.
const SLOT_ENTRIES: usize = 4;

/// Bytes in each sampled window.
const WINDOW: usize = 32;

/// Content bytes held at most, by default (contents are stored once each).
pub const DEFAULT_MEMO_BYTES: usize = 64 << 20;

/// The hash of a sample of `b`: its length and head, middle and tail windows (all of it
/// when shorter).
fn sample(sampler: &RandomState, b: &[u8]) -> u64 {
    if b.len() <= 3 * WINDOW {
        return sampler.hash_one(b);
    }
    let mid = b.len() / 2 - WINDOW / 2;
    let windows = (
        b.len(),
        b.get(..WINDOW),
        b.get(mid..mid + WINDOW),
        b.get(b.len() - WINDOW..),
    );
    sampler.hash_one(windows)
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

    fn sample(&self, content: &str) -> u64 {
        sample(&self.sampler, content.as_bytes())
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

/// The BLAKE3 of each of `contents`, in order: from its slot where one is filled, else
/// from `memo` where it knows the content, else computed (and then kept in both).
///
/// The memo is locked at most twice (to look up, then to record what was missing) and
/// never while hashing, so concurrent compiles only contend for map operations; a
/// compile whose every slot is filled does not lock it at all.
fn hash_all<'a>(
    memo: &std::sync::Mutex<HashMemo>,
    contents: impl Iterator<Item = (&'a str, Option<&'a HashSlot>)> + Clone,
) -> Vec<ContentHash> {
    let known: Vec<Option<ContentHash>> = {
        let mut locked = None;
        contents
            .clone()
            .map(|(c, slot)| match slot.and_then(|s| s.0.get()) {
                Some(hash) => Some(hash.clone()),
                None => locked
                    .get_or_insert_with(|| {
                        memo.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                    })
                    .get(c),
            })
            .collect()
    };
    let mut fresh = Vec::new();
    let hashes: Vec<ContentHash> = contents
        .zip(known)
        .map(|((c, slot), known)| {
            let hash = known.unwrap_or_else(|| {
                let h = ContentHash::of(c);
                fresh.push((c, h.clone()));
                h
            });
            if let Some(slot) = slot {
                slot.0.get_or_init(|| hash.clone());
            }
            hash
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
                .map(|e| (e.content.as_str(), Some(&e.hash)))
                .chain(
                    inputs
                        .memory
                        .iter()
                        .map(|m| (m.content.as_str(), Some(&m.hash))),
                )
                .chain(
                    inputs
                        .request
                        .history
                        .iter()
                        .map(|t| (t.content.as_str(), Some(&t.hash))),
                ),
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

/// Documents of each kind remembered, at most.
const DOCUMENTS: usize = 8;

/// Samples of documents seen once, remembered per kind, at most.
const SEEN: usize = 32;

/// JSON bytes of remembered documents, at most, by default (over both kinds).
pub const DEFAULT_DOCUMENT_BYTES: usize = 32 << 20;

/// Evidence and memory lists decoded from JSON text, remembered by their exact bytes.
///
/// A host that sends the same evidence document again (an agent's steps within one
/// turn share its retrieval result; memory changes rarely) gets the list decoded the
/// first time, with the contents' hashes that compile kept in its items
/// ([`HashSlot`]), instead of parsing hundreds of kilobytes anew. A lookup compares
/// the bytes in full with the few remembered documents of that kind (a length check,
/// then one `memcmp`), so a hit is always the list those very bytes decode to.
///
/// A document is kept only the second time it is seen: the first time only a sample
/// of it is noted (as in [`HashMemo`]), so a host that never repeats a document pays
/// no copy. At most eight documents of each kind and `capacity_bytes` of their
/// JSON are held; the least recently used goes first. Like the other caches, it
/// changes how fast a result comes, never the result.
#[derive(Debug)]
pub struct DocumentMemo {
    evidence: Recent<Evidence>,
    memory: Recent<MemoryItem>,
    sampler: RandomState,
    capacity_bytes: usize,
}

impl Default for DocumentMemo {
    fn default() -> Self {
        DocumentMemo::with_capacity_bytes(DEFAULT_DOCUMENT_BYTES)
    }
}

/// A document's JSON bytes and the list they decode to.
type Document<T> = (Box<[u8]>, Arc<[T]>);

/// The remembered documents of one kind.
#[derive(Debug)]
pub(crate) struct Recent<T> {
    /// Bytes and decoded list, least recently used first.
    entries: VecDeque<Document<T>>,
    /// Samples of documents seen once and not kept, oldest first.
    seen: VecDeque<u64>,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent {
            entries: VecDeque::new(),
            seen: VecDeque::new(),
        }
    }
}

impl<T> Recent<T> {
    /// The list `bytes` decoded to before, now the most recently used.
    fn get(&mut self, bytes: &[u8]) -> Option<Arc<[T]>> {
        let at = self
            .entries
            .iter()
            .position(|(known, _)| **known == *bytes)?;
        let entry = self.entries.remove(at)?;
        let list = Arc::clone(&entry.1);
        self.entries.push_back(entry);
        Some(list)
    }

    /// Whether a document of sample `sample` is to be kept: one of that sample was seen
    /// before (and is no longer noted), else its sample is noted and it is not kept.
    fn second_sight(&mut self, sample: u64) -> bool {
        if let Some(at) = self.seen.iter().position(|s| *s == sample) {
            self.seen.remove(at);
            return true;
        }
        if self.seen.len() == SEEN {
            self.seen.pop_front();
        }
        self.seen.push_back(sample);
        false
    }

    fn bytes(&self) -> usize {
        self.entries.iter().map(|(b, _)| b.len()).sum()
    }
}

/// One kind of list the memo keeps.
pub(crate) trait Remembered: Sized {
    fn recent(memo: &mut DocumentMemo) -> &mut Recent<Self>;
}

impl Remembered for Evidence {
    fn recent(memo: &mut DocumentMemo) -> &mut Recent<Evidence> {
        &mut memo.evidence
    }
}

impl Remembered for MemoryItem {
    fn recent(memo: &mut DocumentMemo) -> &mut Recent<MemoryItem> {
        &mut memo.memory
    }
}

impl DocumentMemo {
    /// An empty memo that holds at most `capacity_bytes` of JSON.
    pub fn with_capacity_bytes(capacity_bytes: usize) -> Self {
        DocumentMemo {
            evidence: Recent::default(),
            memory: Recent::default(),
            sampler: RandomState::default(),
            capacity_bytes,
        }
    }

    /// JSON bytes held (over both kinds).
    pub fn bytes(&self) -> usize {
        self.evidence.bytes() + self.memory.bytes()
    }

    /// Documents held (over both kinds).
    pub fn len(&self) -> usize {
        self.evidence.entries.len() + self.memory.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = DocumentMemo::with_capacity_bytes(self.capacity_bytes);
    }

    /// Makes room for `incoming` more bytes of `T` documents: the least recently used
    /// go, those of the other kind only when this kind has none left.
    fn make_room<T: Remembered>(&mut self, incoming: usize) {
        while T::recent(self).entries.len() >= DOCUMENTS
            || (self.bytes() + incoming > self.capacity_bytes && !self.is_empty())
        {
            if T::recent(self).entries.pop_front().is_none() {
                // This kind holds none: the other kind makes room (popping from the
                // empty one is a no-op).
                self.evidence.entries.pop_front();
                self.memory.entries.pop_front();
            }
        }
    }
}

/// The list a JSON document of evidence or memory decodes to, through `memo`; absent is
/// the empty list, `None` any failure (as [`super::inputs::decode_json_inputs`]).
/// The memo is not locked while decoding.
pub(crate) fn decode_list<T>(
    memo: &std::sync::Mutex<DocumentMemo>,
    bytes: Option<&[u8]>,
) -> Option<Arc<[T]>>
where
    T: Remembered + for<'de> serde::Deserialize<'de>,
{
    let Some(bytes) = bytes else {
        return Some(Arc::from([]));
    };
    let lock = || {
        memo.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let sample = {
        let mut memo = lock();
        if let Some(list) = T::recent(&mut memo).get(bytes) {
            return Some(list);
        }
        sample(&memo.sampler, bytes)
    };
    let list = super::inputs::json_list::<T>(Some(bytes))?;
    let mut memo = lock();
    if bytes.len() <= memo.capacity_bytes / 4 && T::recent(&mut memo).second_sight(sample) {
        memo.make_room::<T>(bytes.len());
        T::recent(&mut memo)
            .entries
            .push_back((bytes.into(), Arc::clone(&list)));
    }
    Some(list)
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
            let got = hash_all(&memo, contents.iter().map(|c| (*c, None)));
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
            contents.iter().map(|c| (c.as_str(), None)),
        );
        let want: Vec<_> = contents.iter().map(|c| ContentHash::of(c)).collect();
        assert_eq!(hashes, want);
    }

    fn evidence_json(contents: &[&str]) -> Vec<u8> {
        let items: Vec<_> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| serde_json::json!({"id": format!("e{i}"), "source": "kb://x", "content": c}))
            .collect();
        serde_json::to_vec(&items).unwrap()
    }

    #[test]
    fn a_document_is_kept_when_seen_again_and_then_shared() {
        let memo = Mutex::new(DocumentMemo::default());
        let doc = evidence_json(&["alpha", "beta"]);
        let fresh = crate::runtime::inputs::json_list::<Evidence>(Some(&doc)).unwrap();
        let first = decode_list::<Evidence>(&memo, Some(&doc)).unwrap();
        // Seen once: only its sample is noted, nothing is copied.
        assert_eq!(memo.lock().unwrap().len(), 0);
        let second = decode_list::<Evidence>(&memo, Some(&doc)).unwrap();
        assert_eq!(memo.lock().unwrap().len(), 1);
        assert_eq!(memo.lock().unwrap().bytes(), doc.len());
        let third = decode_list::<Evidence>(&memo, Some(&doc)).unwrap();
        // The third compile shares the list the second one decoded.
        assert!(Arc::ptr_eq(&second, &third));
        assert!(!Arc::ptr_eq(&first, &second));
        for list in [&first, &second, &third] {
            assert_eq!(**list, *fresh);
        }
        // Memory documents are another kind: the same bytes are no evidence hit.
        let memory = br#"[{"id": "m", "content": "x", "promoted": true}]"#;
        for _ in 0..3 {
            let m = decode_list::<MemoryItem>(&memo, Some(memory)).unwrap();
            assert_eq!(m[0].content, "x");
        }
        assert_eq!(memo.lock().unwrap().len(), 2);
        // Absent is empty; a failure is `None` and remembers nothing.
        assert!(decode_list::<Evidence>(&memo, None).unwrap().is_empty());
        for _ in 0..3 {
            assert!(decode_list::<Evidence>(&memo, Some(b"[{\"id\": 1}]")).is_none());
        }
        assert_eq!(memo.lock().unwrap().len(), 2);
        memo.lock().unwrap().clear();
        assert!(memo.lock().unwrap().is_empty());
    }

    #[test]
    fn look_alike_documents_are_compared_in_full() {
        let memo = Mutex::new(DocumentMemo::default());
        // Same length, head, middle and tail: one sample.
        let a = evidence_json(&[&("x".repeat(100) + "a" + &"x".repeat(100)), "same"]);
        let b = evidence_json(&[&("x".repeat(100) + "b" + &"x".repeat(100)), "same"]);
        assert_eq!(a.len(), b.len());
        for _ in 0..3 {
            for doc in [&a, &b] {
                let got = decode_list::<Evidence>(&memo, Some(doc)).unwrap();
                let want = crate::runtime::inputs::json_list::<Evidence>(Some(doc)).unwrap();
                assert_eq!(*got, *want);
            }
        }
    }

    #[test]
    fn documents_are_bounded_in_number_and_bytes() {
        let memo = Mutex::new(DocumentMemo::with_capacity_bytes(4096));
        let docs: Vec<Vec<u8>> = (0..DOCUMENTS + 3)
            .map(|i| evidence_json(&[&format!("document {i}")]))
            .collect();
        for doc in docs.iter().chain(&docs) {
            decode_list::<Evidence>(&memo, Some(doc)).unwrap();
        }
        // At most DOCUMENTS of a kind; the least recently used went first.
        assert_eq!(memo.lock().unwrap().len(), DOCUMENTS);
        let last = decode_list::<Evidence>(&memo, docs.last().map(Vec::as_slice)).unwrap();
        let again = decode_list::<Evidence>(&memo, docs.last().map(Vec::as_slice)).unwrap();
        assert!(Arc::ptr_eq(&last, &again));
        // Over a quarter of the bound: never kept.
        let big = evidence_json(&[&"y".repeat(1100)]);
        for _ in 0..3 {
            decode_list::<Evidence>(&memo, Some(&big)).unwrap();
        }
        assert!(memo.lock().unwrap().bytes() <= 4096);
        assert!(!memo
            .lock()
            .unwrap()
            .evidence
            .entries
            .iter()
            .any(|(b, _)| **b == *big));
        // Bytes: documents go, least recently used first, to make room.
        let memo = Mutex::new(DocumentMemo::with_capacity_bytes(400));
        let docs: Vec<Vec<u8>> = (0..6)
            .map(|i| evidence_json(&[&format!("{i}").repeat(45)]))
            .collect();
        assert!(docs.iter().all(|d| (81..=100).contains(&d.len())));
        for doc in docs.iter().chain(&docs) {
            decode_list::<Evidence>(&memo, Some(doc)).unwrap();
        }
        // Six fit the count but not the bytes: the four most recent stay.
        assert_eq!(memo.lock().unwrap().len(), 4);
        assert!(memo.lock().unwrap().bytes() <= 400);
    }

    #[test]
    fn filled_slots_are_used_and_unfilled_ones_filled() {
        let memo = Mutex::new(HashMemo::default());
        let slots = [HashSlot::default(), HashSlot::default()];
        let contents = ["one", "two"];
        let items = || contents.iter().zip(&slots).map(|(c, s)| (*c, Some(s)));
        let first = hash_all(&memo, items());
        assert!(slots.iter().all(|s| s.0.get().is_some()));
        // With every slot filled, the memo is not consulted: clear it and see.
        memo.lock().unwrap().clear();
        assert_eq!(hash_all(&memo, items()), first);
        assert!(memo.lock().unwrap().is_empty());
        assert_eq!(first[1], ContentHash::of("two"));
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
