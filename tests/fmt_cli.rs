//! `ctxpack fmt` end to end: rewriting, `--check`, syntax errors, unreadable paths
//! and standard input.

use std::path::Path;

use assert_cmd::Command;

fn ctxpack() -> Command {
    let mut cmd = Command::cargo_bin("ctxpack").unwrap_or_else(|e| panic!("{e}"));
    cmd.env("NO_COLOR", "1");
    cmd
}

const MESSY: &str = "pack   \"a/b\" version \"1.0.0\"\ncontext{a:int}\n";
const TIDY: &str = "pack \"a/b\" version \"1.0.0\"\n\ncontext {\n  a: int\n}\n";

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

#[test]
fn check_lists_unformatted_files_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let messy = write(dir.path(), "messy.ctxpack", MESSY);
    write(dir.path(), "tidy.ctxpack", TIDY);
    let out = ctxpack()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("messy.ctxpack") && !stdout.contains("tidy.ctxpack"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&messy).unwrap_or_default(), MESSY);
}

#[test]
fn rewrites_in_place_then_checks_clean() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let messy = write(dir.path(), "messy.ctxpack", MESSY);
    ctxpack().arg("fmt").arg(dir.path()).assert().code(0);
    assert_eq!(std::fs::read_to_string(&messy).unwrap_or_default(), TIDY);
    ctxpack()
        .args(["fmt", "--check"])
        .arg(dir.path())
        .assert()
        .code(0);
}

#[test]
fn syntax_errors_are_reported_and_never_rewritten() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bad = "pack  \"a/b\" version \"1.0.0\"\ntool {\n";
    let path = write(dir.path(), "bad.ctxpack", bad);
    let out = ctxpack()
        .arg("fmt")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("E0001"));
    assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), bad);
}

#[test]
fn unreadable_paths_exit_3() {
    ctxpack()
        .args(["fmt", "/no/such/dir/x.ctxpack"])
        .assert()
        .code(3);
}

#[test]
fn standard_input_to_standard_output() {
    ctxpack()
        .args(["fmt", "-"])
        .write_stdin(MESSY)
        .assert()
        .code(0)
        .stdout(TIDY);
    ctxpack()
        .args(["fmt", "--check", "-"])
        .write_stdin(TIDY)
        .assert()
        .code(0);
}

/// `-` beside other paths is still standard input to standard output: never a file
/// named `-`, and read once however often it is given.
#[test]
fn standard_input_beside_files_goes_to_standard_output() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let messy = write(dir.path(), "messy.ctxpack", MESSY);
    for args in [&["fmt", "-", "-"][..], &["fmt", "-", "messy.ctxpack"]] {
        std::fs::write(&messy, MESSY).unwrap_or_else(|e| panic!("{e}"));
        let out = ctxpack()
            .current_dir(dir.path())
            .args(args)
            .write_stdin(MESSY)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), TIDY, "{args:?}");
        assert!(!dir.path().join("-").exists(), "{args:?}");
    }
    assert_eq!(std::fs::read_to_string(&messy).unwrap_or_default(), TIDY);
    // Already formatted, it is still echoed.
    let out = ctxpack()
        .current_dir(dir.path())
        .args(["fmt", "-", "messy.ctxpack"])
        .write_stdin(TIDY)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), TIDY);
}

/// `--check --diff -` prints the diff, and a path that cannot be read does not stop
/// the others from being formatted (exit 3 all the same).
#[test]
fn diff_of_standard_input_and_formatting_past_a_missing_path() {
    let out = ctxpack()
        .args(["fmt", "--check", "--diff", "-"])
        .write_stdin(MESSY)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("+++ b/<stdin>") && stdout.contains("+context {"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let messy = write(dir.path(), "messy.ctxpack", MESSY);
    let out = ctxpack()
        .arg("fmt")
        .arg(dir.path().join("missing.ctxpack"))
        .arg(&messy)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.ctxpack"));
    assert_eq!(std::fs::read_to_string(&messy).unwrap_or_default(), TIDY);
}
