//! The JSON Schemas of the runtime's inputs (`schemas/ctxpack.{run,request,evidence,
//! memory}.v1.json`) and of `*.tests.yaml` files (`schemas/ctxpack.tests.v1.json`)
//! describe what the runtime accepts:
//!
//! - every bundled input validates: the conformance cases whose inputs the runtime
//!   accepts, the bundled packs' `*.tests.yaml` files and the input files beside them,
//!   and everything `ctxpack init` writes;
//! - conformance cases refused for their shape fail the schema, and those refused for
//!   what only the pack knows (its context fields, buckets, intents) or for what spans
//!   documents (ids unique across evidence and memory) are named as such;
//! - hand-made negative examples fail, so no test passes vacuously.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const BASE: &str = "https://ctxpack.invalid/schemas/";
const INPUTS: [&str; 4] = ["run", "request", "evidence", "memory"];

struct Validators {
    schemas: boon::Schemas,
    index: BTreeMap<&'static str, boon::SchemaIndex>,
}

impl Validators {
    fn new() -> Self {
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        let mut index = BTreeMap::new();
        for kind in INPUTS.into_iter().chain(["tests"]) {
            let (id, schema) = (id(kind), schema(kind));
            assert_eq!(schema["$id"], json!(id), "{kind}: `$id`");
            assert_eq!(
                schema["$schema"],
                json!("https://json-schema.org/draft/2020-12/schema")
            );
            compiler.add_resource(&id, schema).unwrap();
        }
        for kind in INPUTS.into_iter().chain(["tests"]) {
            let i = compiler
                .compile(&id(kind), &mut schemas)
                .unwrap_or_else(|e| panic!("{kind}: {e:#}"));
            index.insert(kind, i);
        }
        Validators { schemas, index }
    }

    fn check(&self, kind: &str, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, self.index[kind])
            .map_err(|e| format!("{e:#}"))
    }

    fn assert_valid(&self, kind: &str, v: &Value, what: &str) {
        if let Err(e) = self.check(kind, v) {
            panic!("{what} ({kind}) does not validate:\n{e}\n{v:#}");
        }
    }

    fn assert_invalid(&self, kind: &str, v: &Value, what: &str) {
        assert!(
            self.check(kind, v).is_err(),
            "{what} ({kind}) validates but must not:\n{v:#}"
        );
    }
}

fn id(kind: &str) -> String {
    format!("{BASE}ctxpack.{kind}.v1.json")
}

fn schema(kind: &str) -> Value {
    let path = root().join(format!("schemas/ctxpack.{kind}.v1.json"));
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_yaml(path: &Path) -> Value {
    serde_norway::from_slice(&std::fs::read(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn files_ending(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_ending(&p, suffix, out);
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
    out.sort();
}

/// Every schema member documents itself: each property of every object schema has a
/// `description` (editors show it on hover).
#[test]
fn every_property_is_described() {
    fn walk(v: &Value, at: &str, missing: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (name, p) in props {
                        if p.get("description").is_none() {
                            missing.push(format!("{at}/properties/{name}"));
                        }
                    }
                }
                for (k, child) in map {
                    walk(child, &format!("{at}/{k}"), missing);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{at}/{i}"), missing);
                }
            }
            _ => {}
        }
    }
    for kind in INPUTS.into_iter().chain(["tests"]) {
        let s = schema(kind);
        assert!(
            s["title"].is_string() && s["description"].is_string(),
            "{kind}"
        );
        let mut missing = Vec::new();
        walk(&s, "#", &mut missing);
        // An `if` (a condition) and its `else` (a member's shape when the condition
        // fails) name properties that are described where they are declared.
        missing.retain(|m| !m.contains("/if/") && !m.contains("/else/"));
        assert!(missing.is_empty(), "{kind}: undescribed {missing:?}");
    }
}

/// The tests schema stands alone (editors fetch one file), so it repeats the inputs'
/// definitions; they must stay exactly the input schemas' own.
#[test]
fn tests_schema_repeats_the_input_definitions_verbatim() {
    let tests = schema("tests");
    let mut compared = 0;
    for kind in INPUTS {
        let input = schema(kind);
        for (name, def) in input["$defs"].as_object().unwrap() {
            assert_eq!(
                &tests["$defs"][name], def,
                "`$defs/{name}` of ctxpack.tests.v1.json differs from ctxpack.{kind}.v1.json's"
            );
            compared += 1;
        }
    }
    assert!(compared >= 6, "{compared}");
}

/// The exit code a conformance case expects, and the case's inputs.
fn conformance_cases() -> Vec<(String, i64, Value)> {
    let mut out = Vec::new();
    let dir = root().join("tests/conformance");
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let case = entry.path().join("case.json");
        if !case.is_file() {
            continue;
        }
        let expected = read_json(&entry.path().join("expected.json"));
        let code = expected["exit_code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{}: no exit_code", entry.path().display()));
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            code,
            read_json(&case),
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 30, "{} conformance cases", out.len());
    out
}

