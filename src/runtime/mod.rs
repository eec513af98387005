//! The runtime compiler: a verified [`Artifact`] plus one run's inputs in, one
//! [`CompiledContext`] out.
//!
//! [`PreparedPack::new`] does everything that depends on the pack alone, once: it
//! refuses library packs, compiles every policy condition (datalogic-rs) and redactor
//! (regex), builds the context schema tree, and pre-counts the texts that never change
//! (tool descriptions, static blocks and instructs without interpolation).
//! [`PreparedPack::compile`] then runs the eight stages of the runtime contract, one
//! call each, in order, each in the module named for it and handing a typed result to
//! the next:
//!
//! | stage | module | result |
//! | --- | --- | --- |
//! | 1. intent classification | [`intent`] | `Resolved` |
//! | 2. policy resolution | [`policy`] | `PolicyOutcome` (with the active redactors) |
//! | 3. tool surfacing | [`tools`] | `ToolSurface` |
//! | 4–5. evidence and memory, as given | [`memo`] | `Contents` (their hashes) |
//! | 6. token budget allocation | [`budget`] | `BudgetPlan` (and `FixedText`) |
//! | 7. bucket assembly | [`assemble`] | `Assembly` |
//! | 8. manifests, controls, ledger | [`envelope`] | [`CompiledContext`] |
//!
//! Types several stages share live in `shared`, which depends on none of them, so the
//! stages depend on each other only in pipeline order. It is pure and deterministic:
//! no I/O, no clock, no randomness; the same inputs give the same bytes.
//!
//! # Caches
//!
//! The prepared pack owns a block cache (`runtime::cache`: token counts, kept texts and
//! their JSON literals, by key material that determines each text), a content-hash memo
//! ([`memo`]: the BLAKE3 of caller contents) and a document memo
//! ([`memo::DocumentMemo`]: evidence and memory lists by the exact JSON bytes they
//! were decoded from, for [`PreparedPack::decode_json_inputs`]), each behind a `Mutex`,
//! so evidence repeated across compiles is neither re-decoded, re-tokenized, re-hashed,
//! rebuilt nor re-escaped. A hit returns exactly what computing
//! would, so the caches change speed, never output. Locks are taken per lookup, never
//! across tokenization or hashing, so concurrent compiles of one prepared pack (it is
//! `Send + Sync`) only contend for hash-map operations. The only process-wide state is
//! the lazily built BPE encoders in [`crate::tokens`].
//!
//! # Decisions beyond the spec
//!
//! See `docs/runtime.md`, which this module implements: the JsonLogic data shape,
//! template rendering, `min`/`bucket_tokens` allocation, block ids and texts, tool
//! withholding reasons, redaction and the render targets.

pub mod assemble;
pub mod budget;
mod cache;
mod digest;
pub mod document;
pub mod envelope;
pub mod error;
pub mod inputs;
pub mod intent;
pub mod memo;
pub mod policy;
pub mod render;
pub mod session;
mod shared;
pub mod template;
pub mod tools;
pub mod validate;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use datalogic_rs::Engine;
use regex::Regex;
use serde_json::Value;

use crate::artifact::{Artifact, Budget, Effect, Prompts, PPM};
use crate::tokens::{self, Tokenizer};

pub use envelope::*;
pub use error::CompileError;
pub use inputs::{
    decode_inputs, decode_json_inputs, decode_json_with_lists, from_json_bytes, json_request,
    object, objects, optional_object, CompileInputs, Evidence, InvokeRequest, MemoryItem, Object,
    Role, RunBudget, RunContext, RunUser, Turn,
};
use shared::StaticText;
pub use tools::{CapabilityMetadata, ToolManifestEntry};
use validate::SchemaNode;

