//! `ctxpack check --format sarif` against the official OASIS SARIF 2.1.0 JSON Schema
//! (errata 01, vendored in `tests/data/sarif/`) with format assertions on, so every
//! `artifactLocation.uri` must be an RFC 3986 URI reference and every
//! `originalUriBaseIds` entry an absolute URI. The files checked have names that need
//! percent-encoding (spaces, `%`, `#`, `?`, `:`, brackets, non-ASCII), given as
//! relative paths, as absolute paths under the working directory and outside it, and
//! through a directory walk; each location must also resolve back to its file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;
use url::Url;

/// The `id` the official schema declares for itself.
const SCHEMA_ID: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// A pack with one unknown tool: E0102 on line 4.
const BROKEN: &str = "pack \"a/b\" version \"1.0.0\"\nprompt system \"hi\"\nbudget { total 100 bucket policy { share 20% } bucket tools { share 20% } bucket evidence { share 20% } bucket memory { share 20% } bucket session { share 20% } }\nintent main { tools nope task \"x\" }\n";

/// Files under the working directory, as relative paths, and the `uri` each must get.
const NAMES: &[(&str, &str)] = &[
    ("sub/my file.ctxpack", "sub/my%20file.ctxpack"),
    ("sub/we,ird:100%.ctxpack", "sub/we,ird:100%25.ctxpack"),
    // A `:` in the first segment would read as a scheme.
    ("a:b.ctxpack", "a%3Ab.ctxpack"),
    ("#hash?.ctxpack", "%23hash%3F.ctxpack"),
    ("café.ctxpack", "caf%C3%A9.ctxpack"),
    ("100%25.ctxpack", "100%2525.ctxpack"),
    ("br[1] {x}.ctxpack", "br%5B1%5D%20%7Bx%7D.ctxpack"),
    ("q\"<>^`|.ctxpack", "q%22%3C%3E%5E%60%7C.ctxpack"),
    ("keep!$&'()*+,;=@~.ctxpack", "keep!$&'()*+,;=@~.ctxpack"),
    (
        "dir with space/ü 𝔘.ctxpack",
        "dir%20with%20space/%C3%BC%20%F0%9D%94%98.ctxpack",
    ),
];

/// The working directory's name inside the temp dir, and its encoding.
const WORK: (&str, &str) = ("wörk dir", "w%C3%B6rk%20dir");
/// A file outside the working directory, relative to the temp dir, and its encoding.
const OUTSIDE: (&str, &str) = ("out side/x#1.ctxpack", "out%20side/x%231.ctxpack");

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

struct Validator {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Validator {
    fn new() -> Self {
        let text = std::fs::read(repo("tests/data/sarif/sarif-schema-2.1.0.json")).unwrap();
        let schema: Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            schema["id"], SCHEMA_ID,
            "the vendored schema is the OASIS one"
        );
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        compiler.enable_format_assertions();
        compiler.add_resource(SCHEMA_ID, schema).unwrap();
        let index = compiler.compile(SCHEMA_ID, &mut schemas).unwrap();
        Validator { schemas, index }
    }

    fn check(&self, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, self.index)
            .map_err(|e| format!("{e:#}"))
    }

    #[track_caller]
    fn assert_valid(&self, v: &Value) {
        if let Err(e) = self.check(v) {
            panic!(
                "SARIF log fails the official schema:\n{e}\n{}",
                serde_json::to_string_pretty(v).unwrap()
            );
        }
    }
}

/// A temp dir laid out as `<root>/wörk dir/<NAMES>` and `<root>/out side/x#1.ctxpack`,
/// with `root` canonical so it compares with what the binary sees as its cwd.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (name, _) in NAMES {
            write(&root.join(WORK.0).join(name));
        }
        write(&root.join(OUTSIDE.0));
        Tree { _dir: dir, root }
    }

    fn work(&self) -> PathBuf {
        self.root.join(WORK.0)
    }

    fn outside(&self) -> PathBuf {
        self.root.join(OUTSIDE.0)
    }

    /// `file://` + the root, which these tests need to contain nothing to encode.
    fn root_uri(&self) -> String {
        let root = self.root.to_str().unwrap();
        assert!(
            root.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
            "temp dir {root} needs encoding; the expected URIs below assume not"
        );
        format!("file://{root}")
    }
}

