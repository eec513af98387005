//! Diagnostics for a `*.tests.yaml` document as it is typed, against the analysis of
//! the pack it tests: YAML syntax, the file and case problems `ctxpack test` reports
//! ([`crate::testing::spec::parse`]: unknown keys, malformed values), intents, tools,
//! redactors and buckets the pack does not declare, and context values the runtime's
//! input validation would refuse ([`crate::runtime::validate`]). Each points at the
//! offending key or value: spans are byte offsets into the YAML text.
//!
//! What a case sets out to show is respected: a case that expects a compile `error`
//! may give invalid inputs, and one that expects `fallback_used: true` may name an
//! intent the pack does not declare.

use std::collections::{BTreeMap, HashMap, HashSet};

use saphyr_parser::{Event, Parser};
use serde_json::{Map, Value};

use super::Analysis;
use crate::artifact::{ContextField, Type};
use crate::diagnostic::Severity;
use crate::ir::{Pack, SymbolKind};
use crate::runtime::validate::{check_type, SchemaNode};
use crate::span::{clamp_to_char_boundary, LineIndex, Span};
use crate::testing::lines::Lines;

/// A problem in a test file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestDiagnostic {
    /// Byte offsets into the YAML text.
    pub span: Span,
    pub severity: Severity,
    /// What kind of problem: `yaml_syntax`, `invalid_test_file`, `invalid_case`,
    /// `unknown_intent`, `unknown_tool`, `unknown_redactor`, `unknown_bucket`,
    /// `unknown_context_field` or `wrong_type`.
    pub code: &'static str,
    pub message: String,
}

impl Analysis {
    /// The diagnostics of `yaml`, a test file of this analysis's pack, in source order.
    /// Never panics, whatever the text; a pack whose imports did not resolve is not
    /// held to its names (they may come from the import).
    pub fn test_file_diagnostics(&self, yaml: &str) -> Vec<TestDiagnostic> {
        let mut out = Vec::new();
        let text = yaml.strip_prefix('\u{feff}').unwrap_or(yaml);
        let offset = yaml.len() - text.len();
        let doc: Value = match crate::yaml::from_str(text) {
            Ok(doc) => doc,
            Err(e) => {
                let at = e.location().map_or(0, |l| l.index());
                out.push(TestDiagnostic {
                    span: line_rest(text, at),
                    severity: Severity::Error,
                    code: "yaml_syntax",
                    message: e.to_string(),
                });
                return shifted(out, offset);
            }
        };
        let located = Located::of(text);
        let lines = LineIndex::new(text);
        let problem = |code, message: &str| {
            let (span, message) = located.problem(text, &lines, message);
            TestDiagnostic {
                span,
                severity: Severity::Error,
                code,
                message,
            }
        };
        match crate::testing::spec::parse(&doc, &Lines::of(text)) {
            Err(p) => out.push(problem("invalid_test_file", &p.message)),
            Ok(file) => {
                for case in &file.cases {
                    out.extend(case.problems.iter().map(|p| problem("invalid_case", p)));
                }
            }
        }
        let pack = &self.checked().pack;
        if self.checked().ast.header.is_some() && !pack.unresolved_imports {
            let checker = Checker {
                pack,
                located: &located,
                schema: Schema::of(pack),
            };
            checker.file(&doc, &mut out);
        }
        out.sort_by_key(|d| (d.span.start, d.span.end));
        out.dedup();
        shifted(out, offset)
    }
}

fn shifted(mut out: Vec<TestDiagnostic>, offset: usize) -> Vec<TestDiagnostic> {
    for d in &mut out {
        d.span = Span::new(d.span.start + offset, d.span.end + offset);
    }
    out
}

/// From `at` to the end of its line (at least one character when there is one).
fn line_rest(text: &str, at: usize) -> Span {
    let at = clamp_to_char_boundary(text, at.min(text.len()));
    let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
    let end = if end == at {
        text[at..].chars().next().map_or(at, |c| at + c.len_utf8())
    } else {
        end
    };
    Span::new(at, end)
}

