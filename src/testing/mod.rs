//! Pack tests: the `*.tests.yaml` files beside packs, run against the runtime.
//!
//! A test file names its `pack` (relative to the file: a `.ctxpack` source, built by
//! the loader the caller supplies, or a `.json` artifact), optional `defaults`, and
//! `cases`. Each case's `run`, `request`, `evidence` and `memory` are deep-merged over
//! the defaults (objects merge, lists and scalars replace, a nested `null` unsets a
//! default); `evidence` and `memory` may be inline lists or paths relative to the test
//! file. Each case is compiled and held to its expectations ([`spec::EXPECTATIONS`]).
//!
//! Failures stay as local as they can: a case with an unknown or malformed key fails
//! alone, naming the key and its line ([`spec`]); a file whose shape, `pack` or
//! `defaults` is wrong fails as a file and the other files still run. A failing case
//! says why ([`expect`]) and, when its inputs could be read, leaves them in a folder
//! with the `ctxpack compile … --explain` command that reproduces it.
//!
//! [`junit`] writes the results as JUnit XML. Printing and exit codes are the CLI's
//! (`commands::test`).

pub mod expect;
pub mod junit;
pub mod lines;
pub mod lint;
pub mod spec;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::artifact::{verify_bytes, Artifact};
use crate::commands::compile::{parse_document, read_document, CliError};
use crate::runtime::{decode_inputs, PreparedPack};

pub use expect::Failure;
pub use spec::EXPECTATIONS;

/// Builds a `.ctxpack` source into an artifact (the message of a failure).
pub type SourceLoader<'a> = &'a dyn Fn(&Path) -> Result<Artifact, CliError>;

/// How to select and run cases.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Run only cases whose name contains one of these (all when empty).
    pub filters: Vec<String>,
    /// Where a failing case's inputs are written, for its reproduce command; `None`
    /// writes nothing.
    pub repro_dir: Option<PathBuf>,
}

/// The result of running some test files.
#[derive(Debug, Clone)]
pub struct Results {
    pub files: Vec<FileResult>,
    /// Roots that could not be read (exit 3), and notes on roots that hold no test.
    pub unreadable: Vec<CliError>,
    /// Packs given as roots with no test file beside them naming them.
    pub untested_packs: Vec<PathBuf>,
}

/// One test file.
#[derive(Debug, Clone)]
pub struct FileResult {
    pub path: PathBuf,
    /// The cases run, or why the file could not be run.
    pub outcome: Result<Vec<CaseResult>, CliError>,
    /// Cases the filters left out.
    pub filtered_out: usize,
    pub time: Duration,
}

/// One case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub line: Option<usize>,
    pub failures: Vec<Failure>,
    /// For a failing case whose inputs were written: the command that reproduces it.
    pub reproduce: Option<String>,
    pub time: Duration,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

impl Results {
    pub fn cases(&self) -> impl Iterator<Item = (&FileResult, &CaseResult)> {
        self.files.iter().flat_map(|f| {
            f.outcome
                .as_ref()
                .map(|cases| cases.iter().map(move |c| (f, c)).collect::<Vec<_>>())
                .unwrap_or_default()
        })
    }

    pub fn passed(&self) -> usize {
        self.cases().filter(|(_, c)| c.passed()).count()
    }

    pub fn failed(&self) -> usize {
        self.cases().filter(|(_, c)| !c.passed()).count()
    }

    pub fn filtered_out(&self) -> usize {
        self.files.iter().map(|f| f.filtered_out).sum()
    }

    /// Files that could not be run.
    pub fn file_errors(&self) -> impl Iterator<Item = (&FileResult, &CliError)> {
        self.files
            .iter()
            .filter_map(|f| f.outcome.as_ref().err().map(|e| (f, e)))
    }
}

