//! Problems in a `*.tests.yaml` file, for an editor as it is typed: everything the
//! runner would refuse (unknown and malformed keys, a file it cannot run), and what
//! only the pack can tell — intents and tools it does not declare, context values of
//! the wrong type — each on its line.

use serde_json::Value;

use super::lines::Lines;
use super::spec;
use crate::ir::{Pack, Ty};

/// One problem, on a 1-based line (1 when the file gives no better one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    /// What kind of problem, as the editor's diagnostics name it: `yaml_syntax`,
    /// `invalid_test_file`, `invalid_case`, `pack_not_found`, `unknown_intent`,
    /// `unknown_tool`, `unknown_context_field` or `wrong_type`.
    pub code: &'static str,
    pub message: String,
}

/// `line N: message` as the runner words it, split back into its parts.
/// The problem of a test file whose `pack` names no file (`path`, resolved beside
/// the test file): `ctxpack test` refuses it (exit 3). On the line of `pack`.
pub fn missing_pack(text: &str, path: &std::path::Path) -> Problem {
    Problem {
        line: Lines::of(text).get("pack").unwrap_or(1),
        code: "pack_not_found",
        message: format!("pack `{}` not found", path.display()),
    }
}

fn from_runner(code: &'static str, text: &str) -> Problem {
    let parsed = text.strip_prefix("line ").and_then(|rest| {
        let (n, message) = rest.split_once(": ")?;
        Some((n.parse().ok()?, message.to_owned()))
    });
    match parsed {
        Some((line, message)) => Problem {
            line,
            code,
            message,
        },
        None => Problem {
            line: 1,
            code,
            message: text.to_owned(),
        },
    }
}

/// The problems of a test file's text; `pack` is the IR of the pack it names, when
/// that could be read.
pub fn lint(text: &str, pack: Option<&Pack>) -> Vec<Problem> {
    let doc = match crate::yaml::from_str::<Value>(text) {
        Ok(doc) => doc,
        Err(e) => {
            let line = e.location().map_or(1, |l| l.line());
            return vec![Problem {
                line,
                code: "yaml_syntax",
                message: format!("not valid YAML: {e}"),
            }];
        }
    };
    let lines = Lines::of(text);
    let file = match spec::parse(&doc, &lines) {
        Ok(f) => f,
        Err(e) => return vec![from_runner("invalid_test_file", &e.message)],
    };
    let mut out: Vec<Problem> = Vec::new();
    for (i, case) in file.cases.iter().enumerate() {
        out.extend(case.problems.iter().map(|p| from_runner("invalid_case", p)));
        if let Some(pack) = pack {
            against_pack(i, case, &doc, &lines, pack, &mut out);
        }
    }
    out.sort_by_key(|p| p.line);
    out
}

fn against_pack(
    i: usize,
    case: &spec::CaseSpec,
    doc: &Value,
    lines: &Lines,
    pack: &Pack,
    out: &mut Vec<Problem>,
) {
    let path = format!("cases/{i}");
    let line = |sub: &str| {
        lines
            .get(&format!("{path}/{sub}"))
            .or(case.line)
            .unwrap_or(1)
    };
    if let Some(intent) = case.inputs.request.get("intent").and_then(Value::as_str) {
        if !pack.intents.iter().any(|x| x.name == intent) {
            out.push(Problem {
                line: line("request/intent"),
                code: "unknown_intent",
                message: format!("the pack declares no intent `{intent}`"),
            });
        }
    }
    for (key, names) in [
        ("tools", &case.expect.tools),
        ("approval_gates", &case.expect.approval_gates),
    ] {
        for name in names.iter().flatten() {
            if pack.tool(name).is_none() {
                out.push(Problem {
                    line: line(&format!("expect/{key}")),
                    code: "unknown_tool",
                    message: format!("the pack declares no tool `{name}`"),
                });
            }
        }
    }
    // Context values, the case's and the defaults' (reported where they are written).
    let defaults = doc
        .get("defaults")
        .and_then(|d| d.get("request"))
        .and_then(|r| r.get("context"));
    if i == 0 {
        if let Some(ctx) = defaults {
            context(ctx, "", "defaults/request/context", lines, pack, out);
        }
    }
    if let Some(ctx) = case.inputs.request.get("context") {
        context(
            ctx,
            "",
            &format!("{path}/request/context"),
            lines,
            pack,
            out,
        );
    }
}

