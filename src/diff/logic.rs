//! A policy as a reviewer reads it: its `when` condition written back in the
//! language's expression syntax, and its effects as the pack declares them.
//!
//! Conditions are stored as JsonLogic. [`condition`] inverts the lowering of
//! `language.md`'s expressions (`===` → `==`, `!` → `not`, `{"!==": [{"var": p}, null]}`
//! → `exists(p)`, …) and falls back to `json { … }` — the language's own escape for
//! raw JsonLogic — for anything else, so the text is always valid source.

use serde_json::Value;

use crate::artifact::{Effect, Policy};

/// The lines that say what a policy does: `when …`, then one line per effect.
pub fn describe(policy: &Policy) -> Vec<String> {
    let mut lines = vec![format!("when {}", condition(&policy.when))];
    lines.extend(policy.effects.iter().map(effect));
    lines
}

/// One effect as written in a pack.
pub fn effect(effect: &Effect) -> String {
    match effect {
        Effect::Refuse(reason) => format!("refuse {}", quote(reason)),
        Effect::Escalate(target) => format!("escalate {}", quote(target)),
        Effect::RequireApproval(tools) => format!("require_approval {}", tools.join(", ")),
        Effect::Deny(tools) => format!("deny {}", tools.join(", ")),
        Effect::Redact(redactors) => format!("redact {}", redactors.join(", ")),
        Effect::Instruct(template) => format!("instruct {}", quote(&template.text)),
    }
}

fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Binding strength, loosest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Or,
    And,
    Not,
    Cmp,
    Atom,
}

/// A condition in expression syntax.
pub fn condition(rule: &Value) -> String {
    expr(rule).0
}

/// The text of `rule` and how tightly it binds.
fn expr(rule: &Value) -> (String, Prec) {
    match rule {
        Value::Object(map) if map.len() == 1 => {
            let Some((op, args)) = map.iter().next() else {
                return raw(rule);
            };
            operation(op, args).unwrap_or_else(|| raw(rule))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(|v| expr(v).0).collect();
            (format!("[{}]", parts.join(", ")), Prec::Atom)
        }
        Value::Object(_) => raw(rule),
        scalar => (scalar.to_string(), Prec::Atom),
    }
}

fn raw(rule: &Value) -> (String, Prec) {
    (format!("json {rule}"), Prec::Atom)
}

/// `Some` when `op` is one the language writes as an expression.
fn operation(op: &str, args: &Value) -> Option<(String, Prec)> {
    let list: Vec<&Value> = match args {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    match (op, list.as_slice()) {
        ("var", [Value::String(path)]) => Some((path.clone(), Prec::Atom)),
        ("!==", [var, Value::Null]) if path_of(var).is_some() => {
            Some((format!("exists({})", path_of(var)?), Prec::Atom))
        }
        ("and" | "or", items) if items.len() >= 2 => {
            let (word, prec) = if op == "and" {
                ("and", Prec::And)
            } else {
                ("or", Prec::Or)
            };
            let parts: Vec<String> = items.iter().map(|v| operand(v, prec, false)).collect();
            Some((parts.join(&format!(" {word} ")), prec))
        }
        ("!", [x]) => Some((format!("not {}", operand(x, Prec::Not, false)), Prec::Not)),
        (cmp, [a, b]) => {
            let symbol = match cmp {
                "===" => "==",
                "!==" => "!=",
                "==" | "!=" | "<" | "<=" | ">" | ">=" | "in" => cmp,
                _ => return None,
            };
            let (a, b) = (operand(a, Prec::Cmp, true), operand(b, Prec::Cmp, true));
            Some((format!("{a} {symbol} {b}"), Prec::Cmp))
        }
        _ => None,
    }
}

/// An operand of an operator of strength `outer`, in parentheses when it binds more
/// loosely (or as loosely, for comparisons, which do not chain).
fn operand(v: &Value, outer: Prec, strict: bool) -> String {
    let (text, prec) = expr(v);
    if prec < outer || (strict && prec == outer) {
        format!("({text})")
    } else {
        text
    }
}

fn path_of(v: &Value) -> Option<&str> {
    match v.get("var")? {
        Value::String(p) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_read_as_written() {
        let rule = json!({"and": [
            {"<": [{"var": "ctx.user.age"}, 18]},
            {"===": [{"var": "request.channel"}, "voice"]}
        ]});
        assert_eq!(
            condition(&rule),
            "ctx.user.age < 18 and request.channel == \"voice\""
        );
        let rule = json!({"or": [
            {"!": {"in": ["vip", {"var": "ctx.flags"}]}},
            {"and": [{"!==": [{"var": "ctx.order.total"}, null]}, {">": [{"var": "ctx.order.total"}, 500.0]}]}
        ]});
        assert_eq!(
            condition(&rule),
            "not \"vip\" in ctx.flags or exists(ctx.order.total) and ctx.order.total > 500.0"
        );
        let rule = json!({"and": [{"or": [true, false]}, {"!": {"and": [true, false]}}]});
        assert_eq!(condition(&rule), "(true or false) and not (true and false)");
        assert_eq!(condition(&json!(true)), "true");
        assert_eq!(
            condition(&json!({"in": [{"var": "ctx.tier"}, ["a", "b"]]})),
            "ctx.tier in [\"a\", \"b\"]"
        );
    }

    #[test]
    fn anything_else_is_raw_json_logic() {
        let rule = json!({">": [{"+": [{"var": "ctx.code"}]}, 100]});
        assert_eq!(
            condition(&rule),
            "json {\"+\":[{\"var\":\"ctx.code\"}]} > 100"
        );
        assert_eq!(
            condition(&json!({"a": 1, "b": 2})),
            "json {\"a\":1,\"b\":2}"
        );
    }
}