/// Where each key and value of the document is, by path (`cases/3/request/intent`,
/// `cases/0/expect/tools/1`), as byte spans. Like [`Lines`], a document the event
/// parser cannot follow has the spans before the break.
#[derive(Debug, Default)]
struct Located {
    keys: HashMap<String, Span>,
    values: HashMap<String, Span>,
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, index: usize },
}

fn join(parent: &str, segment: &str) -> String {
    if parent.is_empty() {
        segment.to_owned()
    } else {
        format!("{parent}/{segment}")
    }
}

impl Located {
    fn of(text: &str) -> Located {
        // The parser counts characters; spans are bytes.
        let bytes: Vec<usize> = text
            .char_indices()
            .map(|(b, _)| b)
            .chain(std::iter::once(text.len()))
            .collect();
        let byte = |m: saphyr_parser::Marker| bytes.get(m.index()).copied().unwrap_or(text.len());
        let mut located = Located::default();
        let mut stack: Vec<Frame> = Vec::new();
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else {
                break;
            };
            let (start, end) = (byte(span.start), byte(span.end).max(byte(span.start)));
            // A flow scalar's span can take in the blanks after it.
            let end = start + text.get(start..end).map_or(0, |s| s.trim_end().len());
            let span = Span::new(start, end);
            match event {
                Event::DocumentEnd => break,
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map {
                        path,
                        key: key @ None,
                    }) = stack.last_mut()
                    {
                        located.keys.insert(join(path, &value), span);
                        *key = Some(value.into_owned());
                    } else {
                        let path = value_path(&stack);
                        located.values.insert(path, span);
                        finish_value(&mut stack);
                    }
                }
                Event::Alias(_) => {
                    located.values.insert(value_path(&stack), span);
                    finish_value(&mut stack);
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = value_path(&stack);
                    located.values.insert(path.clone(), span);
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map { path, key: None }
                    } else {
                        Frame::Seq { path, index: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    if let Some(Frame::Map { path, .. } | Frame::Seq { path, .. }) = stack.pop() {
                        if let Some(v) = located.values.get_mut(&path) {
                            v.end = v.end.max(span.end);
                        }
                    }
                    finish_value(&mut stack);
                }
                _ => {}
            }
        }
        located
    }

    /// The span of the value at `path`, else of its key, else the start of the text.
    fn value(&self, path: &str) -> Span {
        self.values
            .get(path)
            .or_else(|| self.keys.get(path))
            .copied()
            .unwrap_or_default()
    }

    /// The span of the key at `path`, else of its value.
    fn key(&self, path: &str) -> Span {
        self.keys
            .get(path)
            .or_else(|| self.values.get(path))
            .copied()
            .unwrap_or_default()
    }

    /// Where a `line N: message` problem points: the key or value named first in
    /// backticks on that line, else the line's text; and the message without its line.
    fn problem(&self, text: &str, lines: &LineIndex, message: &str) -> (Span, String) {
        let parsed = message.strip_prefix("line ").and_then(|rest| {
            let (n, rest) = rest.split_once(": ")?;
            Some((n.parse::<usize>().ok()?, rest))
        });
        let Some((line, rest)) = parsed.filter(|(l, _)| *l >= 1 && *l <= lines.line_count()) else {
            return (line_rest(text, 0), message.to_owned());
        };
        let start = lines.line_start(line - 1);
        let named = rest.split('`').nth(1).filter(|n| !n.is_empty());
        let on_line = |s: &&Span| lines.line_of(s.start) == line - 1;
        let found = named.and_then(|name| {
            let is = |s: &&Span| {
                let written = text.get(s.start..s.end).unwrap_or("");
                written.trim_matches(|c| c == '"' || c == '\'') == name
            };
            let mut spans: Vec<&Span> = self.keys.values().filter(on_line).filter(is).collect();
            if spans.is_empty() {
                spans = self.values.values().filter(on_line).filter(is).collect();
            }
            spans.into_iter().min().copied()
        });
        let span = found.unwrap_or_else(|| {
            let whole = line_rest(text, start);
            let body = text.get(whole.start..whole.end).unwrap_or("");
            let lead = body.len() - body.trim_start().len();
            Span::new(
                whole.start + lead,
                whole.start + body.trim_end().len().max(lead),
            )
        });
        (span, rest.to_owned())
    }
}

