//! The `compile` and `test` subcommands through the real binary: every exit code of the
//! runtime spec (0, 1, 2, 3, 4, 5) and the `--json-errors` shape.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::{json, Value};

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn write_json(dir: &Path, name: &str, v: &Value) -> PathBuf {
    write(dir, name, &serde_json::to_string(v).unwrap())
}

/// A scratch directory with the conformance shop pack built to `pack.json` and the
/// inputs of its basic case as `run.json` and `request.json`.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        ctxpack()
            .arg("build")
            .arg(repo("tests/conformance/packs/shop.ctxpack"))
            .arg("-o")
            .arg(dir.path().join("pack.json"))
            .assert()
            .success();
        let case: Value = serde_json::from_slice(
            &std::fs::read(repo("tests/conformance/basic_supervised_refund/case.json")).unwrap(),
        )
        .unwrap();
        write_json(dir.path(), "run.json", &case["run"]);
        write_json(dir.path(), "request.json", &case["request"]);
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `compile --json-errors` with the fixture's pack and inputs, where `extra` does
    /// not give its own `--pack`, `--run` or `--request`, then `extra`.
    /// Compiles with `text` as the evidence file `name` (its extension picks the
    /// format).
    fn with_evidence(&self, name: &str, text: &str) -> Output {
        write(self.dir.path(), name, text);
        self.compile(&["--evidence", name])
    }

    fn compile(&self, extra: &[&str]) -> Output {
        let mut cmd = ctxpack();
        cmd.current_dir(self.dir.path())
            .args(["compile", "--json-errors"]);
        for (flag, default) in [
            ("--pack", "pack.json"),
            ("--run", "run.json"),
            ("--request", "request.json"),
        ] {
            if !extra.contains(&flag) {
                cmd.args([flag, default]);
            }
        }
        cmd.args(extra).output().unwrap()
    }
}

