//! Stage 8: the `ctxpack.compiled/v1` envelope and its context ledger.
//!
//! Field names are the runtime spec's, verbatim. Every collection is a `Vec` in a
//! documented order or a `BTreeMap`, and the envelope's bytes are canonical JSON (sorted
//! keys, no whitespace, final newline) as in `artifact::canonical`, so two compiles of
//! the same inputs give the same bytes. `context_ledger.hash` is the BLAKE3 of the
//! canonical bytes of the whole envelope with that one member removed.
//!
//! Going through `serde_json::Value` to canonicalize costs an allocation per key and
//! string, which was a third of a warm compile. So the envelope serializes canonically
//! *directly*, with [`crate::artifact::json`] (serde_json's bytes, faster on long
//! strings): every struct declares its fields in sorted order, maps are `BTreeMap`s,
//! and free JSON (`json_schema`, `effects`) is written through [`SortedValue`], which
//! sorts object keys itself (never relying on serde_json's `preserve_order` being off).
//! A test checks that
//! the direct bytes equal `canonical_bytes(to_value())`, so a field added out of order
//! cannot go unnoticed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use serde::ser::{SerializeMap, SerializeSeq};

use crate::artifact::json;

use super::inputs::Role;
use super::tools::ToolManifestEntry;

/// The format tag of a compiled envelope.
pub const COMPILED_FORMAT: &str = "ctxpack.compiled/v1";

