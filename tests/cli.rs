//! End-to-end tests of the `ctxpack` binary: exit codes, output formats, build,
//! verify and determinism.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap();
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const BROKEN: &str = "pack \"a/b\" version \"1.0.0\"\nprompt system \"hi\"\nbudget { total 100 bucket policy { share 20% } bucket tools { share 20% } bucket evidence { share 20% } bucket memory { share 20% } bucket session { share 20% } }\nintent main { tools nope task \"x\" }\n";

#[test]
fn check_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    ctxpack()
        .args(["check"])
        .arg(data("spec_example.ctxpack"))
        .assert()
        .code(0);
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    ctxpack().arg("check").arg(&broken).assert().code(1);
    // Warnings only: exit 0, or 1 with --deny-warnings.
    let warn = write(
        dir.path(),
        "warn.ctxpack",
        &std::fs::read_to_string(data("spec_example.ctxpack"))
            .unwrap()
            .replace("description \"Fetch an order by its id.\"\n", ""),
    );
    ctxpack().arg("check").arg(&warn).assert().code(0);
    ctxpack()
        .args(["check", "--deny-warnings"])
        .arg(&warn)
        .assert()
        .code(1);
    ctxpack().args(["check", "--no-such-flag"]).assert().code(2);
    ctxpack()
        .args(["check", "--format", "xml", "."])
        .assert()
        .code(2);
    ctxpack()
        .args(["check", "/no/such/path.ctxpack"])
        .assert()
        .code(3);
    let bad_utf8 = dir.path().join("bin.ctxpack");
    std::fs::write(&bad_utf8, [0xff, 0xfe, 0x00]).unwrap();
    ctxpack().arg("check").arg(&bad_utf8).assert().code(3);
    // The readable files are still checked and reported: with a machine format, stdout
    // holds one document of them, which also names the unreadable paths (a reader of
    // stdout alone must not see a clean check); they are on stderr too; exit 3.
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    for format in ["json", "sarif", "github"] {
        let o = ctxpack()
            .args(["check", "--format", format])
            .arg(&broken)
            .arg("/no/such/path.ctxpack")
            .arg(&bad_utf8)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{format}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains("/no/such/path.ctxpack"), "{stderr}");
        assert!(stderr.contains("bin.ctxpack"), "{stderr}");
        let named = |messages: Vec<String>| {
            assert_eq!(messages.len(), 2, "{format}: {messages:?}");
            assert!(
                messages[0].contains("/no/such/path.ctxpack"),
                "{messages:?}"
            );
            assert!(messages[1].contains("bin.ctxpack"), "{messages:?}");
        };
        if format == "github" {
            let text = String::from_utf8(o.stdout).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines[0].starts_with("::error file="), "{text}");
            assert!(lines[0].contains("broken.ctxpack"), "{text}");
            named(
                lines
                    .iter()
                    .filter_map(|l| l.strip_prefix("::error::"))
                    .map(str::to_owned)
                    .collect(),
            );
            continue;
        }
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
        if format == "json" {
            assert!(doc["errors"].as_u64().unwrap() > 0, "{doc}");
            assert!(doc["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .all(|d| d["file"].as_str().unwrap().ends_with("broken.ctxpack")));
            named(
                doc["unreadable"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(text)
                    .collect(),
            );
        } else {
            let invocation = &doc["runs"][0]["invocations"][0];
            assert_eq!(invocation["executionSuccessful"], false, "{doc}");
            let notes = invocation["toolExecutionNotifications"].as_array().unwrap();
            assert!(notes.iter().all(|n| n["level"] == "error"));
            named(notes.iter().map(|n| text(&n["message"]["text"])).collect());
            assert!(!doc["runs"][0]["results"].as_array().unwrap().is_empty());
        }
    }
    // Every input readable: no `unreadable` member, a successful invocation.
    for format in ["json", "sarif"] {
        let o = ctxpack()
            .args(["check", "--format", format])
            .arg(&broken)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{format}");
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        if format == "json" {
            assert!(doc.get("unreadable").is_none(), "{doc}");
        } else {
            assert_eq!(
                doc["runs"][0]["invocations"],
                serde_json::json!([{ "executionSuccessful": true }])
            );
        }
    }
}

#[test]
fn check_json_format_has_the_spec_fields() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    let out = ctxpack()
        .args(["check", "--format", "json"])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["errors"], 1);
    assert_eq!(v["warnings"], 0);
    let d = &v["diagnostics"][0];
    assert_eq!(d["code"], "E0102");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["line"], 4);
    assert_eq!(d["column"], 21);
    assert_eq!(d["end_line"], 4);
    assert_eq!(d["end_column"], 25);
    for key in ["message", "file", "help", "labels"] {
        assert!(d.get(key).is_some(), "missing {key}");
    }
}