/// A pack ready to compile many requests.
pub struct PreparedPack {
    artifact: Artifact,
    pack_hash: String,
    engine: Engine,
    conditions: Vec<policy::Condition>,
    redactors: BTreeMap<String, (String, Regex)>,
    schema: SchemaNode,
    bucket_names: Vec<String>,
    /// The static blocks routed to the `evidence` or `memory` bucket: no caller id may
    /// take one of their names.
    lane_blocks: Vec<String>,
    /// Schemas, descriptions, kinds and counted block texts of every tool, by tool index; the
    /// first three are shared with every manifest.
    tools: Vec<tools::PreparedTool>,
    /// The manifest form of every policy's effects, by policy index.
    policy_effects: Vec<envelope::PreparedEffects>,
    /// Blocks without interpolation, by block index: their text and its count for
    /// the pack's tokenizer.
    static_blocks: Vec<Option<StaticText>>,
    /// The same for each policy's instructs, by policy index then instruct order.
    static_instructs: Vec<Vec<Option<StaticText>>>,
    /// Names the envelope repeats, shared rather than copied per compile: the budget's
    /// buckets (in budget order), the blocks and the policies (by index), each policy's
    /// bundle, and the sorted unique bundles.
    bucket_shared: Vec<Arc<str>>,
    block_names: Vec<Arc<str>>,
    policy_names: Vec<Arc<str>>,
    policy_bundles: Vec<Arc<str>>,
    bundles: Vec<Arc<str>>,
    /// Token counts and kept texts of blocks seen before (see [`cache`]).
    cache: Mutex<cache::BlockCache>,
    /// The BLAKE3 of caller contents seen before (see [`memo`]).
    hashes: Mutex<memo::HashMemo>,
    /// Evidence and memory documents decoded before (see [`memo::DocumentMemo`]).
    documents: Mutex<memo::DocumentMemo>,
}

impl std::fmt::Debug for PreparedPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedPack")
            .field(
                "pack",
                &format!("{}@{}", self.artifact.name, self.artifact.version),
            )
            .field("hash", &self.pack_hash)
            .finish_non_exhaustive()
    }
}

fn prompts_and_budget(artifact: &Artifact) -> Result<(&Prompts, &Budget), CompileError> {
    match (&artifact.prompts, &artifact.budget) {
        (Some(p), Some(b)) => Ok((p, b)),
        _ => Err(CompileError::artifact(
            "an application pack needs its prompts and budget",
        )),
    }
}