fn value_path(stack: &[Frame]) -> String {
    match stack.last() {
        None => String::new(),
        Some(Frame::Map {
            path,
            key: Some(key),
        }) => join(path, key),
        Some(Frame::Map { path, key: None }) => join(path, "?"),
        Some(Frame::Seq { path, index }) => join(path, &index.to_string()),
    }
}

fn finish_value(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Map { key, .. }) => *key = None,
        Some(Frame::Seq { index, .. }) => *index += 1,
        None => {}
    }
}

/// The pack's context schema as the runtime validates it; `None` when the pack's
/// `context` could not be read (its fields are then not checked).
struct Schema {
    root: Option<BTreeMap<String, SchemaNode>>,
    /// Fields whose type did not check: any value goes.
    lenient: HashSet<String>,
}

impl Schema {
    fn of(pack: &Pack) -> Schema {
        let fields: Vec<ContextField> = pack
            .fields
            .iter()
            .map(|f| ContextField {
                path: String::from(&*f.path),
                ty: f.ty.to_artifact(),
                optional: f.optional,
                doc: None,
                provenance: String::new(),
            })
            .collect();
        let root = match SchemaNode::build(&fields) {
            Ok(SchemaNode::Group(root)) if !pack.unresolved_fields => Some(root),
            _ => None,
        };
        Schema {
            root,
            lenient: pack
                .fields
                .iter()
                .filter(|f| f.ty.is_unknown())
                .map(|f| String::from(&*f.path))
                .collect(),
        }
    }
}

/// What a case expects that excuses inputs the pack would not accept.
#[derive(Clone, Copy)]
struct Excuses {
    /// `expect: { error: ... }`: invalid inputs may be the point.
    error: bool,
    /// `expect: { fallback_used: true }`: an undeclared intent is the point.
    fallback: bool,
}

struct Checker<'a> {
    pack: &'a Pack,
    located: &'a Located,
    schema: Schema,
}

fn diagnostic(
    span: Span,
    severity: Severity,
    code: &'static str,
    message: String,
) -> TestDiagnostic {
    TestDiagnostic {
        span,
        severity,
        code,
        message,
    }
}

/// `; did you mean `x`?` for the nearest of `names`, or nothing.
fn did_you_mean<'n>(name: &str, names: impl Iterator<Item = &'n str>) -> String {
    names
        .map(|n| (strsim::damerau_levenshtein(name, n), n))
        .filter(|(d, n)| *d <= 2.max(n.len() / 4) && *d < n.len().max(1))
        .min()
        .map(|(_, n)| format!("; did you mean `{n}`?"))
        .unwrap_or_default()
}

