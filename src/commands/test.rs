//! `ctxpack test`: runs the `*.tests.yaml` files beside packs.
//!
//! A test file names its `pack` (relative to the file: a `.json` artifact, or a
//! `.ctxpack` source built by the loader the caller supplies), optional `defaults`, and
//! `cases`. Each case's `run`, `request`, `evidence` and `memory` are deep-merged over
//! the defaults (objects merge, lists and scalars replace, and a nested `null` unsets a
//! default, e.g. `request: { intent: null }`); `evidence` and `memory` may be inline
//! lists or paths relative to the test file. A case whose evidence or memory file
//! cannot be read fails, with the reason; the other cases still run.
//!
//! Expectations (all optional; unknown ones are an error so that a typo cannot pass):
//!
//! | key | checks |
//! | --- | --- |
//! | `must_refuse`, `must_escalate`, `fallback_used` | the envelope's flag |
//! | `tools` | the exact set of surfaced tools (order-insensitive) |
//! | `approval_gates` | the exact set of `approval_gates_active` |
//! | `redactions` | the exact set of active redactor names |
//! | `dropped` | per named bucket, the exact set of dropped ids |
//! | `contains` | substrings of the prompt (system, developer, task, block texts, the redacted message) |
//! | `error` | the compile fails with this kind (`invalid_input`, `unknown_intent`, `policy_eval_error`, `budget_exhausted`, `overflow_error`, ...) |
//!
//! A case whose compile fails when no `error` is expected fails, and vice versa.
//! Output: `ok  FILE :: CASE` or `FAIL FILE :: CASE` with one indented line per failed
//! expectation, then `N passed, N failed`. Exit 1 if any case failed; 3 or 4 if a test
//! file (or its pack) was unreadable or invalid, after running the other files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::artifact::{verify_bytes, Artifact};
use crate::runtime::{decode_inputs, CompileError, CompiledContext, PreparedPack};

use super::compile::{parse_document, read_document, CliError};

/// Arguments of `ctxpack test`.
#[derive(Debug, Clone, clap::Args)]
pub struct TestArgs {
    /// Test files or directories to search for `*.tests.yaml` (default: `.`).
    pub paths: Vec<PathBuf>,
    /// Print failures as one JSON object on stderr: unreadable or invalid test files,
    /// or `tests_failed` with every failing case and its failed expectations.
    #[arg(long)]
    pub json_errors: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFile {
    pack: String,
    #[serde(default)]
    defaults: Value,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(default)]
    run: Value,
    #[serde(default)]
    request: Value,
    #[serde(default)]
    evidence: Value,
    #[serde(default)]
    memory: Value,
    #[serde(default)]
    expect: Expect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    must_refuse: Option<bool>,
    must_escalate: Option<bool>,
    fallback_used: Option<bool>,
    tools: Option<Vec<String>>,
    approval_gates: Option<Vec<String>>,
    redactions: Option<Vec<String>>,
    dropped: Option<BTreeMap<String, Vec<String>>>,
    contains: Option<Vec<String>>,
    error: Option<String>,
}

/// Runs the tests, building `.ctxpack` sources on the fly (imports resolve from
/// `$CTXPACK_REGISTRY` or `.ctxpack/registry`, checked against `ctxpack.lock`).
pub fn run(args: &TestArgs) -> i32 {
    run_with_loader(args, &|path| {
        crate::build::build_file(path, &crate::build::BuildOptions::default())
            .map(|built| built.artifact)
            .map_err(|e| e.summary())
    })
}

/// Runs the tests; `load_source` builds a `.ctxpack` source into an artifact.
pub fn run_with_loader(
    args: &TestArgs,
    load_source: &dyn Fn(&Path) -> Result<Artifact, String>,
) -> i32 {
    let report = execute(args, load_source);
    anstream::print!("{}", report.stdout);
    anstream::eprint!("{}", report.stderr);
    report.exit_code
}

