//! Stage 2: policy resolution. Every policy's `when` (JsonLogic, compiled once per pack
//! with datalogic-rs) is evaluated over `{ "ctx", "request", "run" }` in evaluation
//! order; the effects of those that fire are collected.
//!
//! Failure handling:
//!
//! - An enforcing policy whose evaluation fails stops the compile closed with
//!   `policy_eval_error` naming the policy (exit 5).
//! - An advisory policy that fails is skipped (it does not fire) and reported as an
//!   `R0201` diagnostic and in its manifest entry's `error`.
//! - A condition that does not even compile is found when the pack is prepared: for an
//!   enforcing policy, [`super::PreparedPack::new`] fails with `policy_eval_error` (the
//!   pack could never compile anything, so refusing it at load is the earliest form of
//!   failing closed); for an advisory policy, the error is kept and every compile
//!   skips the policy with `R0201`.
//!
//! A condition fires when its result is truthy under JsonLogic's rules, as any other
//! JsonLogic implementation would decide.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use datalogic_rs::bumpalo::Bump;
use datalogic_rs::{DataValue, Engine, Logic};
use regex::Regex;
use serde_json::{json, Value};

use crate::artifact::{Effect, Policy};

use super::error::CompileError;
use super::shared::Diagnostic;

/// A policy condition as prepared once per pack.
pub(crate) enum Condition {
    Compiled(Logic),
    /// The rule did not compile (advisory policies only; see the module docs).
    Broken(String),
}

pub(crate) fn compile_conditions(
    engine: &Engine,
    policies: &[Policy],
) -> Result<Vec<Condition>, CompileError> {
    policies
        .iter()
        .map(|p| {
            let rule = p.when.to_string();
            let checked = match unknown_operator(engine, &p.when) {
                Some(op) => Err(format!("unknown JsonLogic operator `{op}`")),
                None => engine.compile(&rule).map_err(|e| e.to_string()),
            };
            match checked {
                Ok(logic) => Ok(Condition::Compiled(logic)),
                Err(e) if p.enforcing => Err(CompileError::PolicyEvalError {
                    policy: p.name.clone(),
                    message: format!("condition does not compile: {e}"),
                }),
                Err(e) => Ok(Condition::Broken(format!(
                    "condition does not compile: {e}"
                ))),
            }
        })
        .collect()
}

/// The first operator of `rule` that the engine does not know, if any.
///
/// datalogic-rs reports an unknown operator only when evaluation reaches it, so a typo
/// in a branch that `and`/`or`/`if` rarely reach would stay hidden. We look for them
/// when the pack is prepared instead. In JsonLogic an object with exactly one key is an
/// operation named by that key.
fn unknown_operator(engine: &Engine, rule: &Value) -> Option<String> {
    match rule {
        Value::Object(map) if map.len() == 1 => {
            let (op, args) = map.iter().next()?;
            if !engine.builtin_operator_names().any(|b| b == op) {
                return Some(op.clone());
            }
            unknown_operator(engine, args)
        }
        Value::Object(map) => map.values().find_map(|v| unknown_operator(engine, v)),
        Value::Array(items) => items.iter().find_map(|v| unknown_operator(engine, v)),
        _ => None,
    }
}

/// Stage 2's result.
#[derive(Debug)]
pub(crate) struct PolicyOutcome<'p> {
    /// By policy, in evaluation order.
    pub results: Vec<PolicyResult>,
    /// The first fired `refuse` in evaluation order.
    pub refusal: Option<String>,
    /// The first fired `escalate` in evaluation order.
    pub escalation: Option<String>,
    /// The redactors that fired `redact` effects activate.
    pub redaction: Redaction<'p>,
    /// `R0201` for advisory policies that failed to evaluate.
    pub diagnostics: Vec<Diagnostic>,
}

/// Stage 2: evaluates every policy over `data` in evaluation order and collects the
/// effects of those that fire. `redactors` are the pack's, compiled, by name.
pub(crate) fn resolve<'p>(
    engine: &Engine,
    policies: &'p [Policy],
    conditions: &[Condition],
    redactors: &'p BTreeMap<String, (String, Regex)>,
    data: &Value,
) -> Result<PolicyOutcome<'p>, CompileError> {
    let mut diagnostics = Vec::new();
    let results = evaluate(engine, policies, conditions, data, &mut diagnostics)?;
    let mut refusal = None;
    let mut escalation = None;
    let mut redact: BTreeSet<&str> = BTreeSet::new();
    for (policy, _) in policies.iter().zip(&results).filter(|(_, r)| r.fired) {
        for e in &policy.effects {
            match e {
                Effect::Refuse(reason) if refusal.is_none() => refusal = Some(reason.clone()),
                Effect::Escalate(target) if escalation.is_none() => {
                    escalation = Some(target.clone())
                }
                Effect::Redact(names) => redact.extend(names.iter().map(String::as_str)),
                _ => {}
            }
        }
    }
    let active = redact
        .iter()
        .filter_map(|n| redactors.get_key_value(*n).map(|(k, v)| (k.as_str(), v)))
        .collect();
    Ok(PolicyOutcome {
        results,
        refusal,
        escalation,
        redaction: Redaction::new(active),
        diagnostics,
    })
}

