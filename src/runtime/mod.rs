//! The runtime compiler: a verified [`Artifact`] plus one run's inputs in, one
//! [`CompiledContext`] out.
//!
//! [`PreparedPack::new`] does everything that depends on the pack alone, once: it
//! refuses library packs, compiles every policy condition (datalogic-rs) and redactor
//! (regex), builds the context schema tree, and pre-counts the texts that never change
//! (tool descriptions, static blocks and instructs without interpolation).
//! [`PreparedPack::compile`] then runs the eight stages of `runtime.md`. It is pure and
//! deterministic: no I/O, no clock, no randomness; the same inputs give the same bytes.
//!
//! # Caches
//!
//! The prepared pack owns a block cache (`runtime::cache`: token counts and kept texts by key
//! material that determines each text) and a content-hash memo ([`memo`]: the BLAKE3
//! of caller contents), each behind a `Mutex`, so evidence repeated across compiles is
//! neither re-tokenized, re-hashed nor rebuilt. A hit returns exactly what computing
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
pub mod envelope;
pub mod error;
pub mod inputs;
pub mod intent;
pub mod memo;
pub mod policy;
pub mod render;
pub mod template;
pub mod tools;
pub mod validate;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use datalogic_rs::Engine;
use regex::Regex;
use serde_json::{json, Value};

use crate::artifact::{Artifact, Budget, Effect, Prompts, PPM};
use crate::tokens::{self, Tokenizer};

