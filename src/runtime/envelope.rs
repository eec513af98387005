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

use crate::artifact::{json, Artifact};

use super::assemble::Assembly;
use super::budget::{BudgetPlan, FixedText};
use super::digest;
use super::inputs::CompileInputs;
use super::intent::Resolved;
use super::memo::{ContentHash, Contents};
use super::policy::PolicyOutcome;
use super::shared::{blake3_ref, raw_field, Derived, SortedValues};
pub use super::shared::{BlockSource, ContextBlock, Diagnostic, Trust};
use super::tools::{ToolManifestEntry, ToolSurface};

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
    /// The session step (`state_before`, `decision`, `state_after`), for packs with
    /// `session directives`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<super::session::SessionReport>,
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifests {
    pub evidence_manifest: Vec<EvidenceManifestEntry>,
    pub policy_manifest: Vec<PolicyManifestEntry>,
    pub tool_manifest: Vec<ToolManifestEntry>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyManifestEntry {
    pub bundle: Arc<str>,
    /// Shared with the prepared pack (never copied per compile).
    pub effects: std::sync::Arc<[Value]>,
    pub enforcing: bool,
    pub error: Option<String>,
    pub fired: bool,
    pub policy: Arc<str>,
    pub priority: i64,
    /// `effects` as canonical JSON, written once by the prepared pack, so that every
    /// envelope copies it instead of sorting and writing the effects again.
    pub(crate) effects_json: Derived<Option<Arc<str>>>,
}

impl Serialize for PolicyManifestEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Members in sorted order, as the canonical envelope writes them; a field
        // added to the struct is added here too.
        let mut st = s.serialize_struct("PolicyManifestEntry", 7)?;
        st.serialize_field("bundle", &self.bundle)?;
        let effects = SortedValues(&self.effects);
        raw_field(&mut st, "effects", &effects, &self.effects_json)?;
        st.serialize_field("enforcing", &self.enforcing)?;
        st.serialize_field("error", &self.error)?;
        st.serialize_field("fired", &self.fired)?;
        st.serialize_field("policy", &self.policy)?;
        st.serialize_field("priority", &self.priority)?;
        st.end()
    }
}

/// A policy's effects in manifest form, with their canonical JSON (see
/// [`PolicyManifestEntry`]), built once per prepared pack.
#[derive(Debug)]
pub(crate) struct PreparedEffects {
    pub values: Arc<[Value]>,
    pub json: Option<Arc<str>>,
}

impl PreparedEffects {
    pub fn new(values: Arc<[Value]>) -> PreparedEffects {
        let json = crate::artifact::json::raw(&SortedValues(&values)).ok();
        PreparedEffects { values, json }
    }
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
    /// The session decision (`no_directive`, `update`, `error`), for packs with
    /// `session directives`: on `update` or `error` the host answers the user itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directive: Option<Value>,
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
    /// For packs with `session directives`: the BLAKE3 of the session state before
    /// and after the step (their canonical exports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<super::session::LedgerSession>,
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

/// What stage 8 writes out: the pack's identity and the shared names it prepared,
/// and every earlier stage's result.
pub(crate) struct Parts<'a> {
    pub artifact: &'a Artifact,
    pub pack_hash: &'a str,
    /// By policy: the manifest form of its effects, its name and its bundle.
    pub policy_effects: &'a [PreparedEffects],
    pub policy_names: &'a [Arc<str>],
    pub policy_bundles: &'a [Arc<str>],
    /// The pack's bundles, sorted and unique.
    pub bundles: &'a [Arc<str>],
    pub inputs: &'a CompileInputs,
    pub intent: Resolved<'a>,
    pub fixed: FixedText,
    pub policies: PolicyOutcome<'a>,
    pub surface: ToolSurface,
    pub contents: Contents,
    pub plan: BudgetPlan,
    pub assembly: Assembly,
    /// Runtime diagnostics in stage order: policies, fixed text, blocks.
    pub diagnostics: Vec<Diagnostic>,
    /// The session step, for packs with `session directives`.
    pub session: Option<super::session::SessionStep>,
}