/// The active redactors of one compile, sorted by name.
#[derive(Debug)]
pub(crate) struct Redaction<'p> {
    active: Vec<(&'p str, &'p (String, Regex))>,
    /// What the active redactors are, as part of every lane block's cache key: the same
    /// content renders differently when a different set is active.
    key: Vec<u8>,
}

impl<'p> Redaction<'p> {
    fn new(active: Vec<(&'p str, &'p (String, Regex))>) -> Redaction<'p> {
        let mut key = Vec::new();
        for (name, _) in &active {
            key.extend_from_slice(name.as_bytes());
            key.push(0);
        }
        Redaction { active, key }
    }

    pub fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Each active redactor's name and pattern.
    pub fn rules(&self) -> impl Iterator<Item = (&'p str, &'p str)> + '_ {
        self.active
            .iter()
            .map(|(name, (pattern, _))| (*name, pattern.as_str()))
    }

    /// `text` with every match of an active redactor replaced by `[REDACTED:<name>]`;
    /// borrowed when nothing matched. An empty match redacts nothing: a pattern such
    /// as `[0-9]*` replaces runs of digits, not the gaps between every character.
    pub fn apply<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for (name, (_, re)) in &self.active {
            let mut replaced = String::new();
            let mut last = 0;
            for m in re.find_iter(&out).filter(|m| !m.is_empty()) {
                replaced.push_str(&out[last..m.start()]);
                replaced.push_str("[REDACTED:");
                replaced.push_str(name);
                replaced.push(']');
                last = m.end();
            }
            if last > 0 {
                replaced.push_str(&out[last..]);
                out = Cow::Owned(replaced);
            }
        }
        out
    }
}

/// What happened to one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PolicyResult {
    pub fired: bool,
    pub error: Option<String>,
}

/// Evaluates every policy over `data` (the compile's `{ctx, request, run}`).
fn evaluate(
    engine: &Engine,
    policies: &[Policy],
    conditions: &[Condition],
    data: &Value,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<PolicyResult>, CompileError> {
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    // The data is parsed into the arena once and shared by every evaluation.
    let text = data.to_string();
    let arena = Bump::new();
    let parsed = DataValue::from_str(&text, &arena)
        .map_err(|e| CompileError::artifact(format!("policy data could not be prepared: {e}")))?;
    let parsed: &DataValue = arena.alloc(parsed);
    let mut results = Vec::with_capacity(policies.len());
    for (policy, condition) in policies.iter().zip(conditions) {
        let outcome = match condition {
            Condition::Compiled(logic) => engine
                .evaluate(logic, parsed, &arena)
                .map(|v| engine.truthy(v))
                .map_err(|e| explain_failure(engine, &policy.when, &text, &e)),
            Condition::Broken(message) => Err(message.clone()),
        };
        match outcome {
            Ok(fired) => results.push(PolicyResult { fired, error: None }),
            Err(message) if policy.enforcing => {
                return Err(CompileError::PolicyEvalError {
                    policy: policy.name.clone(),
                    message,
                })
            }
            Err(message) => {
                diagnostics.push(Diagnostic {
                    code: "R0201".into(),
                    message: format!(
                        "advisory policy `{}` failed to evaluate and was skipped: {message}",
                        policy.name
                    ),
                    policy: Some(policy.name.clone()),
                });
                results.push(PolicyResult {
                    fired: false,
                    error: Some(message),
                });
            }
        }
    }
    Ok(results)
}

/// Says why a condition failed in the pack's terms: the innermost operation that fails
/// on its own, the values its operands had (`ctx.code` = "abc") and what went wrong,
/// rather than the engine's internal error value. Runs only after a failure.
fn explain_failure(
    engine: &Engine,
    rule: &Value,
    data: &str,
    error: &datalogic_rs::Error,
) -> String {
    innermost_failure(engine, rule, data, 0).unwrap_or_else(|| {
        let op = error
            .operator()
            .map(|op| format!("`{op}` "))
            .unwrap_or_default();
        format!("{op}failed: {}", reason(error))
    })
}

/// How deep [`innermost_failure`] descends; conditions are far shallower.
const MAX_EXPLAIN_DEPTH: usize = 64;

fn innermost_failure(engine: &Engine, rule: &Value, data: &str, depth: usize) -> Option<String> {
    let Value::Object(map) = rule else {
        return None;
    };
    let (op, args) = map.iter().next().filter(|_| map.len() == 1)?;
    let args: Vec<&Value> = match args {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    // Operands in evaluation order: the first that fails by itself is the culprit.
    if op != "var" && depth < MAX_EXPLAIN_DEPTH {
        if let Some(inner) = args
            .iter()
            .find_map(|a| innermost_failure(engine, a, data, depth + 1))
        {
            return Some(inner);
        }
    }
    let error = engine.eval_str(&rule.to_string(), data).err()?;
    let operands: Vec<String> = args.iter().map(|a| operand(engine, a, data)).collect();
    Some(format!(
        "`{op}` failed on {}: {}",
        if operands.is_empty() {
            "no operands".to_owned()
        } else {
            operands.join(", ")
        },
        reason(&error)
    ))
}

/// An operand as the pack wrote it and the value it had: `ctx.code` = "abc", or a
/// literal's JSON.
fn operand(engine: &Engine, arg: &Value, data: &str) -> String {
    let value = engine
        .eval_str(&arg.to_string(), data)
        .map(|v| shorten(&v))
        .unwrap_or_else(|_| "(fails)".to_owned());
    match arg
        .get("var")
        .map(|v| v.as_array().and_then(|a| a.first()).unwrap_or(v))
    {
        Some(Value::String(path)) => format!("`{path}` = {value}"),
        _ => value,
    }
}

/// At most 60 characters of a value's JSON.
fn shorten(json: &str) -> String {
    match json.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &json[..cut]),
        None => json.to_owned(),
    }
}

