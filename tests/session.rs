//! Session directives: the conformance runner on our own fixtures (`tests/session/`,
//! in the context-compiler fixture format), through the library and through the
//! binary, and the exit codes and output of `ctxpack session`.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use ctxpack::commands::session::conformance;
use ctxpack::session::conformance::{run_fixture, Outcome};
use ctxpack::session::{classify, Classification, Decision, State};
use serde_json::{json, Value};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/session")
}

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env("NO_COLOR", "1");
    cmd
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

/// The one JSON object `--json-errors` prints on stderr.
fn json_err(o: &Output) -> Value {
    let text = stderr(o);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    serde_json::from_str(text.trim()).unwrap()
}

/// Fixture files, without the `expected/` halves of structured regressions.
fn fixture_count() -> usize {
    fn walk(dir: &Path, n: &mut usize) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("expected") {
                    walk(&path, n);
                }
            } else if path.extension().is_some_and(|e| e == "json") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(&fixtures(), &mut n);
    n
}

#[test]
fn our_fixtures_pass_through_the_library() {
    let report = conformance(&fixtures()).unwrap();
    let failures: Vec<_> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(report.passed(), fixture_count());
    assert_eq!(report.skipped(), 0);
    // Every kind the runner runs is covered, and structured regressions too.
    let kinds = report.by_kind();
    for kind in [
        "grammar",
        "step",
        "apply_directive",
        "state_json",
        "controller",
        "structured_regression",
    ] {
        assert!(
            kinds.get(kind).is_some_and(|(p, _)| *p >= 2),
            "{kind}: {kinds:?}"
        );
    }
}

#[test]
fn each_fixture_file_runs_on_its_own() {
    for dir in [
        "grammar",
        "step",
        "apply-directive",
        "state-json",
        "controller",
    ] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap().flatten() {
            let path = entry.path();
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let outcome = run_fixture(stem, &text);
            assert!(
                matches!(outcome, Outcome::Passed { .. }),
                "{}: {outcome:?}",
                path.display()
            );
            // Under another name, the id check fails it.
            assert!(matches!(
                run_fixture("renamed", &text),
                Outcome::Failed { .. }
            ));
        }
    }
}

#[test]
fn our_fixtures_pass_through_the_binary() {
    let out = ctxpack()
        .args(["session", "conformance"])
        .arg(fixtures())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some(format!("{} passed, 0 failed", fixture_count()).as_str())
    );
    assert_eq!(lines.len(), fixture_count() + 1);
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l.starts_with("ok   ")));
    assert!(text.contains("ok   grammar/grammar_replace_use_tab_delimiter.json\n"));
    assert!(text.contains("ok   regression/scenarios/package_manager_session.json\n"));
    assert!(!text.contains("regression/expected/"));
}

/// A directory with one passing, one failing and two skipped fixtures.
fn mixed_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let good = json!({
        "id": "good", "kind": "grammar",
        "action": {"fn": "decompose_directive", "text": "use pnpm"},
        "expected": {"directive": {"kind": "use_item", "text": "use pnpm", "operands": {"item": "pnpm"}}}
    });
    let bad = json!({
        "id": "bad", "kind": "step",
        "initial_state": {"premise": null, "policies": {}, "version": 2},
        "input": "use pnpm",
        "expected": {"decision": {"kind": "no_directive"}, "state": {"premise": null, "policies": {}, "version": 2}}
    });
    std::fs::write(dir.path().join("good.json"), good.to_string()).unwrap();
    std::fs::create_dir(dir.path().join("nested")).unwrap();
    std::fs::write(dir.path().join("nested/bad.json"), bad.to_string()).unwrap();
    std::fs::write(
        dir.path().join("m.json"),
        r#"{"id": "m", "kind": "mutation_isolation"}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("n.json"),
        r#"{"id": "n", "kind": "mutation_isolation"}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "not a fixture").unwrap();
    dir
}

