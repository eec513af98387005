//! `ctxpack test` end to end, on the project `ctxpack init` writes: every expectation
//! key passing and failing with its explanation, problems that fail one case with
//! their line, reproduce commands that run, JUnit XML, filters, empty runs, and a
//! pack given as the root.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use quick_xml::events::Event;
use serde_json::Value;

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn run(dir: &Path, args: &[&str]) -> Output {
    ctxpack().current_dir(dir).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A starter project (`ctxpack init`) with an advisory policy that fails for order
/// ids that are not numbers (R0201), and `extra.tests.yaml` holding `cases`.
fn project(cases: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = run(dir.path(), &["init", ".", "--name", "acme/shop"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let pack = dir.path().join("shop.ctxpack");
    let mut text = std::fs::read_to_string(&pack).unwrap();
    text.push_str(
        r#"
policy legacy_orders priority 20 advisory {
  when json { "<": [{ "+": [{ "var": "ctx.order.id" }] }, 100000] }
  instruct "Orders below 100000 were placed in the old shop."
}
"#,
    );
    std::fs::write(&pack, text).unwrap();
    let defaults = r#"pack: shop.ctxpack
defaults:
  run: { run_id: r, safety_mode: supervised, user: { id: u, roles: [support] } }
  request:
    request_id: q
    intent: support
    channel: web
    locale: en-US
    message: "Where is my order A-1001?"
    context:
      customer: { tier: pro, age: 34, verified: true, country: US }
      order: { id: A-1001, total: 89.9 }
      flags: []
cases:
"#;
    std::fs::write(
        dir.path().join("extra.tests.yaml"),
        format!("{defaults}{cases}"),
    )
    .unwrap();
    dir
}

const LONG_EVIDENCE: &str = r#"    run: { budget: { total_tokens: 16000, bucket_tokens: { evidence: 600 } } }
    evidence:
      - { id: kb-long, source: kb, score: 0.9, content: "LONG" }
      - { id: kb-short, source: kb, score: 0.5, content: "Short note." }
"#;

fn long_evidence() -> String {
    LONG_EVIDENCE.replace("LONG", &"Refunds are paid within five days. ".repeat(120))
}

#[test]
fn every_expectation_passes_on_a_matching_compile() {
    let cases = format!(
        r#"  - name: refusal
    request: {{ context: {{ customer: {{ age: 16 }} }} }}
    expect:
      must_refuse: true
      refusal_reason: "We can only help account holders who are 18 or older."
      must_escalate: false
  - name: escalation
    request: {{ context: {{ flags: [fraud_review] }} }}
    expect: {{ must_escalate: true, escalation_target: fraud-desk }}
  - name: gates, tools and redaction
    request: {{ message: "Refund A-1001, write to jane@example.com", context: {{ order: {{ total: 899.0 }} }} }}
    expect:
      approval_gates: [issue_refund]
      tools: [issue_refund, lookup_order, update_shipping_address]
      redactions: [card_number, email]
      not_contains: ["jane@example.com"]
      contains: ["[REDACTED:email]"]
      diagnostics: [R0201]
      fallback_used: false
  - name: truncation
{}    expect:
      truncated: {{ evidence: [kb-long] }}
      dropped: {{ evidence: [kb-short] }}
  - name: numeric ids raise no diagnostic
    request: {{ context: {{ order: {{ id: "12" }} }} }}
    expect: {{ diagnostics: [] }}
  - name: an error stands alone
    request: {{ intent: null }}
    run: {{ safety_mode: yolo }}
    expect: {{ error: invalid_input }}
"#,
        long_evidence()
    );
    let dir = project(&cases);
    let o = run(dir.path(), &["test", "extra.tests.yaml"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.ends_with("6 passed, 0 failed\n"), "{out}");
}

#[test]
fn every_expectation_fails_with_its_reason() {
    let cases = format!(
        r#"  - name: wrong refusal
    expect:
      must_refuse: true
      refusal_reason: "nope"
  - name: wrong escalation
    request: {{ context: {{ flags: [fraud_review] }} }}
    expect: {{ escalation_target: other-desk, must_escalate: false }}
  - name: wrong tools and gates
    request: {{ context: {{ customer: {{ verified: false }} }} }}
    expect:
      tools: [issue_refund, lookup_order]
      approval_gates: [issue_refund]
      not_contains: ["House rules"]
      contains: ["no such text"]
      diagnostics: []
  - name: wrong budget
{}    expect:
      truncated: {{ evidence: [] }}
      dropped: {{ evidence: [], evidnce: [] }}
"#,
        long_evidence()
    );
    let dir = project(&cases);
    let o = run(dir.path(), &["test", "extra.tests.yaml"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    for wanted in [
        "FAIL extra.tests.yaml:15 :: wrong refusal",
        "    must_refuse: expected true, actual false",
        "      did not fire: `minors` (when ctx.customer.age < 18)",
        "    refusal_reason: expected \"nope\", actual none",
        "    escalation_target: expected \"other-desk\", actual \"fraud-desk\"",
        "      fired: `fraud_review`",
        "    tools: expected [\"issue_refund\", \"lookup_order\"], actual [\"lookup_order\"]",
        "      `issue_refund` withheld: denied_by_policy:unverified_changes; `unverified_changes` (when request.intent == \"support\" and not ctx.customer.verified)",
        "      `issue_refund`: did not fire: `large_refunds`",
        "    not_contains: expected the prompt not to contain \"House rules\", actual: found",
        "      in block `house_rules` (business)",
        "    contains: expected the prompt to contain \"no such text\", actual: not found",
        "    diagnostics: expected [], actual [\"R0201\"]",
        "      R0201: ",
        "    truncated.evidence: expected [], actual [\"kb-long\"]",
        "      bucket `evidence`: 600 tokens allotted",
        "    dropped.evidence: expected [], actual [\"kb-short\"]",
        "    dropped.evidnce: the pack has no bucket `evidnce` (its buckets: ",
        "0 passed, 4 failed",
    ] {
        assert!(out.contains(wanted), "missing {wanted:?} in\n{out}");
    }
}

#[test]
fn imports_resolve_from_the_registry_option() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("base.ctxpack"),
        "pack \"acme/base\" version \"1.0.0\" library\n\
         redactor email pattern \"[a-z]+@[a-z]+\\\\.com\"\n\
         policy pii { when true redact email }\n",
    )
    .unwrap();
    let o = run(d, &["publish", "--registry", "reg", "base.ctxpack"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    std::fs::write(
        d.join("app.ctxpack"),
        "pack \"acme/app\" version \"1.0.0\"\n\
         import \"acme/base\" version \"1.0.0\"\n\
         prompt system \"s\"\n\
         budget { total 1000 tokenizer approx bucket policy { share 20% } bucket tools { share 20% } \
         bucket evidence { share 20% } bucket memory { share 20% } bucket session { share 20% } }\n\
         intent a { task \"t\" }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("app.tests.yaml"),
        "pack: app.ctxpack\ncases:\n  - name: redacted\n    run: { run_id: t, safety_mode: supervised }\n    \
         request: { request_id: t, channel: web, locale: en, message: \"hi x@y.com\", intent: a }\n    \
         expect: { redactions: [email] }\n",
    )
    .unwrap();
    let o = run(d, &["test", "--registry", "reg", "app.tests.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).ends_with("1 passed, 0 failed\n"),
        "{}",
        stdout(&o)
    );
    // Without it, the default registry (`.ctxpack/registry`) does not hold the import.
    let o = run(d, &["test", "app.tests.yaml"]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn a_reproduce_command_compiles_the_case_as_the_runner_did() {
    let dir = project("  - name: Wrong Tools!\n    expect: { tools: [] }\n");
    let o = run(dir.path(), &["test", "extra.tests.yaml"]);
    let out = stdout(&o);
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("reproduce: ctxpack "))
        .unwrap_or_else(|| panic!("no reproduce line in\n{out}"));
    assert!(
        line.contains("target/ctxpack-test/extra/01-wrong-tools/request.json"),
        "{line}"
    );
    assert!(line.ends_with(" --explain"), "{line}");
    let args: Vec<&str> = line.split(' ').collect();
    let o = run(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let explained = stdout(&o);
    assert!(explained.contains("lookup_order"), "{explained}");
    // The written request is the case's merged over the defaults.
    let request: Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("target/ctxpack-test/extra/01-wrong-tools/request.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(request["context"]["order"]["id"], "A-1001");
}

#[test]
fn a_bad_key_fails_only_its_case_and_names_its_line() {
    let dir = project(
        "  - name: typo\n    expect: { tols: [] }\n  - name: bad value\n    expect:\n      must_refuse: maybe\n  - name: fine\n    expect: { must_refuse: false }\n  - name: unknown kind\n    expect: { error: invalid_inptu }\n",
    );
    let o = run(dir.path(), &["test", "extra.tests.yaml"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("FAIL extra.tests.yaml:15 :: typo\n    line 16: unknown expectation `tols`; did you mean `tools`?"), "{out}");
    assert!(
        out.contains("    line 19: `must_refuse` must be true or false, found a text"),
        "{out}"
    );
    assert!(out.contains("ok  extra.tests.yaml :: fine"), "{out}");
    assert!(
        out.contains("line 23: unknown error kind `invalid_inptu`"),
        "{out}"
    );
    assert!(out.ends_with("1 passed, 3 failed\n"), "{out}");
}

#[test]
fn junit_xml_has_a_suite_per_file_and_a_failure_per_failing_case() {
    let dir = project("  - name: fails <&>\n    expect: { must_refuse: true }\n  - name: passes\n    expect: { must_refuse: false }\n");
    std::fs::write(dir.path().join("broken.tests.yaml"), "pack: shop.ctxpack\n").unwrap();
    // The report's directory is created; a file with an error is exit 4, after the
    // others ran.
    let o = run(dir.path(), &["test", "--junit", "out/report.xml", "."]);
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    let xml = std::fs::read_to_string(dir.path().join("out/report.xml")).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut suites, mut cases, mut failures, mut errors) = (Vec::new(), 0, 0, 0);
    let mut names = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            Event::Eof => break,
            Event::Start(e) | Event::Empty(e) => {
                let attr = |name: &str| {
                    e.try_get_attribute(name)
                        .unwrap()
                        .map(|a| a.unescape_value().unwrap().into_owned())
                };
                match e.name().as_ref() {
                    b"testsuite" => suites.push(attr("name").unwrap()),
                    b"testcase" => {
                        cases += 1;
                        names.push(attr("name").unwrap());
                    }
                    b"failure" => failures += 1,
                    b"error" => errors += 1,
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        suites,
        ["broken.tests.yaml", "extra.tests.yaml", "shop.tests.yaml"]
    );
    assert_eq!((failures, errors), (1, 1), "{xml}");
    assert!(names.contains(&"fails <&>".to_owned()), "{names:?}");
    assert!(cases > 10, "{xml}");
}

#[test]
fn filters_select_cases_and_an_empty_run_is_a_failure() {
    let dir = project("  - name: refund one\n    expect: {}\n  - name: refund two\n    expect: {}\n  - name: other\n    expect: {}\n");
    let o = run(
        dir.path(),
        &["test", "--filter", "refund", "extra.tests.yaml"],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(stdout(&o).ends_with("2 passed, 0 failed, 1 filtered out\n"));
    let o = run(
        dir.path(),
        &[
            "test",
            "--filter",
            "refund one",
            "--filter",
            "other",
            "extra.tests.yaml",
        ],
    );
    assert!(stdout(&o).ends_with("2 passed, 0 failed, 1 filtered out\n"));

    let o = run(
        dir.path(),
        &["test", "--filter", "nothing", "extra.tests.yaml"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no test case matches `nothing`"), "{err}");
    let o = run(
        dir.path(),
        &[
            "test",
            "--allow-empty",
            "--filter",
            "nothing",
            "extra.tests.yaml",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    let empty = tempfile::tempdir().unwrap();
    let o = run(empty.path(), &["test", "--json-errors"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let e: Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(e["error"]["kind"], "no_tests");
    let o = run(empty.path(), &["test", "--allow-empty"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

#[test]
fn a_pack_as_the_root_runs_the_tests_beside_it() {
    let dir = project("  - name: extra\n    expect: {}\n");
    std::fs::create_dir(dir.path().join("other")).unwrap();
    std::fs::write(
        dir.path().join("other.tests.yaml"),
        "pack: other/x.ctxpack\ncases: []\n",
    )
    .unwrap();
    let o = run(dir.path(), &["test", "shop.ctxpack"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("ok  extra.tests.yaml :: extra"), "{out}");
    assert!(!out.contains("other.tests.yaml"), "{out}");
    let lone = dir.path().join("lone.ctxpack");
    std::fs::copy(dir.path().join("shop.ctxpack"), &lone).unwrap();
    let o = run(dir.path(), &["test", "lone.ctxpack"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no `*.tests.yaml` beside `lone.ctxpack` names it"),
        "{err}"
    );
}

#[test]
fn the_json_error_names_each_failing_case_its_line_and_reproduce_command() {
    let dir = project("  - name: fails\n    expect: { must_refuse: true }\n");
    let o = run(dir.path(), &["test", "--json-errors", "extra.tests.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&o.stderr).unwrap();
    let f = &e["error"]["failures"][0];
    assert_eq!(f["case"], "fails");
    assert_eq!(f["line"], 15);
    assert!(f["reproduce"]
        .as_str()
        .unwrap()
        .starts_with("ctxpack compile --pack shop.ctxpack"));
    let why = f["why"][0].as_array().unwrap();
    assert!(
        why.iter().any(|w| w.as_str().unwrap().contains("`minors`")),
        "{why:?}"
    );
}

/// A pack the runner cannot load fails as the same file fails `compile`: not UTF-8 or
/// not JSON is unreadable (exit 3, `unreadable_input` / `unparseable_input`), a pack
/// with errors or a tampered artifact invalid (exit 4).
#[test]
fn a_pack_that_does_not_load_fails_with_the_kind_compile_gives_it() {
    let dir = tempfile::tempdir().unwrap();
    let cases = |pack: &str| format!("pack: {pack}\ncases:\n  - name: c\n    expect: {{}}\n");
    let shop = project("");
    let built = shop.path().join("shop.json");
    let o = run(shop.path(), &["build", "shop.ctxpack", "-o", "shop.json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let artifact = std::fs::read_to_string(&built).unwrap();
    let files: [(&str, Vec<u8>, i32, &str); 4] = [
        (
            "latin1.ctxpack",
            b"pack acme/x@1.0.0 \xe9\n".to_vec(),
            3,
            "unreadable_input",
        ),
        (
            "broken.ctxpack",
            b"pack acme/x@1.0.0\ntool {\n".to_vec(),
            4,
            "invalid_pack",
        ),
        (
            "cut.json",
            artifact.as_bytes()[..artifact.len() / 2].to_vec(),
            3,
            "unparseable_input",
        ),
        (
            "tampered.json",
            artifact.replacen("acme/shop", "acme/shoq", 1).into_bytes(),
            4,
            "invalid_artifact",
        ),
    ];
    for (pack, bytes, code, kind) in files {
        std::fs::write(dir.path().join(pack), bytes).unwrap();
        std::fs::write(dir.path().join("t.tests.yaml"), cases(pack)).unwrap();
        let o = run(dir.path(), &["test", "--json-errors", "t.tests.yaml"]);
        let e: Value = serde_json::from_slice(&o.stderr).unwrap_or_default();
        assert_eq!(o.status.code(), Some(code), "{pack}: {e}");
        assert_eq!(e["error"]["kind"], kind, "{pack}: {e}");
        assert_eq!(e["error"]["exit_code"], code, "{pack}: {e}");
    }
}

/// The keys `docs/testing.md` documents are the runner's.
#[test]
fn the_testing_doc_lists_every_expectation() {
    let doc = std::fs::read_to_string(repo("docs/testing.md")).unwrap();
    for (key, _) in ctxpack::testing::EXPECTATIONS {
        assert!(
            doc.contains(&format!("| `{key}` |")),
            "`{key}` is not in the expectations table of docs/testing.md"
        );
    }
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}
