//! Property tests of budget allocation and bucket assembly over random packs and inputs.

use std::collections::{BTreeMap, HashSet};

use ctxpack::artifact::*;
use ctxpack::runtime::*;
use proptest::prelude::*;
use serde_json::json;

const NAMES: [&str; 6] = [
    "business", "evidence", "memory", "policy", "session", "tools",
];

fn text(s: &str) -> Template {
    Template {
        text: s.into(),
        parts: vec![TemplatePart::Text(s.into())],
    }
}

#[derive(Debug, Clone)]
struct Case {
    buckets: Vec<(usize, u64, i64, u64, u8)>,
    total: u64,
    evidence: Vec<(String, f64)>,
    memory: Vec<String>,
    history: Vec<String>,
    tools: usize,
}

fn case() -> impl Strategy<Value = Case> {
    // `error` overflow is rare so that most cases get past assembly.
    let overflow = prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8)];
    let bucket = (1u64..100, -5i64..5, 0u64..20, overflow);
    (
        proptest::sample::subsequence((0..NAMES.len()).collect::<Vec<_>>(), 0..=NAMES.len()),
        proptest::collection::vec(bucket, NAMES.len()),
        50u64..3000,
        proptest::collection::vec(("[a-z <>/é]{0,300}", 0.0f64..1.0), 0..12),
        proptest::collection::vec("[a-z ]{0,200}", 0..6),
        proptest::collection::vec("[a-z ]{0,150}", 0..8),
        0usize..5,
    )
        .prop_map(|(chosen, specs, total, evidence, memory, history, tools)| {
            let weight: u64 = chosen.iter().map(|&i| specs[i].0).sum::<u64>().max(100);
            let buckets = chosen
                .iter()
                .map(|&i| {
                    let (w, p, min, o) = specs[i];
                    (i, w * 1_000_000 / weight, p, min, o)
                })
                .collect();
            Case {
                buckets,
                total,
                evidence,
                memory,
                history,
                tools,
            }
        })
}

fn artifact(c: &Case) -> Artifact {
    let tools: Vec<Tool> = (0..c.tools)
        .map(|i| Tool {
            name: format!("tool_{i}"),
            description: "Does a thing with some words in it.".repeat(i + 1),
            kind: "read".into(),
            risk: Risk::Low,
            approval: Approval::Auto,
            input: json!({"type": "object"}),
            doc: None,
            provenance: "a/b@1.0.0".into(),
        })
        .collect();
    Artifact {
        format: ARTIFACT_FORMAT.into(),
        name: "a/b".into(),
        version: "1.0.0".into(),
        library: false,
        description: None,
        compiler: Compiler {
            name: "ctxpack".into(),
            version: "0".into(),
        },
        dependencies: vec![],
        context: vec![],
        prompts: Some(Prompts {
            system: text("You are a helpful assistant."),
            developer: None,
        }),
        budget: Some(Budget {
            total: 1000,
            tokenizer: Tokenizer::Approx,
            buckets: c
                .buckets
                .iter()
                .map(|&(i, share_ppm, priority, min, o)| Bucket {
                    name: NAMES[i].into(),
                    share_ppm,
                    priority,
                    min,
                    overflow: [Overflow::Drop, Overflow::Truncate, Overflow::Error][o as usize],
                })
                .collect(),
        }),
        intents: vec![Intent {
            name: "main".into(),
            description: None,
            safety: SafetyMode::Autonomous,
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            task: text("Do the task."),
            budget: BTreeMap::new(),
            fallback: true,
            doc: None,
        }],
        tools,
        prohibitions: vec![],
        redactors: vec![],
        policies: vec![Policy {
            name: "always".into(),
            priority: 1,
            enforcing: true,
            when: json!(true),
            effects: vec![
                Effect::Instruct(text("Be brief.")),
                Effect::Instruct(text("Be kind, and cite evidence.")),
            ],
            bundle: "a/b@1.0.0".into(),
            doc: None,
        }],
        blocks: vec![Block {
            name: "rules".into(),
            bucket: "business".into(),
            priority: 3,
            text: text("Some business rules that matter."),
            doc: None,
            provenance: "a/b@1.0.0".into(),
        }],
        session: None,
        hash: None,
    }
}