fn write(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, BROKEN).unwrap();
}

fn check_sarif(cwd: &Path, args: &[&std::ffi::OsStr]) -> (Output, Value) {
    let out = Command::cargo_bin("ctxpack")
        .unwrap()
        .env_remove("CTXPACK_REGISTRY")
        .env("NO_COLOR", "1")
        .current_dir(cwd)
        .args(["check", "--format", "sarif"])
        .args(args)
        .output()
        .unwrap();
    let log: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, log)
}

/// Every `artifactLocation` in the log's results.
fn artifact_locations(log: &Value) -> Vec<Value> {
    log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["locations"].as_array().unwrap())
        .map(|l| l["physicalLocation"]["artifactLocation"].clone())
        .collect()
}

/// The absolute `file:` URL a location stands for: its `uri` resolved against the
/// `originalUriBaseIds` entry its `uriBaseId` names, if it has one.
fn resolve(log: &Value, location: &Value) -> Url {
    let uri = location["uri"].as_str().unwrap();
    match location.get("uriBaseId") {
        Some(id) => {
            let id = id.as_str().unwrap();
            assert_eq!(
                Url::parse(uri),
                Err(url::ParseError::RelativeUrlWithoutBase),
                "`{uri}` has a uriBaseId, so it must be a relative reference"
            );
            let base = log["runs"][0]["originalUriBaseIds"][id]["uri"]
                .as_str()
                .unwrap_or_else(|| panic!("uriBaseId {id} is not declared"));
            assert!(base.ends_with('/'), "{base} must end with `/`");
            Url::parse(base).unwrap().join(uri).unwrap()
        }
        None => {
            let url = Url::parse(uri).unwrap();
            assert_eq!(url.scheme(), "file", "{uri}");
            url
        }
    }
}

/// The files the log's locations resolve to.
fn resolved_files(log: &Value) -> BTreeSet<PathBuf> {
    artifact_locations(log)
        .iter()
        .map(|l| resolve(log, l).to_file_path().unwrap())
        .collect()
}

