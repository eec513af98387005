//! The reference workload (`benches/data/workload.json`) as a pack and inputs.
//! Shared by `benches/runtime.rs` and `examples/bench_report.rs`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use ctxpack::artifact::*;
use ctxpack::runtime::{decode_inputs, CompileInputs};
use serde_json::{json, Value};

pub struct Workload {
    pub artifact: Artifact,
    pub inputs: CompileInputs,
    /// Every text a cold compile tokenizes, for the pure-tokenization baseline.
    pub texts: Vec<String>,
}

pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/data/workload.json")
}

fn text(s: &str) -> Template {
    Template {
        text: s.into(),
        parts: vec![TemplatePart::Text(s.into())],
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// Loads the workload, or `None` (with a message) when the file is absent.
/// `evidence_count` repeats the 200 evidence items (with fresh ids) or takes a prefix.
pub fn load(evidence_count: usize) -> Option<Workload> {
    let path = path();
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("skipping: workload not found at {}", path.display());
        return None;
    };
    let w: Value = serde_json::from_slice(&bytes).ok()?;
    let shares = &w["budget"]["shares"];
    let priorities = [
        ("policy", 90),
        ("tools", 80),
        ("evidence", 50),
        ("memory", 40),
        ("session", 30),
    ];
    let mut buckets: Vec<Bucket> = priorities
        .iter()
        .map(|(name, priority)| Bucket {
            name: (*name).into(),
            share_ppm: shares[*name].as_u64().unwrap_or(0) * 10_000,
            priority: *priority,
            min: 0,
            // The workload's fill rule is "skip": a block that does not fit is skipped
            // and smaller ones are still tried — the spec's `drop`.
            overflow: Overflow::Drop,
        })
        .collect();
    buckets.sort_by(|a, b| a.name.cmp(&b.name));
    let empty = Vec::new();
    let arr = |key: &str| w[key].as_array().unwrap_or(&empty).clone();
    let tools: Vec<Tool> = arr("tools")
        .iter()
        .map(|t| Tool {
            name: s(t, "name").into(),
            description: s(t, "description").into(),
            kind: "read".into(),
            risk: Risk::Low,
            approval: Approval::Auto,
            input: json!({"type": "object", "properties": {}}),
            doc: None,
            provenance: "bench/workload@1.0.0".into(),
        })
        .collect();
    let mut policies: Vec<Policy> = arr("policies")
        .iter()
        .map(|p| Policy {
            name: s(p, "id").replace('-', "_"),
            priority: p["priority"].as_i64().unwrap_or(0),
            enforcing: true,
            when: json!(true),
            effects: vec![Effect::Instruct(text(s(p, "text")))],
            bundle: "bench/workload@1.0.0".into(),
            doc: None,
        })
        .collect();
    policies.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
    let mut sorted_tools = tools.clone();
    sorted_tools.sort_by(|a, b| a.name.cmp(&b.name));
    let artifact = Artifact {
        format: ARTIFACT_FORMAT.into(),
        name: "bench/workload".into(),
        version: "1.0.0".into(),
        library: false,
        description: None,
        compiler: Compiler {
            name: "ctxpack".into(),
            version: "bench".into(),
        },
        dependencies: vec![],
        context: vec![],
        prompts: Some(Prompts {
            system: text(s(&w, "system")),
            developer: Some(text(s(&w, "developer"))),
        }),
        budget: Some(Budget {
            total: w["budget"]["total"].as_u64().unwrap_or(32_000),
            tokenizer: Tokenizer::O200k,
            buckets,
        }),
        tools: sorted_tools,
        prohibitions: vec![],
        intents: vec![Intent {
            name: "resolve".into(),
            description: None,
            safety: SafetyMode::Autonomous,
            tools: tools.iter().map(|t| t.name.clone()).collect(),
            task: text(s(&w, "task")),
            budget: BTreeMap::new(),
            fallback: true,
            doc: None,
        }],
        redactors: vec![],
        policies,
        blocks: vec![],
        session: None,
        hash: None,
    };

    let base = arr("evidence");
    let evidence: Vec<Value> = (0..evidence_count)
        .map(|i| {
            let e = &base[i % base.len()];
            let id = if i < base.len() {
                s(e, "id").to_owned()
            } else {
                format!("{}-r{}", s(e, "id"), i / base.len())
            };
            json!({"id": id, "source": e["source"], "content": e["content"], "score": e["score"]})
        })
        .collect();
    let memory: Vec<Value> = arr("memory")
        .iter()
        .map(|m| json!({"id": m["id"], "content": m["content"], "score": m["score"], "promoted": true}))
        .collect();
    let history: Vec<Value> = arr("history")
        .iter()
        .map(|h| json!({"role": h["role"], "content": h["content"]}))
        .collect();

    let mut texts: Vec<String> = vec![
        s(&w, "system").into(),
        s(&w, "developer").into(),
        s(&w, "task").into(),
    ];
    texts.extend(
        tools
            .iter()
            .map(|t| format!("{}: {}", t.name, t.description)),
    );
    texts.extend(arr("policies").iter().map(|p| s(p, "text").to_owned()));
    texts.extend(evidence.iter().map(|e| {
        format!(
            "<evidence id=\"{}\" source=\"{}\">{}</evidence>",
            s(e, "id"),
            s(e, "source"),
            s(e, "content")
        )
    }));
    texts.extend(
        memory
            .iter()
            .map(|m| format!("<memory id=\"{}\">{}</memory>", s(m, "id"), s(m, "content"))),
    );
    texts.extend(
        history
            .iter()
            .map(|h| format!("{}: {}", s(h, "role"), s(h, "content"))),
    );

    let inputs = decode_inputs(
        json!({"run_id": "bench", "safety_mode": "autonomous"}),
        json!({"request_id": "bench-1", "intent": "resolve", "message": "Where is my refund?",
               "channel": "web", "locale": "en-US", "history": history}),
        Some(Value::Array(evidence)),
        Some(Value::Array(memory)),
    )
    .ok()?;
    Some(Workload {
        artifact,
        inputs,
        texts,
    })
}