/// Finds the test files under `roots` and runs them.
///
/// A root is a test file, a directory (searched recursively for `*.tests.yaml`,
/// skipping hidden directories, `target` and `node_modules`), or a pack (`.ctxpack` or
/// `.json`): then the test files in its directory whose `pack` is that file.
pub fn run(roots: &[PathBuf], options: &Options, load_source: SourceLoader) -> Results {
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    let mut untested_packs = Vec::new();
    for root in roots {
        if root.is_dir() {
            collect(root, &mut files);
        } else if root.is_file() && is_pack(root) {
            let beside = tests_of_pack(root);
            if beside.is_empty() {
                untested_packs.push(root.clone());
            }
            files.extend(beside);
        } else if root.is_file() {
            files.push(root.clone());
        } else {
            unreadable.push(CliError::new(
                "unreadable_input",
                3,
                format!("`{}`: no such file or directory", root.display()),
            ));
        }
    }
    // `./a.tests.yaml` reads as `a.tests.yaml`.
    let mut files: Vec<PathBuf> = files
        .into_iter()
        .map(|p| match p.strip_prefix(".") {
            Ok(rest) if !rest.as_os_str().is_empty() => rest.to_path_buf(),
            _ => p,
        })
        .collect();
    files.sort();
    files.dedup();
    let files = files
        .into_iter()
        .map(|path| run_file(path, options, load_source))
        .collect();
    Results {
        files,
        unreadable,
        untested_packs,
    }
}

fn is_pack(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    !name.ends_with(".tests.yaml")
        && matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("ctxpack" | "json")
        )
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Hidden directories and build output are never test roots.
        if path.is_dir() && !name.starts_with('.') && name != "target" && name != "node_modules" {
            collect(&path, out);
        } else if name.ends_with(".tests.yaml") {
            out.push(path);
        }
    }
}

/// The test files in `pack`'s directory whose `pack` resolves to it.
fn tests_of_pack(pack: &Path) -> Vec<PathBuf> {
    let dir = pack.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(target) = pack.canonicalize() else {
        return Vec::new();
    };
    let mut candidates = Vec::new();
    collect_flat(dir, &mut candidates);
    candidates
        .into_iter()
        .filter(|file| {
            let named = std::fs::read(file)
                .ok()
                .and_then(|bytes| parse_document(Path::new("t.yaml"), &bytes).ok())
                .and_then(|doc| doc.get("pack").and_then(Value::as_str).map(str::to_owned));
            named.is_some_and(|p| dir.join(p).canonicalize().ok().as_ref() == Some(&target))
        })
        .collect()
}

fn collect_flat(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_file() && entry.file_name().to_string_lossy().ends_with(".tests.yaml") {
            out.push(path);
        }
    }
}

fn run_file(path: PathBuf, options: &Options, load_source: SourceLoader) -> FileResult {
    let start = Instant::now();
    let mut filtered_out = 0;
    let outcome = cases_of(&path, options, load_source, &mut filtered_out);
    FileResult {
        path,
        outcome,
        filtered_out,
        time: start.elapsed(),
    }
}

fn cases_of(
    file: &Path,
    options: &Options,
    load_source: SourceLoader,
    filtered_out: &mut usize,
) -> Result<Vec<CaseResult>, CliError> {
    let bytes = std::fs::read(file)
        .map_err(|e| CliError::new("unreadable_input", 3, format!("cannot read: {e}")))?;
    let doc = parse_document(Path::new("tests.yaml"), &bytes).map_err(|e| {
        CliError::new(
            e.kind,
            e.exit_code,
            e.message.replace("`tests.yaml`", "file"),
        )
    })?;
    let text = String::from_utf8_lossy(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes));
    let spec = spec::parse(&doc, &lines::Lines::of(&text))
        .map_err(|p| CliError::new("invalid_test_file", 4, p.message))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let pack_path = dir.join(&spec.pack);
    let artifact = load_artifact(&pack_path, load_source)?;
    // A pack that cannot be prepared fails every case, unless a case expects that error.
    let prepared = PreparedPack::new(artifact.clone());
    let mut results = Vec::new();
    for (index, case) in spec.cases.iter().enumerate() {
        let selected = options.filters.is_empty()
            || options
                .filters
                .iter()
                .any(|f| case.name.contains(f.as_str()));
        if !selected {
            *filtered_out += 1;
            continue;
        }
        let start = Instant::now();
        let mut result = CaseResult {
            name: case.name.clone(),
            line: case.line,
            failures: Vec::new(),
            reproduce: None,
            time: Duration::ZERO,
        };
        if !case.problems.is_empty() {
            result.failures = case
                .problems
                .iter()
                .map(|p| Failure {
                    what: p.clone(),
                    why: Vec::new(),
                })
                .collect();
            results.push(result);
            continue;
        }
        let d = &spec.defaults;
        let run = over_default(&d.run, &case.inputs.run);
        let request = over_default(&d.request, &case.inputs.request);
        // An evidence or memory file that cannot be read fails its case, not the file.
        let lists = list_input(over_default(&d.evidence, &case.inputs.evidence), dir).and_then(
            |evidence| {
                let memory = list_input(over_default(&d.memory, &case.inputs.memory), dir)?;
                Ok((evidence, memory))
            },
        );
        let (evidence, memory) = match lists {
            Ok(lists) => lists,
            Err(e) => {
                result.failures.push(Failure {
                    what: format!("inputs: {}", e.message),
                    why: Vec::new(),
                });
                results.push(result);
                continue;
            }
        };
        let inputs = Merged {
            run,
            request,
            evidence,
            memory,
        };
        let outcome = match &prepared {
            Err(e) => Err(e.clone()),
            Ok(pack) => decode_inputs(
                inputs.run.clone(),
                inputs.request.clone(),
                inputs.evidence.clone(),
                inputs.memory.clone(),
            )
            .and_then(|i| pack.compile(&i)),
        };
        result.failures = expect::check(&case.expect, &outcome, &artifact);
        if !result.failures.is_empty() {
            if let Some(root) = &options.repro_dir {
                result.reproduce = Some(reproduce(root, file, &pack_path, index, case, &inputs));
            }
        }
        result.time = start.elapsed();
        results.push(result);
    }
    Ok(results)
}