/// What went wrong, without the engine's internal representation.
fn reason(error: &datalogic_rs::Error) -> String {
    use datalogic_rs::ErrorKind;
    match &error.kind {
        ErrorKind::Thrown(value) => match value.get("type").and_then(|t| t.as_str()) {
            Some("NaN") => "the result is not a number".to_owned(),
            Some(kind) => format!("it threw `{kind}`"),
            None => format!("it threw {}", shorten(&value.to_json_string())),
        },
        ErrorKind::TypeError(m) => format!("type error: {m}"),
        ErrorKind::ArithmeticError(m) => format!("arithmetic error: {m}"),
        ErrorKind::InvalidArguments(m) => format!("invalid arguments: {m}"),
        ErrorKind::VariableNotFound(v) => format!("`{v}` has no value"),
        ErrorKind::IndexOutOfBounds { index, length } => {
            format!("index {index} is out of bounds for a list of {length}")
        }
        other => datalogic_rs::Error::new(other.clone()).to_string(),
    }
}

/// An effect as the policy manifest shows it: `{ "<effect>": argument }`, with an
/// `instruct` template shown as its source text.
pub(crate) fn effect_json(effect: &Effect) -> Value {
    match effect {
        Effect::Refuse(s) => json!({ "refuse": s }),
        Effect::Escalate(s) => json!({ "escalate": s }),
        Effect::RequireApproval(t) => json!({ "require_approval": t }),
        Effect::Deny(t) => json!({ "deny": t }),
        Effect::Redact(r) => json!({ "redact": r }),
        Effect::Instruct(t) => json!({ "instruct": t.text }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_matches_and_skips_empty_ones() {
        let digits = (String::from("[0-9]*"), Regex::new("[0-9]*").unwrap());
        let email = (String::from("@"), Regex::new("[a-z]+@[a-z.]+").unwrap());
        let r = Redaction::new(vec![("digits", &digits), ("email", &email)]);
        assert_eq!(
            r.apply("call 555 0100 or jo@x.io"),
            "call [REDACTED:digits] [REDACTED:digits] or [REDACTED:email]"
        );
        assert!(matches!(r.apply("no secrets"), Cow::Borrowed("no secrets")));
        assert_eq!(r.apply("42"), "[REDACTED:digits]");
    }

    fn policy(name: &str, enforcing: bool, when: Value) -> Policy {
        Policy {
            name: name.into(),
            priority: 0,
            enforcing,
            when,
            effects: vec![Effect::Refuse("no".into())],
            bundle: "a/b@1.0.0".into(),
            doc: None,
        }
    }

    fn data() -> Value {
        json!({"ctx": {"user": {"age": 16}}, "request": {"channel": "voice"}, "run": {}})
    }

    #[test]
    fn fires_on_truthy_conditions() {
        let engine = Engine::new();
        let ps = vec![
            policy("minor", true, json!({"<": [{"var": "ctx.user.age"}, 18]})),
            policy("adult", true, json!({">=": [{"var": "ctx.user.age"}, 18]})),
            policy(
                "voice",
                true,
                json!({"===": [{"var": "request.channel"}, "voice"]}),
            ),
        ];
        let cs = compile_conditions(&engine, &ps).unwrap();
        let mut d = Vec::new();
        let r = evaluate(&engine, &ps, &cs, &data(), &mut d).unwrap();
        let fired: Vec<bool> = r.iter().map(|r| r.fired).collect();
        assert_eq!(fired, vec![true, false, true]);
    }

    #[test]
    fn unknown_operator_fails_closed_at_load_for_enforcing_only() {
        let engine = Engine::new();
        let bad = json!({"no_such_op": [1]});
        let e = compile_conditions(&engine, &[policy("p", true, bad.clone())]);
        assert!(matches!(e, Err(CompileError::PolicyEvalError { .. })));
        let ps = vec![policy("p", false, bad)];
        let cs = compile_conditions(&engine, &ps).unwrap();
        let mut d = Vec::new();
        let r = evaluate(&engine, &ps, &cs, &data(), &mut d).unwrap();
        assert!(!r[0].fired && r[0].error.is_some());
        assert_eq!(d[0].code, "R0201");
    }
}