impl PreparedPack {
    /// Prepares `artifact` (already verified, e.g. by [`crate::artifact::verify_bytes`]).
    pub fn new(mut artifact: Artifact) -> Result<PreparedPack, CompileError> {
        // The hash of the artifact as given (sealing one that has none).
        let pack_hash = match &artifact.hash {
            Some(h) => h.clone(),
            None => artifact.seal().1,
        };
        // Policies are evaluated in priority order (higher first, ties by name). `build`
        // writes them in that order; an artifact made or edited by other means may not.
        artifact.policies.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.name.cmp(&b.name))
        });
        if artifact.library {
            return Err(CompileError::LibraryPack {
                name: artifact.name.clone(),
            });
        }
        let (_, budget) = prompts_and_budget(&artifact)?;
        if artifact.intents.is_empty() {
            return Err(CompileError::artifact("the pack declares no intent"));
        }
        check_names(&artifact)?;
        let bucket_names: Vec<String> = budget.buckets.iter().map(|b| b.name.clone()).collect();
        check_shares(&artifact, &bucket_names)?;
        let schema = SchemaNode::build(&artifact.context)?;
        let engine = Engine::new();
        let conditions = policy::compile_conditions(&engine, &artifact.policies)?;
        let mut redactors = BTreeMap::new();
        for r in &artifact.redactors {
            let re = Regex::new(&r.pattern).map_err(|e| {
                CompileError::artifact(format!("redactor `{}` is not a valid regex: {e}", r.name))
            })?;
            redactors.insert(r.name.clone(), (r.pattern.clone(), re));
        }
        let kind = budget.tokenizer;
        let tools: Vec<tools::PreparedTool> = artifact
            .tools
            .iter()
            .map(|t| tools::PreparedTool::new(t, kind))
            .collect();
        let static_text = |t: &crate::artifact::Template| {
            template::is_static(t).then(|| StaticText::new(render_static(t), kind))
        };
        let static_blocks = artifact
            .blocks
            .iter()
            .map(|b| static_text(&b.text))
            .collect();
        let static_instructs = artifact
            .policies
            .iter()
            .map(|p| {
                p.effects
                    .iter()
                    .filter_map(|e| match e {
                        Effect::Instruct(t) => Some(static_text(t)),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let policy_effects = artifact
            .policies
            .iter()
            .map(|p| {
                envelope::PreparedEffects::new(p.effects.iter().map(policy::effect_json).collect())
            })
            .collect();
        let shared = |s: &String| Arc::<str>::from(s.as_str());
        let bucket_shared = budget.buckets.iter().map(|b| shared(&b.name)).collect();
        let block_names = artifact.blocks.iter().map(|b| shared(&b.name)).collect();
        let lane_blocks = artifact
            .blocks
            .iter()
            .filter(|b| b.bucket == "evidence" || b.bucket == "memory")
            .map(|b| b.name.clone())
            .collect();
        let policy_names = artifact.policies.iter().map(|p| shared(&p.name)).collect();
        let policy_bundles: Vec<Arc<str>> = artifact
            .policies
            .iter()
            .map(|p| shared(&p.bundle))
            .collect();
        let mut bundles = policy_bundles.clone();
        bundles.sort();
        bundles.dedup();
        Ok(PreparedPack {
            tools,
            policy_effects,
            artifact,
            pack_hash,
            engine,
            conditions,
            redactors,
            schema,
            bucket_names,
            lane_blocks,
            static_blocks,
            static_instructs,
            bucket_shared,
            block_names,
            policy_names,
            policy_bundles,
            bundles,
            cache: Mutex::new(cache::BlockCache::default()),
            hashes: Mutex::new(memo::HashMemo::default()),
            documents: Mutex::new(memo::DocumentMemo::default()),
        })
    }

    /// The artifact this pack was prepared from.
    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }

    /// Forgets every cached token count, kept text, content hash and decoded document,
    /// as for a pack prepared anew (the pre-counted static texts stay).
    pub fn clear_token_cache(&self) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.hashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.documents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// [`decode_json_inputs`] for compiles of this pack: an evidence or memory document
    /// sent again, byte for byte, is not decoded again (see [`memo::DocumentMemo`]).
    /// Whenever it succeeds, the result equals `decode_json_inputs`'s.
    pub fn decode_json_inputs(
        &self,
        run: &[u8],
        request: &[u8],
        evidence: Option<&[u8]>,
        memory: Option<&[u8]>,
    ) -> Option<CompileInputs> {
        decode_json_with_lists(
            run,
            json_request(request),
            self.decode_json_evidence(evidence),
            self.decode_json_memory(memory),
        )
    }

    /// The evidence list of [`PreparedPack::decode_json_inputs`].
    pub fn decode_json_evidence(&self, bytes: Option<&[u8]>) -> Option<Arc<[Evidence]>> {
        memo::decode_list(&self.documents, bytes)
    }

    /// The memory list of [`PreparedPack::decode_json_inputs`].
    pub fn decode_json_memory(&self, bytes: Option<&[u8]>) -> Option<Arc<[MemoryItem]>> {
        memo::decode_list(&self.documents, bytes)
    }

    /// `(hits, misses)` of the block cache (token counts) since the pack was prepared.
    pub fn token_cache_stats(&self) -> (u64, u64) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stats()
    }

    fn cached(&self, key: &[u8]) -> Option<cache::Cached> {
        // A poisoned lock only means another compile panicked mid-insert; the map is
        // still a valid cache of pure values.
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
    }

    /// Records a count and, for a kept block, its text; returns the text's JSON
    /// literal, made here, outside the lock.
    fn store(&self, key: &[u8], tokens: usize, text: Option<&Arc<str>>) -> Option<Arc<str>> {
        let json = text.map(|t| crate::artifact::json::literal(t));
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, tokens, text.zip(json.as_ref()));
        json
    }

    /// The count of a plain text, through the cache.
    fn count(&self, kind: Tokenizer, text: &str) -> usize {
        let mut key = Vec::new();
        cache::text_key(&mut key, kind, text);
        if let Some(hit) = self.cached(&key) {
            return hit.tokens;
        }
        let n = tokens::count(kind, text);
        self.store(&key, n, None);
        n
    }

    /// Compiles one request: the eight stages of the runtime contract, in order, each
    /// in the module of its name. Pure and deterministic; see the module docs.
    pub fn compile(&self, inputs: &CompileInputs) -> Result<CompiledContext, CompileError> {
        let mut compiled = self.compile_stages(inputs)?;
        compiled.seal();
        Ok(compiled)
    }

    /// [`Self::compile`], also returning the envelope's canonical bytes (what
    /// [`CompiledContext::canonical_bytes`] gives): the envelope is serialized once,
    /// for both the ledger hash and the bytes, instead of twice. For hosts that send
    /// or store the envelope.
    pub fn compile_canonical(
        &self,
        inputs: &CompileInputs,
    ) -> Result<(CompiledContext, Vec<u8>), CompileError> {
        let mut compiled = self.compile_stages(inputs)?;
        let bytes = compiled.seal_canonical();
        Ok((compiled, bytes))
    }

    /// The eight stages, in order; the ledger hash is left to the caller.
    fn compile_stages(&self, inputs: &CompileInputs) -> Result<CompiledContext, CompileError> {
        let (prompts, budget) = prompts_and_budget(&self.artifact)?;
        validate::validate_inputs(&self.schema, &self.bucket_names, &self.lane_blocks, inputs)?;
        let with_floats;
        let inputs = match validate::floats_written_as_floats(&self.schema, &inputs.request.context)
        {
            Some(context) => {
                with_floats = inputs.with_context(context);
                &with_floats
            }
            None => inputs,
        };
        let limits = budget::Limits::new(budget, &inputs.run);
        let count = |text: &str| self.count(limits.tokenizer, text);

        // 1. Intent classification.
        let intent = intent::resolve(&self.artifact.intents, inputs.request.intent.as_deref())?;
        // Session directives: the request's state, stepped with its message.
        let session = session::step(&self.artifact, &inputs.request)?;
        let mut data = template::data(&intent.intent.name, inputs);
        if let (Some(s), Some(map)) = (&session, data.as_object_mut()) {
            map.insert("session".to_owned(), s.data());
        }
        let session_block = session.as_ref().and_then(session::SessionStep::block);
        // The fixed text is counted up front: pins over what it leaves are invalid
        // input (exit 4), which no later stage's failure (exit 5) may mask.
        let mut fixed = budget::FixedText::render(prompts, intent.intent, &data, None, &count);
        if let Some(block) = &session_block {
            fixed.append_developer(block, &count);
        }
        limits.check_pins(fixed.tokens)?;

        // 2. Policy resolution.
        let policies = policy::resolve(
            &self.engine,
            &self.artifact.policies,
            &self.conditions,
            &self.redactors,
            &data,
        )?;
        if !policies.redaction.is_empty() && !budget::FixedText::is_static(prompts, intent.intent) {
            // The caller's values interpolated into the fixed text are redacted too.
            let redact = template::redactor(|text| policies.redaction.apply(text));
            let diagnostics = std::mem::take(&mut fixed.diagnostics);
            fixed = budget::FixedText::render(prompts, intent.intent, &data, Some(&redact), &count);
            if let Some(block) = &session_block {
                fixed.append_developer(block, &count);
            }
            fixed.diagnostics = diagnostics;
            limits.check_pins(fixed.tokens)?;
        }

        // 3. Tool surfacing.
        let surface = tools::surface(
            &self.artifact,
            &self.tools,
            intent.intent,
            &inputs.run,
            &policies.results,
        );

        // 4 and 5. Evidence retrieval and memory recall: the caller's, as given, each
        // content hashed once (or remembered) for the ledger, turn ids and cache keys.
        let contents = memo::Contents::hash(&self.hashes, inputs);

        // 6. Token budget allocation.
        let plan = budget::plan(budget, intent.intent, &limits, fixed.tokens)?;

        // 7. Bucket assembly.
        let mut diagnostics = policies.diagnostics.clone();
        diagnostics.extend(fixed.diagnostics.iter().cloned());
        let counter = RunCounter {
            pack: self,
            kind: limits.tokenizer,
            redaction: &policies.redaction,
        };
        let assembly = assemble::assemble_buckets(
            &self.prepared(limits.tokenizer == budget.tokenizer),
            &assemble::Sources {
                data: &data,
                policies: &policies,
                surface: &surface,
                inputs,
                contents: &contents,
                allocations: &plan.allocations,
            },
            &counter,
            &mut diagnostics,
        )?;

        // 8. Manifests, runtime controls and ledger.
        Ok(envelope::build(envelope::Parts {
            artifact: &self.artifact,
            pack_hash: &self.pack_hash,
            policy_effects: &self.policy_effects,
            policy_names: &self.policy_names,
            policy_bundles: &self.policy_bundles,
            bundles: &self.bundles,
            inputs,
            intent,
            fixed,
            policies,
            surface,
            contents,
            plan,
            assembly,
            diagnostics,
            session,
        }))
    }

    /// What bucket assembly takes from the prepared pack.
    fn prepared(&self, pack_tokenizer: bool) -> assemble::Prepared<'_> {
        assemble::Prepared {
            blocks: &self.artifact.blocks,
            policies: &self.artifact.policies,
            buckets: prompts_and_budget(&self.artifact).map_or(&[], |(_, b)| &b.buckets),
            bucket_names: &self.bucket_shared,
            block_names: &self.block_names,
            policy_names: &self.policy_names,
            static_blocks: &self.static_blocks,
            static_instructs: &self.static_instructs,
            tools: &self.tools,
            pack_tokenizer,
        }
    }
}

