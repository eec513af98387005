//! `schemas/ctxpack.pack.v1.json` describes every artifact the toolchain writes: the
//! artifacts of every bundled pack, fixture and conformance pack validate against it,
//! and hand-broken artifacts do not (so the test cannot pass vacuously).

use std::path::{Path, PathBuf};

use ctxpack::build::{build_file, BuildOptions};
use serde_json::{json, Value};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

struct Validator {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Validator {
    fn new() -> Self {
        let text = std::fs::read(root().join("schemas/ctxpack.pack.v1.json")).unwrap();
        let schema: Value = serde_json::from_slice(&text).unwrap();
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        let loc = "https://ctxpack.invalid/schemas/ctxpack.pack.v1.json";
        compiler.add_resource(loc, schema).unwrap();
        let index = compiler.compile(loc, &mut schemas).unwrap();
        Validator { schemas, index }
    }

    fn check(&self, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, self.index)
            .map_err(|e| format!("{e:#}"))
    }
}

fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [
        "packs",
        "tests/data",
        "tests/fixtures/ok",
        "tests/conformance/packs",
    ] {
        collect(&root().join(dir), &mut out);
    }
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "ctxpack") {
            out.push(p);
        }
    }
}

/// A source with `import` lines needs a registry to build; those are left to the tests
/// that set one up.
fn has_imports(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .any(|l| l.trim_start().starts_with("import "))
}

fn artifact_of(path: &Path) -> Value {
    let built = build_file(path, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.summary()));
    built.artifact.seal().0
}

#[test]
fn every_built_artifact_validates() {
    let v = Validator::new();
    let files: Vec<PathBuf> = sources().into_iter().filter(|p| !has_imports(p)).collect();
    assert!(
        files.len() >= 10,
        "expected packs and fixtures, found {}",
        files.len()
    );
    let mut libraries = 0;
    for path in &files {
        let artifact = artifact_of(path);
        libraries += usize::from(artifact["library"] == json!(true));
        if let Err(e) = v.check(&artifact) {
            panic!("{} does not validate:\n{e}", path.display());
        }
    }
    // The nullable members (`prompts`, `budget`) are exercised by at least one library.
    assert!(
        libraries >= 1,
        "no library pack among {} sources",
        files.len()
    );
}

type Mutation = Box<dyn Fn(&mut Value)>;

#[test]
fn broken_artifacts_do_not_validate() {
    let v = Validator::new();
    let good = artifact_of(&root().join("packs/support/support.ctxpack"));
    v.check(&good).unwrap();
    let mutations: Vec<(&str, Mutation)> = vec![
        ("unknown member", Box::new(|a| a["surprise"] = json!(1))),
        (
            "foreign format",
            Box::new(|a| a["format"] = json!("ctxpack.pack/v2")),
        ),
        ("bad hash", Box::new(|a| a["hash"] = json!("sha256:00"))),
        (
            "missing hash",
            Box::new(|a| _ = a.as_object_mut().unwrap().remove("hash")),
        ),
        (
            "share over 100%",
            Box::new(|a| a["budget"]["buckets"][0]["share_ppm"] = json!(1_000_001)),
        ),
        (
            "effect shape",
            Box::new(|a| a["policies"][0]["effects"][0] = json!({ "refuse": 1, "deny": [] })),
        ),
        (
            "unknown effect",
            Box::new(|a| a["policies"][0]["effects"][0] = json!({ "explode": "now" })),
        ),
        (
            "approval mode",
            Box::new(|a| a["tools"][0]["approval"] = json!("maybe")),
        ),
        (
            "type tag",
            Box::new(|a| a["context"][0]["type"] = json!({ "type": "map" })),
        ),
        (
            "template part",
            Box::new(|a| a["prompts"]["system"]["parts"] = json!([{ "html": "<b>" }])),
        ),
        ("pack name", Box::new(|a| a["name"] = json!("Acme/Support"))),
        (
            "tool input that is not an object schema",
            Box::new(|a| a["tools"][0]["input"] = json!({ "type": "array" })),
        ),
        (
            "null library flag",
            Box::new(|a| a["library"] = Value::Null),
        ),
        (
            "intent share over 100%",
            Box::new(|a| a["intents"][0]["budget"] = json!({ "evidence": 1_000_001 })),
        ),
        (
            "negative bucket minimum",
            Box::new(|a| a["budget"]["buckets"][0]["min"] = json!(-1)),
        ),
    ];
    for (what, mutate) in mutations {
        let mut bad = good.clone();
        mutate(&mut bad);
        assert!(v.check(&bad).is_err(), "a {what} must not validate");
    }
}
