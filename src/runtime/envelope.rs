//! Stage 8: the `ctxpack.compiled/v1` envelope and its context ledger.
//!
//! Field names are the runtime spec's, verbatim. Every collection is a `Vec` in a
//! documented order or a `BTreeMap`, and the envelope is written through the artifact's
//! canonical JSON (sorted keys, no whitespace), so two compiles of the same inputs give
//! the same bytes. `context_ledger.hash` is the BLAKE3 of the canonical bytes of the
//! whole envelope with that one member removed.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::artifact::{canonical_bytes, content_hash};

use super::inputs::Role;
use super::tools::ToolManifestEntry;

/// The format tag of a compiled envelope.
pub const COMPILED_FORMAT: &str = "ctxpack.compiled/v1";

/// The result of one compile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledContext {
    pub format: String,
    pub pack: PackRef,
    pub intent: IntentRef,
    pub compiled_prompt: CompiledPrompt,
    pub manifests: Manifests,
    pub runtime_controls: RuntimeControls,
    pub budget_report: BudgetReport,
    pub diagnostics: Vec<Diagnostic>,
    pub context_ledger: ContextLedger,
    /// The request's message, kept for the provider renders; not part of the envelope
    /// (the ledger records the request by id).
    #[serde(skip)]
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackRef {
    pub name: String,
    pub version: String,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntentRef {
    pub name: String,
    pub fallback_used: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledPrompt {
    pub system: String,
    /// `null` when the pack has no developer prompt.
    pub developer: Option<String>,
    pub task: String,
    /// Kept blocks in prompt order: buckets by priority (descending) then name; within
    /// a bucket in fill order, except `session`, which is chronological.
    pub context_blocks: Vec<ContextBlock>,
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
    pub id: String,
    pub bucket: String,
    pub source: BlockSource,
    pub origin: String,
    pub trust: Trust,
    pub priority: i64,
    pub tokens: u64,
    pub truncated: bool,
    pub text: String,
    /// For a history turn: its role and content (redacted, possibly truncated), for the
    /// provider renders, which send turns without the `ROLE: ` prefix.
    #[serde(skip)]
    pub turn: Option<(Role, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifests {
    pub policy_manifest: Vec<PolicyManifestEntry>,
    pub tool_manifest: Vec<ToolManifestEntry>,
    pub evidence_manifest: Vec<EvidenceManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyManifestEntry {
    pub policy: String,
    pub bundle: String,
    pub priority: i64,
    pub enforcing: bool,
    pub fired: bool,
    pub effects: Vec<Value>,
    pub error: Option<String>,
}

/// One evidence item, in the order the `evidence` bucket tried them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceManifestEntry {
    pub id: String,
    pub source: String,
    pub score: f64,
    pub hops: u32,
    pub included: bool,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeControls {
    pub must_refuse: bool,
    pub refusal_reason: Option<String>,
    pub must_escalate: bool,
    pub escalation_target: Option<String>,
    pub approval_gates_active: Vec<String>,
    pub redaction_rules_active: Vec<RedactionRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedactionRule {
    pub name: String,
    pub pattern: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetReport {
    pub total: u64,
    pub fixed: u64,
    pub available: u64,
    pub tokenizer: String,
    pub allocations: BTreeMap<String, u64>,
    /// Tokens used by the kept blocks of each bucket.
    pub used_at_compile: BTreeMap<String, u64>,
    pub bucket_truncations: BTreeMap<String, bool>,
    /// Dropped block ids per bucket in the order tried. Blocks routed to a bucket the
    /// budget does not declare are listed under that bucket's name.
    pub dropped_block_ids: BTreeMap<String, Vec<String>>,
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
    /// `name@version`.
    pub pack: String,
    /// The request id.
    pub request: String,
    pub policy: LedgerPolicy,
    /// Surfaced tool names, sorted.
    pub tool: Vec<String>,
    /// Every supplied evidence item (sorted by id) with the BLAKE3 of its content as
    /// supplied, before redaction.
    pub evidence: Vec<LedgerItem>,
    pub memory: Vec<LedgerItem>,
    pub budget: LedgerBudget,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerPolicy {
    /// The bundles of all the pack's policies, sorted and unique.
    pub bundles: Vec<String>,
    /// Fired policies in evaluation order.
    pub fired: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerItem {
    pub id: String,
    pub blake3: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerBudget {
    pub total: u64,
    pub fixed: u64,
    pub available: u64,
    /// `fixed` plus the tokens of every kept block.
    pub used: u64,
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
        canonical_bytes(&self.to_value())
    }

    /// Computes and stores `context_ledger.hash`.
    pub(crate) fn seal(&mut self) {
        let mut value = self.to_value();
        if let Some(Value::Object(ledger)) = value.get_mut("context_ledger") {
            ledger.remove("hash");
        }
        self.context_ledger.hash = content_hash(&value);
    }

    /// Recomputes the ledger hash and compares it with the recorded one.
    pub fn verify_ledger(&self) -> bool {
        let mut copy = self.clone();
        copy.seal();
        copy.context_ledger.hash == self.context_ledger.hash
    }

    /// The prompt as text, for `contains` expectations in pack tests: system, developer,
    /// task and every block's text, separated by newlines.
    pub fn prompt_text(&self) -> String {
        let p = &self.compiled_prompt;
        let mut parts: Vec<&str> = vec![&p.system];
        if let Some(d) = &p.developer {
            parts.push(d);
        }
        parts.push(&p.task);
        parts.extend(p.context_blocks.iter().map(|b| b.text.as_str()));
        parts.join("\n")
    }
}
