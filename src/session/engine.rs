//! Semantic evaluation: a canonical directive against the state, giving a decision
//! and the next state. Errors are decided before anything changes, so a rejected
//! directive leaves the state exactly as it was.

use std::fmt;

use serde::{Serialize, Serializer};

use super::grammar::{classify, CanonicalDirective, Classification, DirectiveKind};
use super::state::{ImportError, Policy, State};
use super::text::policy_key;

/// Why a canonical directive could not be applied to the current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SemanticFailure {
    /// `set premise` while a premise is set.
    PremiseAlreadySet,
    /// `change premise to` while no premise is set.
    PremiseNotSet,
    /// `use` of a prohibited item.
    ItemProhibited,
    /// `prohibit` of an item in use.
    ItemAlreadyInUse,
    /// `use NEW instead of OLD` while OLD is prohibited.
    ReplacementSourceProhibited,
    /// `use NEW instead of OLD` while NEW is prohibited.
    ReplacementTargetProhibited,
    /// `use NEW instead of OLD` while OLD is not in use.
    ReplacementSourceMissing,
}

impl SemanticFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            SemanticFailure::PremiseAlreadySet => "premise_already_set",
            SemanticFailure::PremiseNotSet => "premise_not_set",
            SemanticFailure::ItemProhibited => "item_prohibited",
            SemanticFailure::ItemAlreadyInUse => "item_already_in_use",
            SemanticFailure::ReplacementSourceProhibited => "replacement_source_prohibited",
            SemanticFailure::ReplacementTargetProhibited => "replacement_target_prohibited",
            SemanticFailure::ReplacementSourceMissing => "replacement_source_missing",
        }
    }
}

impl fmt::Display for SemanticFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A canonical directive the state could not take: the failure, the directive, the
/// advisory repairs (never applied by the engine; a host may submit one through
/// [`State::apply`]) and the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SemanticError {
    failure: SemanticFailure,
    directive: CanonicalDirective,
    repairs: Vec<CanonicalDirective>,
    message: String,
}

impl SemanticError {
    fn new(failure: SemanticFailure, directive: &CanonicalDirective, repairs: Vec<Repair>) -> Self {
        SemanticError {
            failure,
            message: message(failure, directive),
            directive: directive.clone(),
            // A repair is proposed only when it is itself canonical (`set premise to
            // the moon` is not, so `change premise to to the moon` gets none).
            repairs: repairs.into_iter().filter_map(Repair::directive).collect(),
        }
    }

    pub fn failure(&self) -> SemanticFailure {
        self.failure
    }

    /// The directive that was refused.
    pub fn directive(&self) -> &CanonicalDirective {
        &self.directive
    }

    /// Advisory repairs, in order; empty when none is proposed.
    pub fn repairs(&self) -> &[CanonicalDirective] {
        &self.repairs
    }

    /// What to tell the user. Presentation only: decide on [`failure`](Self::failure).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SemanticError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A repair to propose: a family and its operands, or the refused directive itself.
enum Repair<'a> {
    Build(DirectiveKind, &'static str, &'a str),
    Retry(&'a CanonicalDirective),
}

impl Repair<'_> {
    fn directive(self) -> Option<CanonicalDirective> {
        match self {
            Repair::Build(kind, name, value) => CanonicalDirective::new(kind, [(name, value)]).ok(),
            Repair::Retry(d) => Some(d.clone()),
        }
    }
}

