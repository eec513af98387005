//! A `*.tests.yaml` file, read leniently: a problem in one case (an unknown or
//! malformed key) is that case's failure, with its line, and the other cases still
//! run. Only what every case depends on — the document's shape, `pack`, `defaults` —
//! makes the whole file invalid.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::lines::Lines;
use crate::runtime::CompileError;

/// A parsed test file.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// The pack under test, relative to the test file.
    pub pack: String,
    pub defaults: Inputs,
    pub cases: Vec<CaseSpec>,
}

/// A case's inputs as written (before merging over the defaults); `Null` is absent.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub run: Value,
    pub request: Value,
    pub evidence: Value,
    pub memory: Value,
}

/// One case.
#[derive(Debug, Clone)]
pub struct CaseSpec {
    /// Its `name`, or `case N` (1-based) when it has none.
    pub name: String,
    /// The line its list item starts on.
    pub line: Option<usize>,
    pub inputs: Inputs,
    pub expect: Expect,
    /// What is wrong with the case as written; a case with problems fails without
    /// being compiled.
    pub problems: Vec<String>,
}

/// What a case expects; `None` is unchecked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expect {
    pub must_refuse: Option<bool>,
    pub must_escalate: Option<bool>,
    pub fallback_used: Option<bool>,
    pub tools: Option<Vec<String>>,
    pub approval_gates: Option<Vec<String>>,
    pub redactions: Option<Vec<String>>,
    pub dropped: Option<BTreeMap<String, Vec<String>>>,
    pub truncated: Option<BTreeMap<String, Vec<String>>>,
    pub refusal_reason: Option<String>,
    pub escalation_target: Option<String>,
    pub contains: Option<Vec<String>>,
    pub not_contains: Option<Vec<String>>,
    pub diagnostics: Option<Vec<String>>,
    pub directive: Option<String>,
    pub session_state: Option<serde_json::Value>,
    pub error: Option<String>,
}

/// The expectation keys and what each checks: the one list behind the parser, the
/// `--help` text and `docs/testing.md` (tests hold both to it).
pub const EXPECTATIONS: &[(&str, &str)] = &[
    (
        "must_refuse",
        "true|false: `runtime_controls.must_refuse` (a `refuse` policy fired)",
    ),
    (
        "must_escalate",
        "true|false: `runtime_controls.must_escalate` (an `escalate` policy fired)",
    ),
    (
        "fallback_used",
        "true|false: the fallback intent served the request",
    ),
    ("tools", "[names]: the exact set of surfaced tools"),
    (
        "approval_gates",
        "[names]: the exact set of `runtime_controls.approval_gates_active`",
    ),
    ("redactions", "[names]: the exact set of active redactors"),
    (
        "dropped",
        "{bucket: [ids]}: per bucket named, the exact set of dropped block ids",
    ),
    (
        "truncated",
        "{bucket: [ids]}: per bucket named, the exact set of truncated block ids",
    ),
    (
        "refusal_reason",
        "text: `runtime_controls.refusal_reason`, exactly",
    ),
    (
        "escalation_target",
        "text: `runtime_controls.escalation_target`, exactly",
    ),
    ("contains", "[texts]: substrings the prompt must contain"),
    (
        "not_contains",
        "[texts]: substrings the prompt must not contain",
    ),
    (
        "diagnostics",
        "[codes]: the exact set of runtime diagnostic codes (`R0201`, ...)",
    ),
    (
        "directive",
        "kind: the session decision (`no_directive`, `update`, `error`), for packs with `session directives`",
    ),
    (
        "session_state",
        "{premise, policies, version}: the session state after the step, exactly",
    ),
    (
        "error",
        "kind: the compile fails with this kind (`invalid_input`, `unknown_intent`, ...); alone",
    ),
];

const TOP_KEYS: &[&str] = &["pack", "defaults", "cases"];
const INPUT_KEYS: &[&str] = &["run", "request", "evidence", "memory"];
const DEFAULT_KEYS: &[&str] = &["run", "request", "evidence", "memory", "expect"];
const CASE_KEYS: &[&str] = &["name", "run", "request", "evidence", "memory", "expect"];

/// Why a file cannot be run at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    pub message: String,
}

