//! One conformance fixture, run against this engine: the cross-implementation
//! fixture format of the context-compiler project, one JSON object per file, told
//! apart by its `kind`:
//!
//! | kind | runs | observes |
//! | --- | --- | --- |
//! | `grammar` | `decompose_directive` (classify a text) or `render_directive` (build a directive from a kind and operands) | the classification, or the rendered text or refusal |
//! | `step` | `initial_state`, optional `prelude` inputs, one `input` | the decision and the final state |
//! | `apply_directive` | `initial_state`, optional `prelude`, one canonical directive | the decision and the final state |
//! | `state_json` | `initial_state`, optional `prelude`, one `export_json` or `import_json` | the payload or refusal, and the final state |
//! | `controller` | `initial_state`, then labelled `step`, `apply_directive`, `export_json`, `import_json` calls | labelled observations, pairs that must be equal, the final state |
//!
//! Other kinds (the reference implementation's API-surface and mutation-isolation
//! contracts, which are about Python objects) are skipped, by name.
//!
//! [`run_structured`] runs the other upstream format, the structured engine
//! regressions: a scenario file of inputs and a file of the expected turn after each.
//!
//! Shapes are closed, as in the reference runner: an unknown member fails the fixture,
//! and a fixture's `id` must be its file name without `.json`. Expected refusals name a
//! Python exception type and a pattern searched for in the message; this engine's
//! refusals (a directive that cannot be built, a state that cannot be imported) are all
//! of the one type the fixtures use, `ValueError`.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::engine::{Decision, Engine};
use super::grammar::{classify, CanonicalDirective, Classification, DirectiveKind};

/// The fixture kinds this runner runs.
pub const RUN_KINDS: [&str; 5] = [
    "grammar",
    "step",
    "apply_directive",
    "state_json",
    "controller",
];

/// The exception type name the fixtures give this engine's refusals.
const REFUSAL_TYPE: &str = "ValueError";

/// How one fixture went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed {
        kind: String,
    },
    /// `kind` is absent when the file is not a fixture at all.
    Failed {
        kind: Option<String>,
        reasons: Vec<String>,
    },
    /// A kind this runner does not run.
    Skipped {
        kind: String,
    },
}

/// Runs the fixture `text`, read from a file named `file_stem` + `.json`.
pub fn run_fixture(file_stem: &str, text: &str) -> Outcome {
    let fixture: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return failed(None, format!("not JSON: {e}")),
    };
    let Some(kind) = fixture
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return failed(None, "not a fixture: no string `kind`".into());
    };
    if !RUN_KINDS.contains(&kind.as_str()) {
        return Outcome::Skipped { kind };
    }
    match fixture.get("id").and_then(Value::as_str) {
        Some(id) if id == file_stem => {}
        Some(id) => {
            return failed(
                Some(kind),
                format!("id `{id}` is not the file name `{file_stem}`"),
            )
        }
        None => return failed(Some(kind), "no string `id`".into()),
    }
    let result = match kind.as_str() {
        "grammar" => grammar(fixture),
        "step" => step(fixture),
        "apply_directive" => apply_directive(fixture),
        "state_json" => state_json(fixture),
        _ => controller(fixture),
    };
    match result {
        Ok(()) => Outcome::Passed { kind },
        Err(reasons) => Outcome::Failed {
            kind: Some(kind),
            reasons,
        },
    }
}

fn failed(kind: Option<String>, reason: String) -> Outcome {
    Outcome::Failed {
        kind,
        reasons: vec![reason],
    }
}

type Checked = Result<(), Vec<String>>;

/// Decodes a closed shape; the error says what is wrong with the fixture.
fn shape<T: DeserializeOwned>(value: Value) -> Result<T, Vec<String>> {
    serde_json::from_value(value).map_err(|e| vec![format!("invalid fixture: {e}")])
}

fn invalid(reason: impl Into<String>) -> Vec<String> {
    vec![format!("invalid fixture: {}", reason.into())]
}

/// Members of `object` must be exactly `required` plus any of `optional`.
fn closed(
    object: &Map<String, Value>,
    required: &[&str],
    optional: &[&str],
    what: &str,
) -> Checked {
    let unknown = object
        .keys()
        .find(|k| !required.contains(&k.as_str()) && !optional.contains(&k.as_str()));
    if let Some(k) = unknown {
        return Err(invalid(format!("unknown member `{k}` in {what}")));
    }
    if let Some(m) = required.iter().find(|m| !object.contains_key(**m)) {
        return Err(invalid(format!("missing member `{m}` in {what}")));
    }
    Ok(())
}