/// Columns count Unicode scalar values, whatever the bytes before them.
#[test]
fn json_columns_count_scalar_values() {
    let dir = tempfile::tempdir().unwrap();
    let text = BROKEN.replace(
        "intent main { tools nope",
        "/// 😀 é 中文\nintent main { description \"😀中\" tools nope",
    );
    let f = write(dir.path(), "mb.ctxpack", &text);
    let out = ctxpack()
        .args(["check", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let d = &v["diagnostics"][0];
    let line = text.lines().nth(4).unwrap();
    let byte = line.find("nope").unwrap();
    assert_eq!(d["line"], 5);
    assert_eq!(d["column"], line[..byte].chars().count() + 1);
    assert_ne!(
        d["column"],
        byte + 1,
        "the test must exercise multi-byte text"
    );
    // The human report's `file:line:col` header says the same column.
    let human = ctxpack().arg("check").arg(&f).output().unwrap();
    let stderr = String::from_utf8_lossy(&human.stderr);
    let header = format!("mb.ctxpack:5:{}]", d["column"]);
    assert!(stderr.contains(&header), "{header} not in:\n{stderr}");
}

#[test]
fn check_sarif_and_github_formats() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    let out = ctxpack()
        .args(["check", "--format", "sarif"])
        .arg(&broken)
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let result = &v["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "E0102");
    assert_eq!(result["level"], "error");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"],
        4
    );
    assert_eq!(v["runs"][0]["tool"]["driver"]["rules"][0]["id"], "E0102");

    let out = ctxpack()
        .args(["check", "--format", "github"])
        .arg(&broken)
        .output()
        .unwrap();
    let text = stdout(&out);
    let line = text.lines().next().unwrap();
    assert!(line.starts_with("::error file="), "{line}");
    assert!(line.contains(",line=4,col=21::"), "{line}");
    assert!(line.contains("::[E0102] unknown tool `nope`"), "{line}");
}

#[test]
fn check_recurses_into_directories_in_sorted_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("b/c")).unwrap();
    write(dir.path(), "z.ctxpack", BROKEN);
    write(&dir.path().join("b/c"), "a.ctxpack", BROKEN);
    write(dir.path(), "ignored.txt", "not a pack");
    let out = ctxpack()
        .args(["check", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let files: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["file"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 2);
    assert!(
        files[0].ends_with("b/c/a.ctxpack") && files[1].ends_with("z.ctxpack"),
        "{files:?}"
    );
}

#[test]
fn check_output_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    let a = ctxpack()
        .args(["check", "--format", "json"])
        .arg(&broken)
        .output()
        .unwrap();
    let b = ctxpack()
        .args(["check", "--format", "json"])
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn explain_prints_pages() {
    let out = ctxpack().args(["explain", "E0401"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("E0401"));
    ctxpack().args(["explain", "e0102"]).assert().code(0);
    ctxpack().args(["explain", "E9999"]).assert().code(2);
    let list = ctxpack().arg("explain").output().unwrap();
    assert!(stdout(&list).lines().count() >= 36);
}

#[test]
fn build_is_reproducible_across_directories() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(data("spec_example.ctxpack")).unwrap();
    let pa = write(a.path(), "pack.ctxpack", &source);
    std::fs::create_dir_all(b.path().join("deep/er")).unwrap();
    let pb = write(&b.path().join("deep/er"), "other-name.ctxpack", &source);
    ctxpack()
        .current_dir(a.path())
        .arg("build")
        .arg(&pa)
        .assert()
        .code(0);
    ctxpack()
        .current_dir(b.path())
        .arg("build")
        .arg(&pb)
        .arg("-o")
        .arg(b.path().join("x.json"))
        .assert()
        .code(0);
    let default_out = a
        .path()
        .join("target/ctxpack/acme/support-agent/1.4.0.json");
    let first = std::fs::read(&default_out).unwrap();
    let second = std::fs::read(b.path().join("x.json")).unwrap();
    assert_eq!(first, second);
    assert_eq!(first.last(), Some(&b'\n'));
    ctxpack().arg("verify").arg(&default_out).assert().code(0);
    // --pretty is for people, but carries the same hash and verifies.
    let pretty = a.path().join("pretty.json");
    ctxpack()
        .arg("build")
        .arg(&pa)
        .arg("--pretty")
        .arg("-o")
        .arg(&pretty)
        .assert()
        .code(0);
    ctxpack().arg("verify").arg(&pretty).assert().code(0);
}

#[test]
fn build_refuses_packs_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let broken = write(dir.path(), "broken.ctxpack", BROKEN);
    ctxpack()
        .arg("build")
        .arg(&broken)
        .arg("-o")
        .arg(dir.path().join("o.json"))
        .assert()
        .code(1);
    assert!(!dir.path().join("o.json").exists());
    ctxpack()
        .arg("build")
        .arg(dir.path().join("missing.ctxpack"))
        .assert()
        .code(3);
}