/// Stage 8: the manifests, the runtime controls, the budget report and the ledger,
/// sealed with the ledger hash.
pub(crate) fn build(parts: Parts<'_>) -> CompiledContext {
    let context_ledger = ledger(&parts);
    let policy_manifest = policy_manifest(&parts);
    let evidence_manifest = evidence_manifest(parts.inputs, &parts.assembly);
    let Parts {
        artifact,
        pack_hash,
        inputs,
        intent,
        fixed,
        policies,
        surface,
        plan,
        assembly,
        diagnostics,
        session,
        ..
    } = parts;
    let out = CompiledContext {
        format: COMPILED_FORMAT.to_owned(),
        pack: PackRef {
            name: artifact.name.clone(),
            version: artifact.version.clone(),
            hash: pack_hash.to_owned(),
        },
        intent: IntentRef {
            name: intent.intent.name.clone(),
            fallback_used: intent.fallback_used,
        },
        compiled_prompt: CompiledPrompt {
            message: policies
                .redaction
                .apply(&inputs.request.message)
                .into_owned(),
            system: fixed.system,
            developer: fixed.developer,
            task: fixed.task,
            context_blocks: assembly.blocks,
        },
        manifests: Manifests {
            policy_manifest,
            tool_manifest: surface.manifest,
            evidence_manifest,
        },
        runtime_controls: RuntimeControls {
            must_refuse: policies.refusal.is_some(),
            refusal_reason: policies.refusal,
            must_escalate: policies.escalation.is_some(),
            escalation_target: policies.escalation,
            approval_gates_active: surface.gates,
            directive: session
                .as_ref()
                .map(|s| serde_json::to_value(&s.decision).unwrap_or(Value::Null)),
            redaction_rules_active: policies
                .redaction
                .rules()
                .map(|(name, pattern)| RedactionRule {
                    name: name.to_owned(),
                    pattern: pattern.to_owned(),
                })
                .collect(),
        },
        budget_report: BudgetReport {
            total: plan.total,
            fixed: plan.fixed,
            available: plan.available,
            tokenizer: plan.tokenizer.as_str().to_owned(),
            allocations: plan.allocations,
            used_at_compile: assembly.used,
            bucket_truncations: assembly.truncations,
            dropped_block_ids: assembly.dropped,
            warnings: assembly.warnings,
        },
        diagnostics,
        context_ledger,
        session: session.as_ref().map(super::session::SessionStep::report),
    };
    out
}

/// Every policy in evaluation order: whether it fired, its effects, its error.
fn policy_manifest(parts: &Parts<'_>) -> Vec<PolicyManifestEntry> {
    parts
        .artifact
        .policies
        .iter()
        .zip(&parts.policies.results)
        .zip(parts.policy_effects)
        .zip(parts.policy_names.iter().zip(parts.policy_bundles))
        .map(|(((p, r), effects), (name, bundle))| PolicyManifestEntry {
            policy: Arc::clone(name),
            bundle: Arc::clone(bundle),
            priority: p.priority,
            enforcing: p.enforcing,
            fired: r.fired,
            effects: Arc::clone(&effects.values),
            error: r.error.clone(),
            effects_json: Derived(effects.json.clone()),
        })
        .collect()
}

/// Every evidence item in the order the `evidence` bucket tried them.
fn evidence_manifest(inputs: &CompileInputs, assembly: &Assembly) -> Vec<EvidenceManifestEntry> {
    assembly
        .evidence
        .iter()
        .map(|&(i, included, truncated)| {
            let e = &inputs.evidence[i];
            EvidenceManifestEntry {
                id: Arc::clone(&e.id),
                source: Arc::clone(&e.source),
                score: e.score,
                hops: e.hops,
                included,
                truncated,
            }
        })
        .collect()
}