/// Checks the leaves of a context value against the pack's fields.
fn context(
    value: &Value,
    prefix: &str,
    at: &str,
    lines: &Lines,
    pack: &Pack,
    out: &mut Vec<Problem>,
) {
    let Value::Object(map) = value else {
        return;
    };
    for (key, v) in map {
        let field = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let here = format!("{at}/{key}");
        let line = lines.get(&here).unwrap_or(1);
        match pack.field(&field) {
            Some(f) => {
                let absent = v.is_null() && f.optional;
                if !absent && !fits(&f.ty, v) {
                    out.push(Problem {
                        line,
                        code: "wrong_type",
                        message: format!(
                            "`ctx.{field}` is `{}`{}, not {v}",
                            f.ty.describe(),
                            if f.optional { "?" } else { "" }
                        ),
                    });
                }
            }
            None if v.is_object()
                && pack
                    .fields
                    .iter()
                    .any(|f| f.path.starts_with(&format!("{field}."))) =>
            {
                context(v, &field, &here, lines, pack, out);
            }
            None if pack.unresolved_imports || pack.may_declare(&field) => {}
            None => out.push(Problem {
                line,
                code: "unknown_context_field",
                message: format!("the pack declares no context field `ctx.{field}`"),
            }),
        }
    }
}

fn fits(ty: &Ty, v: &Value) -> bool {
    match (ty, v) {
        (Ty::String | Ty::Timestamp, Value::String(_)) => true,
        (Ty::Int, Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Ty::Float, Value::Number(_)) => true,
        (Ty::Bool, Value::Bool(_)) => true,
        (Ty::Enum(variants), Value::String(s)) => variants.iter().any(|x| x == s),
        (Ty::List(inner), Value::Array(items)) => items.iter().all(|i| fits(inner, i)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACK: &str = "pack \"a/b\" version \"1.0.0\"\ncontext {\n  user.tier: enum(\"free\", \"pro\")\n  user.age: int\n}\nprompt system \"s\"\nbudget {\n  total 1000\n  bucket policy { share 20% }\n  bucket tools { share 20% }\n  bucket evidence { share 20% }\n  bucket memory { share 20% }\n  bucket session { share 20% }\n}\ntool t {\n  description \"d\"\n  kind read\n  risk low\n  approval auto\n}\nintent i {\n  tools t\n  task \"x\"\n}\n";

    #[test]
    fn problems_come_with_their_lines() {
        let checked = crate::check::check_source(PACK);
        let text = "pack: a.ctxpack\ndefaults:\n  request:\n    context: { user: { tier: gold, age: 3 } }\ncases:\n  - name: a\n    request: { intent: nope, context: { user: { age: \"old\" }, zip: 1 } }\n    expect: { tools: [t, u], tols: [] }\n";
        let problems = lint(text, Some(&checked.pack));
        let got: Vec<(usize, &str)> = problems
            .iter()
            .map(|p| (p.line, p.message.as_str()))
            .collect();
        assert!(
            got.contains(&(
                4,
                "`ctx.user.tier` is `enum(\"free\", \"pro\")`, not \"gold\""
            )),
            "{got:?}"
        );
        assert!(
            got.contains(&(7, "the pack declares no intent `nope`")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(l, m)| *l == 7 && m.contains("`ctx.user.age` is `int`")),
            "{got:?}"
        );
        assert!(
            got.contains(&(7, "the pack declares no context field `ctx.zip`")),
            "{got:?}"
        );
        assert!(
            got.contains(&(8, "the pack declares no tool `u`")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(l, m)| *l == 8 && m.contains("unknown expectation `tols`")),
            "{got:?}"
        );
        assert_eq!(lint("pack: [\n", None)[0].line, 2);
        assert!(lint("pack: a.ctxpack\ncases: []\n", Some(&checked.pack)).is_empty());
    }
}