/// Token counting for one compile: the pack's caches, the compile's tokenizer and its
/// active redactors.
struct RunCounter<'p> {
    pack: &'p PreparedPack,
    kind: Tokenizer,
    redaction: &'p policy::Redaction<'p>,
}

impl assemble::Counter for RunCounter<'_> {
    fn kind(&self) -> Tokenizer {
        self.kind
    }

    fn redaction_key(&self) -> &[u8] {
        self.redaction.key()
    }

    fn cached(&self, key: &[u8]) -> Option<cache::Cached> {
        self.pack.cached(key)
    }

    fn store(&self, key: &[u8], tokens: usize, text: Option<&Arc<str>>) -> Option<Arc<str>> {
        self.pack.store(key, tokens, text)
    }

    fn tokenize(&self, text: &str) -> usize {
        tokens::count(self.kind, text)
    }

    fn count(&self, text: &str) -> usize {
        self.pack.count(self.kind, text)
    }

    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.redaction.apply(text)
    }
}

/// Renders a template without interpolations.
pub(crate) fn render_static(t: &crate::artifact::Template) -> String {
    template::render(t, &Value::Null, "", &mut Vec::new())
}

/// What `build` guarantees of names, held of an artifact made or edited by other
/// means: a valid `scope/name` and semantic version, no two tools, intents, policies,
/// redactors, blocks or buckets of one name, at most one fallback intent, intents
/// that permit only declared tools, and effects that name declared tools and
/// redactors. Otherwise the manifests and provider bodies would list a
/// name twice, or a tool the pack does not describe.
fn check_names(artifact: &Artifact) -> Result<(), CompileError> {
    crate::artifact::check_identity(artifact).map_err(CompileError::artifact)?;
    crate::artifact::check_templates(artifact).map_err(CompileError::artifact)?;
    fn unique<'a>(what: &str, names: impl Iterator<Item = &'a str>) -> Result<(), CompileError> {
        let mut seen = std::collections::HashSet::new();
        for name in names {
            if !seen.insert(name) {
                return Err(CompileError::artifact(format!(
                    "{what} `{name}` is declared twice"
                )));
            }
        }
        Ok(())
    }
    let buckets = artifact.budget.iter().flat_map(|b| &b.buckets);
    unique("tool", artifact.tools.iter().map(|t| t.name.as_str()))?;
    unique("intent", artifact.intents.iter().map(|i| i.name.as_str()))?;
    unique("policy", artifact.policies.iter().map(|p| p.name.as_str()))?;
    unique(
        "redactor",
        artifact.redactors.iter().map(|r| r.name.as_str()),
    )?;
    unique("block", artifact.blocks.iter().map(|b| b.name.as_str()))?;
    unique("bucket", buckets.map(|b| b.name.as_str()))?;
    let fallbacks: Vec<&str> = artifact
        .intents
        .iter()
        .filter(|i| i.fallback)
        .map(|i| i.name.as_str())
        .collect();
    if let [_, second, ..] = fallbacks.as_slice() {
        return Err(CompileError::artifact(format!(
            "intent `{second}` is a second fallback intent"
        )));
    }
    for intent in &artifact.intents {
        for tool in &intent.tools {
            if !artifact.tools.iter().any(|t| &t.name == tool) {
                return Err(CompileError::artifact(format!(
                    "intent `{}` permits `{tool}`, which the pack does not declare",
                    intent.name
                )));
            }
        }
    }
    check_references(artifact)
}