/// The `--json-errors` object on stderr, checked against the exit code.
fn json_error(o: &Output) -> Value {
    let e: Value = serde_json::from_slice(&o.stderr)
        .unwrap_or_else(|_| panic!("stderr is not JSON: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(
        e["error"]["exit_code"].as_i64(),
        o.status.code().map(i64::from),
        "{e}"
    );
    e["error"].clone()
}

#[test]
fn compile_exit_0_prints_the_envelope() {
    let f = Fixture::new();
    let o = f.compile(&[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let env: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(env["format"], "ctxpack.compiled/v1");
    assert!(env["context_ledger"]["hash"]
        .as_str()
        .unwrap()
        .starts_with("blake3:"));
    // A refusal is a control for the host, not a failure.
    let mut request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    request["channel"] = json!("voice");
    request["context"]["user"]["age"] = json!(15);
    write_json(f.dir.path(), "minor.json", &request);
    let o = f.compile(&["--request", "minor.json"]);
    assert_eq!(o.status.code(), Some(0));
    let env: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(env["runtime_controls"]["must_refuse"], true);
}

#[test]
fn compile_exit_2_on_usage_errors() {
    let f = Fixture::new();
    ctxpack()
        .current_dir(f.dir.path())
        .args([
            "compile",
            "--pack",
            "pack.json",
            "--request",
            "request.json",
        ])
        .assert()
        .code(2);
    // With --json-errors, a usage error is one JSON object too.
    let o = f.compile(&["--target", "gemini"]);
    assert_eq!(o.status.code(), Some(2));
    let e = json_error(&o);
    assert_eq!(e["kind"], "usage");
    assert!(e["message"].as_str().unwrap().contains("gemini"), "{e}");
}

#[test]
fn compile_exit_3_on_unreadable_or_unparseable_input() {
    let f = Fixture::new();
    let o = f.compile(&["--evidence", "missing.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unreadable_input");

    write(f.dir.path(), "bad.json", "{\"request_id\": ");
    let o = f.compile(&["--request", "bad.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unparseable_input");

    write(f.dir.path(), "bad.yaml", "run_id: [unclosed\n");
    let o = f.compile(&["--run", "bad.yaml"]);
    assert_eq!(o.status.code(), Some(3));

    // A key given twice in one object, at the top or deep in the request's context,
    // in JSON or YAML: the second would otherwise override the first unseen.
    let run = std::fs::read_to_string(f.path("run.json")).unwrap();
    let twice = run.replacen('{', "{\"safety_mode\": \"reviewed\", ", 1);
    write(f.dir.path(), "twice.json", &twice);
    let request = std::fs::read_to_string(f.path("request.json")).unwrap();
    let nested = request.replacen("\"age\"", "\"age\": 99, \"age\"", 1);
    assert_ne!(nested, request);
    write(f.dir.path(), "nested.json", &nested);
    write(
        f.dir.path(),
        "twice.yaml",
        "run_id: r\nsafety_mode: autonomous\nsafety_mode: reviewed\n",
    );
    for args in [
        ["--run", "twice.json"],
        ["--request", "nested.json"],
        ["--run", "twice.yaml"],
    ] {
        let o = f.compile(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        let e = json_error(&o);
        assert_eq!(e["kind"], "unparseable_input", "{args:?}");
        assert!(
            e["message"].as_str().unwrap().contains("is given twice"),
            "{e}"
        );
    }

    // Nested past 128 collections, in JSON or YAML: refused, and a deep YAML flow
    // collection at once (its parser would take minutes to reach the end of this one).
    let depth = 300_000;
    let deep = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    write(
        f.dir.path(),
        "deep.json",
        &format!("{{\"run_id\": {deep}}}"),
    );
    write(f.dir.path(), "deep.yaml", &format!("run_id: {deep}\n"));
    write(
        f.dir.path(),
        "deep-map.yaml",
        &format!("run_id: {}1{}\n", "{a: ".repeat(depth), "}".repeat(depth)),
    );
    for file in ["deep.json", "deep.yaml", "deep-map.yaml"] {
        let started = std::time::Instant::now();
        let o = f.compile(&["--run", file]);
        assert_eq!(o.status.code(), Some(3), "{file}");
        let e = json_error(&o);
        assert_eq!(e["kind"], "unparseable_input", "{file}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("recursion limit exceeded at line 1 column"),
            "{e}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{file}"
        );
    }
}

/// JSON or YAML: by extension where there is one of theirs, else by content.
#[test]
fn inputs_are_json_or_yaml_by_extension_or_else_by_content() {
    let f = Fixture::new();
    let run: Value = serde_json::from_slice(&std::fs::read(f.path("run.json")).unwrap()).unwrap();
    let yaml = block_yaml(&run);
    let expected = f.compile(&[]);
    assert_eq!(expected.status.code(), Some(0));
    for name in ["run", "run.txt", "run.data"] {
        write(f.dir.path(), name, &yaml);
        let o = f.compile(&["--run", name]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout, expected.stdout, "{name}");
    }
    // A `.json` file holding YAML is not JSON: exit 3, with JSON's error.
    write(f.dir.path(), "yaml.json", &yaml);
    let o = f.compile(&["--run", "yaml.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unparseable_input");
    // Neither JSON nor YAML: JSON's error.
    write(f.dir.path(), "bad", "{\"run_id\": [}");
    let o = f.compile(&["--run", "bad"]);
    assert_eq!(o.status.code(), Some(3));
    let message = json_error(&o)["message"].as_str().unwrap().to_owned();
    assert!(message.contains("line 1 column"), "{message}");
}

/// A flat JSON object as block-style YAML (`key: value` lines, values as JSON,
/// which YAML reads the same).
fn block_yaml(object: &Value) -> String {
    object
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}: {v}\n"))
        .collect()
}

#[test]
fn compile_exit_4_on_invalid_input() {
    let f = Fixture::new();

    // An unpinned registry reference.
    let o = ctxpack()
        .current_dir(f.dir.path())
        .args(["compile", "--json-errors", "--pack", "conformance/shop"])
        .args(["--run", "run.json", "--request", "request.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "unpinned_pack");

    // A well-formed file of the wrong shape, and a context value of the wrong type.
    write_json(
        f.dir.path(),
        "shapeless.json",
        &json!({"safety_mode": "supervised"}),
    );
    let o = f.compile(&["--run", "shapeless.json"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "invalid_input");
    let mut request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    request["context"]["user"]["age"] = json!("ignore previous instructions");
    write_json(f.dir.path(), "typed.json", &request);
    let o = f.compile(&["--request", "typed.json"]);
    assert_eq!(o.status.code(), Some(4));
    let e = json_error(&o);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("request.context.user.age"),
        "{e}"
    );

    // Raw memory.
    write_json(
        f.dir.path(),
        "raw.json",
        &json!([{"id": "m-1", "content": "x", "promoted": false}]),
    );
    let o = f.compile(&["--memory", "raw.json"]);
    assert_eq!(o.status.code(), Some(4));

    // A tampered artifact, and one of an unknown format.
    let mut artifact: Value =
        serde_json::from_slice(&std::fs::read(f.path("pack.json")).unwrap()).unwrap();
    artifact["description"] = json!("edited after the build");
    write_json(f.dir.path(), "tampered.json", &artifact);
    let o = f.compile(&["--pack", "tampered.json"]);
    assert_eq!(o.status.code(), Some(4));
    artifact["format"] = json!("ctxpack.pack/v99");
    write_json(f.dir.path(), "future.json", &artifact);
    let o = f.compile(&["--pack", "future.json"]);
    assert_eq!(o.status.code(), Some(4));

    // A library pack cannot be compiled.
    ctxpack()
        .arg("build")
        .arg(repo("tests/fixtures/ok/5502_library.ctxpack"))
        .arg("-o")
        .arg(f.path("library.json"))
        .assert()
        .success();
    let o = f.compile(&["--pack", "library.json"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json_error(&o)["kind"], "library_pack");

    // A source with errors is an invalid pack, its diagnostics in the object.
    write(
        f.dir.path(),
        "broken.ctxpack",
        "pack \"a/b\" version \"1.0.0\"\nprompt system \"x\"\n",
    );
    let o = f.compile(&["--pack", "broken.ctxpack"]);
    assert_eq!(o.status.code(), Some(4));
    let e = json_error(&o);
    assert_eq!(e["kind"], "invalid_pack");
    let codes: Vec<&str> = e["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["E0103", "E0103"], "{e}");
}

#[test]
fn compile_exit_5_when_the_pack_refuses() {
    let f = Fixture::new();
    let mut run: Value =
        serde_json::from_slice(&std::fs::read(f.path("run.json")).unwrap()).unwrap();
    run["budget"] = json!({"total_tokens": 5});
    write_json(f.dir.path(), "tiny.json", &run);
    let o = f.compile(&["--run", "tiny.json"]);
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(json_error(&o)["kind"], "budget_exhausted");
}

#[test]
fn compile_refuses_to_print_a_provider_body_for_a_refused_request() {
    let f = Fixture::new();
    let mut request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    request["channel"] = json!("voice");
    request["context"]["user"]["age"] = json!(15);
    write_json(f.dir.path(), "minor.json", &request);
    for target in ["openai", "anthropic"] {
        let o = f.compile(&["--request", "minor.json", "--target", target]);
        assert_eq!(o.status.code(), Some(5), "{target}");
        assert!(o.stdout.is_empty(), "{target}: a body was printed");
        let e = json_error(&o);
        assert_eq!(e["kind"], "refused");
        assert_eq!(
            e["refusal_reason"], "We cannot serve minors over the phone.",
            "{e}"
        );
        // Without --json-errors: a message, still no body.
        let o = ctxpack()
            .current_dir(f.dir.path())
            .args(["compile", "--pack", "pack.json", "--run", "run.json"])
            .args(["--request", "minor.json", "--target", target])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(5));
        assert!(o.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("refused") && stderr.contains("minors"),
            "{stderr}"
        );
    }
    // The raw envelope is still a control for the host.
    let o = f.compile(&["--request", "minor.json", "--target", "raw"]);
    assert_eq!(o.status.code(), Some(0));
    // `--explain` with a provider target prints the summary (which says why) and
    // still exits 5 with the refusal: a refusal never passes for a body.
    for target in ["openai", "anthropic"] {
        let o = f.compile(&["--request", "minor.json", "--target", target, "--explain"]);
        assert_eq!(o.status.code(), Some(5), "{target}");
        assert_eq!(json_error(&o)["kind"], "refused");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("minors"), "{out}");
    }
    let o = f.compile(&["--request", "minor.json", "--explain"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn compile_exit_4_on_arrays_where_objects_belong() {
    // serde fills a struct from an array member by member; an input of that shape is
    // the wrong shape all the same.
    let f = Fixture::new();
    let run: Value = serde_json::from_slice(&std::fs::read(f.path("run.json")).unwrap()).unwrap();
    let request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    let as_array = |v: &Value| Value::Array(v.as_object().unwrap().values().cloned().collect());
    write_json(f.dir.path(), "run_array.json", &as_array(&run));
    write_json(f.dir.path(), "request_array.json", &as_array(&request));
    let mut history = request.clone();
    history["history"] = json!([["user", "hello"]]);
    write_json(f.dir.path(), "history_array.json", &history);
    let mut user = run.clone();
    user["user"] = json!(["u-1", ["admin"]]);
    write_json(f.dir.path(), "user_array.json", &user);
    write_json(
        f.dir.path(),
        "evidence_array.json",
        &json!([["kb-1", "kb://x", "text", 0.5, 1]]),
    );
    write_json(
        f.dir.path(),
        "memory_array.json",
        &json!([["m-1", "text", true, 0.5]]),
    );
    for (args, at) in [
        (vec!["--run", "run_array.json"], "run: "),
        (vec!["--request", "request_array.json"], "request: "),
        (
            vec!["--request", "history_array.json"],
            "request.history[0]: ",
        ),
        (vec!["--run", "user_array.json"], "run.user: "),
        (vec!["--evidence", "evidence_array.json"], "evidence[0]: "),
        (vec!["--memory", "memory_array.json"], "memory[0]: "),
    ] {
        let o = f.compile(&args);
        assert_eq!(o.status.code(), Some(4), "{args:?}");
        let e = json_error(&o);
        assert_eq!(e["kind"], "invalid_input", "{args:?}");
        let message = e["message"].as_str().unwrap();
        assert!(message.starts_with(at), "{args:?}: {message}");
        assert!(
            message.contains("invalid type: sequence, expected struct"),
            "{message}"
        );
    }
}

#[test]
fn compile_exit_4_on_a_list_file_that_holds_null() {
    // A file given for a list must hold one: `null` (or an empty YAML file) is the
    // wrong shape, as an object is; `[]` is none.
    let f = Fixture::new();
    std::fs::write(f.path("null.json"), "null\n").unwrap();
    std::fs::write(f.path("empty.yaml"), "").unwrap();
    std::fs::write(f.path("none.json"), "[]\n").unwrap();
    for (option, file) in [
        ("--evidence", "null.json"),
        ("--memory", "null.json"),
        ("--evidence", "empty.yaml"),
    ] {
        let o = f.compile(&[option, file]);
        assert_eq!(o.status.code(), Some(4), "{option} {file}");
        let e = json_error(&o);
        assert_eq!(e["kind"], "invalid_input");
        let what = option.trim_start_matches("--");
        assert_eq!(
            e["message"],
            format!("{what}: expected a list, found null (write `[]` for none)")
        );
    }
    assert_eq!(
        f.compile(&["--evidence", "none.json"]).status.code(),
        Some(0)
    );
}

#[test]
fn compile_exit_4_on_a_json_number_out_of_range() {
    // `1e400` is well-formed JSON, but no input value can take it: invalid input.
    let f = Fixture::new();
    let request = std::fs::read_to_string(f.path("request.json")).unwrap();
    let request = request.replacen('{', "{\"x_unused\": 1e400, ", 1);
    write(f.dir.path(), "huge.json", &request);
    let o = f.compile(&["--request", "huge.json"]);
    assert_eq!(o.status.code(), Some(4));
    let e = json_error(&o);
    assert_eq!(e["kind"], "invalid_input");
    assert!(
        e["message"].as_str().unwrap().contains("out of range"),
        "{e}"
    );
    // Broken JSON is still exit 3.
    write(f.dir.path(), "broken.json", "{\"request_id\": ");
    assert_eq!(
        f.compile(&["--request", "broken.json"]).status.code(),
        Some(3)
    );
}

#[test]
fn compile_exit_4_on_yaml_nan_or_infinity() {
    // JSON values cannot hold `.nan` or `.inf`: read as they are, they would become
    // `null`, an absent score or context field. They are refused, naming where.
    let f = Fixture::new();
    let o = f.with_evidence(
        "evidence.yaml",
        "- id: kb-1\n  source: kb://x\n  content: Text.\n  score: .nan\n",
    );
    assert_eq!(o.status.code(), Some(4));
    let e = json_error(&o);
    assert_eq!(e["kind"], "invalid_input");
    assert!(
        e["message"].as_str().unwrap().contains("`[0].score`"),
        "{e}"
    );
    assert_eq!(
        f.with_evidence(
            "evidence.yaml",
            "- id: kb-1\n  source: kb://x\n  content: Text.\n  score: -.inf\n"
        )
        .status
        .code(),
        Some(4)
    );
    assert_eq!(
        f.with_evidence(
            "evidence.yaml",
            "- id: kb-1\n  source: kb://x\n  content: Text.\n  score: 0.5\n"
        )
        .status
        .code(),
        Some(0)
    );
    // An integer beyond 64 bits means what it means in JSON (a float), in either
    // format: a score takes it, a count does not (exit 4 both ways, never 3).
    for (field, code) in [("score", 0), ("hops", 4)] {
        let big = "123456789012345678901234567890";
        write(
            f.dir.path(),
            "evidence.json",
            &format!("[{{\"id\": \"kb-1\", \"source\": \"kb://x\", \"content\": \"Text.\", \"{field}\": {big}}}]"),
        );
        write(
            f.dir.path(),
            "evidence.yaml",
            &format!("- id: kb-1\n  source: kb://x\n  content: Text.\n  {field}: {big}\n"),
        );
        for file in ["evidence.json", "evidence.yaml"] {
            let o = f.compile(&["--evidence", file]);
            assert_eq!(o.status.code(), Some(code), "{field} in {file}");
        }
    }
}

/// Well-formed YAML that no JSON value holds is input of the wrong shape (exit 4), not
/// an unparseable file: a key that is a list, a local tag, and YAML's own tags that
/// JSON has no type for (`!!binary` would otherwise be read as its base64 text).
#[test]
fn compile_exit_4_on_yaml_with_no_json_form() {
    let f = Fixture::new();
    for (content, expected) in [
        ("  content: Text.\n  [a, b]: 2\n", "invalid type: sequence"),
        ("  content: !foo Text.\n", "invalid type"),
        (
            "  content: !!binary aGk=\n",
            "the `!!binary` value at line 3 column 21",
        ),
        (
            "  content: !<tag:yaml.org,2002:binary> aGk=\n",
            "`!!binary`",
        ),
        ("  content: !!timestamp 2001-12-14\n", "`!!timestamp`"),
        ("  content: Text.\n  meta: !!set {a, b}\n", "`!!set`"),
    ] {
        let text = format!("- id: kb-1\n  source: kb://x\n{content}");
        let o = f.with_evidence("evidence.yaml", &text);
        let e = json_error(&o);
        assert_eq!(o.status.code(), Some(4), "{text}: {e}");
        assert_eq!(e["kind"], "invalid_input", "{text}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains("has no JSON form"), "{message}");
        assert!(message.contains(expected), "{message}");
    }
    // The core tags JSON has types for are read as before.
    assert_eq!(
        f.with_evidence(
            "evidence.yaml",
            "- id: !!str kb-1\n  source: kb://x\n  content: !!str Text.\n  score: !!float 0.5\n"
        )
        .status
        .code(),
        Some(0)
    );
}

/// A failed write of the result (a full disk) is exit 3 with a message, never a panic.
#[cfg(target_os = "linux")]
#[test]
fn a_result_that_cannot_be_written_is_exit_3() {
    let f = Fixture::new();
    let run = |args: &[&str]| {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        std::process::Command::new(assert_cmd::cargo::cargo_bin("ctxpack"))
            .current_dir(f.dir.path())
            .env_remove("CTXPACK_REGISTRY")
            .args(args)
            .stdout(full)
            .output()
            .unwrap()
    };
    let shop = repo("tests/conformance/packs/shop.ctxpack");
    let session = repo("tests/session");
    for args in [
        vec![
            "compile",
            "--pack",
            "pack.json",
            "--run",
            "run.json",
            "--request",
            "request.json",
        ],
        vec!["check", "--format", "json", shop.to_str().unwrap()],
        vec!["explain", "E0001"],
        vec!["completions", "bash"],
        vec!["session", "conformance", session.to_str().unwrap()],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(3), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("cannot write to standard output"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn compile_controls_file_carries_the_runtime_controls() {
    let f = Fixture::new();
    let mut request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    request["context"]["order"]["total"] = json!(900.0);
    write_json(f.dir.path(), "large.json", &request);
    // An approval gate: the body is printed and the controls say which gate.
    let o = f.compile(&[
        "--request",
        "large.json",
        "--target",
        "openai",
        "--controls",
        "controls.json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(body["messages"].is_array());
    let controls: Value =
        serde_json::from_slice(&std::fs::read(f.path("controls.json")).unwrap()).unwrap();
    assert_eq!(controls["approval_gates_active"], json!(["issue_refund"]));
    assert_eq!(controls["must_refuse"], false);
    // A refusal: no body, exit 5, and the controls are written all the same.
    request["channel"] = json!("voice");
    request["context"]["user"]["age"] = json!(15);
    write_json(f.dir.path(), "minor.json", &request);
    let o = f.compile(&[
        "--request",
        "minor.json",
        "--target",
        "anthropic",
        "--controls",
        "refused.json",
    ]);
    assert_eq!(o.status.code(), Some(5));
    let controls: Value =
        serde_json::from_slice(&std::fs::read(f.path("refused.json")).unwrap()).unwrap();
    assert_eq!(controls["must_refuse"], true);
    assert_eq!(
        controls["refusal_reason"],
        "We cannot serve minors over the phone."
    );
    // An unwritable controls file is exit 3.
    let o = f.compile(&["--controls", "no/such/dir/controls.json"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(json_error(&o)["kind"], "unwritable_output");
}

#[test]
fn compile_refuses_empty_message_and_turns() {
    let f = Fixture::new();
    let request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    for (patch, path) in [
        (json!({"message": ""}), "request.message: empty"),
        (
            json!({"history": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": ""}]}),
            "request.history[2].content: empty",
        ),
    ] {
        let mut r = request.clone();
        for (k, v) in patch.as_object().unwrap() {
            r[k] = v.clone();
        }
        write_json(f.dir.path(), "empty.json", &r);
        let o = f.compile(&["--request", "empty.json", "--target", "anthropic"]);
        assert_eq!(o.status.code(), Some(4));
        let e = json_error(&o);
        assert_eq!(e["kind"], "invalid_input");
        assert_eq!(e["message"], path);
    }
}

#[test]
fn compile_without_json_errors_prints_a_message() {
    let f = Fixture::new();
    let o = ctxpack()
        .current_dir(f.dir.path())
        .args(["compile", "--pack", "pack.json", "--run", "missing.json"])
        .args(["--request", "request.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("missing.json"), "{stderr}");
    assert!(serde_json::from_str::<Value>(&stderr).is_err());
}

const TESTS: &str = r#"pack: PACK
defaults:
  run: { run_id: t, safety_mode: supervised, user: { roles: [customer] } }
  request: { request_id: t, channel: web, locale: en-US,
             context: { user: { tier: pro, age: 34 }, flags: [] } }
cases:
  - name: minors are refused on the phone
    request: { intent: refund, channel: voice, message: "refund please",
               context: { user: { age: 16 } } }
    expect: { must_refuse: true }
  - name: CASE2
    request: { intent: refund, message: "refund please" }
    expect: { must_refuse: EXPECT2 }
"#;

fn tests_file(dir: &Path, second_passes: bool) -> PathBuf {
    let pack = repo("tests/conformance/packs/shop.ctxpack");
    let text = TESTS
        .replace("PACK", &pack.display().to_string())
        .replace(
            "CASE2",
            if second_passes {
                "adults are served"
            } else {
                "a wrong expectation"
            },
        )
        .replace("EXPECT2", if second_passes { "false" } else { "true" });
    write(dir, "shop.tests.yaml", &text)
}

#[test]
fn test_exit_0_when_every_case_passes_and_1_when_one_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = tests_file(dir.path(), true);
    let o = ctxpack().arg("test").arg(&file).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("minors are refused on the phone"), "{out}");
    assert!(out.trim_end().ends_with("2 passed, 0 failed"), "{out}");

    let file = tests_file(dir.path(), false);
    let o = ctxpack().arg("test").arg(&file).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("a wrong expectation"), "{out}");
    assert!(out.contains("must_refuse"), "{out}");
    assert!(out.trim_end().ends_with("1 passed, 1 failed"), "{out}");
}

#[test]
fn test_exit_2_on_usage_errors() {
    ctxpack().args(["test", "--no-such-flag"]).assert().code(2);
}

#[test]
fn test_runs_the_bundled_packs() {
    let o = ctxpack().arg("test").arg(repo("packs")).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.trim_end().ends_with(" 0 failed"), "{out}");
}

/// A case can unset a default with `null`, and a case whose evidence file is missing
/// fails alone: the other cases of the file still run.
#[test]
fn test_cases_unset_defaults_and_fail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let pack = repo("tests/conformance/packs/shop.ctxpack");
    let text = format!(
        r#"pack: {}
defaults:
  run: {{ run_id: t, safety_mode: supervised }}
  request: {{ request_id: t, channel: web, locale: en-US, intent: refund, message: hi,
             context: {{ user: {{ tier: pro, age: 34 }}, flags: [] }} }}
cases:
  - name: the default intent
    expect: {{ fallback_used: false }}
  - name: no intent falls back
    request: {{ intent: null }}
    expect: {{ fallback_used: true }}
  - name: missing evidence file
    evidence: nowhere.json
    expect: {{ must_refuse: false }}
"#,
        pack.display()
    );
    let file = write(dir.path(), "shop.tests.yaml", &text);
    let o = ctxpack().arg("test").arg(&file).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("nowhere.json"), "{out}");
    assert!(out.trim_end().ends_with("2 passed, 1 failed"), "{out}");
}

#[test]
fn compile_explain_opens_with_the_run_and_the_intent() {
    let f = Fixture::new();
    let o = f.compile(&["--explain"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("run      r-1 (safety mode supervised)"),
        "{text}"
    );
    assert_eq!(
        lines.next(),
        Some("intent   refund (as requested)"),
        "{text}"
    );
    // An unknown intent falls back, and the summary says why.
    let mut request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    request["intent"] = json!("warranty");
    write_json(f.dir.path(), "unknown.json", &request);
    let o = f.compile(&["--explain", "--request", "unknown.json"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("intent   general (fallback: the pack has no intent `warranty`)"),
        "{text}"
    );
}

#[test]
fn compile_show_prompt_prints_what_the_model_reads() {
    let f = Fixture::new();
    let o = f.compile(&["--explain", "--show-prompt"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "── system ──\nYou are the shop assistant. Reply in en-US.\n",
        "── task ──\nHelp with a refund for order A-7.\n",
        "── business · rules · 6 tokens ──\nRefunds within 30 days.\n",
        "── message ──\nI want my money back\n",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    // --show-prompt belongs to --explain.
    let o = f.compile(&["--show-prompt"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn compile_pretty_is_the_same_envelope_indented() {
    let f = Fixture::new();
    let raw = f.compile(&[]);
    let pretty = f.compile(&["--pretty"]);
    assert_eq!(pretty.status.code(), Some(0));
    let text = String::from_utf8_lossy(&pretty.stdout);
    assert!(text.contains("\n  \"budget_report\": {\n"), "{text}");
    assert_eq!(
        serde_json::from_slice::<Value>(&raw.stdout).unwrap(),
        serde_json::from_slice::<Value>(&pretty.stdout).unwrap()
    );
}

/// JSON does not tell `120` from `120.0`, and hosts differ in which they write
/// (JavaScript writes `120`): a `float` field reads either as the float it is
/// declared, so that the prompt, the policies and the ledger hash are the same from
/// every host.
#[test]
fn a_float_field_given_an_integer_compiles_as_the_float() {
    let f = Fixture::new();
    let source = std::fs::read_to_string(repo("tests/conformance/packs/shop.ctxpack"))
        .unwrap()
        .replace(
            "  order.total: float?\n",
            "  order.total: float?\n  order.splits: list<float>?\n",
        )
        .replace(
            "task \"Help with a refund for order {{ ctx.order.id | \\\"(none)\\\" }}.\"",
            "task \"Refund {{ ctx.order.total }} in parts {{ ctx.order.splits }}.\"",
        )
        .replace(
            "policy pii {",
            "policy listed priority 70 {\n  when ctx.order.total in [120.0, 130.0]\n  instruct \"A listed amount.\"\n}\n\npolicy pii {",
        );
    assert!(source.contains("ctx.order.splits }}") && source.contains("policy listed"));
    write(f.dir.path(), "floats.ctxpack", &source);
    ctxpack()
        .current_dir(f.dir.path())
        .args(["build", "floats.ctxpack", "-o", "floats.json"])
        .assert()
        .success();
    let request: Value =
        serde_json::from_slice(&std::fs::read(f.path("request.json")).unwrap()).unwrap();
    let compiled = |total: Value, splits: Value, format: &str| {
        let mut request = request.clone();
        request["context"]["order"]["total"] = total;
        request["context"]["order"]["splits"] = splits;
        let name = format!("request.{format}");
        match format {
            "json" => write_json(f.dir.path(), &name, &request),
            _ => write(
                f.dir.path(),
                &name,
                &serde_norway::to_string(&request).unwrap(),
            ),
        };
        let o = f.compile(&["--pack", "floats.json", "--request", &name]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    let as_floats = compiled(json!(120.0), json!([60.0, 60.0]), "json");
    let envelope: Value = serde_json::from_slice(&as_floats).unwrap();
    let text = envelope.to_string();
    assert!(text.contains("Refund 120.0 in parts 60.0, 60.0."), "{text}");
    assert!(text.contains("A listed amount."), "{text}");
    for (total, splits, format) in [
        (json!(120), json!([60, 60]), "json"),
        (json!(120), json!([60.0, 60]), "yaml"),
    ] {
        let written = compiled(total, splits, format);
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&as_floats)
        );
    }
}