/// The message for a failure, worded as the reference implementation words it.
fn message(failure: SemanticFailure, directive: &CanonicalDirective) -> String {
    let operand = |name: &str| directive.operand(name).unwrap_or_default();
    match failure {
        SemanticFailure::PremiseAlreadySet => {
            "Premise already set.\nUse 'change premise to <value>' to modify it.".into()
        }
        SemanticFailure::PremiseNotSet => {
            "No premise is set.\nUse 'set premise <value>' to define one.".into()
        }
        SemanticFailure::ItemProhibited => format!(
            "\"{}\" is currently prohibited.\nRemove or replace it before using it.",
            policy_key(operand("item"))
        ),
        SemanticFailure::ItemAlreadyInUse => format!(
            "\"{}\" is currently in use.\nRemove or replace it before prohibiting it.",
            policy_key(operand("item"))
        ),
        SemanticFailure::ReplacementSourceProhibited => format!(
            "\"{}\" is currently prohibited.\nSubmit explicit directive(s) to remove it or use a different item.",
            operand("old_item")
        ),
        SemanticFailure::ReplacementTargetProhibited => format!(
            "\"{}\" is currently prohibited.\nSubmit explicit directive(s) to remove it or use a different item.",
            operand("new_item")
        ),
        SemanticFailure::ReplacementSourceMissing => format!(
            "\"{}\" is not currently in use.\nReplacement requires an active 'use' policy.",
            operand("old_item")
        ),
    }
}

/// The decision for one raw input.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    /// No canonical directive (chat, or a directive-shaped input that is not
    /// canonical): nothing changed, the host decides what to do.
    NoDirective,
    /// A canonical directive was accepted; `changed` says whether the state changed
    /// (an idempotent directive is an update that changed nothing).
    Update { changed: bool },
    /// A canonical directive was refused by the state; nothing changed.
    Error(SemanticError),
}

impl Decision {
    /// `no_directive`, `update` or `error`.
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::NoDirective => "no_directive",
            Decision::Update { .. } => "update",
            Decision::Error(_) => "error",
        }
    }
}

/// The decision for one canonical directive: never `no_directive`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Applied {
    Update { changed: bool },
    Error(SemanticError),
}

impl From<Applied> for Decision {
    fn from(applied: Applied) -> Decision {
        match applied {
            Applied::Update { changed } => Decision::Update { changed },
            Applied::Error(e) => Decision::Error(e),
        }
    }
}

/// Serialized as the [`Decision`] it is.
impl Serialize for Applied {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Decision::from(self.clone()).serialize(serializer)
    }
}

impl State {
    /// Classifies one raw input and, when it is a canonical directive, applies it.
    /// Returns the decision and the next state (the same state unless an update
    /// changed it).
    pub fn step(&self, input: &str) -> (Decision, State) {
        match classify(input) {
            Classification::Directive(directive) => {
                let (applied, next) = self.apply(&directive);
                (applied.into(), next)
            }
            Classification::NoDirective | Classification::Invalid(_) => {
                (Decision::NoDirective, self.clone())
            }
        }
    }

    /// Applies one canonical directive. Returns the decision and the next state.
    pub fn apply(&self, directive: &CanonicalDirective) -> (Applied, State) {
        if let Some(error) = self.refusal(directive) {
            return (Applied::Error(error), self.clone());
        }
        let next = self.applied(directive);
        let changed = next != *self;
        (Applied::Update { changed }, next)
    }

    /// The semantic error `directive` meets in this state, if any.
    fn refusal(&self, directive: &CanonicalDirective) -> Option<SemanticError> {
        use DirectiveKind as K;
        use SemanticFailure as F;
        let operand = |name| directive.operand(name).unwrap_or_default();
        let policy = |name| self.policies().get(&policy_key(operand(name))).copied();
        let error = |failure, repairs| Some(SemanticError::new(failure, directive, repairs));
        match directive.kind() {
            K::SetPremise if self.premise().is_some() => error(
                F::PremiseAlreadySet,
                vec![Repair::Build(K::ChangePremise, "value", operand("value"))],
            ),
            K::ChangePremise if self.premise().is_none() => error(
                F::PremiseNotSet,
                vec![Repair::Build(K::SetPremise, "value", operand("value"))],
            ),
            K::UseItem if policy("item") == Some(Policy::Prohibit) => error(
                F::ItemProhibited,
                vec![
                    Repair::Build(K::RemovePolicy, "item", operand("item")),
                    Repair::Build(K::UseItem, "item", operand("item")),
                ],
            ),
            K::ProhibitItem if policy("item") == Some(Policy::Use) => error(
                F::ItemAlreadyInUse,
                vec![
                    Repair::Build(K::RemovePolicy, "item", operand("item")),
                    Repair::Build(K::ProhibitItem, "item", operand("item")),
                ],
            ),
            K::ReplaceUse => {
                let same_item = policy_key(operand("new_item")) == policy_key(operand("old_item"));
                match (policy("old_item"), policy("new_item")) {
                    (Some(Policy::Prohibit), _) => error(F::ReplacementSourceProhibited, vec![]),
                    (_, Some(Policy::Prohibit)) if !same_item => error(
                        F::ReplacementTargetProhibited,
                        vec![
                            Repair::Build(K::RemovePolicy, "item", operand("new_item")),
                            Repair::Retry(directive),
                        ],
                    ),
                    (Some(Policy::Use), _) => None,
                    _ => error(F::ReplacementSourceMissing, vec![]),
                }
            }
            _ => None,
        }
    }