/// A case's inputs after merging over the defaults.
struct Merged {
    run: Value,
    request: Value,
    evidence: Option<Value>,
    memory: Option<Value>,
}

/// Writes a failing case's inputs under `root` and returns the command that compiles
/// them, or says why they could not be written.
fn reproduce(
    root: &Path,
    file: &Path,
    pack: &Path,
    index: usize,
    case: &spec::CaseSpec,
    inputs: &Merged,
) -> String {
    let dir = root
        .join(repro_path(&file.with_extension("").with_extension("")))
        .join(format!("{:02}-{}", index + 1, slug(&case.name)));
    let write = |name: &str, value: &Value| -> Result<PathBuf, String> {
        let path = dir.join(name);
        let mut text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
        text.push('\n');
        std::fs::write(&path, text)
            .map(|()| path.clone())
            .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
    };
    let written = std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))
        .and_then(|()| {
            let mut args = vec![
                "--pack".to_owned(),
                shell_word(&pack.to_string_lossy()),
                "--run".to_owned(),
                shell_word(&write("run.json", &inputs.run)?.to_string_lossy()),
                "--request".to_owned(),
                shell_word(&write("request.json", &inputs.request)?.to_string_lossy()),
            ];
            for (flag, name, value) in [
                ("--evidence", "evidence.json", &inputs.evidence),
                ("--memory", "memory.json", &inputs.memory),
            ] {
                if let Some(value) = value {
                    args.push(flag.to_owned());
                    args.push(shell_word(&write(name, value)?.to_string_lossy()));
                }
            }
            Ok(args)
        });
    match written {
        Ok(args) => format!("ctxpack compile {} --explain", args.join(" ")),
        Err(e) => format!("(inputs not written: {e})"),
    }
}

/// Where a test file's failing cases are written under the root: its path, one
/// directory per component, so that two files never share one (`x/y-z` and `x-y/z`).
/// A component kept as it is when it is a plain name (`[A-Za-z0-9_.-]`, not `..`);
/// otherwise its slug and a short hash of it, so that names that slug alike differ.
fn repro_path(file: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in file.components() {
        let std::path::Component::Normal(part) = component else {
            if component == std::path::Component::ParentDir {
                out.push("up");
            }
            continue;
        };
        let part = part.to_string_lossy();
        let plain = part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && !part.starts_with('.');
        if plain {
            out.push(part.as_ref());
        } else {
            let hash = blake3::hash(part.as_bytes()).to_hex();
            out.push(format!("{}-{}", slug(&part), &hash[..8]));
        }
    }
    if out.as_os_str().is_empty() {
        out.push("case");
    }
    out
}

/// Lowercase letters, digits and single `-`, at most 60 characters.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "case".to_owned()
    } else {
        out.to_owned()
    }
}