/// What a test run printed and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// Runs the tests and returns the report instead of printing it.
pub fn execute(
    args: &TestArgs,
    load_source: &dyn Fn(&Path) -> Result<Artifact, String>,
) -> TestReport {
    use std::fmt::Write as _;
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let roots = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut files = Vec::new();
    let mut errors: Vec<CliError> = Vec::new();
    let mut failing = Vec::new();
    for root in &roots {
        if root.is_dir() {
            collect(root, &mut files);
        } else if root.is_file() {
            files.push(root.clone());
        } else {
            errors.push(CliError::new(
                "unreadable_input",
                3,
                format!("`{}`: no such file or directory", root.display()),
            ));
        }
    }
    files.sort();
    let (mut passed, mut failed) = (0usize, 0usize);
    for file in &files {
        match run_file(file, load_source) {
            Ok(results) => {
                for (name, failures) in results {
                    if failures.is_empty() {
                        passed += 1;
                        let _ = writeln!(stdout, "ok  {} :: {name}", file.display());
                    } else {
                        failed += 1;
                        let _ = writeln!(stdout, "FAIL {} :: {name}", file.display());
                        for f in &failures {
                            let _ = writeln!(stdout, "    {f}");
                        }
                        failing.push(serde_json::json!({
                            "file": file.display().to_string(), "case": name, "failures": failures,
                        }));
                    }
                }
            }
            Err(mut e) => {
                e.message = format!("{}: {}", file.display(), e.message);
                errors.push(e);
            }
        }
    }
    let _ = writeln!(stdout, "{passed} passed, {failed} failed");
    let worst_file_error = errors.iter().map(|e| e.exit_code).max().unwrap_or(0);
    let exit_code = if worst_file_error != 0 {
        worst_file_error
    } else if failed > 0 {
        1
    } else {
        0
    };
    if args.json_errors {
        if failed > 0 {
            let message = format!("{failed} of {} cases failed", passed + failed);
            errors.push(
                CliError::new("tests_failed", 1, message).with("failures", Value::Array(failing)),
            );
        }
        if let Some(error) = super::error::combine(errors) {
            let _ = writeln!(stderr, "{}", error.to_json());
        }
    } else {
        for e in &errors {
            let _ = writeln!(stderr, "error: {}", e.message);
        }
    }
    TestReport {
        stdout,
        stderr,
        exit_code,
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Hidden directories and build output are never test roots.
        if path.is_dir() && !name.starts_with('.') && name != "target" && name != "node_modules" {
            collect(&path, out);
        } else if name.ends_with(".tests.yaml") {
            out.push(path);
        }
    }
}

/// A case's value over the defaults: absent (`null` at the top) keeps the default.
fn over_default(base: &Value, over: &Value) -> Value {
    match over {
        Value::Null => base.clone(),
        over => merge(base, over),
    }
}

/// Deep merge: objects merge key by key; anything else in `over` replaces `base`,
/// `null` included (so a case can unset a default, e.g. `request: { intent: null }`).
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            let mut out = b.clone();
            for (k, v) in o {
                let merged = match b.get(k) {
                    Some(bv) => merge(bv, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => over.clone(),
    }
}

fn load_artifact(
    path: &Path,
    load_source: &dyn Fn(&Path) -> Result<Artifact, String>,
) -> Result<Artifact, CliError> {
    if path.extension().and_then(|e| e.to_str()) == Some("ctxpack") {
        if !path.is_file() {
            return Err(CliError::new(
                "unreadable_input",
                3,
                format!("pack `{}` not found", path.display()),
            ));
        }
        return load_source(path).map_err(|m| CliError::new("invalid_pack", 4, m));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        CliError::new(
            "unreadable_input",
            3,
            format!("cannot read pack `{}`: {e}", path.display()),
        )
    })?;
    verify_bytes(&bytes).map_err(|e| {
        CliError::new(
            "invalid_artifact",
            e.exit_code(),
            format!("pack `{}`: {e}", path.display()),
        )
    })
}

/// A list given inline or as a path relative to the test file.
fn list_input(value: Value, dir: &Path) -> Result<Option<Value>, CliError> {
    match value {
        Value::Null => Ok(None),
        Value::String(rel) => read_document(&dir.join(rel)).map(Some),
        other => Ok(Some(other)),
    }
}

