//! The outputs as other people's tools read them: `--json-errors` on every subcommand
//! that can fail on input (one JSON object on stderr, the same shape everywhere), and a
//! byte-order mark that moves no column in any output format.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn ctxpack(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY")
        .env("NO_COLOR", "1")
        .current_dir(dir);
    cmd
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// The one JSON object on stderr: `{"error": {kind, message, exit_code, ...}}`, its
/// exit code that of the process. Returns the inner object.
fn json_error(o: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    let e: Value =
        serde_json::from_str(&stderr).unwrap_or_else(|_| panic!("stderr is not JSON: {stderr}"));
    let error = &e["error"];
    assert_eq!(
        error["exit_code"].as_i64(),
        o.status.code().map(i64::from),
        "{e}"
    );
    assert!(
        error["kind"].is_string() && error["message"].is_string(),
        "{e}"
    );
    error.clone()
}

const BROKEN: &str = "pack \"a/b\" version \"1.0.0\"\nprompt system \"hi\"\nbudget { total 100 bucket policy { share 20% } bucket tools { share 20% } bucket evidence { share 20% } bucket memory { share 20% } bucket session { share 20% } }\nintent main { tools nope task \"x\" }\n";

fn run(dir: &Path, args: &[&str]) -> Output {
    ctxpack(dir).args(args).output().unwrap()
}