impl Checker<'_> {
    fn file(&self, doc: &Value, out: &mut Vec<TestDiagnostic>) {
        let none = Excuses {
            error: false,
            fallback: false,
        };
        if let Some(defaults) = doc.get("defaults").filter(|d| d.is_object()) {
            self.inputs(defaults, "defaults", none, out);
        }
        let Some(cases) = doc.get("cases").and_then(Value::as_array) else {
            return;
        };
        for (i, case) in cases.iter().enumerate() {
            let expect = case.get("expect");
            let excuses = Excuses {
                error: expect
                    .and_then(|e| e.get("error"))
                    .is_some_and(Value::is_string),
                fallback: expect.and_then(|e| e.get("fallback_used")) == Some(&Value::Bool(true)),
            };
            let path = format!("cases/{i}");
            if case.is_object() {
                self.inputs(case, &path, excuses, out);
            }
            if let (Some(Value::Object(expect)), false) = (expect, excuses.error) {
                self.expect(expect, &format!("{path}/expect"), out);
            }
        }
    }

    /// A case's (or the defaults') `run` and `request`.
    fn inputs(&self, inputs: &Value, path: &str, excuses: Excuses, out: &mut Vec<TestDiagnostic>) {
        let request = inputs.get("request");
        if let Some(Value::String(intent)) = request.and_then(|r| r.get("intent")) {
            self.intent(intent, &format!("{path}/request/intent"), excuses, out);
        }
        if excuses.error {
            return;
        }
        if let (Some(context), Some(root)) = (
            request.and_then(|r| r.get("context")),
            self.schema.root.as_ref(),
        ) {
            self.context(
                context,
                root,
                &format!("{path}/request/context"),
                "ctx",
                out,
            );
        }
        let run = inputs.get("run");
        for list in ["permissions", "prohibitions"] {
            let items = run.and_then(|r| r.get(list)).and_then(Value::as_array);
            for (i, item) in items.into_iter().flatten().enumerate() {
                let Some(tool) = item.as_str() else { continue };
                if !self.pack.declares(SymbolKind::Tool, tool) {
                    out.push(diagnostic(
                        self.located.value(&format!("{path}/run/{list}/{i}")),
                        Severity::Warning,
                        "unknown_tool",
                        format!(
                            "the pack declares no tool `{tool}`: `run.{list}` names it to no effect{}",
                            did_you_mean(tool, self.pack.names(SymbolKind::Tool))
                        ),
                    ));
                }
            }
        }
        let pins = run
            .and_then(|r| r.get("budget"))
            .and_then(|b| b.get("bucket_tokens"))
            .and_then(Value::as_object);
        for bucket in pins.into_iter().flat_map(Map::keys) {
            self.name(
                SymbolKind::Bucket,
                bucket,
                self.located.key(&format!("{path}/run/budget/bucket_tokens/{bucket}")),
                "`run.budget.bucket_tokens` may only pin the pack's buckets: the compile fails with `invalid_input`",
                out,
            );
        }
    }

    fn intent(&self, intent: &str, path: &str, excuses: Excuses, out: &mut Vec<TestDiagnostic>) {
        if self.pack.declares(SymbolKind::Intent, intent) || excuses.error {
            return;
        }
        let hint = did_you_mean(intent, self.pack.names(SymbolKind::Intent));
        let span = self.located.value(path);
        match self.pack.intents.iter().find(|i| i.fallback) {
            Some(_) if excuses.fallback => {}
            Some(fallback) => out.push(diagnostic(
                span,
                Severity::Warning,
                "unknown_intent",
                format!(
                    "the pack declares no intent `{intent}`: the fallback intent `{}` serves the request{hint}",
                    fallback.name
                ),
            )),
            None => out.push(diagnostic(
                span,
                Severity::Error,
                "unknown_intent",
                format!(
                    "the pack declares no intent `{intent}` and has no fallback intent: the compile fails with `unknown_intent`{hint}"
                ),
            )),
        }
    }

    /// An error unless the pack declares `name` as a `kind`.
    fn name(
        &self,
        kind: SymbolKind,
        name: &str,
        span: Span,
        why: &str,
        out: &mut Vec<TestDiagnostic>,
    ) {
        if self.pack.declares(kind, name) {
            return;
        }
        let code = match kind {
            SymbolKind::Tool => "unknown_tool",
            SymbolKind::Redactor => "unknown_redactor",
            SymbolKind::Bucket => "unknown_bucket",
            SymbolKind::Intent => "unknown_intent",
            _ => "unknown_name",
        };
        out.push(diagnostic(
            span,
            Severity::Error,
            code,
            format!(
                "the pack declares no {} `{name}`: {why}{}",
                kind.as_str(),
                did_you_mean(name, self.pack.names(kind))
            ),
        ));
    }

    /// The names an `expect` mapping lists.
    fn expect(&self, expect: &Map<String, Value>, path: &str, out: &mut Vec<TestDiagnostic>) {
        for (key, kind, why) in [
            (
                "tools",
                SymbolKind::Tool,
                "it is never surfaced, so the case fails",
            ),
            (
                "approval_gates",
                SymbolKind::Tool,
                "it never has an approval gate, so the case fails",
            ),
            (
                "redactions",
                SymbolKind::Redactor,
                "it is never active, so the case fails",
            ),
        ] {
            let items = expect.get(key).and_then(Value::as_array);
            for (i, item) in items.into_iter().flatten().enumerate() {
                if let Some(name) = item.as_str() {
                    let span = self.located.value(&format!("{path}/{key}/{i}"));
                    self.name(kind, name, span, why, out);
                }
            }
        }
        for key in ["dropped", "truncated"] {
            let buckets = expect.get(key).and_then(Value::as_object);
            for bucket in buckets.into_iter().flat_map(Map::keys) {
                let span = self.located.key(&format!("{path}/{key}/{bucket}"));
                self.name(
                    SymbolKind::Bucket,
                    bucket,
                    span,
                    "no block is ever placed in it, so the case fails",
                    out,
                );
            }
        }
    }

    /// `request.context` (or a group in it) against the pack's schema, as the
    /// runtime validates it; absent fields are not reported (a case's context is
    /// merged over the defaults').
    fn context(
        &self,
        value: &Value,
        group: &BTreeMap<String, SchemaNode>,
        path: &str,
        dotted: &str,
        out: &mut Vec<TestDiagnostic>,
    ) {
        let object = match value {
            Value::Null => return,
            Value::Object(object) => object,
            other => {
                out.push(wrong_type(
                    self.located.value(path),
                    format!(
                        "`{dotted}` is a group of fields: expected a mapping, found {}",
                        kind_of(other)
                    ),
                ));
                return;
            }
        };
        for (key, v) in object {
            let (key_path, child) = (format!("{path}/{key}"), format!("{dotted}.{key}"));
            match group.get(key) {
                None => out.push(diagnostic(
                    self.located.key(&key_path),
                    Severity::Error,
                    "unknown_context_field",
                    format!(
                        "the pack declares no context field `{child}`: the compile fails with `invalid_input`{}",
                        did_you_mean(key, group.keys().map(String::as_str))
                    ),
                )),
                Some(SchemaNode::Group(children)) => {
                    self.context(v, children, &key_path, &child, out);
                }
                Some(SchemaNode::Field { ty, optional }) => {
                    self.field(v, ty, *optional, &key_path, &child, out);
                }
            }
        }
    }

    fn field(
        &self,
        value: &Value,
        ty: &Type,
        optional: bool,
        path: &str,
        dotted: &str,
        out: &mut Vec<TestDiagnostic>,
    ) {
        let field = dotted.strip_prefix("ctx.").unwrap_or(dotted);
        if self.schema.lenient.contains(field) {
            return;
        }
        if value.is_null() {
            if !optional {
                out.push(wrong_type(
                    self.located.value(path),
                    format!("`{dotted}` is a required {ty}: `null` leaves it unset and the compile fails with `invalid_input`"),
                ));
            }
            return;
        }
        // A list's elements are each pointed at.
        if let (Type::List { items }, Value::Array(elements)) = (ty, value) {
            for (i, element) in elements.iter().enumerate() {
                if let Err(e) = check_type(element, items, &format!("{dotted}[{i}]")) {
                    out.push(wrong_type(
                        self.located.value(&format!("{path}/{i}")),
                        e.to_string(),
                    ));
                }
            }
            return;
        }
        if let Err(e) = check_type(value, ty, dotted) {
            out.push(wrong_type(self.located.value(path), e.to_string()));
        }
    }
}