/// Why the runtime refuses a conformance case's inputs (exit 4).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Refusal {
    /// The inputs' shape: the schema must refuse them too.
    Shape,
    /// Something only the pack knows (its context fields, buckets, intents) or that
    /// spans documents (ids unique across evidence and memory): the schema accepts.
    BeyondTheSchema,
}

const REFUSED: &[(&str, Refusal)] = &[
    ("unknown_safety_mode_rejected", Refusal::Shape),
    ("raw_memory_rejected", Refusal::Shape),
    ("empty_message_rejected", Refusal::Shape),
    ("empty_history_turn_rejected", Refusal::Shape),
    // `request.context.user.age` is a field of the pack's own context schema.
    ("missing_required_field", Refusal::BeyondTheSchema),
    ("invalid_context_type_rejected", Refusal::BeyondTheSchema),
    ("enum_value_not_declared", Refusal::BeyondTheSchema),
    ("unknown_context_key_rejected", Refusal::BeyondTheSchema),
    ("no_fallback_unknown_intent", Refusal::BeyondTheSchema),
    ("bucket_tokens_over_available", Refusal::BeyondTheSchema),
    ("duplicate_evidence_ids_rejected", Refusal::BeyondTheSchema),
    ("session_state_malformed_rejected", Refusal::Shape),
    // Whether a pack takes a session state is the pack's own declaration.
    (
        "session_state_refused_without_directives",
        Refusal::BeyondTheSchema,
    ),
];

fn case_inputs(case: &Value) -> Vec<(&'static str, &Value)> {
    INPUTS
        .into_iter()
        .filter_map(|kind| case.get(kind).map(|v| (kind, v)))
        .collect()
}

#[test]
fn conformance_inputs_the_runtime_accepts_validate() {
    let v = Validators::new();
    let mut checked = 0;
    for (name, code, case) in conformance_cases() {
        // Exit 5 is the pack refusing well-formed inputs (budget, policy, overflow).
        if code == 4 {
            continue;
        }
        for (kind, input) in case_inputs(&case) {
            v.assert_valid(kind, input, &format!("conformance case `{name}`"));
            checked += 1;
        }
    }
    assert!(checked >= 60, "{checked} inputs checked");
}

#[test]
fn conformance_inputs_refused_for_their_shape_fail_the_schema() {
    let v = Validators::new();
    let table: BTreeMap<&str, Refusal> = REFUSED.iter().copied().collect();
    let mut shape = 0;
    for (name, code, case) in conformance_cases() {
        if code != 4 {
            continue;
        }
        let refusal = *table.get(name.as_str()).unwrap_or_else(|| {
            panic!("conformance case `{name}` exits 4: classify it in REFUSED (shape or beyond the schema)")
        });
        let failing: Vec<&str> = case_inputs(&case)
            .into_iter()
            .filter(|(kind, input)| v.check(kind, input).is_err())
            .map(|(kind, _)| kind)
            .collect();
        match refusal {
            Refusal::Shape => {
                shape += 1;
                assert!(
                    !failing.is_empty(),
                    "`{name}` is refused for its shape, but every input validates"
                );
            }
            Refusal::BeyondTheSchema => assert!(
                failing.is_empty(),
                "`{name}` is refused by the pack's rules, not its shape, yet {failing:?} fail the schema"
            ),
        }
    }
    assert_eq!(
        shape,
        REFUSED.iter().filter(|(_, r)| *r == Refusal::Shape).count(),
        "a shape case in REFUSED is not among the conformance cases"
    );
}