/// Runs one file: each case's name and its failed expectations.
fn run_file(
    file: &Path,
    load_source: &dyn Fn(&Path) -> Result<Artifact, String>,
) -> Result<Vec<(String, Vec<String>)>, CliError> {
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::new("unreadable_input", 3, format!("cannot read: {e}")))?;
    let doc = parse_document(Path::new("tests.yaml"), &bytes).map_err(|e| {
        CliError::new(
            e.kind,
            e.exit_code,
            e.message.replace("`tests.yaml`", "file"),
        )
    })?;
    let spec: TestFile = serde_json::from_value(doc)
        .map_err(|e| CliError::new("invalid_test_file", 4, format!("invalid test file: {e}")))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let artifact = load_artifact(&dir.join(&spec.pack), load_source)?;
    // A pack that cannot be prepared fails every case, unless a case expects that error.
    let prepared = PreparedPack::new(artifact);
    let mut results = Vec::new();
    for case in spec.cases {
        let get = |key: &str| spec.defaults.get(key).cloned().unwrap_or(Value::Null);
        let run = over_default(&get("run"), &case.run);
        let request = over_default(&get("request"), &case.request);
        // An evidence or memory file that cannot be read fails its case, not the file.
        let lists =
            list_input(over_default(&get("evidence"), &case.evidence), dir).and_then(|evidence| {
                let memory = list_input(over_default(&get("memory"), &case.memory), dir)?;
                Ok((evidence, memory))
            });
        let (evidence, memory) = match lists {
            Ok(lists) => lists,
            Err(e) => {
                results.push((case.name, vec![format!("inputs: {}", e.message)]));
                continue;
            }
        };
        let outcome = match &prepared {
            Err(e) => Err(e.clone()),
            Ok(pack) => {
                decode_inputs(run, request, evidence, memory).and_then(|i| pack.compile(&i))
            }
        };
        results.push((case.name, check(&case.expect, &outcome)));
    }
    Ok(results)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

fn check(expect: &Expect, outcome: &Result<CompiledContext, CompileError>) -> Vec<String> {
    let cc = match (outcome, &expect.error) {
        (Err(e), Some(kind)) if e.kind() == kind => return Vec::new(),
        (Err(e), Some(kind)) => {
            return vec![format!(
                "error: expected `{kind}`, actual `{}` ({e})",
                e.kind()
            )]
        }
        (Err(e), None) => return vec![format!("compile failed: {} ({})", e, e.kind())],
        (Ok(_), Some(kind)) => {
            return vec![format!(
                "error: expected `{kind}`, actual: the compile succeeded"
            )]
        }
        (Ok(cc), None) => cc,
    };
    let mut failures = Vec::new();
    let mut flag = |name: &str, expected: Option<bool>, actual: bool| {
        if let Some(e) = expected {
            if e != actual {
                failures.push(format!("{name}: expected {e}, actual {actual}"));
            }
        }
    };
    let rc = &cc.runtime_controls;
    flag("must_refuse", expect.must_refuse, rc.must_refuse);
    flag("must_escalate", expect.must_escalate, rc.must_escalate);
    flag(
        "fallback_used",
        expect.fallback_used,
        cc.intent.fallback_used,
    );
    let mut set = |name: &str, expected: &Option<Vec<String>>, actual: Vec<String>| {
        if let Some(e) = expected {
            let (e, a) = (sorted(e.clone()), sorted(actual));
            if e != a {
                failures.push(format!("{name}: expected {e:?}, actual {a:?}"));
            }
        }
    };
    let surfaced = cc
        .manifests
        .tool_manifest
        .iter()
        .filter(|t| t.surfaced)
        .map(|t| t.name.to_string())
        .collect();
    set("tools", &expect.tools, surfaced);
    set(
        "approval_gates",
        &expect.approval_gates,
        rc.approval_gates_active.clone(),
    );
    set(
        "redactions",
        &expect.redactions,
        rc.redaction_rules_active
            .iter()
            .map(|r| r.name.clone())
            .collect(),
    );
    if let Some(dropped) = &expect.dropped {
        for (bucket, ids) in dropped {
            let actual = cc
                .budget_report
                .dropped_block_ids
                .get(bucket)
                .map(|ids| ids.iter().map(|id| id.to_string()).collect())
                .unwrap_or_default();
            set(&format!("dropped.{bucket}"), &Some(ids.clone()), actual);
        }
    }
    if let Some(needles) = &expect.contains {
        let prompt = cc.prompt_text();
        for n in needles {
            if !prompt.contains(n.as_str()) {
                failures.push(format!(
                    "contains: expected the prompt to contain {n:?}, actual: not found"
                ));
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deep_merge_objects_replace_lists() {
        let base = json!({"a": {"x": 1, "y": [1, 2]}, "b": 1});
        let over = json!({"a": {"y": [3]}, "c": 2});
        assert_eq!(
            merge(&base, &over),
            json!({"a": {"x": 1, "y": [3]}, "b": 1, "c": 2})
        );
    }

    #[test]
    fn null_unsets_a_default_but_an_absent_case_value_keeps_it() {
        let base = json!({"intent": "refund", "message": "hi"});
        assert_eq!(
            over_default(&base, &json!({"intent": null})),
            json!({"intent": null, "message": "hi"})
        );
        assert_eq!(over_default(&base, &Value::Null), base);
    }
}