/// Policy effects name declared tools and redactors: an effect on a name the pack
/// does not declare would do nothing without a word (a redaction that redacts
/// nothing). (A block in a bucket the budget lacks is valid: it is dropped, and the
/// budget report lists it.)
fn check_references(artifact: &Artifact) -> Result<(), CompileError> {
    for policy in &artifact.policies {
        for effect in &policy.effects {
            let (names, what, declared): (&[String], &str, Vec<&str>) = match effect {
                Effect::RequireApproval(tools) | Effect::Deny(tools) => (
                    tools,
                    "tool",
                    artifact.tools.iter().map(|t| t.name.as_str()).collect(),
                ),
                Effect::Redact(redactors) => (
                    redactors,
                    "redactor",
                    artifact.redactors.iter().map(|r| r.name.as_str()).collect(),
                ),
                Effect::Refuse(_) | Effect::Escalate(_) | Effect::Instruct(_) => continue,
            };
            if let Some(name) = names.iter().find(|n| !declared.contains(&n.as_str())) {
                return Err(CompileError::artifact(format!(
                    "policy `{}` names {what} `{name}`, which the pack does not declare",
                    policy.name
                )));
            }
        }
    }
    Ok(())
}

/// Shares (the pack's, and each intent's after its overrides) may not exceed 100%, and
/// overrides must name declared buckets: otherwise allocations could exceed the budget.
fn check_shares(artifact: &Artifact, buckets: &[String]) -> Result<(), CompileError> {
    let Some(budget) = &artifact.budget else {
        return Ok(());
    };
    let pack_sum: u64 = budget
        .buckets
        .iter()
        .map(|b| b.share_ppm)
        .fold(0, u64::saturating_add);
    if pack_sum > PPM {
        return Err(CompileError::artifact(format!(
            "bucket shares sum to {pack_sum} ppm, over 100%"
        )));
    }
    for intent in &artifact.intents {
        for name in intent.budget.keys() {
            if !buckets.contains(name) {
                return Err(CompileError::artifact(format!(
                    "intent `{}` overrides the share of unknown bucket `{name}`",
                    intent.name
                )));
            }
        }
        let sum: u64 = budget
            .buckets
            .iter()
            .map(|b| intent.budget.get(&b.name).copied().unwrap_or(b.share_ppm))
            .fold(0, u64::saturating_add);
        if sum > PPM {
            return Err(CompileError::artifact(format!(
                "bucket shares for intent `{}` sum to {sum} ppm, over 100%",
                intent.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepared_pack_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<PreparedPack>();
    }
}