/// The bundled packs' test files, and the input files they and the packs' READMEs use.
#[test]
fn bundled_test_files_and_inputs_validate() {
    let v = Validators::new();
    let mut tests = Vec::new();
    files_ending(&root().join("packs"), ".tests.yaml", &mut tests);
    assert!(tests.len() >= 3, "{tests:?}");
    let mut lists = 0;
    for file in &tests {
        let doc = read_yaml(file);
        v.assert_valid("tests", &doc, &file.display().to_string());
        // Evidence and memory given as paths are input files of their own.
        let dir = file.parent().unwrap();
        let mut named = Vec::new();
        for holder in std::iter::once(&doc["defaults"]).chain(doc["cases"].as_array().unwrap()) {
            for kind in ["evidence", "memory"] {
                if let Some(rel) = holder.get(kind).and_then(Value::as_str) {
                    named.push((kind, dir.join(rel)));
                }
            }
        }
        for (kind, path) in named {
            v.assert_valid(kind, &read_json(&path), &path.display().to_string());
            lists += 1;
        }
    }
    assert!(lists >= 3, "{lists} evidence or memory files");
    let inputs = root().join("packs/support/inputs");
    for kind in ["run", "request", "evidence"] {
        let path = inputs.join(format!("{kind}.json"));
        v.assert_valid(kind, &read_json(&path), &path.display().to_string());
    }
}

#[test]
fn what_init_writes_validates() {
    let v = Validators::new();
    let files = ctxpack::commands::init::starter("acme/helpdesk");
    let mut seen = Vec::new();
    for f in &files {
        let path = f.path.to_string_lossy().replace('\\', "/");
        if let Some(kind) = path
            .strip_prefix("examples/")
            .and_then(|p| p.strip_suffix(".json"))
        {
            let value: Value = serde_json::from_str(&f.text).unwrap();
            v.assert_valid(kind, &value, &path);
            seen.push(kind.to_owned());
        } else if path.ends_with(".tests.yaml") {
            let first = f.text.lines().next().unwrap_or_default();
            assert_eq!(
                first,
                format!("# yaml-language-server: $schema={}", id("tests"))
            );
            let value: Value = serde_norway::from_str(&f.text).unwrap();
            v.assert_valid("tests", &value, &path);
            seen.push("tests".to_owned());
        }
    }
    seen.sort();
    assert_eq!(seen, ["evidence", "memory", "request", "run", "tests"]);
}

fn run() -> Value {
    json!({"run_id": "r", "safety_mode": "supervised"})
}

fn request() -> Value {
    json!({"request_id": "q", "message": "hi", "channel": "web", "locale": "en"})
}

/// Inputs the runtime accepts: minimal ones, nulls for absent optional members, and the
/// edges of its rules.
fn accepted_inputs() -> Vec<(&'static str, Value)> {
    vec![
        ("run", run()),
        (
            "run",
            json!({"run_id": "r", "safety_mode": "reviewed", "tenant": null, "permissions": null,
                   "prohibitions": ["x"], "user": {"id": null, "roles": null},
                   "budget": {"total_tokens": 100, "tokenizer": "approx", "bucket_tokens": {"evidence": 10}}}),
        ),
        (
            "run",
            json!({"run_id": "", "safety_mode": "autonomous",
                   "budget": {"total_tokens": null, "tokenizer": null, "bucket_tokens": null}}),
        ),
        (
            "run",
            json!({"run_id": "r", "safety_mode": "autonomous", "user": null, "budget": null}),
        ),
        ("request", request()),
        (
            "request",
            json!({"request_id": "q", "message": "  hi ", "channel": "web", "locale": "en",
                   "intent": null, "context": null, "history": null}),
        ),
        (
            "request",
            json!({"request_id": "q", "message": "hi", "channel": "", "locale": "en",
                   "intent": "not declared: the fallback serves it",
                   "context": {"anything": {"the": "pack decides"}},
                   "history": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}),
        ),
        // U+FEFF is not whitespace to Rust's `trim`, so the runtime accepts it.
        (
            "request",
            json!({"request_id": "q", "message": "\u{feff}", "channel": "web", "locale": "en"}),
        ),
        ("evidence", json!([])),
        ("evidence", Value::Null),
        (
            "evidence",
            json!([{"id": "a", "source": "s", "content": "", "score": null, "hops": null},
                   {"id": "b", "source": "", "content": "x", "score": -1.5, "hops": 3}]),
        ),
        (
            "memory",
            json!([{"id": "m", "content": "x", "promoted": true, "score": null}]),
        ),
        ("memory", json!([])),
        ("memory", Value::Null),
    ]
}