/// A JSON value's kind, as the runtime's messages name it.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn wrong_type(span: Span, message: String) -> TestDiagnostic {
    diagnostic(span, Severity::Error, "wrong_type", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACK: &str = r#"pack "a/b" version "1.0.0"

context {
  user.tier: enum("free", "pro")
  user.age: int
  tags: list<string>
  note: string?
}

prompt system "Hi."

budget {
  total 1000
  bucket tools    { share 50% }
  bucket evidence { share 50% }
}

tool lookup {
  description "Look up."
  kind read
}

intent help {
  tools lookup
  task "Help."
}

redactor email { pattern "[a-z]+@[a-z]+" }
"#;

    fn found(yaml: &str) -> Vec<(String, &'static str, Severity)> {
        Analysis::new(PACK)
            .test_file_diagnostics(yaml)
            .into_iter()
            .map(|d| {
                let written = yaml.get(d.span.start..d.span.end).unwrap().to_owned();
                (written, d.code, d.severity)
            })
            .collect()
    }

    #[test]
    fn a_clean_file_has_nothing_to_say() {
        let yaml = "pack: a.ctxpack\ndefaults:\n  request: { intent: help, context: { user: { tier: pro, age: 3 }, tags: [x] } }\ncases:\n  - name: a\n    expect: { tools: [lookup], redactions: [email], dropped: { evidence: [] } }\n";
        assert_eq!(found(yaml), []);
    }

    #[test]
    fn unknown_keys_point_at_the_key() {
        let yaml = "pack: a.ctxpack\ncases:\n  - name: a\n    expect: { tols: [] }\n  - name: b\n    reqeust: {}\n";
        let f = found(yaml);
        assert_eq!(
            f,
            [
                ("tols".to_owned(), "invalid_case", Severity::Error),
                ("reqeust".to_owned(), "invalid_case", Severity::Error),
            ]
        );
        let d = Analysis::new(PACK).test_file_diagnostics(yaml);
        assert!(
            d[0].message.starts_with("unknown expectation `tols`"),
            "{d:?}"
        );
        let file = found("pack: a.ctxpack\ncases: []\ncase: []\n");
        assert_eq!(
            file,
            [("case".to_owned(), "invalid_test_file", Severity::Error)]
        );
    }

    #[test]
    fn undeclared_names_on_their_line() {
        let yaml = "pack: a.ctxpack\ncases:\n  - name: a\n    request: { intent: hlep }\n    run: { permissions: [lookup, nope], budget: { bucket_tokens: { evidnce: 3 } } }\n    expect: { tools: [lookup, lokup], redactions: [phone], truncated: { memory: [] } }\n";
        let f = found(yaml);
        let codes: Vec<(&str, &str)> = f.iter().map(|(w, c, _)| (w.as_str(), *c)).collect();
        assert_eq!(
            codes,
            [
                ("hlep", "unknown_intent"),
                ("nope", "unknown_tool"),
                ("evidnce", "unknown_bucket"),
                ("lokup", "unknown_tool"),
                ("phone", "unknown_redactor"),
                ("memory", "unknown_bucket"),
            ]
        );
        // No fallback: an unknown intent fails the compile.
        assert_eq!(f[0].2, Severity::Error);
        assert_eq!(f[1].2, Severity::Warning);
        let d = Analysis::new(PACK).test_file_diagnostics(yaml);
        assert!(
            d[0].message.ends_with("did you mean `help`?"),
            "{}",
            d[0].message
        );
    }

    #[test]
    fn context_values_of_the_wrong_type() {
        let yaml = "pack: a.ctxpack\ncases:\n  - name: a\n    request:\n      context:\n        user: { tier: gold, age: \"3\" }\n        tags: [x, 2]\n        notes: x\n        note: null\n  - name: b\n    request: { context: { user: 3 } }\n  - name: c\n    request: { context: { user: { age: null } } }\n";
        let f = found(yaml);
        let got: Vec<(&str, &str)> = f.iter().map(|(w, c, _)| (w.as_str(), *c)).collect();
        assert_eq!(
            got,
            [
                ("gold", "wrong_type"),
                ("\"3\"", "wrong_type"),
                ("2", "wrong_type"),
                ("notes", "unknown_context_field"),
                ("3", "wrong_type"),
                ("null", "wrong_type"),
            ]
        );
    }

    #[test]
    fn what_a_case_sets_out_to_show_is_not_reported() {
        let yaml = "pack: a.ctxpack\ncases:\n  - name: a\n    request: { intent: nope, context: { user: { age: x } } }\n    expect: { error: invalid_input }\n";
        assert_eq!(found(yaml), []);
        let with_fallback = PACK.replace("intent help {", "intent help fallback {");
        let a = Analysis::new(with_fallback.as_str());
        let yaml = "pack: a.ctxpack\ncases:\n  - name: a\n    request: { intent: nope }\n    expect: { fallback_used: true }\n  - name: b\n    request: { intent: nope }\n";
        let d = a.test_file_diagnostics(yaml);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].code, d[0].severity),
            ("unknown_intent", Severity::Warning)
        );
        assert_eq!(a.text().len(), with_fallback.len());
    }

    #[test]
    fn syntax_errors_and_odd_text_never_panic() {
        let f = found("pack: a\ncases: [\n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].1, "yaml_syntax");
        // A flow collection nested 200,000 deep, as a paste might bring: one syntax
        // problem, on its line, at once (the YAML parser alone took minutes).
        let deep = format!(
            "pack: a\ncases: {}{}\n",
            "[".repeat(200_000),
            "]".repeat(200_000)
        );
        let started = std::time::Instant::now();
        let d = Analysis::new(PACK).test_file_diagnostics(&deep);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, "yaml_syntax");
        assert!(
            d[0].message
                .starts_with("recursion limit exceeded at line 2"),
            "{}",
            d[0].message
        );
        assert!(d[0].span.start > "pack: a\n".len() && d[0].span.end <= deep.len());
        for yaml in [
            "",
            "\u{feff}pack: é\ncases:\n  - name: ü\n    request: { intent: ñ }\n",
            "- 1\n",
            "pack: a\ncases:\n  - ? [a]\n    : b\n",
            "pack: a\ndefaults: { request: { context: [1] } }\ncases: [{ name: x, request: { context: { user: [] } } }]\n",
            "&a pack: *a\n",
            "\t\"",
        ] {
            let a = Analysis::new(PACK);
            for d in a.test_file_diagnostics(yaml) {
                assert!(d.span.start <= d.span.end && d.span.end <= yaml.len(), "{yaml:?} {d:?}");
                assert!(yaml.is_char_boundary(d.span.start) && yaml.is_char_boundary(d.span.end));
            }
        }
        // Every cut of a real file (a document being typed) is answered.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packs/support");
        let pack = std::fs::read_to_string(root.join("support.ctxpack")).unwrap();
        let yaml = std::fs::read_to_string(root.join("support.tests.yaml")).unwrap();
        let a = Analysis::new(pack);
        for cut in (0..yaml.len())
            .step_by(97)
            .filter(|c| yaml.is_char_boundary(*c))
        {
            for d in a.test_file_diagnostics(&yaml[..cut]) {
                assert!(
                    d.span.start <= d.span.end && d.span.end <= cut,
                    "{cut} {d:?}"
                );
            }
        }
        // A non-ASCII text points at the right bytes.
        let yaml = "pack: a.ctxpack\n# é ü\ncases:\n  - name: é\n    request: { intent: ñope }\n";
        let d = Analysis::new(PACK).test_file_diagnostics(yaml);
        assert_eq!(&yaml[d[0].span.start..d[0].span.end], "ñope");
    }

    #[test]
    fn the_bundled_test_files_are_clean() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packs");
        for name in ["support", "coding", "triage"] {
            let dir = root.join(name);
            let pack = std::fs::read_to_string(dir.join(format!("{name}.ctxpack"))).unwrap();
            let yaml = std::fs::read_to_string(dir.join(format!("{name}.tests.yaml"))).unwrap();
            let d = Analysis::new(pack).test_file_diagnostics(&yaml);
            assert!(d.is_empty(), "{name}: {d:?}");
        }
    }
}