fn inputs(c: &Case) -> CompileInputs {
    let evidence: Vec<_> = c
        .evidence
        .iter()
        .enumerate()
        .map(|(i, (content, score))| json!({"id": format!("ev-{i}"), "source": "kb://x", "content": content, "score": score}))
        .collect();
    let memory: Vec<_> = c
        .memory
        .iter()
        .enumerate()
        .map(|(i, content)| json!({"id": format!("m-{i}"), "content": content, "promoted": true}))
        .collect();
    let history: Vec<_> = c
        .history
        .iter()
        .enumerate()
        .map(|(i, content)| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{i} {content}")}))
        .collect();
    decode_inputs(
        json!({"run_id": "r", "safety_mode": "autonomous", "budget": {"total_tokens": c.total}}),
        json!({"request_id": "q", "message": "hi", "channel": "web", "locale": "en", "history": history}),
        Some(json!(evidence)),
        Some(json!(memory)),
    )
    .expect("generated inputs are well-formed")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn allocation_and_assembly_invariants(c in case()) {
        let pack = PreparedPack::new(artifact(&c)).expect("generated packs are valid");
        let inputs = inputs(&c);
        let cc = match pack.compile(&inputs) {
            Ok(cc) => cc,
            // Minimums over the budget, or an `error` bucket that overflowed.
            Err(e) => {
                prop_assert!(matches!(e.kind(), "budget_exhausted" | "overflow_error"), "{e}");
                return Ok(());
            }
        };
        let b = &cc.budget_report;
        prop_assert_eq!(cc.canonical_bytes(), canonical_bytes(&cc.to_value()));
        // Serialized once for the hash and the bytes: the same envelope, the same bytes.
        let (again, bytes) = pack.compile_canonical(&inputs).expect("it compiled once");
        prop_assert_eq!(&again, &cc);
        // The second compile takes kept texts, and their JSON literals, from the cache.
        prop_assert_eq!(&bytes, &canonical_bytes(&again.to_value()));
        prop_assert_eq!(bytes, cc.canonical_bytes());
        prop_assert!(b.allocations.values().sum::<u64>() <= b.available);
        prop_assert_eq!(b.available, b.total - b.fixed);
        // `min` is a floor under `floor(available × share)`: every bucket gets at least
        // its minimum, none gets more than its share rounded up, and when every share
        // covers its minimum the shares alone decide.
        let covered = c.buckets.iter().all(|&(_, ppm, _, min, _)| b.available * ppm / 1_000_000 >= min);
        for &(i, ppm, _, min, _) in &c.buckets {
            let tokens = b.allocations[NAMES[i]];
            let exact = b.available * ppm / 1_000_000;
            prop_assert!(tokens >= min, "{} under its min", NAMES[i]);
            prop_assert!(tokens <= exact + 1 || tokens == min, "{} over its share", NAMES[i]);
            if covered {
                prop_assert!(tokens == exact || tokens == exact + 1, "{}: {} for {}", NAMES[i], tokens, exact);
            }
        }

        let mut used: BTreeMap<&str, u64> = BTreeMap::new();
        let mut rendered = HashSet::new();
        for block in &cc.compiled_prompt.context_blocks {
            prop_assert_eq!(block.tokens as usize, ctxpack::tokens::count(Tokenizer::Approx, &block.text));
            *used.entry(&*block.bucket).or_default() += block.tokens;
            rendered.insert((block.bucket.to_string(), block.id.to_string()));
            if block.source == BlockSource::Evidence {
                prop_assert!(block.text.ends_with("</evidence>"));
                prop_assert_eq!(block.text.to_ascii_lowercase().matches("</evidence").count(), 1);
            }
        }
        for (bucket, tokens) in &used {
            prop_assert!(*tokens <= b.allocations[*bucket], "{} over its allocation", bucket);
            prop_assert_eq!(*tokens, b.used_at_compile[*bucket]);
        }

        // Every input block is rendered or listed as dropped, never both.
        let dropped: HashSet<(String, String)> = b
            .dropped_block_ids
            .iter()
            .flat_map(|(bucket, ids)| ids.iter().map(move |id| (bucket.clone(), id.to_string())))
            .collect();
        let mut expected: Vec<(String, String)> = vec![
            ("business".into(), "rules".into()),
            ("policy".into(), "always".into()),
            ("policy".into(), "always#2".into()),
        ];
        expected.extend((0..c.tools).map(|i| ("tools".into(), format!("tool_{i}"))));
        expected.extend((0..c.evidence.len()).map(|i| ("evidence".into(), format!("ev-{i}"))));
        expected.extend((0..c.memory.len()).map(|i| ("memory".into(), format!("m-{i}"))));
        let session_ids: Vec<String> = inputs
            .request
            .history
            .iter()
            .map(|t| format!("blake3:{}", blake3::hash(t.content().as_bytes()).to_hex()))
            .collect();
        expected.extend(session_ids.iter().map(|id| ("session".into(), id.clone())));
        for key in &expected {
            prop_assert!(rendered.contains(key) ^ dropped.contains(key), "{:?}", key);
        }
        prop_assert_eq!(rendered.len() + dropped.len(), expected.len());

        // Session keeps a contiguous run of the newest turns.
        let kept: Vec<usize> = cc
            .compiled_prompt
            .context_blocks
            .iter()
            .filter(|b| &*b.bucket == "session")
            .map(|b| b.origin.parse().unwrap())
            .collect();
        let n = c.history.len();
        prop_assert_eq!(kept, ((n - kept_len(&cc))..n).collect::<Vec<_>>());
    }
}

fn kept_len(cc: &CompiledContext) -> usize {
    cc.compiled_prompt
        .context_blocks
        .iter()
        .filter(|b| &*b.bucket == "session")
        .count()
}

/// The inputs of `c` with `run.budget.bucket_tokens` set to `pins`.
fn pinned_inputs(c: &Case, pins: &BTreeMap<String, u64>) -> CompileInputs {
    let mut inputs = inputs(c);
    let budget = inputs.run.budget.get_or_insert_with(Default::default);
    budget.bucket_tokens = Some(pins.clone());
    inputs
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A pin moves only its own bucket: the others keep the allotment they have without
    /// it, unless the pins leave too little; then they shrink in proportion, never
    /// below their minimum nor above their unpinned allotment, and use all that is left.
    #[test]
    fn pins_move_only_their_bucket(c in case(), picks in proptest::collection::vec((any::<bool>(), 0.0f64..1.2), NAMES.len())) {
        let pack = PreparedPack::new(artifact(&c)).expect("generated packs are valid");
        let Ok(free) = pack.compile(&inputs(&c)) else { return Ok(()) };
        let available = free.budget_report.available;
        let mut pins = BTreeMap::new();
        for (&(i, ..), &(pin, fraction)) in c.buckets.iter().zip(&picks) {
            if pin {
                pins.insert(NAMES[i].to_owned(), (available as f64 * fraction / 3.0) as u64);
            }
        }
        let pinned_sum: u64 = pins.values().sum();
        let cc = match pack.compile(&pinned_inputs(&c, &pins)) {
            Ok(cc) => cc,
            Err(e) => {
                // Pins over `available` are invalid input; pins that leave less than
                // the other buckets' minimums exhaust the budget; `error` buckets may
                // overflow with their new sizes.
                prop_assert!(
                    (e.kind() == "invalid_input" && pinned_sum > available)
                        || matches!(e.kind(), "budget_exhausted" | "overflow_error"),
                    "{e}"
                );
                return Ok(());
            }
        };
        prop_assert!(pinned_sum <= available);
        let (base, got) = (&free.budget_report.allocations, &cc.budget_report.allocations);
        prop_assert!(got.values().sum::<u64>() <= available);
        for (name, pin) in &pins {
            prop_assert_eq!(got[name], *pin);
        }
        let left = available - pinned_sum;
        let unpinned: Vec<&String> = base.keys().filter(|n| !pins.contains_key(*n)).collect();
        let wanted: u64 = unpinned.iter().map(|n| base[*n]).sum();
        if wanted <= left {
            for n in &unpinned {
                prop_assert_eq!(got[*n], base[*n], "{} moved", n);
            }
        } else {
            prop_assert_eq!(unpinned.iter().map(|n| got[*n]).sum::<u64>(), left);
            for &(i, _, _, min, _) in &c.buckets {
                let n = NAMES[i].to_owned();
                if !pins.contains_key(&n) {
                    prop_assert!(got[&n] <= base[&n] && got[&n] >= min, "{}: {} of {} (min {})", n, got[&n], base[&n], min);
                }
            }
        }
    }
}
