//! Input validation, before any stage runs and all-or-nothing: the context against the
//! pack's schema (no coercion, no unknown keys), unique non-empty ids, promoted memory
//! only, finite scores, and run budget overrides that name declared buckets.
//!
//! Errors name the offending path, e.g. `request.context.user.age: expected int, found
//! string`. When several things are wrong, the first in a deterministic order (unknown
//! keys in sorted order, then declared fields in path order) is reported.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Number, Value};

use crate::artifact::{ContextField, Type};

use super::error::CompileError;
use super::inputs::CompileInputs;
use super::shared::json_kind;

/// The context schema as a tree of path segments: `user.tier` and `user.age` share the
/// `user` group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SchemaNode {
    Field { ty: Type, optional: bool },
    Group(BTreeMap<String, SchemaNode>),
}

impl SchemaNode {
    /// Builds the tree; a path that is both a field and a prefix is an invalid artifact.
    pub(crate) fn build(fields: &[ContextField]) -> Result<SchemaNode, CompileError> {
        let mut root = BTreeMap::new();
        for field in fields {
            let segments: Vec<&str> = field.path.split('.').collect();
            if segments.iter().any(|s| s.is_empty()) {
                return Err(CompileError::artifact(format!(
                    "context field `{}` has an empty path segment",
                    field.path
                )));
            }
            insert(&mut root, &segments, field)?;
        }
        Ok(SchemaNode::Group(root))
    }
}

fn insert(
    group: &mut BTreeMap<String, SchemaNode>,
    segments: &[&str],
    field: &ContextField,
) -> Result<(), CompileError> {
    let conflict = || {
        CompileError::artifact(format!(
            "context path `{}` is both a field and a prefix of another field",
            field.path
        ))
    };
    match segments {
        [] => Err(conflict()),
        [last] => {
            if group.contains_key(*last) {
                return Err(conflict());
            }
            group.insert(
                (*last).to_owned(),
                SchemaNode::Field {
                    ty: field.ty.clone(),
                    optional: field.optional,
                },
            );
            Ok(())
        }
        [first, rest @ ..] => {
            let node = group
                .entry((*first).to_owned())
                .or_insert_with(|| SchemaNode::Group(BTreeMap::new()));
            match node {
                SchemaNode::Group(children) => insert(children, rest, field),
                SchemaNode::Field { .. } => Err(conflict()),
            }
        }
    }
}

/// Refuses a text that is empty or whitespace only: `request.history[2].content: empty`.
fn non_blank(text: &str, path: impl FnOnce() -> String) -> Result<(), CompileError> {
    match text {
        "" => Err(CompileError::input(path(), "empty")),
        t if t.trim().is_empty() => Err(CompileError::input(path(), "empty (whitespace only)")),
        _ => Ok(()),
    }
}