/// Inputs the runtime refuses for their shape, each with what is wrong.
fn refused_inputs() -> Vec<(&'static str, &'static str, Value)> {
    let with = |mut base: Value, key: &str, value: Value| {
        base[key] = value;
        base
    };
    let without = |mut base: Value, key: &str| {
        base.as_object_mut().unwrap().remove(key);
        base
    };
    vec![
        (
            "run without safety_mode",
            "run",
            without(run(), "safety_mode"),
        ),
        ("run without run_id", "run", without(run(), "run_id")),
        ("null run_id", "run", with(run(), "run_id", Value::Null)),
        (
            "unknown safety mode",
            "run",
            with(run(), "safety_mode", json!("yolo")),
        ),
        (
            "unknown run member",
            "run",
            with(run(), "safty_mode", json!("reviewed")),
        ),
        (
            "unknown user member",
            "run",
            with(run(), "user", json!({"name": "x"})),
        ),
        (
            "unknown tokenizer",
            "run",
            with(run(), "budget", json!({"tokenizer": "gpt2"})),
        ),
        (
            "negative total",
            "run",
            with(run(), "budget", json!({"total_tokens": -1})),
        ),
        (
            "fractional total",
            "run",
            with(run(), "budget", json!({"total_tokens": 1.5})),
        ),
        (
            "null pin",
            "run",
            with(
                run(),
                "budget",
                json!({"bucket_tokens": {"evidence": null}}),
            ),
        ),
        (
            "null permission",
            "run",
            with(run(), "permissions", json!([null])),
        ),
        (
            "request without channel",
            "request",
            without(request(), "channel"),
        ),
        (
            "request without message",
            "request",
            without(request(), "message"),
        ),
        (
            "empty message",
            "request",
            with(request(), "message", json!("")),
        ),
        (
            "blank message",
            "request",
            with(request(), "message", json!(" \t\n\u{85}\u{3000}")),
        ),
        (
            "list context",
            "request",
            with(request(), "context", json!([])),
        ),
        (
            "system turn",
            "request",
            with(
                request(),
                "history",
                json!([{"role": "system", "content": "x"}]),
            ),
        ),
        (
            "blank turn",
            "request",
            with(
                request(),
                "history",
                json!([{"role": "user", "content": "  "}]),
            ),
        ),
        (
            "null turn",
            "request",
            with(request(), "history", json!([null])),
        ),
        (
            "evidence object",
            "evidence",
            json!({"id": "a", "source": "s", "content": "x"}),
        ),
        (
            "evidence without content",
            "evidence",
            json!([{"id": "a", "source": "s"}]),
        ),
        (
            "empty evidence id",
            "evidence",
            json!([{"id": "", "source": "s", "content": "x"}]),
        ),
        (
            "fractional hops",
            "evidence",
            json!([{"id": "a", "source": "s", "content": "x", "hops": 1.5}]),
        ),
        (
            "misspelled score",
            "evidence",
            json!([{"id": "a", "source": "s", "content": "x", "scroe": 1}]),
        ),
        (
            "raw memory",
            "memory",
            json!([{"id": "m", "content": "x", "promoted": false}]),
        ),
        (
            "memory without promoted",
            "memory",
            json!([{"id": "m", "content": "x"}]),
        ),
        (
            "memory with null promoted",
            "memory",
            json!([{"id": "m", "content": "x", "promoted": null}]),
        ),
        (
            "empty memory id",
            "memory",
            json!([{"id": "", "content": "x", "promoted": true}]),
        ),
    ]
}

#[test]
fn input_schemas_follow_the_runtime_rules() {
    let v = Validators::new();
    for (i, (kind, value)) in accepted_inputs().iter().enumerate() {
        v.assert_valid(kind, value, &format!("accepted input {i}"));
    }
    for (what, kind, value) in &refused_inputs() {
        v.assert_invalid(kind, value, what);
    }
}

/// The examples above say what the runtime does: each is compiled, in place of the
/// minimal run or request (or as the evidence or memory), against a pack whose
/// context, buckets and fallback they fit.
#[test]
fn the_runtime_agrees_with_the_examples() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("free.ctxpack");
    std::fs::write(
        &source,
        r#"pack "test/free" version "1.0.0"
context {
  anything.the: string?
}
prompt system "You answer."
budget {
  total 1_000
  tokenizer approx
  bucket policy   { share 20% }
  bucket tools    { share 20% }
  bucket evidence { share 20% }
  bucket memory   { share 20% }
  bucket session  { share 20% }
}
intent general fallback {
  task "Answer."
}
"#,
    )
    .unwrap();
    let built = ctxpack::build::build_file(&source, &ctxpack::build::BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.summary()));
    let pack = ctxpack::runtime::PreparedPack::new(built.artifact).unwrap();
    let compile = |kind: &str, value: &Value| {
        let (mut run, mut request, mut evidence, mut memory) = (run(), request(), None, None);
        match kind {
            "run" => run = value.clone(),
            "request" => request = value.clone(),
            "evidence" => evidence = Some(value.clone()),
            _ => memory = Some(value.clone()),
        }
        ctxpack::runtime::decode_inputs(run, request, evidence, memory)
            .and_then(|inputs| pack.compile(&inputs))
    };
    for (i, (kind, value)) in accepted_inputs().iter().enumerate() {
        if let Err(e) = compile(kind, value) {
            panic!("accepted input {i} ({kind}) is refused by the runtime: {e}\n{value:#}");
        }
    }
    for (what, kind, value) in &refused_inputs() {
        match compile(kind, value) {
            Ok(_) => panic!("{what} ({kind}) is accepted by the runtime"),
            Err(e) => assert_eq!(e.kind(), "invalid_input", "{what}: {e}"),
        }
    }
}