#[test]
fn build_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "broken.ctxpack", BROKEN);
    let o = run(d, &["build", "--json-errors", "broken.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(e["kind"], "check_failed");
    assert_eq!(e["diagnostics"][0]["code"], "E0102");
    assert_eq!(e["diagnostics"][0]["line"], 4);
    let o = run(d, &["build", "--json-errors", "missing.ctxpack"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unreadable_input");
    // A malformed `oci://` registry is the command's mistake (exit 4), not an E0702 on
    // the pack's imports; so `build --help` says.
    let o = run(
        d,
        &[
            "build",
            "--json-errors",
            "--registry",
            "oci://",
            "broken.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "invalid_registry_location");
    // `check` reports it on each import (E0702), saying that the registry is the
    // problem, not the artifact.
    write(
        d,
        "imports.ctxpack",
        "pack \"acme/x\" version \"1.0.0\" library\nimport \"acme/lib\" version \"1.0.0\"\n",
    );
    let o = run(
        d,
        &[
            "check",
            "--format",
            "json",
            "--registry",
            "oci://",
            "imports.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d0 = &report["diagnostics"][0];
    assert_eq!(
        (d0["code"].as_str(), d0["line"].as_u64()),
        (Some("E0702"), Some(2))
    );
    assert_eq!(
        d0["labels"][0]["message"], "the registry cannot be read",
        "{d0}"
    );
    // Without the flag: prose, not JSON.
    let o = run(d, &["build", "broken.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(serde_json::from_slice::<Value>(&o.stderr).is_err());
}

#[test]
fn check_and_explain_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "broken.ctxpack", BROKEN);
    // Errors: stderr holds only the object, which carries the diagnostics; with
    // `--format json`, stdout still holds the document.
    let o = run(d, &["check", "--json-errors", "broken.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(e["kind"], "check_failed");
    assert_eq!(e["message"], "1 error, 0 warnings in 1 file");
    assert_eq!(e["diagnostics"][0]["code"], "E0102");
    assert_eq!(e["diagnostics"][0]["file"], "broken.ctxpack");
    assert_eq!(e["diagnostics"][0]["line"], 4);
    assert!(o.stdout.is_empty());
    let o = run(
        d,
        &[
            "check",
            "--json-errors",
            "--format",
            "json",
            "broken.ctxpack",
        ],
    );
    assert_eq!(json_error(&o)["kind"], "check_failed");
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["errors"], 1);
    // Unreadable (exit 3), and nothing to check (exit 1); the flag before the
    // subcommand works as well.
    let o = run(d, &["check", "--json-errors", "missing.ctxpack"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unreadable_input");
    let o = run(d, &["--json-errors", "check", "missing.ctxpack"]);
    assert_eq!(json_error(&o)["kind"], "unreadable_input");
    std::fs::create_dir(d.join("empty")).unwrap();
    let o = run(d, &["check", "--json-errors", "empty"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_error(&o)["kind"], "no_packs");
    // Warnings denied.
    let warned = BROKEN.replace("tools nope ", "");
    write(
        d,
        "warned.ctxpack",
        &format!("{warned}tool t {{ kind read risk low approval auto }}\n"),
    );
    let o = run(
        d,
        &[
            "check",
            "--json-errors",
            "--deny-warnings",
            "warned.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(
        e["message"],
        "0 errors, 2 warnings in 1 file (warnings denied)"
    );
    assert!(run(d, &["check", "--json-errors", "warned.ctxpack"])
        .stderr
        .is_empty());
    // explain: an unknown code is a usage error; a pack with errors is check_failed.
    let o = run(d, &["explain", "--json-errors", "E9999"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_error(&o)["kind"], "unknown_code");
    let o = run(
        d,
        &["explain", "--json-errors", "--tools", "broken.ctxpack"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_error(&o)["diagnostics"][0]["code"], "E0102");
    let o = run(
        d,
        &["explain", "--json-errors", "--tools", "missing.ctxpack"],
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unreadable_input");
    // A usage error with the flag anywhere is one object too.
    let o = run(d, &["--json-errors", "check", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_error(&o)["kind"], "usage");
}

#[test]
fn a_pack_run_from_elsewhere_uses_its_projects_registry() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "proj/lib.ctxpack",
        "pack \"acme/lib\" version \"1.0.0\" library\nredactor email pattern \"[a-z]+@[a-z]+\"\n",
    );
    let app = BROKEN.replace("tools nope ", "").replace(
        "prompt system",
        "import \"acme/lib\" version \"1.0.0\"\nprompt system",
    );
    write(d, "proj/app.ctxpack", &app);
    let o = run(
        d,
        &[
            "publish",
            "--registry",
            "proj/.ctxpack/registry",
            "proj/lib.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // From the project's parent: its `.ctxpack/registry` is found above the pack.
    for args in [
        vec!["check", "proj/app.ctxpack"],
        vec!["build", "proj/app.ctxpack", "-o", "app.json"],
    ] {
        let o = run(d, &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
    }
    // From a subdirectory of the project too.
    std::fs::create_dir(d.join("proj/sub")).unwrap();
    let o = run(&d.join("proj/sub"), &["check", "../app.ctxpack"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    // A registry in the current directory is still the one used, as is `--registry`.
    std::fs::create_dir_all(d.join(".ctxpack/registry")).unwrap();
    let o = run(d, &["check", "--format", "json", "proj/app.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["diagnostics"][0]["code"], "E0702", "{doc}");
    let o = run(
        d,
        &[
            "check",
            "--registry",
            "proj/.ctxpack/registry",
            "proj/app.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

#[test]
fn verify_json_errors_one_object_for_several_failures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "not-json.json", "{");
    write(
        d,
        "foreign.json",
        r#"{"format": "other/v9", "hash": "blake3:00"}"#,
    );
    let o = run(d, &["verify", "--json-errors", "not-json.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unparseable_input");
    let o = run(
        d,
        &[
            "verify",
            "--json-errors",
            "not-json.json",
            "foreign.json",
            "gone.json",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    let e = json_error(&o);
    assert_eq!(e["kind"], "invalid_artifact");
    let kinds: Vec<&str> = e["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["unparseable_input", "invalid_artifact", "unreadable_input"]
    );
}

#[test]
fn publish_versions_and_diff_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shop = repo("tests/conformance/packs/shop.ctxpack");
    let shop = shop.to_str().unwrap();
    let o = run(d, &["build", shop, "-o", "shop.json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // publish: a tampered artifact.
    let text = std::fs::read_to_string(d.join("shop.json")).unwrap();
    write(
        d,
        "tampered.json",
        &text.replace("shop assistant", "shop assistent"),
    );
    let o = run(
        d,
        &[
            "publish",
            "--json-errors",
            "--registry",
            "reg",
            "tampered.json",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "invalid_artifact");
    // publish: a source with errors.
    write(d, "broken.ctxpack", BROKEN);
    let o = run(
        d,
        &[
            "publish",
            "--json-errors",
            "--registry",
            "reg",
            "broken.ctxpack",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_error(&o)["kind"], "check_failed");
    // versions: a malformed name, then a pack the registry does not have.
    let o = run(
        d,
        &[
            "versions",
            "--json-errors",
            "--registry",
            "reg",
            "Not A Name",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    let o = run(
        d,
        &[
            "versions",
            "--json-errors",
            "--registry",
            "reg",
            "acme/none",
        ],
    );
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "not_found");
    // diff: an unpinned reference and a missing file.
    let o = run(d, &["diff", "--json-errors", "shop.json", "acme/shop"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "unpinned_pack");
    let o = run(d, &["diff", "--json-errors", "shop.json", "gone.json"]);
    assert_eq!(o.status.code(), Some(3));
    json_error(&o);
}

#[test]
fn fmt_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "ugly.ctxpack", "pack   \"a/b\"   version \"1.0.0\"\n");
    write(
        d,
        "syntax.ctxpack",
        "pack \"a/b\" version \"1.0.0\"\ntool {\n",
    );
    let o = run(d, &["fmt", "--check", "--json-errors", "ugly.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(e["kind"], "unformatted");
    assert_eq!(e["files"], serde_json::json!(["ugly.ctxpack"]));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ugly.ctxpack\n");
    let o = run(d, &["fmt", "--json-errors", "syntax.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(e["kind"], "syntax_error");
    assert_eq!(e["diagnostics"][0]["code"], "E0001");
    let o = run(d, &["fmt", "--json-errors", "no/such/dir"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unreadable_input");
    // Formatting that succeeds prints nothing on stderr.
    let o = run(d, &["fmt", "--json-errors", "ugly.ctxpack"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn test_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shop = repo("tests/conformance/packs/shop.ctxpack");
    let tests = format!(
        r#"pack: {}
defaults:
  run: {{ run_id: t, safety_mode: supervised, user: {{ roles: [customer] }} }}
  request: {{ request_id: t, channel: web, locale: en-US, intent: refund, message: hi,
             context: {{ user: {{ tier: pro, age: 34 }}, flags: [] }} }}
cases:
  - name: passes
    expect: {{ must_refuse: false }}
  - name: fails
    expect: {{ must_refuse: true }}
"#,
        shop.display()
    );
    write(d, "a/shop.tests.yaml", &tests);
    let o = run(d, &["test", "--json-errors", "a"]);
    assert_eq!(o.status.code(), Some(1));
    let e = json_error(&o);
    assert_eq!(e["kind"], "tests_failed");
    assert_eq!(e["failures"][0]["case"], "fails");
    assert!(e["failures"][0]["failures"][0]
        .as_str()
        .unwrap()
        .contains("must_refuse"));
    write(d, "b/bad.tests.yaml", "pack: [");
    let o = run(d, &["test", "--json-errors", "b"]);
    assert_eq!(o.status.code(), Some(3));
    json_error(&o);
    // Both: one object, the worst exit code first.
    let o = run(d, &["test", "--json-errors", "a", "b"]);
    assert_eq!(o.status.code(), Some(3));
    let e = json_error(&o);
    assert_eq!(e["errors"].as_array().unwrap().len(), 2);
}

/// A pack whose first line holds a diagnostic at a known column: the version `"1"`
/// is not semver (E0104) at line 1, column 23.
const LINE_ONE: &str = "pack \"acme/x\" version \"1\"\n";

#[test]
fn a_byte_order_mark_moves_no_column() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "plain.ctxpack", LINE_ONE);
    write(d, "bom.ctxpack", &format!("\u{FEFF}{LINE_ONE}"));
    let check = |file: &str, format: &str| {
        let o = run(d, &["check", "--format", format, file]);
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8(o.stdout).unwrap()
    };
    // JSON: the same line and columns.
    let json = |file| -> Value { serde_json::from_str(&check(file, "json")).unwrap() };
    let (plain, bom) = (json("plain.ctxpack"), json("bom.ctxpack"));
    let e0104 = |v: &Value| {
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["code"] == "E0104")
            .cloned()
            .unwrap()
    };
    assert_eq!(
        (e0104(&bom)["line"].clone(), e0104(&bom)["column"].clone()),
        (1.into(), 23.into())
    );
    assert_eq!(e0104(&bom)["end_column"], e0104(&plain)["end_column"]);
    // SARIF: regions do not depend on the mark (SARIF §3.30.2).
    let sarif = |file| -> Value { serde_json::from_str(&check(file, "sarif")).unwrap() };
    let region = |v: &Value| {
        v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["ruleId"] == "E0104")
            .map(|r| r["locations"][0]["physicalLocation"]["region"].clone())
            .unwrap()
    };
    assert_eq!(
        region(&sarif("bom.ctxpack")),
        region(&sarif("plain.ctxpack"))
    );
    assert_eq!(region(&sarif("bom.ctxpack"))["startColumn"], 23);
    // GitHub annotations and the human report.
    let github = check("bom.ctxpack", "github");
    assert!(github.contains("line=1,col=23::[E0104]"), "{github}");
    let o = run(d, &["check", "bom.ctxpack"]);
    let human =
        String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    assert!(human.contains("bom.ctxpack:1:23"), "{human}");
    // fmt drops the mark: the file is not formatted until it is gone.
    let o = run(d, &["fmt", "--check", "bom.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    let o = run(d, &["fmt", "bom.ctxpack"]);
    assert_eq!(o.status.code(), Some(0));
    let formatted = std::fs::read(d.join("bom.ctxpack")).unwrap();
    assert!(!formatted.starts_with("\u{FEFF}".as_bytes()));
    assert_eq!(formatted, std::fs::read(d.join("plain.ctxpack")).unwrap());
}

#[test]
fn a_byte_order_mark_changes_no_artifact_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let source = std::fs::read_to_string(repo("tests/conformance/packs/shop.ctxpack")).unwrap();
    write(d, "plain.ctxpack", &source);
    write(d, "bom.ctxpack", &format!("\u{FEFF}{source}"));
    for name in ["plain", "bom"] {
        let o = run(
            d,
            &[
                "build",
                &format!("{name}.ctxpack"),
                "-o",
                &format!("{name}.json"),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(
        std::fs::read(d.join("plain.json")).unwrap(),
        std::fs::read(d.join("bom.json")).unwrap()
    );
}

// ── No silent green, no dead ends ────────────────────────────────────────────

#[test]
fn check_of_no_pack_fails() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["check", "."]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no `.ctxpack` files found"));
}

#[test]
fn dash_reads_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shop = std::fs::read(repo("tests/conformance/packs/shop.ctxpack")).unwrap();
    // check -
    let o = ctxpack(d)
        .args(["check", "--format", "json", "-"])
        .write_stdin(BROKEN)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["diagnostics"][0]["file"], "<stdin>");
    // build -
    let o = ctxpack(d)
        .args(["build", "-", "-o", "shop.json"])
        .write_stdin(shop.clone())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // verify -
    let artifact = std::fs::read(d.join("shop.json")).unwrap();
    let o = ctxpack(d)
        .args(["verify", "-"])
        .write_stdin(artifact)
        .output()
        .unwrap();
    assert!(o.status.success());
    // compile --request - (JSON or YAML)
    let case: Value = serde_json::from_slice(
        &std::fs::read(repo("tests/conformance/basic_supervised_refund/case.json")).unwrap(),
    )
    .unwrap();
    write(d, "run.json", &case["run"].to_string());
    let yaml = serde_norway::to_string(&case["request"]).unwrap();
    let o = ctxpack(d)
        .args([
            "compile",
            "--pack",
            "shop.json",
            "--run",
            "run.json",
            "--request",
            "-",
        ])
        .write_stdin(yaml)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Two inputs cannot both be standard input.
    let o = run(
        d,
        &[
            "compile",
            "--json-errors",
            "--pack",
            "-",
            "--run",
            "run.json",
            "--request",
            "-",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(json_error(&o)["kind"], "usage");
}

#[test]
fn compile_takes_a_pack_source() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let case: Value = serde_json::from_slice(
        &std::fs::read(repo("tests/conformance/basic_supervised_refund/case.json")).unwrap(),
    )
    .unwrap();
    write(d, "run.json", &case["run"].to_string());
    write(d, "request.json", &case["request"].to_string());
    let shop = repo("tests/conformance/packs/shop.ctxpack");
    let o = run(
        d,
        &[
            "compile",
            "--pack",
            shop.to_str().unwrap(),
            "--run",
            "run.json",
            "--request",
            "request.json",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let env: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(env["pack"]["name"], "conformance/shop");
    // A source with errors: an invalid pack (exit 4), its diagnostics.
    write(d, "broken.ctxpack", BROKEN);
    let o = run(
        d,
        &[
            "compile",
            "--json-errors",
            "--pack",
            "broken.ctxpack",
            "--run",
            "run.json",
            "--request",
            "request.json",
        ],
    );
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "invalid_pack");
    assert_eq!(json_error(&o)["diagnostics"][0]["code"], "E0102");
}

#[test]
fn build_takes_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shop = std::fs::read_to_string(repo("tests/conformance/packs/shop.ctxpack")).unwrap();
    write(d, "packs/a/shop.ctxpack", &shop);
    write(
        d,
        "packs/b/shop2.ctxpack",
        &shop.replace("conformance/shop", "conformance/shop-two"),
    );
    let o = run(d, &["build", "packs"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(d
        .join("target/ctxpack/conformance/shop/1.0.0.json")
        .is_file());
    assert!(d
        .join("target/ctxpack/conformance/shop-two/1.0.0.json")
        .is_file());
    // -o names one artifact: refused for a directory of several.
    let o = run(d, &["build", "packs", "-o", "x.json"]);
    assert_eq!(o.status.code(), Some(2));
    // An empty directory builds nothing, and says so.
    std::fs::create_dir_all(d.join("empty")).unwrap();
    let o = run(d, &["build", "--json-errors", "empty"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_error(&o)["kind"], "no_packs");
}

#[test]
fn fmt_check_diff_shows_what_would_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "ugly.ctxpack", "pack   \"a/b\"   version \"1.0.0\"\n");
    let o = run(d, &["fmt", "--check", "--diff", "ugly.ctxpack"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "--- a/ugly.ctxpack\n+++ b/ugly.ctxpack\n@@ -1 +1 @@\n-pack   \"a/b\"   version \"1.0.0\"\n+pack \"a/b\" version \"1.0.0\"\n"
    );
    // --diff belongs to --check.
    assert_eq!(
        run(d, &["fmt", "--diff", "ugly.ctxpack"]).status.code(),
        Some(2)
    );
}

#[test]
fn completions_for_each_shell() {
    let dir = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let o = run(dir.path(), &["completions", shell]);
        assert!(o.status.success());
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(
            script.contains("compile") && script.contains("json-errors"),
            "{shell}"
        );
    }
}

#[test]
fn a_missing_registry_says_how_to_name_one() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["versions", "acme/support"]);
    assert_eq!(o.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("--registry DIR") && stderr.contains("CTXPACK_REGISTRY"),
        "{stderr}"
    );
}

/// The README's example pack is formatted and checks clean, and its compile example
/// runs as written against the inputs shipped beside the support pack.
#[test]
fn the_readme_examples_run_as_written() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pack = readme
        .split("```ctxpack\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    write(d, "readme.ctxpack", pack);
    let o = run(d, &["fmt", "--check", "--diff", "readme.ctxpack"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let o = run(d, &["check", "--deny-warnings", "readme.ctxpack"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The `cd packs/support` block: every `ctxpack` line without `...`, run there.
    let block = readme
        .split("```sh\ncd packs/support\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap()
        .replace("\\\n", " ");
    let support = repo("packs/support");
    let mut ran = 0;
    for line in block.lines().filter(|l| !l.contains("...")) {
        let command = line.split('#').next().unwrap().trim();
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let o = Command::cargo_bin("ctxpack")
            .unwrap()
            .current_dir(&support)
            .args(
                words
                    .iter()
                    .map(|w| w.replace("support.json", d.join("support.json").to_str().unwrap())),
            )
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        ran += 1;
    }
    assert_eq!(ran, 2, "{block}");
}

/// `ctxpack serve` starts the service binary built beside it, arguments passed on.
#[test]
fn serve_runs_the_service_binary() {
    let beside = Path::new(env!("CARGO_BIN_EXE_ctxpack"))
        .with_file_name(format!("ctxpack-serve{}", std::env::consts::EXE_SUFFIX));
    if !beside.is_file() {
        eprintln!(
            "skipping: {} is not built (cargo test --workspace builds it)",
            beside.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["serve", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("--max-concurrency") && help.contains("--preload"),
        "{help}"
    );
    let o = run(dir.path(), &["serve", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
}