/// `uri` of the location for each result, in order, with its `uriBaseId`.
fn uris(log: &Value) -> Vec<(String, Option<String>)> {
    artifact_locations(log)
        .iter()
        .map(|l| {
            (
                l["uri"].as_str().unwrap().to_owned(),
                l.get("uriBaseId").map(|b| b.as_str().unwrap().to_owned()),
            )
        })
        .collect()
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

fn expected_inside(tree: &Tree) -> BTreeSet<PathBuf> {
    NAMES.iter().map(|(n, _)| tree.work().join(n)).collect()
}

/// The `uri`s of the files under the working directory, sorted as `check` sorts them.
fn expected_inside_uris() -> Vec<(String, Option<String>)> {
    let mut names: Vec<_> = NAMES.to_vec();
    names.sort_by_key(|(n, _)| PathBuf::from(n));
    names
        .iter()
        .map(|(_, uri)| (uri.to_string(), Some("%SRCROOT%".to_owned())))
        .collect()
}

#[test]
fn schema_enforces_uri_formats() {
    let validator = Validator::new();
    let tree = Tree::new();
    let (_, log) = check_sarif(&tree.work(), &[os("sub/my file.ctxpack")]);
    validator.assert_valid(&log);

    // The same log with hand-made bad URIs must fail, or the other tests prove nothing.
    let with_uri = |uri: &str| {
        let mut bad = log.clone();
        bad["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
            ["uri"] = uri.into();
        bad
    };
    for uri in [
        "sub/my file.ctxpack",
        "sub/we,ird:100%.ctxpack",
        "#hash?.ctxpack#x",
        "br[1].ctxpack",
        "file:///abs/path x.ctxpack",
    ] {
        let bad = with_uri(uri);
        let err = validator
            .check(&bad)
            .expect_err(&format!("`{uri}` must fail uri-reference"));
        assert!(err.contains("uri-reference"), "{uri}: {err}");
    }
    for uri in ["sub/my%20file.ctxpack", "file:///abs/path%20x.ctxpack"] {
        validator.assert_valid(&with_uri(uri));
    }

    let mut bad = log.clone();
    bad["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] = "file:///a b/".into();
    let err = validator.check(&bad).expect_err("a raw space in a uri");
    assert!(err.contains("uri"), "{err}");
}

#[test]
fn relative_paths_are_percent_encoded_relative_references() {
    let validator = Validator::new();
    let tree = Tree::new();
    let args: Vec<&std::ffi::OsStr> = NAMES.iter().map(|(n, _)| os(n)).collect();
    let (out, log) = check_sarif(&tree.work(), &args);
    assert_eq!(out.status.code(), Some(1));
    validator.assert_valid(&log);
    assert_eq!(uris(&log), expected_inside_uris());
    assert_eq!(
        log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        format!("{}/{}/", tree.root_uri(), WORK.1)
    );
    assert_eq!(resolved_files(&log), expected_inside(&tree));
}

#[test]
fn the_two_named_examples_encode_exactly() {
    let tree = Tree::new();
    let (_, log) = check_sarif(
        &tree.work(),
        &[os("sub/my file.ctxpack"), os("sub/we,ird:100%.ctxpack")],
    );
    let got: Vec<String> = uris(&log).into_iter().map(|(u, _)| u).collect();
    assert_eq!(
        got,
        ["sub/my%20file.ctxpack", "sub/we,ird:100%25.ctxpack"],
        "{log:#}"
    );
}

#[test]
fn absolute_paths_under_cwd_are_relative_to_srcroot() {
    let validator = Validator::new();
    let tree = Tree::new();
    let paths: Vec<PathBuf> = NAMES.iter().map(|(n, _)| tree.work().join(n)).collect();
    let args: Vec<&std::ffi::OsStr> = paths.iter().map(|p| p.as_os_str()).collect();
    let (out, log) = check_sarif(&tree.work(), &args);
    assert_eq!(out.status.code(), Some(1));
    validator.assert_valid(&log);
    assert_eq!(uris(&log), expected_inside_uris());
    assert_eq!(resolved_files(&log), expected_inside(&tree));
}

#[test]
fn absolute_paths_outside_cwd_are_file_uris() {
    let validator = Validator::new();
    let tree = Tree::new();
    let outside = tree.outside();
    let inside = tree.work().join("café.ctxpack");
    let (out, log) = check_sarif(&tree.work(), &[outside.as_os_str(), inside.as_os_str()]);
    assert_eq!(out.status.code(), Some(1));
    validator.assert_valid(&log);
    let expected_outside = format!("{}/{}", tree.root_uri(), OUTSIDE.1);
    assert_eq!(
        uris(&log),
        [
            (expected_outside.clone(), None),
            ("caf%C3%A9.ctxpack".to_owned(), Some("%SRCROOT%".to_owned())),
        ]
    );
    assert_eq!(
        resolved_files(&log),
        [outside.clone(), inside].into_iter().collect()
    );

    // Only outside files: a `file:` URI and nothing relative, so no base is needed.
    let (_, log) = check_sarif(&tree.work(), &[outside.as_os_str()]);
    validator.assert_valid(&log);
    assert_eq!(uris(&log), [(expected_outside.clone(), None)]);

    // The same file reached with `..` from the working directory.
    let dotdot = format!("../{}", OUTSIDE.0);
    let (_, log) = check_sarif(&tree.work(), &[os(&dotdot)]);
    validator.assert_valid(&log);
    assert_eq!(uris(&log), [(expected_outside, None)]);
    assert_eq!(resolved_files(&log), [outside].into_iter().collect());
}

#[test]
fn directory_walks_and_dot_segments_give_the_same_uris() {
    let validator = Validator::new();
    let tree = Tree::new();
    for arg in [".", "./", "sub/..", &format!("../{}", WORK.0)] {
        let (out, log) = check_sarif(&tree.work(), &[os(arg)]);
        assert_eq!(out.status.code(), Some(1), "{arg}");
        validator.assert_valid(&log);
        assert_eq!(uris(&log), expected_inside_uris(), "{arg}");
        assert_eq!(resolved_files(&log), expected_inside(&tree), "{arg}");
    }
    // From the temp root, the working directory is a subdirectory.
    let (_, log) = check_sarif(&tree.root, &[os(WORK.0)]);
    validator.assert_valid(&log);
    assert_eq!(resolved_files(&log), expected_inside(&tree));
    for (uri, base) in uris(&log) {
        assert!(uri.starts_with("w%C3%B6rk%20dir/"), "{uri}");
        assert_eq!(base.as_deref(), Some("%SRCROOT%"));
    }
}

#[test]
fn bundled_packs_validate() {
    let validator = Validator::new();
    let root = repo("");
    let (out, log) = check_sarif(&root, &[os("packs")]);
    assert_eq!(out.status.code(), Some(0));
    validator.assert_valid(&log);
    // Absolute, from a working directory the packs are not under.
    let tree = Tree::new();
    let packs = repo("packs");
    let (out, log) = check_sarif(&tree.work(), &[packs.as_os_str()]);
    assert_eq!(out.status.code(), Some(0));
    validator.assert_valid(&log);
    // And mixed with broken files, so rules and results are present.
    let (_, log) = check_sarif(
        &tree.work(),
        &[packs.as_os_str(), os("sub"), tree.outside().as_os_str()],
    );
    validator.assert_valid(&log);
    assert!(!artifact_locations(&log).is_empty());
    let rules = log["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap();
    assert!(rules.iter().all(|r| r["help"]["text"].is_string()));
    // And with an input that cannot be read: a failed invocation with a notification.
    let (out, log) = check_sarif(&tree.work(), &[packs.as_os_str(), os("no such.ctxpack")]);
    assert_eq!(out.status.code(), Some(3));
    validator.assert_valid(&log);
    let invocation = &log["runs"][0]["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    assert_eq!(
        invocation["toolExecutionNotifications"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn sarif_output_is_deterministic() {
    let tree = Tree::new();
    let args: Vec<&std::ffi::OsStr> = NAMES.iter().map(|(n, _)| os(n)).collect();
    let (a, _) = check_sarif(&tree.work(), &args);
    let (b, _) = check_sarif(&tree.work(), &args);
    assert_eq!(a.stdout, b.stdout);
    let mut reversed = args.clone();
    reversed.reverse();
    let (c, _) = check_sarif(&tree.work(), &reversed);
    assert_eq!(a.stdout, c.stdout);
}

#[test]
fn regions_and_rules_are_kept() {
    let tree = Tree::new();
    let (_, log) = check_sarif(&tree.work(), &[os("café.ctxpack")]);
    let run = &log["runs"][0];
    assert_eq!(log["version"], "2.1.0");
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let rule = &run["tool"]["driver"]["rules"][0];
    assert_eq!(rule["id"], "E0102");
    assert!(rule["shortDescription"]["text"].is_string());
    assert!(rule["fullDescription"]["text"].is_string());
    assert!(rule["help"]["text"].is_string());
    assert_eq!(rule["defaultConfiguration"]["level"], "error");
    let result = &run["results"][0];
    assert_eq!(result["ruleId"], "E0102");
    assert_eq!(result["ruleIndex"], 0);
    assert_eq!(result["level"], "error");
    let region = &result["locations"][0]["physicalLocation"]["region"];
    assert_eq!(region["startLine"], 4);
    assert_eq!(region["startColumn"], 21);
    assert_eq!(region["endLine"], 4);
    assert_eq!(region["endColumn"], 25);
}
