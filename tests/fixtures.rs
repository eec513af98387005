//! The checker's fixture corpus: every file under `tests/fixtures/ok` checks clean;
//! every file under `tests/fixtures/err` produces exactly the diagnostics its
//! `// expect: CODE@LINE` header lines list, in order. Each fixture's human and JSON
//! output is snapshotted.

use std::path::{Path, PathBuf};

use ctxpack::check::check_source;
use ctxpack::diagnostic::{to_human, to_json, FileReport};

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ctxpack"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", root.display());
    files
}

fn report(path: &Path) -> FileReport {
    let source = std::fs::read_to_string(path).unwrap();
    let checked = check_source(&source);
    let name = path.file_name().unwrap().to_string_lossy();
    let dir = path
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    FileReport {
        path: format!("{dir}/{name}"),
        source,
        diagnostics: checked.diagnostics,
    }
}

fn expectations(source: &str) -> Vec<(String, usize)> {
    source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("// expect:"))
        .map(|e| {
            let (code, line) = e.trim().split_once('@').expect("expect: CODE@LINE");
            (
                code.trim().to_owned(),
                line.trim().parse().expect("line number"),
            )
        })
        .collect()
}

fn snapshot(path: &Path, report: &FileReport) {
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let dir = path
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let human = to_human(report, false);
    let json = serde_json::to_string_pretty(&to_json(std::slice::from_ref(report))).unwrap();
    insta::with_settings!({ snapshot_path => "snapshots/fixtures", prepend_module_to_snapshot => false }, {
        insta::assert_snapshot!(format!("{dir}__{stem}__human"), human);
        insta::assert_snapshot!(format!("{dir}__{stem}__json"), json);
    });
}

#[test]
fn ok_fixtures_check_clean() {
    let mut failures = Vec::new();
    for path in fixtures("ok") {
        let r = report(&path);
        if !r.diagnostics.is_empty() {
            failures.push(format!("{}:\n{}", path.display(), to_human(&r, false)));
        }
        snapshot(&path, &r);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn err_fixtures_report_exactly_their_expectations() {
    let mut failures = Vec::new();
    for path in fixtures("err") {
        let r = report(&path);
        let expected = expectations(&r.source);
        assert!(
            !expected.is_empty(),
            "{} has no `// expect:` lines",
            path.display()
        );
        let actual: Vec<(String, usize)> = r
            .located()
            .iter()
            .map(|l| (l.code.to_owned(), l.line))
            .collect();
        if actual != expected {
            failures.push(format!(
                "{}\n  expected {:?}\n  actual   {:?}\n{}",
                path.display(),
                expected,
                actual,
                to_human(&r, false)
            ));
        }
        snapshot(&path, &r);
    }
    assert!(
        failures.is_empty(),
        "{} fixture(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every code of the language reference is triggered by at least one fixture
/// (E0702–E0705 need a registry and are covered by the import tests).
#[test]
fn every_language_code_has_a_fixture() {
    let mut seen = std::collections::BTreeSet::new();
    for path in fixtures("err") {
        let source = std::fs::read_to_string(&path).unwrap();
        for (code, _) in expectations(&source) {
            seen.insert(code);
        }
    }
    let missing: Vec<&str> = ctxpack::codes::CODES
        .iter()
        .map(|c| c.code)
        .filter(|c| !c.starts_with('R') && !matches!(*c, "E0702" | "E0703" | "E0704" | "E0705"))
        .filter(|c| !seen.contains(*c))
        .collect();
    assert!(
        missing.is_empty(),
        "codes without an err fixture: {missing:?}"
    );
}

/// Snapshots that no fixture produces any more fail the build, so renamed or deleted
/// fixtures cannot leave stale expectations behind.
#[test]
fn no_stale_fixture_snapshots() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/fixtures");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut expected = std::collections::BTreeSet::new();
    for kind in ["ok", "err"] {
        for path in fixtures(kind) {
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            for form in ["human", "json"] {
                expected.insert(format!("{kind}__{stem}__{form}.snap"));
            }
        }
    }
    let stale: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".snap") && !expected.contains(n))
        .collect();
    assert!(stale.is_empty(), "stale snapshots: {stale:?}");
}