/// `*.tests.yaml`: the runner's keys, partial inputs over defaults, and inputs left
/// free only where a case expects them to be refused.
#[test]
fn tests_schema_follows_the_runner() {
    let v = Validators::new();
    let file = |cases: Value| json!({"pack": "p.ctxpack", "cases": cases});
    let ok = [
        json!({"pack": "p.json", "cases": []}),
        json!({"pack": "p.ctxpack", "defaults": null, "cases": [{"name": "a"}]}),
        json!({"pack": "p.ctxpack",
               "defaults": {"run": run(), "request": request(), "evidence": "e.json", "memory": null},
               "cases": [{"name": "a", "run": {"safety_mode": "autonomous"},
                          "request": {"intent": null, "context": {"user": {"age": 16}}},
                          "evidence": [{"id": "a", "source": "s", "content": "x"}],
                          "memory": "m.yaml",
                          "expect": {"must_refuse": true, "must_escalate": null, "fallback_used": false,
                                     "tools": ["a"], "approval_gates": [], "redactions": ["email"],
                                     "dropped": {"evidence": ["a"]}, "contains": ["x"]}}]}),
        // A case that expects its inputs to be refused may give any inputs.
        file(
            json!([{"name": "raw memory", "memory": [{"id": "m", "content": "x", "promoted": false}],
                     "run": {"safety_mode": "yolo"}, "expect": {"error": "invalid_input"}}]),
        ),
        file(json!([{"name": "e", "expect": {"error": "unknown_intent"}}])),
    ];
    for (i, doc) in ok.iter().enumerate() {
        v.assert_valid("tests", doc, &format!("test file {i}"));
    }
    let bad = [
        ("no pack", json!({"cases": []})),
        ("no cases", json!({"pack": "p.ctxpack"})),
        ("null cases", json!({"pack": "p.ctxpack", "cases": null})),
        (
            "unknown top-level key",
            json!({"pack": "p.ctxpack", "cases": [], "case": []}),
        ),
        (
            "unknown defaults key",
            json!({"pack": "p.ctxpack", "defaults": {"reqeust": {}}, "cases": []}),
        ),
        ("unnamed case", file(json!([{"expect": {}}]))),
        (
            "an error with other expectations",
            file(json!([{"name": "e", "expect": {"error": "invalid_input", "tools": []}}])),
        ),
        ("numeric name", file(json!([{"name": 1}]))),
        (
            "unknown case key",
            file(json!([{"name": "a", "expected": {}}])),
        ),
        ("null expect", file(json!([{"name": "a", "expect": null}]))),
        (
            "misspelled expectation",
            file(json!([{"name": "a", "expect": {"must_refuse_": true}}])),
        ),
        (
            "tools as a string",
            file(json!([{"name": "a", "expect": {"tools": "lookup"}}])),
        ),
        (
            "null dropped list",
            file(json!([{"name": "a", "expect": {"dropped": {"evidence": null}}}])),
        ),
        (
            "unknown error kind",
            file(json!([{"name": "a", "expect": {"error": "refused"}}])),
        ),
        (
            "misspelled run member",
            file(json!([{"name": "a", "run": {"safety_mod": "reviewed"}}])),
        ),
        (
            "unknown safety mode",
            file(json!([{"name": "a", "run": {"safety_mode": "yolo"}}])),
        ),
        (
            "raw memory without error",
            file(
                json!([{"name": "a", "memory": [{"id": "m", "content": "x", "promoted": false}]}]),
            ),
        ),
        (
            "evidence object",
            file(json!([{"name": "a", "evidence": {"id": "a"}}])),
        ),
        (
            "bad default request",
            json!({"pack": "p.ctxpack", "defaults": {"request": {"history": [{"role": "system", "content": "x"}]}}, "cases": []}),
        ),
        (
            "other error keeps shapes",
            file(
                json!([{"name": "a", "run": {"safety_mode": "yolo"}, "expect": {"error": "budget_exhausted"}}]),
            ),
        ),
    ];
    for (what, doc) in &bad {
        v.assert_invalid("tests", doc, what);
    }
}
