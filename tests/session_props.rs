//! Property tests of the session-directive engine: determinism, the export/import
//! fixed point, rejected directives and non-directive text never changing the state,
//! and robustness on arbitrary text.

use ctxpack::session::{classify, policy_key, CanonicalDirective, Classification, Decision, State};
use proptest::prelude::*;

/// Items drawn from text that exercises identity: case, width, apostrophes,
/// combining marks, final sigma, sharp s, whitespace of every kind, controls.
fn item() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("npm"),
        Just("NPM"),
        Just("pnpm"),
        Just("Yarn Berry"),
        Just("yarn  berry"),
        Just("ｎｐｍ"),
        Just("don't"),
        Just("don’t"),
        Just("don`t"),
        Just("ß"),
        Just("SS"),
        Just("ſ"),
        Just("ς"),
        Just("Σ"),
        Just("cafe\u{301}"),
        Just("café"),
        Just("ß\u{301}"),
        Just("İ"),
        Just("ǰ"),
        Just("\u{3000}"),
        Just("\u{a0}"),
        Just("\t"),
        Just("\u{1c}"),
        Just("\u{200b}"),
        Just("😀"),
        Just("a\"b"),
        Just("x\\y"),
        Just("instead"),
        Just("of"),
        Just("to"),
        Just("and"),
        Just("use"),
        Just("."),
    ];
    proptest::collection::vec((pieces, prop_oneof![Just(""), Just(" "), Just("  ")]), 1..4)
        .prop_map(|parts| parts.into_iter().map(|(p, s)| format!("{p}{s}")).collect())
}

/// One user input: mostly directive-shaped, sometimes arbitrary text.
fn input() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => item().prop_map(|i| format!("use {i}")),
        2 => item().prop_map(|i| format!("prohibit {i}")),
        1 => item().prop_map(|i| format!("Remove Policy {i}")),
        2 => (item(), item()).prop_map(|(a, b)| format!("use {a} instead of {b}")),
        1 => item().prop_map(|i| format!("set premise {i}")),
        1 => item().prop_map(|i| format!("change premise to {i}")),
        1 => prop_oneof![Just("clear premise"), Just("reset policies"), Just(" CLEAR\tSTATE ")]
            .prop_map(str::to_owned),
        1 => (item(), item()).prop_map(|(a, b)| format!("use {a} and prohibit {b}")),
        2 => any::<String>(),
    ]
}

fn inputs() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(input(), 0..12)
}

/// Steps every input from the empty state; the decisions and the states after each.
fn run(inputs: &[String]) -> Vec<(Decision, State)> {
    let mut state = State::new();
    inputs
        .iter()
        .map(|input| {
            let (decision, next) = state.step(input);
            state = next.clone();
            (decision, next)
        })
        .collect()
}

/// The stored state keeps its invariants: keys are non-empty canonical identities,
/// a premise is non-empty.
fn assert_invariants(state: &State) {
    for key in state.policies().keys() {
        assert!(!key.is_empty());
        assert_eq!(&policy_key(key), key);
    }
    if let Some(p) = state.premise() {
        assert!(!p.is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_same_inputs_give_the_same_decisions_and_states(inputs in inputs()) {
        let first = run(&inputs);
        let second = run(&inputs);
        prop_assert_eq!(&first, &second);
        let exports: Vec<String> = first.iter().map(|(_, s)| s.export_json()).collect();
        let again: Vec<String> = second.iter().map(|(_, s)| s.export_json()).collect();
        prop_assert_eq!(exports, again);
    }

    #[test]
    fn export_then_import_is_a_fixed_point(inputs in inputs()) {
        for (_, state) in run(&inputs) {
            assert_invariants(&state);
            let payload = state.export_json();
            let imported = State::import_json(&payload).unwrap();
            prop_assert_eq!(&imported, &state);
            prop_assert_eq!(imported.export_json(), payload.clone());
            prop_assert_eq!(State::from_value(&state.to_value()).unwrap(), state.clone());
            prop_assert!(payload.is_ascii());
        }
    }

    #[test]
    fn a_rejected_directive_never_changes_the_state(inputs in inputs(), last in input()) {
        let mut state = State::new();
        for input in inputs.iter().chain(std::iter::once(&last)) {
            let (decision, next) = state.step(input);
            if let Decision::Error(error) = &decision {
                prop_assert_eq!(&next, &state);
                // Repairs are canonical directives, and none is applied.
                for repair in error.repairs() {
                    prop_assert_eq!(classify(&repair.text()), Classification::Directive(repair.clone()));
                }
            }
            state = next;
        }
    }

    #[test]
    fn text_that_is_not_a_directive_never_changes_the_state(inputs in inputs(), text in any::<String>()) {
        let state = run(&inputs).pop().map(|(_, s)| s).unwrap_or_default();
        for candidate in [text.clone(), format!("Sure! {text}"), format!("\"use {text}\""), format!("use {text}\nuse x")] {
            if !matches!(classify(&candidate), Classification::Directive(_)) {
                prop_assert_eq!(state.step(&candidate), (Decision::NoDirective, state.clone()));
            }
        }
    }

    #[test]
    fn a_directive_renders_to_text_that_classifies_back_to_it(text in input()) {
        if let Classification::Directive(d) = classify(&text) {
            prop_assert_eq!(classify(&d.text()), Classification::Directive(d.clone()));
            let operands: Vec<(&str, &str)> = d.operands().collect();
            prop_assert_eq!(CanonicalDirective::new(d.kind(), operands).unwrap(), d.clone());
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = classify(&text);
        let _ = State::new().step(&text);
        let _ = State::import_json(&text);
        let lossy = String::from_utf8_lossy(&bytes);
        let _ = classify(&lossy);
        let _ = State::import_json(&lossy);
        let _ = policy_key(&text);
    }

    #[test]
    fn imports_either_fail_or_give_a_state_that_round_trips(
        premise in prop_oneof![Just("null".to_owned()), item().prop_map(|i| serde_json::to_string(&i).unwrap())],
        policies in proptest::collection::vec((item(), prop_oneof![Just("use"), Just("prohibit"), Just("deny")]), 0..5),
    ) {
        let members: Vec<String> = policies
            .iter()
            .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), serde_json::to_string(v).unwrap()))
            .collect();
        let payload = format!("{{\"premise\":{premise},\"policies\":{{{}}},\"version\":2}}", members.join(","));
        if let Ok(state) = State::import_json(&payload) {
            assert_invariants(&state);
            prop_assert_eq!(State::import_json(&state.export_json()).unwrap(), state);
        }
    }
}
