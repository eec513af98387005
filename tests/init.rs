//! `ctxpack init` through the real binary: what it writes checks with warnings denied,
//! is formatted, builds with `--locked`, compiles with its example inputs, passes its
//! own tests and its CI workflow's commands; it never overwrites, and a bad `--name` is
//! a usage error.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

/// `ctxpack ARGS` in `dir`.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    ctxpack().current_dir(dir).args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts success and returns stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(
        o.status.success(),
        "`ctxpack {}` failed ({:?}):\n{}{}",
        args.join(" "),
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Every file under `dir`, relative, `/`-separated, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap();
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

fn starter_files(file: &str) -> Vec<String> {
    let mut v = vec![
        ".github/workflows/ctxpack.yml".to_owned(),
        "examples/evidence.json".to_owned(),
        "examples/memory.json".to_owned(),
        "examples/request.json".to_owned(),
        "examples/run.json".to_owned(),
        format!("{file}.ctxpack"),
        format!("{file}.tests.yaml"),
    ];
    v.sort();
    v
}

/// A scratch directory with `ctxpack init proj --name acme/helpdesk` done in it.
fn initialized() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(tmp.path(), &["init", "proj", "--name", "acme/helpdesk"]);
    for f in starter_files("helpdesk") {
        assert!(out.contains(&format!("  {f}\n")), "{f} not listed:\n{out}");
    }
    let proj = tmp.path().join("proj");
    (tmp, proj)
}