use assemble::{BucketPlan, Candidate, Lane, Prefix};
use budget::BucketSpec;
pub use envelope::*;
pub use error::CompileError;
pub use inputs::{
    decode_inputs, CompileInputs, Evidence, InvokeRequest, MemoryItem, Role, RunBudget, RunContext,
    RunUser, Turn,
};
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
    /// Schemas, descriptions, kinds and counted block texts of every tool, by tool index; the
    /// first three are shared with every manifest.
    tools: Vec<tools::PreparedTool>,
    /// The manifest form of every policy's effects, by policy index.
    policy_effects: Vec<Arc<[Value]>>,
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
            .map(|p| p.effects.iter().map(policy::effect_json).collect())
            .collect();
        let shared = |s: &String| Arc::<str>::from(s.as_str());
        let bucket_shared = budget.buckets.iter().map(|b| shared(&b.name)).collect();
        let block_names = artifact.blocks.iter().map(|b| shared(&b.name)).collect();
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
            static_blocks,
            static_instructs,
            bucket_shared,
            block_names,
            policy_names,
            policy_bundles,
            bundles,
            cache: Mutex::new(cache::BlockCache::default()),
            hashes: Mutex::new(memo::HashMemo::default()),
        })
    }

    /// The artifact this pack was prepared from.
    pub fn artifact(&self) -> &Artifact {
        &self.artifact
    }

    /// Forgets every cached token count, kept text and content hash, as for a pack
    /// prepared anew (the pre-counted static texts stay).
    pub fn clear_token_cache(&self) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.hashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
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

    fn store(&self, key: &[u8], tokens: usize, text: Option<&Arc<str>>) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, tokens, text);
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

    /// Compiles one request. Pure and deterministic; see the module docs.
    pub fn compile<'p>(&'p self, inputs: &CompileInputs) -> Result<CompiledContext, CompileError> {
        let artifact = &self.artifact;
        let (prompts, budget) = prompts_and_budget(artifact)?;
        validate::validate_inputs(&self.schema, &self.bucket_names, inputs)?;
        let run = &inputs.run;
        let request = &inputs.request;

        // Stage 1: intent.
        let (intent, fallback_used) =
            intent::resolve(&artifact.intents, request.intent.as_deref())?;

        // The data every condition and template sees.
        let ctx = match &request.context {
            Value::Null => json!({}),
            other => other.clone(),
        };
        let data = json!({
            "ctx": ctx,
            "request": {
                "intent": intent.name,
                "message": request.message,
                "channel": request.channel,
                "locale": request.locale,
            },
            "run": {
                "id": run.run_id,
                "tenant": run.tenant,
                "user": { "id": run.user.id, "roles": run.user.roles },
                "safety_mode": run.safety_mode.as_str(),
            },
        });

        // The fixed text (system, developer, task) depends on the inputs alone. It is
        // counted first so that the one input check that needs it — explicit bucket
        // tokens against what the fixed text leaves, exit 4 — runs before any stage.
        // Its diagnostics are reported after the policies', in stage order.
        let mut prompt_diagnostics = Vec::new();
        let kind = run
            .budget
            .as_ref()
            .and_then(|b| b.tokenizer)
            .unwrap_or(budget.tokenizer);
        let total = run
            .budget
            .as_ref()
            .and_then(|b| b.total_tokens)
            .unwrap_or(budget.total);
        // Every interpolated value of the fixed text, rendered without redaction here
        // and again below if fired policies activate redactors.
        let render_fixed = |redact: Option<template::Redact<'_>>, diags: &mut Vec<Diagnostic>| {
            let system = template::render_redacted(
                &prompts.system,
                &data,
                "the system prompt",
                diags,
                redact,
            );
            let developer = prompts.developer.as_ref().map(|t| {
                template::render_redacted(t, &data, "the developer prompt", diags, redact)
            });
            let task = template::render_redacted(
                &intent.task,
                &data,
                &format!("the task of intent `{}`", intent.name),
                diags,
                redact,
            );
            let fixed = [
                system.as_str(),
                developer.as_deref().unwrap_or(""),
                task.as_str(),
            ]
            .iter()
            .map(|t| self.count(kind, t) as u64)
            .sum::<u64>();
            (system, developer, task, fixed)
        };
        let (mut system, mut developer, mut task, mut fixed) =
            render_fixed(None, &mut prompt_diagnostics);
        let explicit = run.budget.as_ref().and_then(|b| b.bucket_tokens.as_ref());
        if let Some(available) = total.checked_sub(fixed) {
            budget::check_explicit(explicit, available)?;
        }

        // Stage 2: policies.
        let mut diagnostics = Vec::new();
        let results = policy::evaluate(
            &self.engine,
            &artifact.policies,
            &self.conditions,
            &data,
            &mut diagnostics,
        )?;
        let fired: Vec<&crate::artifact::Policy> = artifact
            .policies
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.fired)
            .map(|(p, _)| p)
            .collect();
        let mut refusal = None;
        let mut escalation = None;
        let mut redact: BTreeSet<&str> = BTreeSet::new();
        for p in &fired {
            for e in &p.effects {
                match e {
                    Effect::Refuse(reason) if refusal.is_none() => refusal = Some(reason.clone()),
                    Effect::Escalate(target) if escalation.is_none() => {
                        escalation = Some(target.clone())
                    }
                    Effect::Redact(names) => redact.extend(names.iter().map(String::as_str)),
                    _ => {}
                }
            }
        }
        let active: Vec<(&str, &(String, Regex))> = redact
            .iter()
            .filter_map(|n| {
                self.redactors
                    .get_key_value(*n)
                    .map(|(k, v)| (k.as_str(), v))
            })
            .collect();
        // What the active redactors are, as part of every lane block's cache key: the
        // same content renders differently when a different set is active.
        let mut redaction_key = Vec::new();
        for (name, _) in &active {
            redaction_key.extend_from_slice(name.as_bytes());
            redaction_key.push(0);
        }
        let redact = redactor(|text| redact_with(&active, text));
        let redact: Option<template::Redact<'_>> = (!active.is_empty()).then_some(&redact);
        if redact.is_some() {
            let fixed_templates = [
                Some(&prompts.system),
                prompts.developer.as_ref(),
                Some(&intent.task),
            ];
            if !fixed_templates
                .into_iter()
                .flatten()
                .all(template::is_static)
            {
                (system, developer, task, fixed) = render_fixed(redact, &mut Vec::new());
                if let Some(available) = total.checked_sub(fixed) {
                    budget::check_explicit(explicit, available)?;
                }
            }
        }

        // Stage 3: tools.
        let (tool_manifest, gates) = tools::surface(artifact, &self.tools, intent, run, &results);

        // Stage 6: budget.
        diagnostics.append(&mut prompt_diagnostics);
        if fixed > total {
            return Err(CompileError::BudgetExhausted {
                message: format!(
                    "the system, developer and task text take {fixed} tokens, over the total of {total}"
                ),
            });
        }
        let available = total - fixed;
        let specs: Vec<BucketSpec> = budget
            .buckets
            .iter()
            .map(|b| BucketSpec {
                name: b.name.clone(),
                share_ppm: intent.budget.get(&b.name).copied().unwrap_or(b.share_ppm),
                priority: b.priority,
                min: b.min,
            })
            .collect();
        let allocations = budget::allocate(&specs, available, explicit)?;

        // Stage 7: candidates from every source, then filling.
        let mut candidates = Vec::with_capacity(
            artifact.blocks.len()
                + fired.len()
                + tool_manifest.len()
                + inputs.evidence.len()
                + inputs.memory.len()
                + request.history.len(),
        );
        // Texts that never change are shared with the prepared pack, and their counts
        // hold for the pack's own tokenizer.
        let pack_kind = kind == budget.tokenizer;
        let shared = |s: &'p StaticText| (&s.text, pack_kind.then_some(s.tokens));
        for ((b, prepared), name) in artifact
            .blocks
            .iter()
            .zip(&self.static_blocks)
            .zip(&self.block_names)
        {
            // A block whose bucket is not declared is dropped unrendered.
            let (content, fixed) = match prepared {
                Some(s) => (Cow::Borrowed(&*s.text), Some(shared(s))),
                None if self.bucket_names.contains(&b.bucket) => {
                    let text = template::render_redacted(
                        &b.text,
                        &data,
                        &format!("block `{}`", b.name),
                        &mut diagnostics,
                        redact,
                    );
                    (Cow::Owned(text), None)
                }
                None => (Cow::Borrowed(""), None),
            };
            candidates.push(trusted(
                Arc::clone(name),
                &b.bucket,
                BlockSource::Block,
                name,
                b.priority,
                content,
                fixed,
            ));
        }
        for (((p, r), prepared), name) in artifact
            .policies
            .iter()
            .zip(&results)
            .zip(&self.static_instructs)
            .zip(&self.policy_names)
        {
            if !r.fired {
                continue;
            }
            let instructs = p.effects.iter().filter_map(|e| match e {
                Effect::Instruct(t) => Some(t),
                _ => None,
            });
            for (n, (t, prepared)) in instructs.zip(prepared).enumerate() {
                let id = if n == 0 {
                    Arc::clone(name)
                } else {
                    Arc::from(format!("{}#{}", p.name, n + 1))
                };
                let (text, fixed) = match prepared {
                    Some(s) => (Cow::Borrowed(&*s.text), Some(shared(s))),
                    None => {
                        let text = template::render_redacted(
                            t,
                            &data,
                            &format!("the instruct of policy `{}`", p.name),
                            &mut diagnostics,
                            redact,
                        );
                        (Cow::Owned(text), None)
                    }
                };
                candidates.push(trusted(
                    id,
                    "policy",
                    BlockSource::Policy,
                    name,
                    p.priority,
                    text,
                    fixed,
                ));
            }
        }
        for (entry, prepared) in tool_manifest.iter().zip(&self.tools) {
            if entry.surfaced {
                candidates.push(trusted(
                    Arc::clone(&prepared.name),
                    "tools",
                    BlockSource::Tool,
                    &prepared.name,
                    0,
                    Cow::Borrowed(&prepared.block.text),
                    Some(shared(&prepared.block)),
                ));
            }
        }
        // The BLAKE3 of every caller content, computed once (or remembered from an
        // earlier compile): the ledger records evidence and memory hashes, turn ids are
        // made of them, and lane blocks derive their cache keys from them.
        let mut content_hashes = memo::hash_all(
            &self.hashes,
            inputs
                .evidence
                .iter()
                .map(|e| e.content.as_str())
                .chain(inputs.memory.iter().map(|m| m.content.as_str()))
                .chain(request.history.iter().map(|t| t.content.as_str())),
        );
        let turn_hashes = content_hashes.split_off(inputs.evidence.len() + inputs.memory.len());
        let memory_hashes = content_hashes.split_off(inputs.evidence.len());
        let evidence_hashes = content_hashes;
        for (i, (e, hash)) in inputs.evidence.iter().zip(&evidence_hashes).enumerate() {
            candidates.push(Candidate {
                id: Arc::clone(&e.id),
                bucket: "evidence",
                source: BlockSource::Evidence,
                origin: Some(Arc::clone(&e.source)),
                trust: Trust::Untrusted,
                priority: 0,
                score: e.score,
                turn: None,
                evidence: Some(i),
                fixed: None,
                prefix: Prefix::Evidence {
                    id: &e.id,
                    source: &e.source,
                },
                raw: Cow::Borrowed(&e.content),
                lane: Lane::Redacted {
                    escape: true,
                    hash: hash.hash,
                },
                suffix: "</evidence>",
            });
        }
        for (m, hash) in inputs.memory.iter().zip(&memory_hashes) {
            candidates.push(Candidate {
                id: Arc::clone(&m.id),
                bucket: "memory",
                source: BlockSource::Memory,
                origin: Some(Arc::clone(&m.id)),
                trust: Trust::Untrusted,
                priority: 0,
                score: m.score,
                turn: None,
                evidence: None,
                fixed: None,
                prefix: Prefix::Memory { id: &m.id },
                raw: Cow::Borrowed(&m.content),
                lane: Lane::Redacted {
                    escape: true,
                    hash: hash.hash,
                },
                suffix: "</memory>",
            });
        }
        // A turn's id is the BLAKE3 of its content as supplied; a repeated content
        // ("ok", "thanks") gets `#2`, `#3`, ... so that every id names one turn.
        let mut seen_turns: HashMap<blake3::Hash, usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(request.history.len(), Default::default());
        for (i, (t, hash)) in request.history.iter().zip(&turn_hashes).enumerate() {
            let n = seen_turns.entry(hash.hash).or_insert(0);
            *n += 1;
            let id = if *n > 1 {
                Arc::from(format!("{}#{n}", hash.text))
            } else {
                Arc::clone(&hash.text)
            };
            candidates.push(Candidate {
                id,
                bucket: "session",
                source: BlockSource::Session,
                // The turn index, written out by the assembly for kept turns only.
                origin: None,
                trust: Trust::Untrusted,
                priority: 0,
                score: 0.0,
                turn: Some((i, t.role)),
                evidence: None,
                fixed: None,
                prefix: Prefix::Fixed(t.role.prefix()),
                raw: Cow::Borrowed(&t.content),
                lane: Lane::Redacted {
                    escape: false,
                    hash: hash.hash,
                },
                suffix: "",
            });
        }
        let plans: Vec<BucketPlan<'_>> = budget
            .buckets
            .iter()
            .zip(&self.bucket_shared)
            .map(|(b, name)| BucketPlan {
                name,
                priority: b.priority,
                overflow: b.overflow,
                allocation: allocations.get(&b.name).copied().unwrap_or(0),
            })
            .collect();
        let counter = RunCounter {
            pack: self,
            kind,
            active: &active,
            redaction_key: &redaction_key,
        };
        let assembly = assemble::assemble(&plans, candidates, &counter)?;

        // Stage 8: manifests, controls and ledger.
        let policy_manifest = artifact
            .policies
            .iter()
            .zip(&results)
            .zip(&self.policy_effects)
            .zip(self.policy_names.iter().zip(&self.policy_bundles))
            .map(|(((p, r), effects), (name, bundle))| PolicyManifestEntry {
                policy: Arc::clone(name),
                bundle: Arc::clone(bundle),
                priority: p.priority,
                enforcing: p.enforcing,
                fired: r.fired,
                effects: Arc::clone(effects),
                error: r.error.clone(),
            })
            .collect();
        let evidence_manifest = assembly
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
            .collect();
        let used: u64 = fixed + assembly.used.values().sum::<u64>();
        let ledger_items = |ids: Vec<&Arc<str>>, hashes: &[memo::ContentHash]| {
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
        let surfaced: Vec<Arc<str>> = tool_manifest
            .iter()
            .filter(|t| t.surfaced)
            .map(|t| Arc::clone(&t.name))
            .collect();
        let mut out = CompiledContext {
            format: COMPILED_FORMAT.to_owned(),
            pack: PackRef {
                name: artifact.name.clone(),
                version: artifact.version.clone(),
                hash: self.pack_hash.clone(),
            },
            intent: IntentRef {
                name: intent.name.clone(),
                fallback_used,
            },
            compiled_prompt: CompiledPrompt {
                system,
                developer,
                task,
                context_blocks: assembly.blocks,
                message: redact.map_or_else(
                    || request.message.clone(),
                    |redact| redact(&request.message).into_owned(),
                ),
            },
            manifests: Manifests {
                policy_manifest,
                tool_manifest,
                evidence_manifest,
            },
            runtime_controls: RuntimeControls {
                must_refuse: refusal.is_some(),
                refusal_reason: refusal,
                must_escalate: escalation.is_some(),
                escalation_target: escalation,
                approval_gates_active: gates,
                redaction_rules_active: active
                    .iter()
                    .map(|(name, (pattern, _))| RedactionRule {
                        name: (*name).to_owned(),
                        pattern: pattern.clone(),
                    })
                    .collect(),
            },
            budget_report: BudgetReport {
                total,
                fixed,
                available,
                tokenizer: kind.as_str().to_owned(),
                allocations,
                used_at_compile: assembly.used,
                bucket_truncations: assembly.truncations,
                dropped_block_ids: assembly.dropped,
                warnings: assembly.warnings,
            },
            diagnostics,
            context_ledger: ContextLedger {
                pack: format!("{}@{}", artifact.name, artifact.version),
                pack_hash: self.pack_hash.clone(),
                inputs: digest::inputs_digest(inputs, &memory_hashes, &turn_hashes),
                request: request.request_id.clone(),
                policy: LedgerPolicy {
                    bundles: self.bundles.clone(),
                    fired: results
                        .iter()
                        .zip(&self.policy_names)
                        .filter(|(r, _)| r.fired)
                        .map(|(_, name)| Arc::clone(name))
                        .collect(),
                },
                tool: surfaced,
                evidence: ledger_items(
                    inputs.evidence.iter().map(|e| &e.id).collect(),
                    &evidence_hashes,
                ),
                memory: ledger_items(
                    inputs.memory.iter().map(|m| &m.id).collect(),
                    &memory_hashes,
                ),
                budget: LedgerBudget {
                    total,
                    fixed,
                    available,
                    used,
                },
                hash: String::new(),
            },
        };
        out.seal();
        Ok(out)
    }
}