fn object<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Vec<String>> {
    value
        .as_object()
        .ok_or_else(|| invalid(format!("{what} is not an object")))
}

/// An engine holding `initial_state`, imported as an exported payload is, then the
/// `prelude` inputs stepped.
fn engine(initial_state: &Map<String, Value>, prelude: &[String]) -> Result<Engine, Vec<String>> {
    let payload = Value::Object(initial_state.clone()).to_string();
    let mut engine = Engine::new();
    engine
        .import_json(&payload)
        .map_err(|e| vec![format!("initial_state does not import: {e}")])?;
    for input in prelude {
        engine.step(input);
    }
    Ok(engine)
}

fn compare(what: &str, expected: &Value, observed: &Value, reasons: &mut Vec<String>) {
    if expected != observed {
        reasons.push(format!("{what}: expected {expected}, got {observed}"));
    }
}

fn finish(reasons: Vec<String>) -> Checked {
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// The closed shape of an expected decision.
fn check_decision_shape(decision: &Value, what: &str) -> Checked {
    let map = object(decision, what)?;
    match map.get("kind").and_then(Value::as_str) {
        Some("no_directive") => closed(map, &["kind"], &[], what),
        Some("update") => {
            closed(map, &["kind", "changed"], &[], what)?;
            if map.get("changed").is_some_and(Value::is_boolean) {
                Ok(())
            } else {
                Err(invalid(format!("{what}.changed is not a boolean")))
            }
        }
        Some("error") => {
            closed(
                map,
                &["kind", "failure", "directive", "repairs", "message"],
                &[],
                what,
            )?;
            let directive_shape = |d: &Value, w: &str| -> Checked {
                closed(object(d, w)?, &["kind", "text", "operands"], &[], w)
            };
            directive_shape(&map["directive"], &format!("{what}.directive"))?;
            let repairs = map["repairs"]
                .as_array()
                .ok_or_else(|| invalid(format!("{what}.repairs is not a list")))?;
            for (i, r) in repairs.iter().enumerate() {
                directive_shape(r, &format!("{what}.repairs[{i}]"))?;
            }
            Ok(())
        }
        _ => Err(invalid(format!("{what}.kind is not a decision kind"))),
    }
}

fn decision_value(decision: &Decision) -> Value {
    serde_json::to_value(decision).unwrap_or(Value::Null)
}

/// Whether a refusal matches `{"type", "message_contains"}`: the type this engine's
/// refusals have, and the pattern (a regular expression, as the reference runner
/// reads it) found in the message.
fn check_refusal(expected: &Value, message: Option<&str>, reasons: &mut Vec<String>) -> Checked {
    let map = object(expected, "expected.error")?;
    closed(map, &["type", "message_contains"], &[], "expected.error")?;
    let (Some(ty), Some(pattern)) = (map["type"].as_str(), map["message_contains"].as_str()) else {
        return Err(invalid("expected.error members are not strings"));
    };
    let regex = regex::Regex::new(pattern)
        .map_err(|e| invalid(format!("message_contains is not a pattern: {e}")))?;
    match message {
        None => reasons.push(format!("expected a {ty} matching `{pattern}`, got none")),
        Some(_) if ty != REFUSAL_TYPE => reasons.push(format!(
            "expected a {ty}; this engine's refusals are {REFUSAL_TYPE}"
        )),
        Some(m) if !regex.is_match(m) => {
            reasons.push(format!("refusal `{m}` does not match `{pattern}`"))
        }
        Some(_) => {}
    }
    Ok(())
}

fn classification_value(classification: &Classification) -> Value {
    match classification {
        Classification::NoDirective => Value::Null,
        Classification::Invalid(i) => json!({
            "kind": "invalid_directive_syntax",
            "failure": i.failure,
            "directive_kind": i.directive_kind,
            "missing_operand": i.missing_operand,
        }),
        Classification::Directive(d) => serde_json::to_value(d).unwrap_or(Value::Null),
    }
}

/// Builds a directive from a kind name and a JSON object of operands.
fn render(kind: &str, operands: &Map<String, Value>) -> Result<CanonicalDirective, String> {
    let Some(kind) = DirectiveKind::from_name(kind) else {
        return Err(format!("Unsupported directive kind: '{kind}'"));
    };
    let mut pairs = Vec::with_capacity(operands.len());
    for (name, value) in operands {
        let Some(value) = value.as_str() else {
            return Err(format!("Operand '{name}' for {kind} must be a string."));
        };
        pairs.push((name.as_str(), value));
    }
    CanonicalDirective::new(kind, pairs).map_err(|e| e.to_string())
}

fn grammar(fixture: Value) -> Checked {
    let map = object(&fixture, "fixture")?;
    closed(map, &["id", "kind", "action", "expected"], &[], "fixture")?;
    let action = object(&map["action"], "action")?;
    let expected = object(&map["expected"], "expected")?;
    let mut reasons = Vec::new();
    match action.get("fn").and_then(Value::as_str) {
        Some("decompose_directive") => {
            closed(action, &["fn", "text"], &[], "action")?;
            closed(expected, &["directive"], &[], "expected")?;
            let text = action["text"]
                .as_str()
                .ok_or_else(|| invalid("action.text is not a string"))?;
            let classification = classify(text);
            compare(
                "directive",
                &expected["directive"],
                &classification_value(&classification),
                &mut reasons,
            );
            if let Classification::Directive(d) = &classification {
                let operands: Vec<(&str, &str)> = d.operands().collect();
                match CanonicalDirective::new(d.kind(), operands) {
                    Ok(rebuilt) if rebuilt.text() == d.text() => {}
                    other => reasons.push(format!(
                        "`{}` does not render back to itself: {other:?}",
                        d.text()
                    )),
                }
            }
        }
        Some("render_directive") => {
            closed(action, &["fn", "kind", "operands"], &[], "action")?;
            let kind = action["kind"]
                .as_str()
                .ok_or_else(|| invalid("action.kind is not a string"))?;
            let operands = object(&action["operands"], "action.operands")?;
            let rendered = render(kind, operands);
            if let Some(error) = expected.get("error") {
                closed(expected, &["error"], &[], "expected")?;
                check_refusal(
                    error,
                    rendered.as_ref().err().map(String::as_str),
                    &mut reasons,
                )?;
            } else {
                closed(expected, &["text", "directive_kind"], &[], "expected")?;
                match rendered {
                    Err(e) => reasons.push(format!("refused: {e}")),
                    Ok(d) => {
                        compare("text", &expected["text"], &json!(d.text()), &mut reasons);
                        match classify(&d.text()) {
                            Classification::Directive(back) if back.text() == d.text() => compare(
                                "directive_kind",
                                &expected["directive_kind"],
                                &json!(back.kind()),
                                &mut reasons,
                            ),
                            other => {
                                reasons.push(format!("`{}` classifies as {other:?}", d.text()))
                            }
                        }
                    }
                }
            }
        }
        _ => {
            return Err(invalid(
                "action.fn is neither decompose_directive nor render_directive",
            ))
        }
    }
    finish(reasons)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Observed {
    decision: Value,
    state: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFixture {
    // Checked before the shape is decoded.
    #[serde(rename = "id")]
    _id: String,
    #[serde(rename = "kind")]
    _kind: String,
    initial_state: Map<String, Value>,
    #[serde(default)]
    prelude: Vec<String>,
    input: String,
    expected: Observed,
}

fn step(fixture: Value) -> Checked {
    let f: StepFixture = shape(fixture)?;
    check_decision_shape(&f.expected.decision, "expected.decision")?;
    let mut engine = engine(&f.initial_state, &f.prelude)?;
    let decision = engine.step(&f.input);
    let mut reasons = Vec::new();
    compare(
        "decision",
        &f.expected.decision,
        &decision_value(&decision),
        &mut reasons,
    );
    compare(
        "state",
        &Value::Object(f.expected.state),
        &engine.state().to_value(),
        &mut reasons,
    );
    finish(reasons)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyAction {
    #[serde(rename = "fn")]
    func: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyFixture {
    // Checked before the shape is decoded.
    #[serde(rename = "id")]
    _id: String,
    #[serde(rename = "kind")]
    _kind: String,
    initial_state: Map<String, Value>,
    #[serde(default)]
    prelude: Vec<String>,
    action: ApplyAction,
    expected: Observed,
}

/// The canonical directive an `apply_directive` text stands for.
fn canonical(text: &str) -> Result<CanonicalDirective, Vec<String>> {
    CanonicalDirective::parse(text)
        .map_err(|c| vec![format!("`{text}` is not a canonical directive: {c:?}")])
}

fn apply_directive(fixture: Value) -> Checked {
    let f: ApplyFixture = shape(fixture)?;
    if f.action.func != "apply_directive" {
        return Err(invalid("action.fn is not apply_directive"));
    }
    check_decision_shape(&f.expected.decision, "expected.decision")?;
    let mut engine = engine(&f.initial_state, &f.prelude)?;
    let directive = canonical(&f.action.text)?;
    let decision = Decision::from(engine.apply_directive(&directive));
    let mut reasons = Vec::new();
    compare(
        "decision",
        &f.expected.decision,
        &decision_value(&decision),
        &mut reasons,
    );
    compare(
        "state",
        &Value::Object(f.expected.state),
        &engine.state().to_value(),
        &mut reasons,
    );
    finish(reasons)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateJsonFixture {
    // Checked before the shape is decoded.
    #[serde(rename = "id")]
    _id: String,
    #[serde(rename = "kind")]
    _kind: String,
    initial_state: Map<String, Value>,
    #[serde(default)]
    prelude: Vec<String>,
    action: Map<String, Value>,
    expected: Map<String, Value>,
}

fn state_json(fixture: Value) -> Checked {
    let f: StateJsonFixture = shape(fixture)?;
    let mut engine = engine(&f.initial_state, &f.prelude)?;
    let expected = &f.expected;
    let mut reasons = Vec::new();
    match f.action.get("fn").and_then(Value::as_str) {
        Some("export_json") => {
            closed(&f.action, &["fn"], &[], "action")?;
            if expected.contains_key("error") {
                closed(expected, &["error", "state"], &[], "expected")?;
                check_refusal(&expected["error"], None, &mut reasons)?;
            } else {
                closed(expected, &["payload", "state"], &[], "expected")?;
                compare(
                    "payload",
                    &expected["payload"],
                    &json!(engine.export_json()),
                    &mut reasons,
                );
            }
        }
        Some("import_json") => {
            closed(&f.action, &["fn", "payload"], &[], "action")?;
            let payload = f.action["payload"]
                .as_str()
                .ok_or_else(|| invalid("action.payload is not a string"))?;
            let result = engine.import_json(payload);
            if let Some(error) = expected.get("error") {
                closed(expected, &["error", "state"], &[], "expected")?;
                let message = result.err().map(|e| e.to_string());
                check_refusal(error, message.as_deref(), &mut reasons)?;
            } else {
                closed(expected, &["state"], &[], "expected")?;
                if let Err(e) = result {
                    reasons.push(format!("import refused: {e}"));
                }
            }
        }
        _ => return Err(invalid("action.fn is neither export_json nor import_json")),
    }
    compare(
        "state",
        &expected["state"],
        &engine.state().to_value(),
        &mut reasons,
    );
    finish(reasons)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerExpected {
    observations: Map<String, Value>,
    equal: Vec<[String; 2]>,
    state: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ControllerFixture {
    // Checked before the shape is decoded.
    #[serde(rename = "id")]
    _id: String,
    #[serde(rename = "kind")]
    _kind: String,
    initial_state: Map<String, Value>,
    operations: Vec<Map<String, Value>>,
    expected: ControllerExpected,
}

/// One controller operation, validated.
enum Operation {
    Step { input: String, label: String },
    Apply { text: String, label: String },
    Export { label: String },
    Import { payload: String },
    ImportRef { label: String },
}

fn string_member(op: &Map<String, Value>, name: &str, at: usize) -> Result<String, Vec<String>> {
    op.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("operations[{at}].{name} is not a string")))
}

fn operation(op: &Map<String, Value>, at: usize) -> Result<Operation, Vec<String>> {
    let what = format!("operations[{at}]");
    let s = |name| string_member(op, name, at);
    match op.get("fn").and_then(Value::as_str) {
        Some("step") => {
            closed(op, &["fn", "input", "label"], &[], &what)?;
            Ok(Operation::Step {
                input: s("input")?,
                label: s("label")?,
            })
        }
        Some("apply_directive") => {
            closed(op, &["fn", "text", "label"], &[], &what)?;
            Ok(Operation::Apply {
                text: s("text")?,
                label: s("label")?,
            })
        }
        Some("export_json") => {
            closed(op, &["fn", "label"], &[], &what)?;
            Ok(Operation::Export { label: s("label")? })
        }
        Some("import_json") => match (op.contains_key("payload"), op.contains_key("payload_ref")) {
            (true, false) => {
                closed(op, &["fn", "payload"], &[], &what)?;
                Ok(Operation::Import {
                    payload: s("payload")?,
                })
            }
            (false, true) => {
                closed(op, &["fn", "payload_ref"], &[], &what)?;
                Ok(Operation::ImportRef {
                    label: s("payload_ref")?,
                })
            }
            _ => Err(invalid(format!(
                "{what} needs exactly one of payload, payload_ref"
            ))),
        },
        _ => Err(invalid(format!("{what}.fn is not a controller operation"))),
    }
}

fn controller(fixture: Value) -> Checked {
    let f: ControllerFixture = shape(fixture)?;
    let operations = f
        .operations
        .iter()
        .enumerate()
        .map(|(i, op)| operation(op, i))
        .collect::<Result<Vec<_>, _>>()?;
    for (label, expected) in &f.expected.observations {
        if expected.is_object() {
            check_decision_shape(expected, &format!("expected.observations.{label}"))?;
        } else if !expected.is_string() {
            return Err(invalid(format!(
                "expected.observations.{label} is neither a decision nor a string"
            )));
        }
    }
    let mut engine = engine(&f.initial_state, &[])?;
    let mut observed: Map<String, Value> = Map::new();
    for (i, op) in operations.into_iter().enumerate() {
        match op {
            Operation::Step { input, label } => {
                observed.insert(label, decision_value(&engine.step(&input)));
            }
            Operation::Apply { text, label } => {
                let applied = engine.apply_directive(&canonical(&text)?);
                observed.insert(label, decision_value(&applied.into()));
            }
            Operation::Export { label } => {
                observed.insert(label, json!(engine.export_json()));
            }
            Operation::Import { payload } => import(&mut engine, &payload, i)?,
            Operation::ImportRef { label } => {
                let Some(payload) = observed.get(&label).and_then(Value::as_str) else {
                    return Err(vec![format!(
                        "operations[{i}]: no exported payload labelled `{label}`"
                    )]);
                };
                let payload = payload.to_owned();
                import(&mut engine, &payload, i)?;
            }
        }
    }
    let mut reasons = Vec::new();
    for (label, expected) in &f.expected.observations {
        let got = observed.get(label).unwrap_or(&Value::Null);
        compare(
            &format!("observation `{label}`"),
            expected,
            got,
            &mut reasons,
        );
    }
    for [left, right] in &f.expected.equal {
        match (observed.get(left), observed.get(right)) {
            (Some(l), Some(r)) if l == r => {}
            (Some(l), Some(r)) => {
                reasons.push(format!("`{left}` = {l} differs from `{right}` = {r}"))
            }
            _ => reasons.push(format!("`{left}` or `{right}` was never observed")),
        }
    }
    compare(
        "state",
        &Value::Object(f.expected.state),
        &engine.state().to_value(),
        &mut reasons,
    );
    finish(reasons)
}

/// The kind name of a structured regression pair.
pub const STRUCTURED_KIND: &str = "structured_regression";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    id: String,
    #[serde(default, rename = "description")]
    _description: Option<String>,
    #[serde(default)]
    initial_state: Option<Map<String, Value>>,
    inputs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    input: String,
    decision: Value,
    state: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedTurns {
    id: String,
    turns: Vec<Turn>,
}

/// Runs a structured regression pair: a scenario (`scenarios/ID.json`: `id`,
/// `inputs`, optional `initial_state` and `description`) and its expected turns
/// (`expected/ID.json`: `id`, and per input the `input`, the `decision` and the
/// `state` after it). Each input is stepped in turn.
pub fn run_structured(
    scenario_stem: &str,
    scenario: &str,
    expected_stem: &str,
    expected: &str,
) -> Outcome {
    match structured(scenario_stem, scenario, expected_stem, expected) {
        Ok(()) => Outcome::Passed {
            kind: STRUCTURED_KIND.into(),
        },
        Err(reasons) => Outcome::Failed {
            kind: Some(STRUCTURED_KIND.into()),
            reasons,
        },
    }
}

fn structured(scenario_stem: &str, scenario: &str, expected_stem: &str, expected: &str) -> Checked {
    let parse = |text: &str, what: &str| -> Result<Value, Vec<String>> {
        serde_json::from_str(text).map_err(|e| vec![format!("{what} is not JSON: {e}")])
    };
    let scenario: Scenario = shape(parse(scenario, "the scenario")?)?;
    let expected: ExpectedTurns = shape(parse(expected, "the expected turns")?)?;
    if scenario.id != scenario_stem || expected.id != expected_stem || scenario.id != expected.id {
        return Err(invalid(format!(
            "ids `{}` and `{}` must both be the file name `{scenario_stem}`",
            scenario.id, expected.id
        )));
    }
    if scenario.inputs.len() != expected.turns.len() {
        return Err(invalid(format!(
            "{} inputs but {} expected turns",
            scenario.inputs.len(),
            expected.turns.len()
        )));
    }
    for (i, turn) in expected.turns.iter().enumerate() {
        check_decision_shape(&turn.decision, &format!("turns[{i}].decision"))?;
    }
    let mut engine = engine(&scenario.initial_state.unwrap_or_else(empty_state), &[])?;
    let mut reasons = Vec::new();
    for (i, (input, turn)) in scenario.inputs.iter().zip(expected.turns).enumerate() {
        let decision = engine.step(input);
        compare(
            &format!("turn {i} input"),
            &json!(turn.input),
            &json!(input),
            &mut reasons,
        );
        compare(
            &format!("turn {i} decision"),
            &turn.decision,
            &decision_value(&decision),
            &mut reasons,
        );
        compare(
            &format!("turn {i} state"),
            &Value::Object(turn.state),
            &engine.state().to_value(),
            &mut reasons,
        );
    }
    finish(reasons)
}

fn empty_state() -> Map<String, Value> {
    match super::state::State::new().to_value() {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn import(engine: &mut Engine, payload: &str, at: usize) -> Checked {
    engine
        .import_json(payload)
        .map_err(|e| vec![format!("operations[{at}]: import refused: {e}")])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_fixtures_fail_and_other_kinds_skip() {
        assert!(matches!(
            run_fixture("x", "{"),
            Outcome::Failed { kind: None, .. }
        ));
        assert!(matches!(
            run_fixture("x", "[]"),
            Outcome::Failed { kind: None, .. }
        ));
        assert_eq!(
            run_fixture("x", r#"{"kind": "api-contract"}"#),
            Outcome::Skipped {
                kind: "api-contract".into()
            }
        );
    }

    #[test]
    fn id_must_match_the_file() {
        let text = r#"{"id": "a", "kind": "grammar", "action": {"fn": "decompose_directive", "text": "hi"}, "expected": {"directive": null}}"#;
        assert_eq!(
            run_fixture("a", text),
            Outcome::Passed {
                kind: "grammar".into()
            }
        );
        assert!(matches!(run_fixture("b", text), Outcome::Failed { .. }));
    }

    #[test]
    fn shapes_are_closed() {
        let text = r#"{"id": "a", "kind": "grammar", "action": {"fn": "decompose_directive", "text": "hi", "x": 1}, "expected": {"directive": null}}"#;
        let Outcome::Failed { reasons, .. } = run_fixture("a", text) else {
            panic!()
        };
        assert!(reasons[0].contains("unknown member `x`"), "{reasons:?}");
    }

    #[test]
    fn a_wrong_expectation_fails_with_both_values() {
        let text = r#"{"id": "a", "kind": "step", "initial_state": {"premise": null, "policies": {}, "version": 2},
            "input": "use x", "expected": {"decision": {"kind": "update", "changed": false},
            "state": {"premise": null, "policies": {"x": "use"}, "version": 2}}}"#;
        let Outcome::Failed { reasons, .. } = run_fixture("a", text) else {
            panic!()
        };
        assert_eq!(reasons.len(), 1);
        assert!(reasons[0].contains("\"changed\":true"), "{reasons:?}");
    }
}