fn at(line: Option<usize>, message: String) -> String {
    match line {
        Some(l) => format!("line {l}: {message}"),
        None => message,
    }
}

/// `; did you mean `x`?` for a near miss among `known`, or nothing.
fn did_you_mean(word: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < k.len())
        .min()
        .map(|(_, k)| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

fn listing(known: &[&str]) -> String {
    let quoted: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}

/// The name of a JSON value's type, for messages.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Reads a whole document. `Err` only for what makes every case meaningless.
pub fn parse(doc: &Value, lines: &Lines) -> Result<TestFile, FileProblem> {
    let problem = |line: Option<usize>, message: String| FileProblem {
        message: at(line, message),
    };
    let Value::Object(top) = doc else {
        return Err(problem(
            Some(1),
            format!(
                "a test file is a mapping with `pack`, `defaults` and `cases`, found {}",
                kind_of(doc)
            ),
        ));
    };
    for key in top.keys() {
        if !TOP_KEYS.contains(&key.as_str()) {
            return Err(problem(
                lines.get(key),
                format!(
                    "unknown key `{key}` (expected {}){}",
                    listing(TOP_KEYS),
                    did_you_mean(key, TOP_KEYS)
                ),
            ));
        }
    }
    let pack = match top.get("pack") {
        Some(Value::String(p)) if !p.trim().is_empty() => p.clone(),
        Some(other) => {
            return Err(problem(
                lines.get("pack"),
                format!(
                    "`pack` must be the path of a pack, found {}",
                    kind_of(other)
                ),
            ))
        }
        None => {
            return Err(problem(
                Some(1),
                "missing `pack`: the pack under test, relative to this file".into(),
            ))
        }
    };
    let mut default_expect = None;
    let defaults = match top.get("defaults") {
        None | Some(Value::Null) => Inputs::default(),
        Some(Value::Object(map)) => {
            let mut problems = Vec::new();
            let inputs = read_inputs(map, "defaults", lines, &mut problems);
            for key in map.keys().filter(|k| !DEFAULT_KEYS.contains(&k.as_str())) {
                problems.push(at(
                    lines.get(&format!("defaults/{key}")),
                    format!(
                        "unknown key `{key}` in `defaults` (expected {}){}",
                        listing(DEFAULT_KEYS),
                        did_you_mean(key, DEFAULT_KEYS)
                    ),
                ));
            }
            match map.get("expect") {
                None | Some(Value::Null) => {}
                Some(Value::Object(expect)) => {
                    parse_expect(expect, "defaults/expect", lines, &mut problems);
                    default_expect = Some(expect);
                }
                Some(other) => problems.push(at(
                    lines.get("defaults/expect"),
                    format!("`expect` must be a mapping, found {}", kind_of(other)),
                )),
            }
            problems.sort_by_key(|p| line_of(p));
            if let Some(first) = problems.into_iter().next() {
                return Err(FileProblem { message: first });
            }
            inputs
        }
        Some(other) => {
            return Err(problem(
                lines.get("defaults"),
                format!(
                    "`defaults` must be a mapping of `run`, `request`, `evidence`, `memory` and `expect`, found {}",
                    kind_of(other)
                ),
            ))
        }
    };
    let cases = match top.get("cases") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_case(i, item, default_expect, lines))
            .collect(),
        Some(other) => {
            return Err(problem(
                lines.get("cases"),
                format!("`cases` must be a list of cases, found {}", kind_of(other)),
            ))
        }
        None => {
            return Err(problem(
                Some(1),
                "missing `cases`: a list of cases, each with a `name`".into(),
            ))
        }
    };
    Ok(TestFile {
        pack,
        defaults,
        cases,
    })
}