fn trusted<'a>(
    id: Arc<str>,
    bucket: &'a str,
    source: BlockSource,
    origin: &Arc<str>,
    priority: i64,
    text: Cow<'a, str>,
    fixed: Option<(&'a Arc<str>, Option<usize>)>,
) -> Candidate<'a> {
    Candidate {
        id,
        bucket,
        source,
        origin: Some(Arc::clone(origin)),
        trust: Trust::Trusted,
        priority,
        score: 0.0,
        turn: None,
        evidence: None,
        fixed,
        prefix: Prefix::Fixed(""),
        raw: text,
        lane: Lane::Plain,
        suffix: "",
    }
}

/// A text without interpolation, rendered and counted once by the prepared pack.
#[derive(Debug)]
pub(crate) struct StaticText {
    pub text: Arc<str>,
    /// For the pack's tokenizer.
    pub tokens: usize,
}

impl StaticText {
    fn new(text: String, kind: Tokenizer) -> StaticText {
        let tokens = tokens::count(kind, &text);
        StaticText {
            text: Arc::from(text),
            tokens,
        }
    }
}

/// Token counting for one compile: the pack's caches, the compile's tokenizer and its
/// active redactors.
struct RunCounter<'p> {
    pack: &'p PreparedPack,
    kind: Tokenizer,
    active: &'p [(&'p str, &'p (String, Regex))],
    redaction_key: &'p [u8],
}