#[test]
fn verify_refuses_tampering_and_foreign_formats() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("a.json");
    ctxpack()
        .arg("build")
        .arg(data("spec_example.ctxpack"))
        .arg("-o")
        .arg(&out)
        .assert()
        .code(0);
    let text = std::fs::read_to_string(&out).unwrap();

    // One byte of content changed, hash kept: refused.
    let tampered = write(
        dir.path(),
        "t.json",
        &text.replacen("Refunds are possible", "Refunds are possiblE", 1),
    );
    let o = ctxpack().arg("verify").arg(&tampered).output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("hash mismatch"));

    let foreign = write(
        dir.path(),
        "f.json",
        &text.replacen("ctxpack.pack/v1", "ctxpack.pack/v9", 1),
    );
    let o = ctxpack().arg("verify").arg(&foreign).output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown artifact format"));

    let garbage = write(dir.path(), "g.json", "{ not json");
    ctxpack().arg("verify").arg(&garbage).assert().code(3);
    ctxpack()
        .arg("verify")
        .arg(dir.path().join("none.json"))
        .assert()
        .code(3);
}

#[test]
fn imports_resolve_lock_and_report_e070x() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = "pack \"acme/base\" version \"2.1.0\" library\ncontext { user.age: int }\ntool lookup { description \"x\" kind read risk low approval auto }\n";
    let app = "pack \"acme/app\" version \"1.0.0\"\nimport \"acme/base\" version \"2.1.0\"\nprompt system \"hi\"\nbudget { total 1000 bucket policy { share 20% } bucket tools { share 20% } bucket evidence { share 20% } bucket memory { share 20% } bucket session { share 20% } }\nintent main { tools lookup task \"age {{ ctx.user.age }}\" }\n";
    let base_path = write(d, "base.ctxpack", base);
    std::fs::create_dir_all(d.join("app")).unwrap();
    let app_path = write(&d.join("app"), "app.ctxpack", app);
    let reg = d.join("reg");
    let reg_file = reg.join("acme/base/2.1.0.json");
    std::fs::create_dir_all(reg_file.parent().unwrap()).unwrap();

    // Not published yet: E0702 and no cascade of unknown names.
    let o = ctxpack()
        .args(["check", "--format", "json", "--registry"])
        .arg(&reg)
        .arg(&app_path)
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let codes: Vec<&str> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["E0702"]);

    ctxpack()
        .arg("build")
        .arg(&base_path)
        .arg("-o")
        .arg(&reg_file)
        .assert()
        .code(0);
    // --locked refuses to create the lock.
    ctxpack()
        .args(["build", "--locked", "--registry"])
        .arg(&reg)
        .arg(&app_path)
        .arg("-o")
        .arg(d.join("app.json"))
        .assert()
        .code(1);
    build_with(&reg, &app_path, &d.join("app.json")).code(0);
    let lock = std::fs::read_to_string(d.join("app/ctxpack.lock")).unwrap();
    assert!(lock.contains("acme/base") && lock.contains("blake3:"));
    ctxpack()
        .args(["build", "--locked", "--registry"])
        .arg(&reg)
        .arg(&app_path)
        .arg("-o")
        .arg(d.join("app.json"))
        .assert()
        .code(0);
    let artifact: Value =
        serde_json::from_slice(&std::fs::read(d.join("app.json")).unwrap()).unwrap();
    assert_eq!(artifact["dependencies"][0]["name"], "acme/base");
    assert_eq!(artifact["tools"][0]["provenance"], "acme/base@2.1.0");

    // The registry copy changes under the same version: E0703.
    write(
        d,
        "base.ctxpack",
        &base.replace("description \"x\"", "description \"y\""),
    );
    ctxpack()
        .arg("build")
        .arg(d.join("base.ctxpack"))
        .arg("-o")
        .arg(&reg_file)
        .assert()
        .code(0);
    let o = ctxpack()
        .args(["check", "--format", "json", "--registry"])
        .arg(&reg)
        .arg(&app_path)
        .output()
        .unwrap();
    assert!(stdout(&o).contains("\"E0703\""), "{}", stdout(&o));

    // The registry copy edited in place (its `hash` member left as it was): with the
    // lock's entry, E0703 too; without a lock, the copy cannot be loaded (E0702).
    let text = std::fs::read_to_string(&reg_file).unwrap();
    std::fs::write(
        &reg_file,
        text.replace("\"description\":\"y\"", "\"description\":\"z\""),
    )
    .unwrap();
    let codes = |o: &std::process::Output| -> Vec<String> {
        let v: Value = serde_json::from_str(&stdout(o)).unwrap();
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_owned())
            .collect()
    };
    let check = || {
        ctxpack()
            .args(["check", "--format", "json", "--registry"])
            .arg(&reg)
            .arg(&app_path)
            .output()
            .unwrap()
    };
    let o = check();
    assert_eq!(codes(&o), ["E0703"], "{}", stdout(&o));
    assert!(
        stdout(&o).contains("no longer matches `ctxpack.lock`"),
        "{}",
        stdout(&o)
    );
    std::fs::remove_file(d.join("app/ctxpack.lock")).unwrap();
    let o = check();
    assert_eq!(codes(&o), ["E0702"], "{}", stdout(&o));
}