#[test]
fn init_writes_a_project_that_checks_builds_compiles_and_tests() {
    let (_tmp, proj) = initialized();
    assert_eq!(tree(&proj), starter_files("helpdesk"));

    ok(&proj, &["check", "--deny-warnings", "."]);
    ok(&proj, &["fmt", "--check", "."]);
    let built = ok(&proj, &["build", "--locked", "helpdesk.ctxpack"]);
    assert!(built.contains("acme/helpdesk@0.1.0"), "{built}");
    assert!(
        !proj.join("ctxpack.lock").exists(),
        "no imports, no lockfile"
    );

    let envelope = ok(
        &proj,
        &[
            "compile",
            "--pack",
            "target/ctxpack/acme/helpdesk/0.1.0.json",
            "--run",
            "examples/run.json",
            "--request",
            "examples/request.json",
            "--evidence",
            "examples/evidence.json",
            "--memory",
            "examples/memory.json",
        ],
    );
    let envelope: Value = serde_json::from_str(&envelope).unwrap();
    assert_eq!(envelope["runtime_controls"]["must_refuse"], false);
    let kept: Vec<&str> = envelope["compiled_prompt"]["context_blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["bucket"].as_str().unwrap())
        .collect();
    for bucket in ["business", "evidence", "memory", "session", "tools"] {
        assert!(kept.contains(&bucket), "no {bucket} block kept: {kept:?}");
    }
    // The example message carries an email address, which the always-on policy redacts.
    let message = envelope["compiled_prompt"]["message"].as_str().unwrap();
    assert!(message.contains("[REDACTED:email]"), "{message}");

    let tests = ok(&proj, &["test", "."]);
    let last = tests.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed"), "{tests}");
    let passed: usize = last.split(' ').next().unwrap().parse().unwrap();
    assert!(passed >= 8, "{tests}");
    // At least one case per policy effect.
    for effect in [
        "refuse",
        "escalate",
        "require_approval",
        "deny",
        "redact",
        "instruct",
    ] {
        assert!(
            tests.contains(&format!(":: {effect} - ")),
            "no case for `{effect}`:\n{tests}"
        );
    }
}

/// The pack has what a starter promises: both prompts, the runtime's buckets and a
/// business bucket with a static block, a tool of each risk level with a matching
/// approval mode and an input schema, two intents (one fallback), a policy of each
/// effect, a redactor and doc comments.
#[test]
fn the_starter_pack_shows_every_feature() {
    let (_tmp, proj) = initialized();
    ok(&proj, &["build", "helpdesk.ctxpack", "-o", "pack.json"]);
    let a: Value = serde_json::from_slice(&std::fs::read(proj.join("pack.json")).unwrap()).unwrap();
    assert_eq!(a["name"], "acme/helpdesk");
    assert!(a["prompts"]["system"].is_object() && a["prompts"]["developer"].is_object());
    let buckets: Vec<&str> = a["budget"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    for b in [
        "policy", "tools", "evidence", "memory", "session", "business",
    ] {
        assert!(buckets.contains(&b), "no bucket {b}: {buckets:?}");
    }
    assert!(a["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["bucket"] == "business"));
    let tools = a["tools"].as_array().unwrap();
    for (risk, approval) in [
        ("low", "auto"),
        ("medium", "confirm"),
        ("high", "confirm"),
        ("critical", "review"),
    ] {
        let tool = tools
            .iter()
            .find(|t| t["risk"] == risk)
            .unwrap_or_else(|| panic!("no {risk} tool"));
        assert_eq!(tool["approval"], approval, "{tool}");
        assert!(
            tool["input"]["properties"]
                .as_object()
                .is_some_and(|p| !p.is_empty()),
            "{tool}"
        );
    }
    let intents = a["intents"].as_array().unwrap();
    assert_eq!(intents.len(), 2);
    assert_eq!(intents.iter().filter(|i| i["fallback"] == true).count(), 1);
    let effects: Vec<&str> = a["policies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["effects"].as_array().unwrap())
        .flat_map(|e| e.as_object().unwrap().keys())
        .map(String::as_str)
        .collect();
    for effect in [
        "refuse",
        "escalate",
        "require_approval",
        "deny",
        "redact",
        "instruct",
    ] {
        assert!(effects.contains(&effect), "no {effect}: {effects:?}");
    }
    assert!(!a["redactors"].as_array().unwrap().is_empty());
    let documented = a["policies"]
        .as_array()
        .unwrap()
        .iter()
        .chain(tools)
        .chain(intents)
        .filter(|item| item["doc"].is_string())
        .count();
    assert!(documented >= 10, "{documented} documented items");
}

/// Every `ctxpack` command of the CI workflow passes on what `init` wrote, and the
/// workflow runs the four gates.
#[test]
fn the_ci_workflow_commands_pass() {
    let (_tmp, proj) = initialized();
    let workflow: Value = serde_norway::from_slice(
        &std::fs::read(proj.join(".github/workflows/ctxpack.yml")).unwrap(),
    )
    .unwrap();
    let steps = workflow["jobs"]["ctxpack"]["steps"].as_array().unwrap();
    let commands: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .filter(|r| r.starts_with("ctxpack "))
        .collect();
    for gate in [
        "ctxpack check --deny-warnings",
        "ctxpack fmt --check",
        "ctxpack build --locked",
        "ctxpack test",
    ] {
        assert!(
            commands.iter().any(|c| c.starts_with(gate)),
            "no `{gate}` in {commands:?}"
        );
    }
    for command in commands {
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        ok(&proj, &args);
    }
    // The install step names where ctxpack comes from, and fails with a clear
    // message when that is not configured (never an empty URL).
    let install = steps
        .iter()
        .find(|s| s["name"] == "Install ctxpack")
        .unwrap();
    let run = install["run"].as_str().unwrap();
    assert!(
        run.starts_with("cargo install --locked --git \"${CTXPACK_GIT:?"),
        "{run}"
    );
    assert_eq!(install["env"]["CTXPACK_GIT"], "${{ vars.CTXPACK_GIT }}");
}

#[test]
fn the_default_name_comes_from_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = ok(tmp.path(), &["init", "Support Bot"]);
    let proj = tmp.path().join("Support Bot");
    assert_eq!(tree(&proj), starter_files("support-bot"));
    let pack = std::fs::read_to_string(proj.join("support-bot.ctxpack")).unwrap();
    assert!(
        pack.contains(r#"pack "my-org/support-bot" version "0.1.0""#),
        "{pack}"
    );
    assert!(out.contains("cd 'Support Bot'"), "{out}");
    ok(&proj, &["test", "."]);

    // Without DIR: the current directory, created by nobody.
    let here = tmp.path().join("triage_v2");
    std::fs::create_dir(&here).unwrap();
    let out = ok(&here, &["init"]);
    assert!(!out.contains("\n  cd "), "{out}");
    assert_eq!(tree(&here), starter_files("triage-v2"));
    let tests = std::fs::read_to_string(here.join("triage-v2.tests.yaml")).unwrap();
    assert!(tests.starts_with(
        "# yaml-language-server: $schema=https://ctxpack.invalid/schemas/ctxpack.tests.v1.json\n"
    ));
    assert!(tests.contains("\npack: triage-v2.ctxpack\n"));
}

#[test]
fn init_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(proj.join("examples")).unwrap();
    std::fs::write(proj.join("examples/run.json"), "{\"mine\": true}\n").unwrap();
    std::fs::write(proj.join("helpdesk.ctxpack"), "// mine\n").unwrap();
    std::fs::write(proj.join("README.md"), "mine\n").unwrap();
    let before = tree(&proj);

    let o = run_in(tmp.path(), &["init", "proj", "--name", "acme/helpdesk"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(stderr.contains("never overwrites"), "{stderr}");
    assert!(
        stderr.contains("helpdesk.ctxpack") && stderr.contains("examples/run.json"),
        "{stderr}"
    );
    assert!(!stderr.contains("README.md"), "{stderr}");
    assert!(o.stdout.is_empty());
    assert_eq!(tree(&proj), before, "something was written");
    assert_eq!(
        std::fs::read_to_string(proj.join("helpdesk.ctxpack")).unwrap(),
        "// mine\n"
    );

    // The same as one JSON object, with the files in the way.
    let o = run_in(
        tmp.path(),
        &["init", "proj", "--name", "acme/helpdesk", "--json-errors"],
    );
    assert_eq!(o.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&o.stderr).unwrap();
    assert_eq!(e["error"]["kind"], "would_overwrite");
    assert_eq!(e["error"]["exit_code"], 1);
    assert_eq!(
        e["error"]["files"],
        serde_json::json!(["helpdesk.ctxpack", "examples/run.json"])
    );

    // A file where a directory must go is in the way too.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join(".github"), "").unwrap();
    let o = run_in(&other, &["init"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains(".github"), "{}", text(&o.stderr));
    assert_eq!(tree(&other), [".github"]);

    // A second init of a fresh project is refused as a whole.
    let (_tmp, proj) = initialized();
    let o = run_in(&proj, &["init", "--name", "acme/helpdesk"]);
    assert_eq!(o.status.code(), Some(1));
    // Under another name only the shared files are in the way, and still nothing is
    // written.
    let o = run_in(&proj, &["init", "--name", "acme/other"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!proj.join("other.ctxpack").exists());
}

#[test]
fn a_bad_name_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        "helpdesk",
        "Acme/helpdesk",
        "acme/help_desk",
        "acme/",
        "a/b/c",
        "acme/helpdesk@1.0.0",
    ] {
        let o = run_in(tmp.path(), &["init", "proj", "--name", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
        let stderr = text(&o.stderr);
        assert!(
            stderr.contains("is not a pack name") && stderr.contains("scope/name"),
            "{bad}: {stderr}"
        );
        let o = run_in(
            tmp.path(),
            &["init", "proj", "--name", bad, "--json-errors"],
        );
        assert_eq!(o.status.code(), Some(2));
        let e: Value = serde_json::from_slice(&o.stderr).unwrap();
        assert_eq!(e["error"]["kind"], "usage");
    }
    assert!(tree(tmp.path()).is_empty(), "{:?}", tree(tmp.path()));
}

#[test]
fn a_file_in_place_of_the_directory_is_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("proj"), "").unwrap();
    let o = run_in(tmp.path(), &["init", "proj"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("not a directory"));
}