impl assemble::Counter for RunCounter<'_> {
    fn kind(&self) -> Tokenizer {
        self.kind
    }

    fn redaction_key(&self) -> &[u8] {
        self.redaction_key
    }

    fn cached(&self, key: &[u8]) -> Option<cache::Cached> {
        self.pack.cached(key)
    }

    fn store(&self, key: &[u8], tokens: usize, text: Option<&Arc<str>>) {
        self.pack.store(key, tokens, text);
    }

    fn tokenize(&self, text: &str) -> usize {
        tokens::count(self.kind, text)
    }

    fn count(&self, text: &str) -> usize {
        self.pack.count(self.kind, text)
    }

    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        redact_with(self.active, text)
    }
}

/// Applies the active redactors (sorted by name) to `text`: each match becomes
/// `[REDACTED:<name>]`. Borrowed when nothing matched.
fn redact_with<'t>(active: &[(&str, &(String, Regex))], text: &'t str) -> Cow<'t, str> {
    let mut out = Cow::Borrowed(text);
    for (name, (_, re)) in active {
        if re.is_match(&out) {
            let replaced = re
                .replace_all(&out, format!("[REDACTED:{name}]").as_str())
                .into_owned();
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// Pins a closure to the higher-ranked signature of [`template::Redact`].
fn redactor<F: for<'t> Fn(&'t str) -> Cow<'t, str>>(f: F) -> F {
    f
}

/// Renders a template without interpolations.
fn render_static(t: &crate::artifact::Template) -> String {
    template::render(t, &Value::Null, "", &mut Vec::new())
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