/// The audit summary, its `hash` left for [`CompiledContext::seal`].
fn ledger(parts: &Parts<'_>) -> ContextLedger {
    let (artifact, inputs, contents, plan) =
        (parts.artifact, parts.inputs, &parts.contents, &parts.plan);
    let items = |ids: Vec<&Arc<str>>, hashes: &[ContentHash]| {
        let mut v: Vec<LedgerItem> = ids
            .into_iter()
            .zip(hashes)
            .map(|(id, hash)| LedgerItem {
                id: Arc::clone(id),
                blake3: Arc::clone(&hash.text),
            })
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    };
    ContextLedger {
        pack: format!("{}@{}", artifact.name, artifact.version),
        pack_hash: parts.pack_hash.to_owned(),
        inputs: digest::inputs_digest(inputs, &contents.memory, &contents.turns),
        request: inputs.request.request_id.clone(),
        session: parts
            .session
            .as_ref()
            .map(super::session::SessionStep::ledger),
        policy: LedgerPolicy {
            bundles: parts.bundles.to_vec(),
            fired: parts
                .policies
                .results
                .iter()
                .zip(parts.policy_names)
                .filter(|(r, _)| r.fired)
                .map(|(_, name)| Arc::clone(name))
                .collect(),
        },
        tool: parts
            .surface
            .manifest
            .iter()
            .filter(|t| t.surfaced)
            .map(|t| Arc::clone(&t.name))
            .collect(),
        evidence: items(
            inputs.evidence.iter().map(|e| &e.id).collect(),
            &contents.evidence,
        ),
        memory: items(
            inputs.memory.iter().map(|m| &m.id).collect(),
            &contents.memory,
        ),
        budget: LedgerBudget {
            total: plan.total,
            fixed: plan.fixed,
            available: plan.available,
            used: plan.fixed + parts.assembly.used.values().sum::<u64>(),
        },
        hash: String::new(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
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
        let mut out = Vec::with_capacity(self.size_hint());
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

    /// Computes and stores `context_ledger.hash`, and returns the canonical bytes,
    /// serializing the envelope once: the bytes hashed are the canonical bytes without
    /// `context_ledger.hash`, so the sealed bytes are those with the member put in its
    /// place (between `evidence` and `inputs`, the ledger's keys being sorted).
    pub(crate) fn seal_canonical(&mut self) -> Vec<u8> {
        self.context_ledger.hash.clear();
        let member_len = ",\"hash\":\"\"".len() + 7 + 64;
        let mut unsealed = Vec::with_capacity(self.size_hint() + member_len);
        self.write_canonical(&mut unsealed);
        unsealed.push(b'\n');
        let hash = blake3_ref(&blake3::hash(&unsealed));
        // `"inputs":"blake3:` cannot occur inside a JSON string (its quotes would be
        // escaped) nor as another member before the ledger's: the envelope's earlier
        // members hold no string-valued `inputs` key. The ledger is written after
        // `compiled_prompt`, which holds every block text, so it starts past as many
        // bytes as those texts have: the search for it starts there.
        let skip = self.block_text_bytes().min(unsealed.len());
        let at = find(&unsealed[skip..], b"\"context_ledger\":{").and_then(|ledger| {
            let ledger = skip + ledger;
            find(&unsealed[ledger..], b",\"inputs\":\"blake3:").map(|i| ledger + i)
        });
        self.context_ledger.hash = hash;
        let Some(at) = at else {
            // Unreachable for envelopes this module builds; never wrong regardless.
            return self.canonical_bytes();
        };
        let member = format!(",\"hash\":\"{}\"", self.context_ledger.hash);
        // In place: only the members after the ledger move.
        let mut sealed = unsealed;
        sealed.splice(at..at, member.bytes());
        debug_assert_eq!(sealed, self.canonical_bytes());
        sealed
    }

    /// About the size of the canonical bytes, so that they are written without
    /// growing the buffer: the prompt's texts (escaping may lengthen them) plus room
    /// for the manifests and the ledger.
    fn size_hint(&self) -> usize {
        let p = &self.compiled_prompt;
        let texts: usize = self.block_text_bytes()
            + p.system.len()
            + p.task.len()
            + p.message.len()
            + p.developer.as_ref().map_or(0, String::len);
        let items = self.context_ledger.evidence.len() + self.context_ledger.memory.len();
        texts + texts / 8 + items * 256 + 64 * 1024
    }

    /// The bytes of the prompt's block texts, unescaped.
    fn block_text_bytes(&self) -> usize {
        self.compiled_prompt
            .context_blocks
            .iter()
            .map(|b| b.text.len())
            .sum()
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