    /// The state after `directive`, which met no semantic error.
    fn applied(&self, directive: &CanonicalDirective) -> State {
        let operand = |name| directive.operand(name).unwrap_or_default();
        let mut next = self.clone();
        match directive.kind() {
            DirectiveKind::SetPremise | DirectiveKind::ChangePremise => {
                next.set_premise(Some(operand("value")));
            }
            DirectiveKind::UseItem => {
                next.policies_mut()
                    .insert(policy_key(operand("item")), Policy::Use);
            }
            DirectiveKind::ProhibitItem => {
                next.policies_mut()
                    .insert(policy_key(operand("item")), Policy::Prohibit);
            }
            DirectiveKind::RemovePolicy => {
                next.policies_mut().remove(&policy_key(operand("item")));
            }
            DirectiveKind::ReplaceUse => {
                let (new, old) = (
                    policy_key(operand("new_item")),
                    policy_key(operand("old_item")),
                );
                if new != old {
                    next.policies_mut().remove(&old);
                    next.policies_mut().insert(new, Policy::Use);
                }
            }
            DirectiveKind::ClearPremise => next.set_premise(None),
            DirectiveKind::ResetPolicies => next.policies_mut().clear(),
            DirectiveKind::ClearState => next = State::new(),
        }
        next
    }
}

/// An engine owning its state, with the reference implementation's surface:
/// `step`, `apply_directive`, `export_json`, `import_json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Engine {
    state: State,
}

impl Engine {
    /// An engine with the empty state.
    pub fn new() -> Self {
        Engine::default()
    }