/// `run`, `request`, `evidence` and `memory` of a mapping (a case or `defaults`).
fn read_inputs(
    map: &Map<String, Value>,
    path: &str,
    lines: &Lines,
    problems: &mut Vec<String>,
) -> Inputs {
    let mut inputs = Inputs::default();
    for key in INPUT_KEYS {
        let Some(value) = map.get(*key) else {
            continue;
        };
        let line = lines.get(&format!("{path}/{key}"));
        let ok = match *key {
            "run" | "request" => matches!(value, Value::Object(_) | Value::Null),
            _ => matches!(value, Value::Array(_) | Value::String(_) | Value::Null),
        };
        if !ok {
            let wanted = if matches!(*key, "run" | "request") {
                "a mapping"
            } else {
                "a list or the path of a file"
            };
            problems.push(at(
                line,
                format!("`{key}` must be {wanted}, found {}", kind_of(value)),
            ));
            continue;
        }
        let slot = match *key {
            "run" => &mut inputs.run,
            "request" => &mut inputs.request,
            "evidence" => &mut inputs.evidence,
            _ => &mut inputs.memory,
        };
        *slot = value.clone();
    }
    inputs
}

/// One case; `default_expect` is the `expect` of `defaults`, which the case's own
/// merges over (objects merge, lists and scalars replace, `null` unsets).
fn parse_case(
    index: usize,
    item: &Value,
    default_expect: Option<&Map<String, Value>>,
    lines: &Lines,
) -> CaseSpec {
    let path = format!("cases/{index}");
    let line = lines.get(&path);
    let mut case = CaseSpec {
        name: format!("case {}", index + 1),
        line,
        inputs: Inputs::default(),
        expect: Expect::default(),
        problems: Vec::new(),
    };
    let Value::Object(map) = item else {
        case.problems.push(at(
            line,
            format!(
                "a case is a mapping with `name`, inputs and `expect`, found {}",
                kind_of(item)
            ),
        ));
        return case;
    };
    match map.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => case.name = n.clone(),
        Some(other) => case.problems.push(at(
            lines.get(&format!("{path}/name")),
            format!("`name` must be a non-empty text, found {}", kind_of(other)),
        )),
        None => case
            .problems
            .push(at(line, "missing `name`: say what the case shows".into())),
    }
    for key in map.keys().filter(|k| !CASE_KEYS.contains(&k.as_str())) {
        case.problems.push(at(
            lines.get(&format!("{path}/{key}")),
            format!(
                "unknown key `{key}` in case (expected {}){}",
                listing(CASE_KEYS),
                did_you_mean(key, CASE_KEYS)
            ),
        ));
    }
    case.inputs = read_inputs(map, &path, lines, &mut case.problems);
    match (map.get("expect"), default_expect) {
        (None | Some(Value::Null), None) => {}
        (None | Some(Value::Null), Some(defaults)) => {
            case.expect = parse_expect(defaults, "defaults/expect", lines, &mut case.problems)
        }
        (Some(Value::Object(expect)), defaults) => {
            let merged;
            let expect = match defaults {
                Some(defaults) => {
                    merged = super::merge_maps(defaults, expect);
                    &merged
                }
                None => expect,
            };
            case.expect = parse_expect(expect, &format!("{path}/expect"), lines, &mut case.problems)
        }
        (Some(other), _) => case.problems.push(at(
            lines.get(&format!("{path}/expect")),
            format!("`expect` must be a mapping, found {}", kind_of(other)),
        )),
    }
    // In the order the file has them (keys were visited sorted by name).
    case.problems.sort_by_key(|p| line_of(p));
    case
}

