//! The reference benchmark workload as files (`benches/workload/`): the generator's
//! output is current, the pack checks clean, and `ctxpack build` plus `ctxpack compile`
//! on the four input files keep the expected blocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use assert_cmd::Command;
use ctxpack::build::{build_file, BuildOptions};
use ctxpack::runtime::{decode_inputs, CompiledContext, PreparedPack};
use serde_json::{json, Value};

#[path = "../benches/support/workload.rs"]
mod workload;

/// Blocks kept per bucket when the pack compiles the workload's inputs.
///
/// `tools` is 48 of 60, where `benches/support/workload.rs` keeps 54: a tool declared
/// in the language always lowers its input to a closed schema,
/// `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}`,
/// while the in-memory bench artifact uses `{"properties":{},"type":"object"}`. The
/// schema is part of each tool's block, so every block is a few tokens longer and
/// fewer of them fit the bucket's 3,148 tokens.
const KEPT: [(&str, usize); 5] = [
    ("evidence", 43),
    ("memory", 35),
    ("policy", 40),
    ("session", 78),
    ("tools", 48),
];

/// The same, with the tools' input schemas replaced by the bench's open one: the
/// counts `examples/bench_report.rs` prints for 200 evidence.
const KEPT_WITH_BENCH_SCHEMA: [(&str, usize); 5] = [
    ("evidence", 43),
    ("memory", 35),
    ("policy", 40),
    ("session", 78),
    ("tools", 54),
];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/workload")
}

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn read_json(name: &str) -> Value {
    let path = dir().join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn python3() -> bool {
    StdCommand::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Blocks the compile routes to each bucket: one per policy instruct, permitted tool,
/// evidence item, memory item and history turn.
fn offered(bucket: &str) -> usize {
    let source = std::fs::read_to_string(dir().join("workload.ctxpack")).unwrap();
    let len = |v: &Value| v.as_array().map_or(0, Vec::len);
    match bucket {
        "policy" => source.matches("\n  instruct ").count(),
        "tools" => source.matches("\ntool ").count(),
        "evidence" => len(&read_json("evidence.json")),
        "memory" => len(&read_json("memory.json")),
        "session" => len(&read_json("request.json")["history"]),
        other => panic!("unexpected bucket `{other}`"),
    }
}

/// Kept blocks per bucket, from the envelope: the blocks of `context_blocks`, checked
/// against the budget report (kept plus `dropped_block_ids` is every block offered).
fn kept_from_envelope(envelope: &Value) -> BTreeMap<String, usize> {
    let blocks = envelope["compiled_prompt"]["context_blocks"]
        .as_array()
        .expect("context_blocks");
    let dropped = envelope["budget_report"]["dropped_block_ids"]
        .as_object()
        .expect("dropped_block_ids");
    dropped
        .iter()
        .map(|(bucket, ids)| {
            let dropped = ids.as_array().map_or(0, Vec::len);
            let kept = blocks
                .iter()
                .filter(|b| b["bucket"] == bucket.as_str())
                .count();
            assert_eq!(
                kept + dropped,
                offered(bucket),
                "bucket `{bucket}`: kept plus dropped is every block offered"
            );
            (bucket.clone(), kept)
        })
        .collect()
}

fn kept_in(cc: &CompiledContext) -> BTreeMap<String, usize> {
    let mut kept = BTreeMap::new();
    for b in &cc.compiled_prompt.context_blocks {
        *kept.entry(b.bucket.to_string()).or_insert(0) += 1;
    }
    kept
}

fn expected(counts: &[(&str, usize)]) -> BTreeMap<String, usize> {
    counts.iter().map(|(b, n)| ((*b).to_owned(), *n)).collect()
}

#[test]
fn generated_files_are_current() {
    if !python3() {
        eprintln!("skipping: python3 not found");
        return;
    }
    let out = StdCommand::new("python3")
        .arg(dir().join("gen.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "benches/workload is out of date; run `python3 benches/workload/gen.py`\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pack_checks_clean_and_is_formatted() {
    let built = build_file(&dir().join("workload.ctxpack"), &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.summary()));
    let codes: Vec<&str> = built.report.diagnostics.iter().map(|d| d.code).collect();
    assert!(codes.is_empty(), "diagnostics: {codes:?}");
    let a = &built.artifact;
    assert_eq!(
        (a.name.as_str(), a.version.as_str()),
        ("bench/workload", "1.0.0")
    );
    assert_eq!(
        (a.tools.len(), a.policies.len(), a.intents.len()),
        (60, 40, 1)
    );
    assert_eq!(a.budget.as_ref().map(|b| b.total), Some(32_000));

    let source = std::fs::read_to_string(dir().join("workload.ctxpack")).unwrap();
    assert_eq!(ctxpack::fmt::format(&source).unwrap(), source);
}

#[test]
fn cli_build_and_compile_keep_the_expected_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let artifact = tmp.path().join("workload.json");
    ctxpack()
        .arg("check")
        .arg("--deny-warnings")
        .arg(dir().join("workload.ctxpack"))
        .assert()
        .success();
    ctxpack()
        .arg("build")
        .arg(dir().join("workload.ctxpack"))
        .arg("-o")
        .arg(&artifact)
        .assert()
        .success();
    let out = ctxpack()
        .current_dir(dir())
        .arg("compile")
        .arg("--json-errors")
        .arg("--pack")
        .arg(&artifact)
        .args(["--run", "run.json", "--request", "request.json"])
        .args(["--evidence", "evidence.json", "--memory", "memory.json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "compile failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["intent"]["name"], "resolve");
    assert_eq!(envelope["budget_report"]["total"], 32_000);
    assert_eq!(kept_from_envelope(&envelope), expected(&KEPT));
}

#[test]
fn library_compile_matches_and_explains_the_tools_difference() {
    let built = build_file(&dir().join("workload.ctxpack"), &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.summary()));
    let inputs = decode_inputs(
        read_json("run.json"),
        read_json("request.json"),
        Some(read_json("evidence.json")),
        Some(read_json("memory.json")),
    )
    .unwrap();

    let cc = PreparedPack::new(built.artifact.clone())
        .unwrap()
        .compile(&inputs)
        .unwrap();
    assert_eq!(kept_in(&cc), expected(&KEPT));

    // With the bench's open input schema, the tools bucket keeps what the bench keeps.
    let mut bench_like = built.artifact;
    for t in &mut bench_like.tools {
        t.input = json!({"type": "object", "properties": {}});
    }
    bench_like.hash = None;
    let cc = PreparedPack::new(bench_like)
        .unwrap()
        .compile(&inputs)
        .unwrap();
    assert_eq!(kept_in(&cc), expected(&KEPT_WITH_BENCH_SCHEMA));
}

/// The files are `benches/support/workload.rs`'s workload: the built pack equals its
/// artifact once the compiler version and the tools' input schema are aligned (the
/// only differences), and the four input files compile to the same envelope, byte for
/// byte, as its in-memory inputs.
#[test]
fn files_match_the_in_memory_workload() {
    let Some(bench) = workload::load(200) else {
        panic!("benches/data/workload.json is missing");
    };
    let mut built = build_file(&dir().join("workload.ctxpack"), &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.summary()))
        .artifact;
    built.compiler = bench.artifact.compiler.clone();
    for t in &mut built.tools {
        t.input = json!({"type": "object", "properties": {}});
    }
    built.hash = None;
    let mut expected_artifact = bench.artifact.clone();
    expected_artifact.hash = None;
    assert_eq!(
        serde_json::to_value(&built).unwrap(),
        serde_json::to_value(&expected_artifact).unwrap()
    );

    let inputs = decode_inputs(
        read_json("run.json"),
        read_json("request.json"),
        Some(read_json("evidence.json")),
        Some(read_json("memory.json")),
    )
    .unwrap();
    let pack = PreparedPack::new(bench.artifact).unwrap();
    let from_files = pack.compile(&inputs).unwrap();
    let from_memory = pack.compile(&bench.inputs).unwrap();
    assert!(from_files.canonical_bytes() == from_memory.canonical_bytes());
    assert_eq!(kept_in(&from_files), expected(&KEPT_WITH_BENCH_SCHEMA));
}