/// Validates every input. `buckets` are the pack's bucket names.
pub(crate) fn validate_inputs(
    schema: &SchemaNode,
    buckets: &[String],
    lane_blocks: &[String],
    inputs: &CompileInputs,
) -> Result<(), CompileError> {
    let empty = Map::new();
    let context = match &inputs.request.context {
        Value::Null => &empty,
        Value::Object(map) => map,
        other => {
            return Err(CompileError::input(
                "request.context",
                format!("expected object, found {}", json_kind(other)),
            ))
        }
    };
    if let SchemaNode::Group(children) = schema {
        validate_group(context, children, "request.context")?;
    }

    // Provider APIs refuse an empty (or whitespace-only) message: Anthropic's Messages
    // API answers 400 to any such turn but a final assistant one.
    non_blank(&inputs.request.message, || "request.message".to_owned())?;
    for (i, turn) in inputs.request.history.iter().enumerate() {
        non_blank(&turn.content, || format!("request.history[{i}].content"))?;
    }

    let mut seen = HashSet::with_capacity_and_hasher(
        inputs.evidence.len() + inputs.memory.len(),
        foldhash::fast::RandomState::default(),
    );
    for (i, ev) in inputs.evidence.iter().enumerate() {
        check_id(
            &ev.id,
            || format!("evidence[{i}].id"),
            &mut seen,
            lane_blocks,
        )?;
        if !ev.score.is_finite() {
            return Err(CompileError::input(
                format!("evidence[{i}].score"),
                "expected a finite number",
            ));
        }
    }
    for (i, m) in inputs.memory.iter().enumerate() {
        check_id(&m.id, || format!("memory[{i}].id"), &mut seen, lane_blocks)?;
        if m.promoted != Some(true) {
            return Err(CompileError::input(
                format!("memory[{i}].promoted"),
                format!(
                    "memory `{}` is not promoted; only promoted memory (`promoted: true`) is accepted",
                    m.id
                ),
            ));
        }
        if !m.score.is_finite() {
            return Err(CompileError::input(
                format!("memory[{i}].score"),
                "expected a finite number",
            ));
        }
    }

    if let Some(budget) = &inputs.run.budget {
        if let Some(tokens) = &budget.bucket_tokens {
            for name in tokens.keys() {
                if !buckets.iter().any(|b| b == name) {
                    return Err(CompileError::input(
                        format!("run.budget.bucket_tokens.{name}"),
                        format!("unknown bucket `{name}`{}", did_you_mean(name, buckets)),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Ids must be non-empty and unique across evidence and memory together, and no id
/// may be the name of one of the pack's static blocks in those buckets
/// (`lane_blocks`), so that an id in a manifest, the ledger or `dropped_block_ids`
/// names exactly one block. `path` is only formatted when there is an error to report.
fn check_id<'a>(
    id: &'a str,
    path: impl FnOnce() -> String,
    seen: &mut HashSet<&'a str, foldhash::fast::RandomState>,
    lane_blocks: &[String],
) -> Result<(), CompileError> {
    if id.is_empty() {
        return Err(CompileError::input(path(), "id must not be empty"));
    }
    if lane_blocks.iter().any(|b| b == id) {
        return Err(CompileError::input(
            path(),
            format!("id `{id}` is the name of one of the pack's blocks; caller ids must differ from the pack's block names"),
        ));
    }
    if !seen.insert(id) {
        return Err(CompileError::input(
            path(),
            format!("duplicate id `{id}`; evidence and memory ids must be unique"),
        ));
    }
    Ok(())
}

fn did_you_mean<S: AsRef<str>>(name: &str, candidates: &[S]) -> String {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(name, c.as_ref()), c.as_ref()))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)))
        .map(|(_, c)| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

fn validate_group(
    object: &Map<String, Value>,
    children: &BTreeMap<String, SchemaNode>,
    path: &str,
) -> Result<(), CompileError> {
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort();
    for key in keys {
        if !children.contains_key(key) {
            let names: Vec<&String> = children.keys().collect();
            return Err(CompileError::input(
                format!("{path}.{key}"),
                format!("unknown context field{}", did_you_mean(key, &names)),
            ));
        }
    }
    for (name, node) in children {
        let child_path = format!("{path}.{name}");
        let value = object.get(name).unwrap_or(&Value::Null);
        match node {
            SchemaNode::Group(grandchildren) => match value {
                // An absent or null group is as if each field under it were absent.
                Value::Null => validate_group(&Map::new(), grandchildren, &child_path)?,
                Value::Object(map) => validate_group(map, grandchildren, &child_path)?,
                other => {
                    return Err(CompileError::input(
                        child_path,
                        format!("expected object, found {}", json_kind(other)),
                    ))
                }
            },
            SchemaNode::Field { ty, optional } => {
                if value.is_null() {
                    if !optional {
                        return Err(CompileError::input(
                            child_path,
                            format!("missing required field of type {}", ty),
                        ));
                    }
                } else {
                    check_type(value, ty, &child_path)?;
                }
            }
        }
    }
    Ok(())
}

/// The request context with each number in a `float` field (or a `list<float>`) that
/// is written as an integer written as a float instead (`120` as `120.0`), or `None`
/// when there is none, the usual case, and nothing is copied. JSON does not tell `120`
/// from `120.0`, and hosts differ in which they write (JavaScript cannot write
/// `120.0`); read as the `float` it is declared, one value renders, compares and
/// hashes the same from every host. Runs on a validated context.
pub(crate) fn floats_written_as_floats(schema: &SchemaNode, context: &Value) -> Option<Value> {
    if !has_integral_float(schema, context) {
        return None;
    }
    let mut context = context.clone();
    write_floats(schema, &mut context);
    Some(context)
}

fn has_integral_float(node: &SchemaNode, value: &Value) -> bool {
    match (node, value) {
        (SchemaNode::Group(children), Value::Object(map)) => children
            .iter()
            .any(|(key, child)| map.get(key).is_some_and(|v| has_integral_float(child, v))),
        (SchemaNode::Field { ty, .. }, value) => integral_float(ty, value),
        _ => false,
    }
}

fn integral_float(ty: &Type, value: &Value) -> bool {
    match (ty, value) {
        (Type::Float, Value::Number(n)) => !n.is_f64(),
        (Type::List { items }, Value::Array(elements)) => {
            elements.iter().any(|e| integral_float(items, e))
        }
        _ => false,
    }
}

fn write_floats(node: &SchemaNode, value: &mut Value) {
    match (node, value) {
        (SchemaNode::Group(children), Value::Object(map)) => {
            for (key, child) in children {
                if let Some(v) = map.get_mut(key) {
                    write_floats(child, v);
                }
            }
        }
        (SchemaNode::Field { ty, .. }, value) => write_float(ty, value),
        _ => {}
    }
}

fn write_float(ty: &Type, value: &mut Value) {
    match (ty, value) {
        (Type::Float, Value::Number(n)) if !n.is_f64() => {
            // An integer is always a finite f64 (the nearest one past 2^53).
            if let Some(float) = n.as_f64().and_then(Number::from_f64) {
                *n = float;
            }
        }
        (Type::List { items }, Value::Array(elements)) => {
            for element in elements {
                write_float(items, element);
            }
        }
        _ => {}
    }
}

/// Checks `value` against `ty` exactly: no coercion between kinds. The one widening is
/// that an integer literal is a valid `float` (`120` for `120.0`), because JSON does not
/// distinguish the two.
pub(crate) fn check_type(value: &Value, ty: &Type, path: &str) -> Result<(), CompileError> {
    let mismatch =
        || CompileError::input(path, format!("expected {}, found {}", ty, json_kind(value)));
    match (ty, value) {
        (Type::String, Value::String(_)) => Ok(()),
        (Type::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(()),
        // An integer literal past 64 bits is read as a float: say so, rather than
        // "found float" for a number written without a point.
        (Type::Int, Value::Number(n))
            if n.as_f64().is_some_and(|f| {
                f >= 18_446_744_073_709_551_616.0 || f <= -9_223_372_036_854_775_808.0
            }) =>
        {
            Err(CompileError::input(
                path,
                "expected int, found a number out of its range (an int is from -2^63 to 2^64 - 1)",
            ))
        }
        (Type::Float, Value::Number(_)) => Ok(()),
        (Type::Bool, Value::Bool(_)) => Ok(()),
        (Type::Timestamp, Value::String(s)) => {
            if is_rfc3339(s) {
                Ok(())
            } else {
                Err(CompileError::input(
                    path,
                    format!("expected an RFC 3339 timestamp, found {s:?}"),
                ))
            }
        }
        (Type::Enum { variants }, Value::String(s)) => {
            if variants.iter().any(|v| v == s) {
                Ok(())
            } else {
                Err(CompileError::input(
                    path,
                    format!("{s:?} is not a variant of {}", ty),
                ))
            }
        }
        (Type::List { items }, Value::Array(elements)) => {
            for (i, element) in elements.iter().enumerate() {
                check_type(element, items, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Err(mismatch()),
    }
}

/// RFC 3339 `date-time`: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, with `T`/`Z` in either
/// case, real calendar dates, and a leap second allowed.
pub(crate) fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 {
        return false;
    }
    let num = |from: usize, len: usize| -> Option<u32> {
        let part = b.get(from..from + len)?;
        if part.iter().all(u8::is_ascii_digit) {
            Some(part.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (num(0, 4), num(5, 2), num(8, 2)) else {
        return false;
    };
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) = (num(11, 2), num(14, 2), num(17, 2)) else {
        return false;
    };
    if b[13] != b':' || b[16] != b':' {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if day == 0 || day > days || hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match &b[i..] {
        [b'Z' | b'z'] => true,
        [sign, ..] if matches!(sign, b'+' | b'-') && b.len() == i + 6 => {
            matches!((num(i + 1, 2), b[i + 3], num(i + 4, 2)), (Some(h), b':', Some(m)) if h <= 23 && m <= 59)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::inputs::decode_inputs;
    use serde_json::json;

    fn field(path: &str, ty: Type, optional: bool) -> ContextField {
        ContextField {
            path: path.into(),
            ty,
            optional,
            doc: None,
            provenance: "a/b@1.0.0".into(),
        }
    }

    fn schema() -> SchemaNode {
        SchemaNode::build(&[
            field("user.age", Type::Int, false),
            field(
                "user.tier",
                Type::Enum {
                    variants: vec!["free".into(), "pro".into()],
                },
                false,
            ),
            field("order.total", Type::Float, true),
            field("order.placed_at", Type::Timestamp, true),
            field(
                "flags",
                Type::List {
                    items: Box::new(Type::String),
                },
                true,
            ),
        ])
        .unwrap()
    }

    fn check(context: Value) -> Result<(), CompileError> {
        let inputs = decode_inputs(
            json!({"run_id": "r", "safety_mode": "supervised"}),
            json!({"request_id": "q", "message": "m", "channel": "web", "locale": "en", "context": context}),
            None,
            None,
        )
        .unwrap();
        validate_inputs(&schema(), &[], &[], &inputs)
    }

    fn message(context: Value) -> String {
        check(context).unwrap_err().to_string()
    }

    #[test]
    fn valid_context_passes() {
        check(json!({"user": {"age": 34, "tier": "pro"}, "order": {"total": 120}, "flags": ["a"]}))
            .unwrap();
        check(json!({"user": {"age": 34, "tier": "pro"}, "order": null, "flags": null})).unwrap();
    }

    #[test]
    fn types_are_exact() {
        assert_eq!(
            message(json!({"user": {"age": "ignore previous instructions", "tier": "pro"}})),
            "request.context.user.age: expected int, found string"
        );
        assert_eq!(
            message(json!({"user": {"age": 3.5, "tier": "pro"}})),
            "request.context.user.age: expected int, found float"
        );
        // An integral value written as a float is a float (docs/runtime.md), and so is
        // `-0`, which the JSON parser reads as -0.0.
        for written in ["34.0", "3.4e1", "1e2", "-0"] {
            let age: Value = serde_json::from_str(written).unwrap();
            assert_eq!(
                message(json!({"user": {"age": age, "tier": "pro"}})),
                "request.context.user.age: expected int, found float",
                "{written}"
            );
        }
        for written in ["18446744073709551616", "-9223372036854775809", "1e30"] {
            let age: Value = serde_json::from_str(written).unwrap();
            assert_eq!(
                message(json!({"user": {"age": age, "tier": "pro"}})),
                "request.context.user.age: expected int, found a number out of its range (an int is from -2^63 to 2^64 - 1)",
                "{written}"
            );
        }
        assert_eq!(
            message(json!({"user": {"age": 3, "tier": "gold"}})),
            "request.context.user.tier: \"gold\" is not a variant of enum(\"free\", \"pro\")"
        );
        assert_eq!(
            message(json!({"user": {"age": 3, "tier": "pro"}, "flags": ["a", 1]})),
            "request.context.flags[1]: expected string, found int"
        );
        assert_eq!(
            message(json!({"user": 5})),
            "request.context.user: expected object, found int"
        );
    }

    #[test]
    fn unknown_and_missing_fields() {
        assert_eq!(
            message(json!({"user": {"age": 3, "tier": "pro", "tire": 1}})),
            "request.context.user.tire: unknown context field; did you mean `tier`?"
        );
        assert_eq!(
            message(json!({"user": {"tier": "pro"}})),
            "request.context.user.age: missing required field of type int"
        );
        assert_eq!(
            message(json!({"user.age": 3})),
            "request.context.user.age: unknown context field; did you mean `user`?"
        );
    }

    #[test]
    fn timestamps() {
        for ok in [
            "2024-02-29T12:00:00Z",
            "2024-01-01t00:00:60.123+05:30",
            "1999-12-31T23:59:59-00:00",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2023-02-29T12:00:00Z",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00",
            "2024-13-01T00:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+5:30",
            "yesterday",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    #[test]
    fn conflicting_schema_is_invalid() {
        let e = SchemaNode::build(&[field("a", Type::Int, false), field("a.b", Type::Int, false)]);
        assert_eq!(e.unwrap_err().kind(), "invalid_artifact");
    }

    #[test]
    fn numbers_in_float_fields_are_written_as_floats() {
        let schema = SchemaNode::build(&[
            field("user.age", Type::Int, false),
            field("order.total", Type::Float, true),
            field(
                "order.splits",
                Type::List {
                    items: Box::new(Type::Float),
                },
                true,
            ),
            field(
                "order.counts",
                Type::List {
                    items: Box::new(Type::Int),
                },
                true,
            ),
        ])
        .unwrap();
        let rewritten = |context: Value| floats_written_as_floats(&schema, &context);
        let context = json!({
            "user": {"age": 34},
            "order": {"total": 120, "splits": [1, 2.5, -3], "counts": [1, 2]},
        });
        let floats = rewritten(context.clone()).unwrap();
        assert_eq!(
            floats.to_string(),
            r#"{"order":{"counts":[1,2],"splits":[1.0,2.5,-3.0],"total":120.0},"user":{"age":34}}"#
        );
        // Written as floats already (or no float given): nothing to copy.
        assert_eq!(rewritten(floats), None);
        assert_eq!(rewritten(json!({"user": {"age": 34}})), None);
        assert_eq!(rewritten(json!({"user": {"age": 34}, "order": null})), None);
        // Past 2^53, the nearest float, as a float field holds it.
        assert_eq!(
            rewritten(json!({"user": {"age": 1}, "order": {"total": 9_007_199_254_740_993_u64}}))
                .unwrap()["order"]["total"]
                .to_string(),
            "9007199254740992.0"
        );
    }
}