    pub fn with_state(state: State) -> Self {
        Engine { state }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn into_state(self) -> State {
        self.state
    }

    /// One raw user input.
    pub fn step(&mut self, input: &str) -> Decision {
        let (decision, next) = self.state.step(input);
        self.state = next;
        decision
    }

    /// One canonical directive (a repair, or a directive the host parsed).
    pub fn apply_directive(&mut self, directive: &CanonicalDirective) -> Applied {
        let (applied, next) = self.state.apply(directive);
        self.state = next;
        applied
    }

    pub fn export_json(&self) -> String {
        self.state.export_json()
    }

    /// Replaces the state with an exported one; on error the state is unchanged.
    pub fn import_json(&mut self, payload: &str) -> Result<(), ImportError> {
        self.state = State::import_json(payload)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run(inputs: &[&str]) -> (Decision, State) {
        let mut engine = Engine::new();
        let mut last = Decision::NoDirective;
        for input in inputs {
            last = engine.step(input);
        }
        (last, engine.into_state())
    }

    fn error(inputs: &[&str]) -> SemanticError {
        match run(inputs).0 {
            Decision::Error(e) => e,
            other => panic!("{inputs:?}: {other:?}"),
        }
    }

    #[test]
    fn premise_lifecycle() {
        let (d, s) = run(&["set premise  Terse\tanswers "]);
        assert_eq!(d, Decision::Update { changed: true });
        assert_eq!(s.premise(), Some("Terse answers"));
        let e = error(&["set premise a", "set premise b"]);
        assert_eq!(e.failure(), SemanticFailure::PremiseAlreadySet);
        assert_eq!(e.repairs()[0].text(), "change premise to b");
        let e = error(&["change premise to to the moon"]);
        assert_eq!(e.failure(), SemanticFailure::PremiseNotSet);
        assert!(e.repairs().is_empty());
        assert_eq!(
            run(&["clear premise"]).0,
            Decision::Update { changed: false }
        );
    }

    #[test]
    fn policy_lifecycle() {
        let (d, s) = run(&["use Docker", "use  docker"]);
        assert_eq!(d, Decision::Update { changed: false });
        assert_eq!(s.policy("DOCKER"), Some(Policy::Use));
        let e = error(&["use Docker", "prohibit DOCKER"]);
        assert_eq!(
            e.message(),
            "\"docker\" is currently in use.\nRemove or replace it before prohibiting it."
        );
        let texts: Vec<String> = e.repairs().iter().map(|r| r.text()).collect();
        assert_eq!(texts, ["remove policy DOCKER", "prohibit DOCKER"]);
        let (_, s) = run(&["prohibit nuts", "use x", "remove policy NUTS"]);
        assert_eq!(s.items(Policy::Use).collect::<Vec<_>>(), ["x"]);
        assert_eq!(run(&["use x", "reset policies"]).1, State::new());
    }

    #[test]
    fn replacement() {
        let (d, s) = run(&["use npm", "use pnpm instead of npm"]);
        assert_eq!(d, Decision::Update { changed: true });
        assert_eq!(s.items(Policy::Use).collect::<Vec<_>>(), ["pnpm"]);
        assert_eq!(
            error(&["use pnpm instead of npm"]).failure(),
            SemanticFailure::ReplacementSourceMissing
        );
        let e = error(&["use npm", "prohibit pnpm", "use pnpm instead of npm"]);
        assert_eq!(e.failure(), SemanticFailure::ReplacementTargetProhibited);
        assert_eq!(e.repairs()[1], *e.directive());
        // The same item on both sides: a no-op only when it is in use.
        assert_eq!(
            run(&["use npm", "use NPM instead of npm"]).0,
            Decision::Update { changed: false }
        );
        assert_eq!(
            error(&["use NPM instead of npm"]).failure(),
            SemanticFailure::ReplacementSourceMissing
        );
        assert_eq!(
            error(&["prohibit npm", "use NPM instead of npm"]).failure(),
            SemanticFailure::ReplacementSourceProhibited
        );
    }

    #[test]
    fn errors_change_nothing() {
        let before = run(&["use npm", "prohibit yarn"]).1;
        for input in [
            "use yarn",
            "prohibit npm",
            "use x instead of yarn",
            "change premise to y",
        ] {
            let (d, after) = before.step(input);
            assert_eq!(d.kind(), "error", "{input}");
            assert_eq!(after, before);
        }
    }

    #[test]
    fn invalid_directives_are_no_directive() {
        let state = run(&["use npm"]).1;
        for input in ["use", "use a and prohibit b", "set premise to x", "hello"] {
            assert_eq!(state.step(input), (Decision::NoDirective, state.clone()));
        }
    }

    #[test]
    fn decision_json() {
        assert_eq!(
            serde_json::to_value(Decision::NoDirective).unwrap(),
            json!({"kind": "no_directive"})
        );
        assert_eq!(
            serde_json::to_value(Decision::Update { changed: false }).unwrap(),
            json!({"kind": "update", "changed": false})
        );
        let e = error(&["change premise to x"]);
        assert_eq!(
            serde_json::to_value(Decision::Error(e)).unwrap(),
            json!({
                "kind": "error",
                "failure": "premise_not_set",
                "directive": {"kind": "change_premise", "text": "change premise to x", "operands": {"value": "x"}},
                "repairs": [{"kind": "set_premise", "text": "set premise x", "operands": {"value": "x"}}],
                "message": "No premise is set.\nUse 'set premise <value>' to define one."
            })
        );
    }

    #[test]
    fn import_is_all_or_nothing() {
        let mut engine = Engine::new();
        engine.step("use a");
        let before = engine.clone();
        assert!(engine
            .import_json(r#"{"premise":null,"policies":{"b":"maybe"},"version":2}"#)
            .is_err());
        assert_eq!(engine, before);
    }
}
