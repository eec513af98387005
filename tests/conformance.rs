//! The runtime conformance suite: each `tests/conformance/<case>/case.json` names a
//! pack source and gives the run, request, evidence, memory and render target;
//! `expected.json` holds the exact exit code and output of `ctxpack compile` (the
//! envelope, the provider body, or the `--json-errors` object). The suite drives the
//! real binary, so it pins the command-line contract as well as the compiler.
//!
//! `CTXPACK_BLESS=1 cargo test --test conformance` rewrites the expectations; review
//! the diff like code.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ctxpack"))
}

fn run_case(dir: &Path, scratch: &Path) -> Value {
    let case: Value =
        serde_json::from_slice(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let pack = dir.join(case["pack"].as_str().unwrap());
    let artifact = scratch.join("pack.json");
    let built = std::process::Command::new(bin())
        .arg("build")
        .arg(&pack)
        .arg("-o")
        .arg(&artifact)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let mut cmd = std::process::Command::new(bin());
    cmd.env_remove("CTXPACK_REGISTRY")
        .arg("compile")
        .arg("--json-errors")
        .arg("--pack")
        .arg(&artifact);
    for (key, flag) in [
        ("run", "--run"),
        ("request", "--request"),
        ("evidence", "--evidence"),
        ("memory", "--memory"),
    ] {
        if let Some(v) = case.get(key) {
            let p = scratch.join(format!("{key}.json"));
            std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
            cmd.arg(flag).arg(p);
        }
    }
    if let Some(t) = case.get("target").and_then(Value::as_str) {
        cmd.arg("--target").arg(t);
    }
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if code == 0 {
        let body: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{}: {e}\n{stdout}", dir.display()));
        json!({ "exit_code": 0, "output": body })
    } else {
        let error: Value = serde_json::from_str(&stderr)
            .unwrap_or_else(|e| panic!("{}: {e}\n{stderr}", dir.display()));
        json!({ "exit_code": code, "error": error })
    }
}

#[test]
fn conformance_cases_match_their_expectations() {
    let bless = std::env::var_os("CTXPACK_BLESS").is_some();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 25, "the suite shrank: {} cases", dirs.len());
    let mut failures = Vec::new();
    for dir in &dirs {
        let scratch = tempfile::tempdir().unwrap();
        let actual = run_case(dir, scratch.path());
        // Twice, to pin determinism end to end.
        assert_eq!(
            actual,
            run_case(dir, scratch.path()),
            "{} is not deterministic",
            dir.display()
        );
        let expected_path = dir.join("expected.json");
        if bless {
            let mut text = serde_json::to_string_pretty(&actual).unwrap();
            text.push('\n');
            std::fs::write(&expected_path, text).unwrap();
            continue;
        }
        let expected: Value = match std::fs::read(&expected_path) {
            Ok(b) => serde_json::from_slice(&b).unwrap(),
            Err(_) => {
                failures.push(format!(
                    "{}: no expected.json (run with CTXPACK_BLESS=1)",
                    dir.display()
                ));
                continue;
            }
        };
        if expected != actual {
            failures.push(format!(
                "{}:\nexpected {}\nactual   {}",
                dir.display(),
                serde_json::to_string(&expected).unwrap(),
                serde_json::to_string(&actual).unwrap()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