/// A path as one POSIX shell word.
fn shell_word(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain && !text.is_empty() {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A case's value over the defaults: absent (`null` at the top) keeps the default.
fn over_default(base: &Value, over: &Value) -> Value {
    match over {
        Value::Null => base.clone(),
        over => merge(base, over),
    }
}

/// Deep merge: objects merge key by key; anything else in `over` replaces `base`; a
/// `null` member unsets the default's (`request: { intent: null }` sends no intent,
/// `context: { user: { age: null } }` no age: the key is left out, not sent as null).
fn merge(base: &Value, over: &Value) -> Value {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => Value::Object(merge_maps(b, o)),
        _ => over.clone(),
    }
}

/// [`merge`] of two objects.
fn merge_maps(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in over {
        if v.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match base.get(k) {
            Some(bv) => merge(bv, v),
            None => v.clone(),
        };
        out.insert(k.clone(), merged);
    }
    out
}

fn load_artifact(path: &Path, load_source: SourceLoader) -> Result<Artifact, CliError> {
    if path.extension().and_then(|e| e.to_str()) == Some("ctxpack") {
        if !path.is_file() {
            return Err(CliError::new(
                "unreadable_input",
                3,
                format!("pack `{}` not found", path.display()),
            ));
        }
        return load_source(path);
    }
    let bytes = std::fs::read(path).map_err(|e| {
        CliError::new(
            "unreadable_input",
            3,
            format!("cannot read pack `{}`: {e}", path.display()),
        )
    })?;
    verify_bytes(&bytes).map_err(|e| {
        CliError::new(
            e.kind(),
            e.exit_code(),
            format!("pack `{}`: {e}", path.display()),
        )
    })
}

/// A list given inline or as a path relative to the test file.
fn list_input(value: Value, dir: &Path) -> Result<Option<Value>, CliError> {
    match value {
        Value::Null => Ok(None),
        Value::String(rel) => read_document(&dir.join(rel)).map(Some),
        other => Ok(Some(other)),
    }
}

/// The test files beside `pack` that name it, and how many of their cases ask for
/// each intent (a case's `request.intent` merged over the defaults; a case without
/// one counts for the empty name, which the fallback intent serves).
pub fn cases_by_intent(pack: &Path) -> (Vec<PathBuf>, std::collections::BTreeMap<String, usize>) {
    let files = tests_of_pack(pack);
    let mut counts = std::collections::BTreeMap::new();
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else {
            continue;
        };
        let Ok(doc) = parse_document(Path::new("t.yaml"), &bytes) else {
            continue;
        };
        let Ok(spec) = spec::parse(&doc, &lines::Lines::default()) else {
            continue;
        };
        for case in &spec.cases {
            let request = over_default(&spec.defaults.request, &case.inputs.request);
            let intent = request
                .get("intent")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            *counts.entry(intent).or_insert(0) += 1;
        }
    }
    (files, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deep_merge_objects_replace_lists() {
        let base = json!({"a": {"x": 1, "y": [1, 2]}, "b": 1});
        let over = json!({"a": {"y": [3]}, "c": 2});
        assert_eq!(
            merge(&base, &over),
            json!({"a": {"x": 1, "y": [3]}, "b": 1, "c": 2})
        );
    }

    #[test]
    fn null_unsets_a_default_but_an_absent_case_value_keeps_it() {
        let base = json!({"intent": "refund", "message": "hi"});
        assert_eq!(
            over_default(&base, &json!({"intent": null})),
            json!({"message": "hi"})
        );
        assert_eq!(over_default(&base, &Value::Null), base);
        // Nested too: the key is left out, as `missing` in raw JsonLogic sees it.
        let base = json!({"context": {"user": {"age": 34, "tier": "pro"}}});
        assert_eq!(
            over_default(&base, &json!({"context": {"user": {"age": null}}})),
            json!({"context": {"user": {"tier": "pro"}}})
        );
    }

    #[test]
    fn slugs_and_shell_words() {
        assert_eq!(
            slug("Minors are refused — on the phone!"),
            "minors-are-refused-on-the-phone"
        );
        assert_eq!(slug("***"), "case");
        assert_eq!(
            repro_path(Path::new("packs/support/support")),
            Path::new("packs/support/support")
        );
        assert_ne!(
            repro_path(Path::new("x/y-z")),
            repro_path(Path::new("x-y/z"))
        );
        assert_eq!(repro_path(Path::new("../a/./b")), Path::new("up/a/b"));
        let (a, b) = (
            repro_path(Path::new("my pack")),
            repro_path(Path::new("my_pack!")),
        );
        assert!(
            a.to_string_lossy().starts_with("my-pack-") && a != b,
            "{a:?} {b:?}"
        );
        assert_eq!(shell_word("packs/a.ctxpack"), "packs/a.ctxpack");
        assert_eq!(shell_word("my dir/it's"), r"'my dir/it'\''s'");
    }
}