/// Builds `src` (in `d`) into registry `reg` as `name@version`, leaving no lock behind.
fn publish_source(d: &Path, reg: &Path, src: &str, name: &str, version: &str) {
    let p = write(d, "tmp.ctxpack", src);
    let out = reg.join(name).join(format!("{version}.json"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    build_with(reg, &p, &out).code(0);
    std::fs::remove_file(d.join("ctxpack.lock")).ok();
}

/// `ctxpack build --registry REG SRC -o OUT`.
fn build_with(reg: &Path, src: &Path, out: &Path) -> assert_cmd::assert::Assert {
    ctxpack()
        .args(["build", "--registry"])
        .arg(reg)
        .arg(src)
        .arg("-o")
        .arg(out)
        .assert()
}

/// The code and line of each diagnostic of a `check --format json` run.
fn codes_and_lines(o: &Output) -> Vec<(String, u64)> {
    let v: Value = serde_json::from_str(&stdout(o)).unwrap();
    v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn import_conflicts_and_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reg = d.join("reg");
    let publish =
        |src: &str, name: &str, version: &str| publish_source(d, &reg, src, name, version);
    let tool = |name: &str| {
        format!("tool {name} {{ description \"x\" kind read risk low approval auto }}\n")
    };
    publish(
        &format!(
            "pack \"acme/a\" version \"1.0.0\" library\n{}",
            tool("shared")
        ),
        "acme/a",
        "1.0.0",
    );
    publish(
        &format!(
            "pack \"acme/c\" version \"1.0.0\" library\n{}",
            tool("shared")
        ),
        "acme/c",
        "1.0.0",
    );
    publish(
        &format!(
            "pack \"acme/b\" version \"1.0.0\" library\nimport \"acme/a\" version \"1.0.0\"\n{}",
            tool("other")
        ),
        "acme/b",
        "1.0.0",
    );

    let codes = |src: &str| -> Vec<(String, u64)> {
        let p = write(d, "case.ctxpack", src);
        let o = ctxpack()
            .args(["check", "--format", "json", "--registry"])
            .arg(&reg)
            .arg(&p)
            .output()
            .unwrap();
        codes_and_lines(&o)
    };
    // Two imports define `shared`: E0704 at the second import, pointing at both.
    let two = "pack \"acme/x\" version \"1.0.0\" library\nimport \"acme/a\" version \"1.0.0\"\nimport \"acme/c\" version \"1.0.0\"\n";
    assert_eq!(codes(two), [("E0704".to_owned(), 3)]);
    // A local definition clashing with an imported one: E0704 at the later of the two.
    let local = format!(
        "pack \"acme/x\" version \"1.0.0\" library\nimport \"acme/a\" version \"1.0.0\"\n{}",
        tool("shared")
    );
    assert_eq!(codes(&local), [("E0704".to_owned(), 3)]);
    let local_first = format!(
        "pack \"acme/x\" version \"1.0.0\" library\n{}import \"acme/a\" version \"1.0.0\"\n",
        tool("shared")
    );
    assert_eq!(codes(&local_first), [("E0704".to_owned(), 3)]);
    // A local field under an imported one (or above it) is E0206, at the local field.
    publish(
        "pack \"acme/f\" version \"1.0.0\" library\ncontext { user.age: int }\n",
        "acme/f",
        "1.0.0",
    );
    for local in ["user.age.years: int", "user: string"] {
        let src = format!(
            "pack \"acme/x\" version \"1.0.0\" library\nimport \"acme/f\" version \"1.0.0\"\ncontext {{\n  {local}\n}}\n"
        );
        assert_eq!(codes(&src), [("E0206".to_owned(), 4)], "{local}");
    }
    // A diamond (b brings a's `shared` again, from the same origin) is no conflict.
    let diamond = "pack \"acme/x\" version \"1.0.0\" library\nimport \"acme/a\" version \"1.0.0\"\nimport \"acme/b\" version \"1.0.0\"\n";
    assert_eq!(codes(diamond), []);
    // A local `shared` beside that diamond is one clash, not one per import.
    let clash = format!("{diamond}{}", tool("shared"));
    assert_eq!(codes(&clash), [("E0704".to_owned(), 4)]);
    // acme/a importing acme/b, which depends on acme/a: a cycle.
    let cycle = "pack \"acme/a\" version \"1.0.0\" library\nimport \"acme/b\" version \"1.0.0\"\n";
    assert_eq!(codes(cycle), [("E0705".to_owned(), 2)]);
    let o = ctxpack()
        .args(["check", "--registry"])
        .arg(&reg)
        .arg(d.join("case.ctxpack"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("acme/a → acme/b@1.0.0 → acme/a@1.0.0"));
}

/// A pack imported under one version must be one content, wherever it comes from: an
/// import built against a copy that the lock or another import does not agree with
/// is E0703 at that import.
#[test]
fn imports_built_against_another_copy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reg = d.join("reg");
    let publish = |src: &str, name: &str| publish_source(d, &reg, src, name, "1.0.0");
    let a = |text: &str| {
        format!("pack \"acme/a\" version \"1.0.0\" library\ntool shared {{ description \"{text}\" kind read risk low approval auto }}\n")
    };
    let importing = |name: &str| {
        format!(
            "pack \"acme/{name}\" version \"1.0.0\" library\nimport \"acme/a\" version \"1.0.0\"\n"
        )
    };
    publish(&a("x"), "acme/a");
    publish(&importing("b"), "acme/b");
    // acme/a 1.0.0 changed in place after b was built against it; c is built against
    // the changed copy.
    publish(&a("y"), "acme/a");
    publish(&importing("c"), "acme/c");

    let app_dir = d.join("app");
    std::fs::create_dir_all(&app_dir).unwrap();
    let check = |src: &str| -> (Vec<(String, u64)>, String) {
        let p = write(&app_dir, "x.ctxpack", src);
        let o = ctxpack()
            .args(["check", "--format", "json", "--registry"])
            .arg(&reg)
            .arg(&p)
            .output()
            .unwrap();
        (codes_and_lines(&o), stdout(&o))
    };
    let header = "pack \"acme/x\" version \"1.0.0\" library\n";
    let b = "import \"acme/b\" version \"1.0.0\"\n";
    let c = "import \"acme/c\" version \"1.0.0\"\n";
    let direct = "import \"acme/a\" version \"1.0.0\"\n";
    // Two imports built against two contents of acme/a 1.0.0: at the later import.
    let (codes, out) = check(&format!("{header}{b}{c}"));
    assert_eq!(codes, [("E0703".to_owned(), 3)], "{out}");
    assert!(
        out.contains("`acme/a@1.0.0` is brought in twice with different contents"),
        "{out}"
    );
    // acme/a imported directly (the changed copy) beside b, built against the other.
    let (codes, out) = check(&format!("{header}{direct}{b}"));
    assert_eq!(codes, [("E0703".to_owned(), 3)], "{out}");
    assert!(
        out.contains("imported directly, `acme/a@1.0.0` has hash"),
        "{out}"
    );
    // ... and beside c, built against the same copy: no conflict.
    assert_eq!(check(&format!("{header}{direct}{c}")).0, []);

    // The lock records acme/a, which b brings in; b's copy is not the locked one.
    std::fs::remove_file(app_dir.join("ctxpack.lock")).ok();
    let src = write(&app_dir, "x.ctxpack", &format!("{header}{b}"));
    build_with(&reg, &src, &d.join("x.json")).code(0);
    let lock_path = app_dir.join("ctxpack.lock");
    let lock = std::fs::read_to_string(&lock_path).unwrap();
    assert!(
        lock.contains("\"acme/a\"") && lock.contains("\"acme/b\""),
        "{lock}"
    );
    let mut locked: Value = serde_json::from_str(&lock).unwrap();
    for entry in locked["packages"].as_array_mut().unwrap() {
        if entry["name"] == "acme/a" {
            entry["hash"] = Value::from(format!("blake3:{}", "0".repeat(64)));
        }
    }
    std::fs::write(&lock_path, serde_json::to_vec(&locked).unwrap()).unwrap();
    let (codes, out) = check(&format!("{header}{b}"));
    assert_eq!(codes, [("E0703".to_owned(), 2)], "{out}");
    assert!(
        out.contains("`acme/b@1.0.0` was built against `acme/a@1.0.0` with a hash that `ctxpack.lock` does not record"),
        "{out}"
    );
    // A build refuses it and leaves the lock as it was.
    build_with(&reg, &src, &d.join("x.json")).code(1);
    assert_eq!(
        serde_json::from_slice::<Value>(&std::fs::read(&lock_path).unwrap()).unwrap(),
        locked
    );
}

#[test]
fn publish_and_diff_accept_sources() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let source = std::fs::read_to_string(data("spec_example.ctxpack")).unwrap();
    let v1 = write(d, "v1.ctxpack", &source);
    let v2 = write(
        d,
        "v2.ctxpack",
        &source
            .replace("version \"1.4.0\"", "version \"1.5.0\"")
            .replace("risk low", "risk medium"),
    );
    let reg = d.join("reg");
    ctxpack()
        .args(["publish", "--registry"])
        .arg(&reg)
        .arg(&v1)
        .assert()
        .code(0);
    assert!(reg.join("acme/support-agent/1.4.0.json").exists());
    // Identical bytes again: idempotent.
    ctxpack()
        .args(["publish", "--registry"])
        .arg(&reg)
        .arg(&v1)
        .assert()
        .code(0);
    let out = ctxpack()
        .args(["diff", "--format", "json"])
        .arg(&v1)
        .arg(&v2)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(text.contains("risk"), "{text}");
    // The registry copy against the new source.
    let out = ctxpack()
        .args(["diff", "--registry"])
        .arg(&reg)
        .arg("acme/support-agent@1.4.0")
        .arg(&v2)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout(&out).contains("risk raised"), "{}", stdout(&out));
    // A source with errors is not published.
    let broken = write(d, "broken.ctxpack", BROKEN);
    ctxpack()
        .args(["publish", "--registry"])
        .arg(&reg)
        .arg(&broken)
        .assert()
        .code(1);
}

/// `ctxpack … | head` must end quietly when the reader goes away: the default
/// SIGPIPE action, not a "failed printing to stdout" panic.
#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let bin = assert_cmd::cargo::cargo_bin("ctxpack");
    // The read end is closed before the child starts, so its first write meets a closed
    // pipe whatever the timing.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(bin)
        .arg("explain")
        .env("NO_COLOR", "1")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    const SIGPIPE: i32 = 13; // the same on Linux and macOS
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{:?}", out.status);
}