/// The line a problem message starts with (`line 12: ...`); lines first, stable.
fn line_of(problem: &str) -> (bool, usize) {
    let line = problem
        .strip_prefix("line ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok());
    (line.is_none(), line.unwrap_or(0))
}

fn parse_expect(
    map: &Map<String, Value>,
    path: &str,
    lines: &Lines,
    problems: &mut Vec<String>,
) -> Expect {
    let keys: Vec<&str> = EXPECTATIONS.iter().map(|(k, _)| *k).collect();
    let mut e = Expect::default();
    for (key, value) in map {
        let line = lines.get(&format!("{path}/{key}"));
        if !keys.contains(&key.as_str()) {
            problems.push(at(
                line,
                format!(
                    "unknown expectation `{key}`{} (see `ctxpack test --help`)",
                    did_you_mean(key, &keys)
                ),
            ));
            continue;
        }
        // `null` leaves an expectation unchecked.
        if value.is_null() {
            continue;
        }
        let mut bad = |wanted: &str| {
            problems.push(at(
                line,
                format!("`{key}` must be {wanted}, found {}", kind_of(value)),
            ))
        };
        match key.as_str() {
            "must_refuse" | "must_escalate" | "fallback_used" => match value.as_bool() {
                Some(b) => match key.as_str() {
                    "must_refuse" => e.must_refuse = Some(b),
                    "must_escalate" => e.must_escalate = Some(b),
                    _ => e.fallback_used = Some(b),
                },
                None => bad("true or false"),
            },
            "tools" | "approval_gates" | "redactions" | "contains" | "not_contains"
            | "diagnostics" => match texts(value) {
                Some(list) => {
                    let slot = match key.as_str() {
                        "tools" => &mut e.tools,
                        "approval_gates" => &mut e.approval_gates,
                        "redactions" => &mut e.redactions,
                        "contains" => &mut e.contains,
                        "not_contains" => &mut e.not_contains,
                        _ => &mut e.diagnostics,
                    };
                    *slot = Some(list);
                }
                None => bad("a list of texts"),
            },
            "dropped" | "truncated" => match buckets(value) {
                Some(map) => {
                    if key == "dropped" {
                        e.dropped = Some(map);
                    } else {
                        e.truncated = Some(map);
                    }
                }
                None => bad("a mapping of bucket names to lists of block ids"),
            },
            "directive" => match value.as_str() {
                Some(k @ ("no_directive" | "update" | "error")) => e.directive = Some(k.to_owned()),
                Some(other) => problems.push(at(
                    line,
                    format!(
                        "unknown decision `{other}` (expected `no_directive`, `update` or `error`)"
                    ),
                )),
                None => bad("a decision kind"),
            },
            "session_state" => match value {
                Value::Object(_) => e.session_state = Some(value.clone()),
                _ => bad("a mapping (`premise`, `policies`, `version`)"),
            },
            "refusal_reason" | "escalation_target" => match value.as_str() {
                Some(s) => {
                    if key == "refusal_reason" {
                        e.refusal_reason = Some(s.to_owned());
                    } else {
                        e.escalation_target = Some(s.to_owned());
                    }
                }
                None => bad("a text"),
            },
            _ => match value.as_str() {
                Some(kind) if CompileError::KINDS.contains(&kind) => e.error = Some(kind.into()),
                Some(kind) => problems.push(at(
                    line,
                    format!(
                        "unknown error kind `{kind}` (expected {}){}",
                        listing(CompileError::KINDS),
                        did_you_mean(kind, CompileError::KINDS)
                    ),
                )),
                None => bad("an error kind"),
            },
        }
    }
    if e.error.is_some() {
        let others: Vec<&str> = map
            .iter()
            .filter(|(k, v)| k.as_str() != "error" && !v.is_null())
            .map(|(k, _)| k.as_str())
            .collect();
        if !others.is_empty() {
            problems.push(at(
                lines.get(&format!("{path}/error")),
                format!(
                    "`error` cannot be combined with {}: a compile that fails has no envelope to check",
                    listing(&others)
                ),
            ));
        }
    }
    e
}

fn texts(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn buckets(value: &Value) -> Option<BTreeMap<String, Vec<String>>> {
    value
        .as_object()?
        .iter()
        .map(|(bucket, ids)| Some((bucket.clone(), texts(ids)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<TestFile, FileProblem> {
        let doc: Value = serde_norway::from_str(text).unwrap();
        parse(&doc, &Lines::of(text))
    }

    #[test]
    fn a_bad_key_fails_its_case_with_its_line() {
        let f = read(
            "pack: p.json\ncases:\n  - name: a\n    expect: { tols: [] }\n  - name: b\n    expect:\n      must_refuse: yes please\n  - name: c\n    expect: { must_refuse: true }\n",
        )
        .unwrap();
        assert_eq!(
            f.cases[0].problems,
            ["line 4: unknown expectation `tols`; did you mean `tools`? (see `ctxpack test --help`)"]
        );
        assert_eq!(
            f.cases[1].problems,
            ["line 7: `must_refuse` must be true or false, found a text"]
        );
        assert!(f.cases[2].problems.is_empty());
        assert_eq!(f.cases[2].expect.must_refuse, Some(true));
    }

    #[test]
    fn expectations_in_defaults_merge_under_each_case() {
        let f = read(
            "pack: p.json\ndefaults:\n  expect: { must_refuse: false, tools: [a], dropped: { evidence: [e1] } }\ncases:\n  - name: plain\n  - name: over\n    expect: { tools: [b], dropped: { memory: [m1] } }\n  - name: unset\n    expect: { must_refuse: null, error: invalid_input, tools: null, dropped: null }\n",
        )
        .unwrap();
        let [plain, over, unset] = &f.cases[..] else {
            panic!("{:?}", f.cases)
        };
        assert!(plain.problems.is_empty() && over.problems.is_empty() && unset.problems.is_empty());
        assert_eq!(plain.expect.must_refuse, Some(false));
        assert_eq!(plain.expect.tools, Some(vec!["a".to_owned()]));
        assert_eq!(over.expect.must_refuse, Some(false));
        assert_eq!(over.expect.tools, Some(vec!["b".to_owned()]));
        let dropped = over.expect.dropped.as_ref().unwrap();
        assert_eq!(dropped.keys().collect::<Vec<_>>(), ["evidence", "memory"]);
        assert_eq!(
            unset.expect,
            Expect {
                error: Some("invalid_input".into()),
                ..Expect::default()
            }
        );
        // A bad expectation in `defaults` fails the file, at its line.
        let e = read("pack: p.json\ndefaults:\n  expect:\n    tols: []\ncases: []\n").unwrap_err();
        assert_eq!(
            e.message,
            "line 4: unknown expectation `tols`; did you mean `tools`? (see `ctxpack test --help`)"
        );
        let e = read("pack: p.json\ndefaults: { expect: [] }\ncases: []\n").unwrap_err();
        assert_eq!(
            e.message,
            "line 2: `expect` must be a mapping, found a list"
        );
    }

    #[test]
    fn unnamed_and_odd_cases_fail_alone() {
        let f = read("pack: p.json\ncases:\n  - expect: {}\n  - 3\n  - name: x\n    reqeust: {}\n")
            .unwrap();
        assert_eq!(f.cases[0].name, "case 1");
        assert_eq!(
            f.cases[0].problems,
            ["line 3: missing `name`: say what the case shows"]
        );
        assert!(f.cases[1].problems[0].starts_with("line 4: a case is a mapping"));
        assert_eq!(
            f.cases[2].problems,
            ["line 6: unknown key `reqeust` in case (expected `name`, `run`, `request`, `evidence`, `memory`, `expect`); did you mean `request`?"]
        );
    }

    #[test]
    fn error_kinds_are_known_and_stand_alone() {
        let f = read("pack: p.json\ncases:\n  - name: a\n    expect: { error: invalid_inptu }\n  - name: b\n    expect: { error: invalid_input, tools: [] }\n").unwrap();
        assert!(f.cases[0].problems[0].contains("did you mean `invalid_input`?"));
        assert!(f.cases[1].problems[0].contains("cannot be combined with `tools`"));
    }

    #[test]
    fn what_every_case_needs_makes_the_file_invalid() {
        for (text, wanted) in [
            ("- a\n", "line 1: a test file is a mapping"),
            (
                "pack: p\ncases: []\ncase: []\n",
                "line 3: unknown key `case`",
            ),
            ("cases: []\n", "line 1: missing `pack`"),
            ("pack: p\ncases: {}\n", "line 2: `cases` must be a list"),
            (
                "pack: p\ndefaults: { reqeust: {} }\ncases: []\n",
                "line 2: unknown key `reqeust` in `defaults`",
            ),
            (
                "pack: p\ndefaults: { run: [] }\ncases: []\n",
                "line 2: `run` must be a mapping",
            ),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.message.starts_with(wanted), "{text:?}: {}", e.message);
        }
    }

    #[test]
    fn null_leaves_an_expectation_unchecked() {
        let f =
            read("pack: p\ncases:\n  - name: a\n    expect: { tools: null, must_refuse: false }\n")
                .unwrap();
        assert!(f.cases[0].problems.is_empty());
        assert_eq!(f.cases[0].expect.tools, None);
    }
}