/// The result of one compile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledContext {
    pub budget_report: BudgetReport,
    pub compiled_prompt: CompiledPrompt,
    pub context_ledger: ContextLedger,
    pub diagnostics: Vec<Diagnostic>,
    pub format: String,
    pub intent: IntentRef,
    pub manifests: Manifests,
    pub pack: PackRef,
    pub runtime_controls: RuntimeControls,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackRef {
    pub hash: String,
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntentRef {
    pub fallback_used: bool,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledPrompt {
    /// Kept blocks in prompt order: buckets by priority (descending) then name; within
    /// a bucket in fill order, except `session`, which is chronological.
    pub context_blocks: Vec<ContextBlock>,
    /// `null` when the pack has no developer prompt.
    pub developer: Option<String>,
    /// The request's message as the model receives it: the active redactors applied.
    /// (The ledger's `inputs` digest covers the message as supplied.)
    pub message: String,
    pub system: String,
    pub task: String,
}

/// What kind of block this is (`source` in the envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockSource {
    Block,
    Policy,
    Tool,
    Evidence,
    Memory,
    Session,
}

/// `trusted` text comes from the pack; `untrusted` text (evidence, memory and history
/// turns) comes from the caller and never renders into the system or developer text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Trusted,
    Untrusted,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextBlock {
    pub bucket: Arc<str>,
    pub id: Arc<str>,
    pub origin: Arc<str>,
    pub priority: i64,
    pub source: BlockSource,
    /// Shared with the prepared pack's cache (a kept block's text is built once).
    pub text: Arc<str>,
    pub tokens: u64,
    pub truncated: bool,
    pub trust: Trust,
    /// For a history turn, its role (see [`ContextBlock::turn_content`]).
    #[serde(skip)]
    pub turn: Option<Role>,
}

impl ContextBlock {
    /// For a history turn: its role and content (redacted, possibly truncated), which
    /// is the text after its `ROLE: ` prefix. The provider renders send turns without
    /// the prefix.
    pub fn turn_content(&self) -> Option<(Role, &str)> {
        let role = self.turn?;
        let content = self.text.strip_prefix(role.prefix())?;
        Some((role, content))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifests {
    pub evidence_manifest: Vec<EvidenceManifestEntry>,
    pub policy_manifest: Vec<PolicyManifestEntry>,
    pub tool_manifest: Vec<ToolManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyManifestEntry {
    pub bundle: Arc<str>,
    /// Shared with the prepared pack (never copied per compile).
    #[serde(serialize_with = "sorted_values")]
    pub effects: std::sync::Arc<[Value]>,
    pub enforcing: bool,
    pub error: Option<String>,
    pub fired: bool,
    pub policy: Arc<str>,
    pub priority: i64,
}

/// One evidence item, in the order the `evidence` bucket tried them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceManifestEntry {
    pub hops: u32,
    pub id: Arc<str>,
    pub included: bool,
    pub score: f64,
    pub source: Arc<str>,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeControls {
    pub approval_gates_active: Vec<String>,
    pub escalation_target: Option<String>,
    pub must_escalate: bool,
    pub must_refuse: bool,
    pub redaction_rules_active: Vec<RedactionRule>,
    pub refusal_reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedactionRule {
    pub name: String,
    pub pattern: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetReport {
    pub allocations: BTreeMap<String, u64>,
    pub available: u64,
    pub bucket_truncations: BTreeMap<String, bool>,
    /// Dropped block ids per bucket in the order tried. Blocks routed to a bucket the
    /// budget does not declare are listed under that bucket's name.
    pub dropped_block_ids: BTreeMap<String, Vec<Arc<str>>>,
    pub fixed: u64,
    pub tokenizer: String,
    pub total: u64,
    /// Tokens used by the kept blocks of each bucket.
    pub used_at_compile: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextLedger {
    pub budget: LedgerBudget,
    /// Every supplied evidence item (sorted by id) with the BLAKE3 of its content as
    /// supplied, before redaction.
    pub evidence: Vec<LedgerItem>,
    /// Empty, and then left out, while the hash itself is computed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hash: String,
    /// `blake3:<hex>` of the run, the request and the memory (contents by their
    /// BLAKE3; see `runtime::digest`). With the evidence, which the envelope records
    /// whole, it makes the ledger hash change with any input value.
    pub inputs: String,
    pub memory: Vec<LedgerItem>,
    /// `name@version`.
    pub pack: String,
    /// The artifact's hash (`blake3:<hex>`), as `pack.hash`.
    pub pack_hash: String,
    pub policy: LedgerPolicy,
    /// The request id.
    pub request: String,
    /// Surfaced tool names, sorted.
    pub tool: Vec<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerPolicy {
    /// The bundles of all the pack's policies, sorted and unique.
    pub bundles: Vec<Arc<str>>,
    /// Fired policies in evaluation order.
    pub fired: Vec<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerItem {
    /// `blake3:<hex>`.
    pub blake3: Arc<str>,
    pub id: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerBudget {
    pub available: u64,
    pub fixed: u64,
    pub total: u64,
    /// `fixed` plus the tokens of every kept block.
    pub used: u64,
}

/// A hash as the envelope writes it, `blake3:<hex>`, without allocating.
pub(crate) struct Blake3Text([u8; 7 + 64]);

impl Blake3Text {
    pub fn new(hash: &blake3::Hash) -> Blake3Text {
        let mut text = [0u8; 7 + 64];
        text[..7].copy_from_slice(b"blake3:");
        text[7..].copy_from_slice(hash.to_hex().as_bytes());
        Blake3Text(text)
    }

    pub fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// `blake3:<hex>`, as the ledger, turn ids and hashes of the envelope write a hash.
pub(crate) fn blake3_ref(hash: &blake3::Hash) -> String {
    Blake3Text::new(hash).as_str().to_owned()
}

/// Serializes a JSON value with object keys sorted by their UTF-8 bytes.
pub(crate) struct SortedValue<'a>(pub &'a Value);

impl Serialize for SortedValue<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut m = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &SortedValue(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&SortedValue(item))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(serializer),
        }
    }
}

pub(crate) fn sorted_shared_value<S: serde::Serializer>(
    v: &std::sync::Arc<Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    SortedValue(v).serialize(s)
}

fn sorted_values<S: serde::Serializer>(
    v: &std::sync::Arc<[Value]>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for item in v.iter() {
        seq.serialize_element(&SortedValue(item))?;
    }
    seq.end()
}

impl CompiledContext {
    /// The envelope as a JSON value.
    pub fn to_value(&self) -> Value {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The canonical bytes of the envelope (final newline included): what
    /// `ctxpack compile --target raw` prints.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 * 1024);
        self.write_canonical(&mut out);
        out.push(b'\n');
        out
    }

    fn write_canonical<S: json::Sink>(&self, out: &mut S) {
        // Plain data with string keys: serialization cannot fail.
        let _ = json::to_sink(self, out);
    }

    /// The hash the ledger records: BLAKE3 of the canonical bytes without
    /// `context_ledger.hash`.
    fn ledger_hash(&self) -> String {
        let mut unsealed = std::borrow::Cow::Borrowed(self);
        if !self.context_ledger.hash.is_empty() {
            unsealed.to_mut().context_ledger.hash.clear();
        }
        // Streamed into BLAKE3 through a fixed buffer: the document is never held whole.
        let mut sink = json::HashSink::default();
        unsealed.write_canonical(&mut sink);
        json::Sink::put(&mut sink, b"\n");
        blake3_ref(&sink.finalize())
    }

    /// Computes and stores `context_ledger.hash`.
    pub(crate) fn seal(&mut self) {
        self.context_ledger.hash.clear();
        self.context_ledger.hash = self.ledger_hash();
    }

    /// Recomputes the ledger hash and compares it with the recorded one.
    pub fn verify_ledger(&self) -> bool {
        self.ledger_hash() == self.context_ledger.hash
    }

    /// The prompt as text, for `contains` expectations in pack tests: system, developer,
    /// task, every block's text and the (redacted) message, separated by newlines.
    pub fn prompt_text(&self) -> String {
        let p = &self.compiled_prompt;
        let mut parts: Vec<&str> = vec![&p.system];
        if let Some(d) = &p.developer {
            parts.push(d);
        }
        parts.push(&p.task);
        parts.extend(p.context_blocks.iter().map(|b| &*b.text));
        parts.push(&p.message);
        parts.join("\n")
    }
}