#[test]
fn conformance_reports_failures_and_names_skipped_kinds() {
    let dir = mixed_dir();
    let out = ctxpack()
        .args(["session", "conformance"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("ok   good.json\n"), "{text}");
    assert!(text.contains("FAIL nested/bad.json\n"), "{text}");
    assert!(
        text.contains("decision: expected {\"kind\":\"no_directive\"}, got"),
        "{text}"
    );
    assert!(
        text.contains("skip m.json (kind `mutation_isolation` is not run)\n"),
        "{text}"
    );
    assert!(
        text.contains("skipped kinds: mutation_isolation (2)\n"),
        "{text}"
    );
    assert!(text.ends_with("1 passed, 1 failed, 2 skipped\n"), "{text}");

    let out = ctxpack()
        .args(["session", "conformance", "--json-errors"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = json_err(&out);
    assert_eq!(err["error"]["kind"], "conformance_failed");
    assert_eq!(err["error"]["exit_code"], 1);
    assert_eq!(err["error"]["failures"][0]["file"], "nested/bad.json");
    assert_eq!(err["error"]["failures"][0]["kind"], "step");
}

#[test]
fn conformance_of_nothing_or_of_a_missing_dir_fails() {
    let empty = tempfile::tempdir().unwrap();
    let out = ctxpack()
        .args(["session", "conformance"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "0 passed, 0 failed\n");
    assert!(stderr(&out).contains("no fixture to run"));

    let out = ctxpack()
        .args([
            "session",
            "conformance",
            "--json-errors",
            "/nonexistent/fixtures",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json_err(&out)["error"]["kind"], "unreadable_input");
}

#[test]
fn conformance_runs_a_single_file() {
    let path = fixtures().join("step/step_replace_use_moves_policy.json");
    let out = ctxpack()
        .args(["session", "conformance"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).ends_with("1 passed, 0 failed\n"));
}

#[test]
fn step_prints_the_decision_and_the_state() {
    let out = ctxpack()
        .args(["session", "step", "--input", "Use  PNPM"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "{\"decision\":{\"changed\":true,\"kind\":\"update\"},\"state\":{\"policies\":{\"pnpm\":\"use\"},\"premise\":null,\"version\":2}}\n"
    );

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    std::fs::write(
        &state,
        r#"{"premise": "monorepo", "policies": {"npm": "use"}, "version": 2}"#,
    )
    .unwrap();
    let out = ctxpack()
        .args([
            "session",
            "step",
            "--input",
            "use pnpm instead of npm",
            "--state",
        ])
        .arg(&state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        json_out(&out),
        json!({"decision": {"kind": "update", "changed": true},
               "state": {"premise": "monorepo", "policies": {"pnpm": "use"}, "version": 2}})
    );

    // Chat is no directive; the state comes back as it was.
    let out = ctxpack()
        .args([
            "session",
            "step",
            "--input",
            "-- please use pnpm",
            "--state",
        ])
        .arg(&state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_out(&out)["decision"], json!({"kind": "no_directive"}));
    assert_eq!(json_out(&out)["state"]["policies"], json!({"npm": "use"}));
}

#[test]
fn a_semantic_error_is_a_decision_not_a_failure() {
    let out = ctxpack()
        .args(["session", "step", "--state", "-", "--input", "use npm"])
        .write_stdin(r#"{"premise": null, "policies": {"npm": "prohibit"}, "version": 2}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let value = json_out(&out);
    assert_eq!(value["decision"]["kind"], "error");
    assert_eq!(value["decision"]["failure"], "item_prohibited");
    assert_eq!(value["decision"]["repairs"][0]["text"], "remove policy npm");
    assert_eq!(value["state"]["policies"], json!({"npm": "prohibit"}));
}

#[test]
fn apply_takes_a_repair() {
    let out = ctxpack()
        .args([
            "session",
            "apply",
            "--state",
            "-",
            "--directive",
            "remove policy npm",
        ])
        .write_stdin(r#"{"premise": null, "policies": {"npm": "prohibit"}, "version": 2}"#)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        json_out(&out),
        json!({"decision": {"kind": "update", "changed": true},
               "state": {"premise": null, "policies": {}, "version": 2}})
    );
    let out = ctxpack()
        .args(["session", "apply", "--directive", "change premise to terse"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json_out(&out)["decision"]["failure"], "premise_not_set");
}

#[test]
fn apply_refuses_what_is_not_one_canonical_directive() {
    for (text, syntax) in [
        (
            "use pnpm and prohibit npm",
            json!({"failure": "compound_directive", "directive_kind": null, "missing_operand": null}),
        ),
        (
            "use",
            json!({"failure": "missing_required_operand", "directive_kind": "use_item", "missing_operand": "item"}),
        ),
        ("hello", Value::Null),
    ] {
        let out = ctxpack()
            .args(["session", "apply", "--json-errors", "--directive", text])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(4), "{text}");
        assert!(out.stdout.is_empty());
        let err = json_err(&out);
        assert_eq!(err["error"]["kind"], "invalid_directive", "{text}");
        assert_eq!(err["error"]["syntax"], syntax, "{text}");
    }
    let out = ctxpack()
        .args(["session", "apply", "--directive", "use"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        stderr(&out),
        "error: `use` is not a canonical directive: `use_item` is missing its `item` operand\n"
    );
}

#[test]
fn state_files_unreadable_unparseable_or_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let cases: [(PathBuf, i32, &str, Option<&str>); 7] = [
        (dir.path().join("missing.json"), 3, "unreadable_input", None),
        (write("latin1.json", b"{\"premise\": \"caf\xe9\"}"), 3, "unparseable_input", None),
        (write("broken.json", b"{\"premise\": "), 3, "unparseable_input", None),
        (write("array.json", b"[]"), 4, "invalid_input", Some("$")),
        (
            write("policy.json", br#"{"premise": null, "policies": {"npm": "deny"}, "version": 2}"#),
            4,
            "invalid_input",
            Some("$.policies.npm"),
        ),
        (
            write("version.json", br#"{"premise": null, "policies": {}, "version": 1}"#),
            4,
            "invalid_input",
            Some("$.version"),
        ),
        (
            write("collision.json", br#"{"premise": null, "policies": {"Docker": "use", "docker": "use"}, "version": 2}"#),
            4,
            "invalid_input",
            Some("$.policies.docker"),
        ),
    ];
    for (path, code, kind, member) in cases {
        for sub in [["step", "--input"], ["apply", "--directive"]] {
            let out = ctxpack()
                .args([
                    "session",
                    sub[0],
                    sub[1],
                    "clear state",
                    "--json-errors",
                    "--state",
                ])
                .arg(&path)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(code),
                "{}: {}",
                path.display(),
                stderr(&out)
            );
            assert!(out.stdout.is_empty());
            let err = json_err(&out);
            assert_eq!(err["error"]["kind"], kind, "{}", path.display());
            assert_eq!(err["error"]["exit_code"], code);
            assert_eq!(err["error"]["path"].as_str(), member, "{}", path.display());
        }
    }
    // Without --json-errors: one line naming the file and the member.
    let out = ctxpack()
        .args(["session", "step", "--input", "x", "--state"])
        .arg(dir.path().join("policy.json"))
        .output()
        .unwrap();
    let text = stderr(&out);
    assert!(text.starts_with("error: `"), "{text}");
    assert!(
        text.contains("policy.json`: Invalid state payload at $.policies.npm: expected \"use\" or \"prohibit\", found \"deny\""),
        "{text}"
    );
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_state() {
    let out = ctxpack()
        .args([
            "session",
            "step",
            "--state",
            "-",
            "--input",
            "clear premise",
        ])
        .write_stdin("\u{feff}{\"premise\": \"p\", \"policies\": {}, \"version\": 2}")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(json_out(&out)["state"]["premise"], Value::Null);
}

#[test]
fn usage_errors_are_exit_2() {
    let out = ctxpack().args(["session", "step"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = ctxpack()
        .args(["session", "apply", "--json-errors"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(json_err(&out)["error"]["kind"], "usage");
}

#[test]
fn output_is_deterministic() {
    let run = || {
        ctxpack()
            .args(["session", "step", "--state", "-", "--input", "prohibit Zoë"])
            .write_stdin(
                r#"{"version": 2, "policies": {"b": "use", "a": "prohibit"}, "premise": "x"}"#,
            )
            .output()
            .unwrap()
            .stdout
    };
    let first = run();
    assert_eq!(first, run());
    assert_eq!(
        String::from_utf8(first).unwrap(),
        "{\"decision\":{\"changed\":true,\"kind\":\"update\"},\"state\":{\"policies\":{\"a\":\"prohibit\",\"b\":\"use\",\"zoë\":\"prohibit\"},\"premise\":\"x\",\"version\":2}}\n"
    );
}

#[test]
fn huge_and_hostile_inputs_are_decided_quickly() {
    let long_item = format!("use {}", "docker ".repeat(200_000));
    let many_starts = "use ".repeat(100_000);
    let separators = format!("set{}premise x", " \t".repeat(200_000));
    let controls: String = (0u8..32).map(char::from).collect::<String>().repeat(1000);
    let state = State::new();
    let start = std::time::Instant::now();
    assert!(matches!(classify(&long_item), Classification::Directive(_)));
    assert_eq!(state.step(&many_starts).0, Decision::NoDirective);
    assert!(matches!(
        classify(&separators),
        Classification::Directive(_)
    ));
    assert_eq!(state.step(&controls).0, Decision::NoDirective);
    let (decision, next) = state.step(&long_item);
    assert_eq!(decision, Decision::Update { changed: true });
    assert_eq!(State::import_json(&next.export_json()).unwrap(), next);
    // Linear work on these megabytes takes well under a second optimised and about
    // ten seconds in a debug build (twice that on a busy machine); a quadratic step
    // would take hours. The bound tells the two apart, not one machine from another.
    let bound = if cfg!(debug_assertions) { 90 } else { 20 };
    assert!(start.elapsed().as_secs() < bound, "{:?}", start.elapsed());
    // Deep nesting is refused, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(State::import_json(&deep).is_err());
}
