//! Session directives in a compile (packs that declare `session directives`).
//!
//! The request may carry `session_state`, the state a host exported after the
//! previous turn. The compile imports it (all or nothing: a malformed state is invalid
//! input, exit 4, with the path), steps it with `request.message`, and then:
//!
//! - conditions and templates read the state after the step as `session.premise`,
//!   `session.use` and `session.prohibit`;
//! - the state after the step is rendered as trusted text at the end of the developer
//!   prompt (fixed text, counted before the buckets), never in an untrusted lane;
//! - the envelope reports `session` (`state_before`, `decision`, `state_after`) and
//!   `runtime_controls.directive` (the decision), so a host answers an `update` or an
//!   `error` itself instead of calling the model;
//! - the ledger records the BLAKE3 of both states' canonical exports.
//!
//! A pack without `session directives` refuses a `session_state` input (exit 4).

use serde::Serialize;
use serde_json::{json, Value};

use crate::artifact::Artifact;
use crate::session::{Decision, Policy, State};

use super::error::CompileError;
use super::inputs::InvokeRequest;

/// One compile's session step.
#[derive(Debug, Clone)]
pub(crate) struct SessionStep {
    pub before: State,
    pub decision: Decision,
    pub after: State,
}

/// `session` in the envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionReport {
    pub decision: Value,
    pub state_after: Value,
    pub state_before: Value,
}

/// `context_ledger.session`: what replay needs to reproduce the step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerSession {
    /// BLAKE3 of the canonical export of the state after the step.
    pub after: String,
    /// BLAKE3 of the canonical export of the state the request carried.
    pub before: String,
}

/// Imports and steps the request's session state, for a pack that opts in.
pub(crate) fn step(
    artifact: &Artifact,
    request: &InvokeRequest,
) -> Result<Option<SessionStep>, CompileError> {
    match (&artifact.session, &request.session_state) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(CompileError::input(
            "request.session_state",
            "the pack does not declare `session directives`, so it takes no session state",
        )),
        (Some(_), state) => {
            let before = match state {
                None | Some(Value::Null) => State::new(),
                Some(v) => State::from_value(v).map_err(|e| {
                    CompileError::input(e.path_under("request.session_state"), e.detail())
                })?,
            };
            let (decision, after) = before.step(&request.message);
            Ok(Some(SessionStep {
                before,
                decision,
                after,
            }))
        }
    }
}

impl SessionStep {
    /// What conditions and templates read as `session`.
    pub fn data(&self) -> Value {
        let s = &self.after;
        json!({
            "premise": s.premise(),
            "use": s.items(Policy::Use).collect::<Vec<_>>(),
            "prohibit": s.items(Policy::Prohibit).collect::<Vec<_>>(),
        })
    }

    /// The trusted text the state after the step renders to, or `None` when it is
    /// empty.
    pub fn block(&self) -> Option<String> {
        let s = &self.after;
        if s.is_empty() {
            return None;
        }
        let mut out =
            String::from("Standing constraints the user set in this session (apply them):");
        if let Some(p) = s.premise() {
            out.push_str("\n- premise: ");
            out.push_str(p);
        }
        for (policy, label) in [(Policy::Use, "use"), (Policy::Prohibit, "prohibit")] {
            let items: Vec<&str> = s.items(policy).collect();
            if !items.is_empty() {
                out.push_str(&format!("\n- {label}: {}", items.join(", ")));
            }
        }
        Some(out)
    }

    pub fn report(&self) -> SessionReport {
        SessionReport {
            decision: serde_json::to_value(&self.decision).unwrap_or(Value::Null),
            state_before: self.before.to_value(),
            state_after: self.after.to_value(),
        }
    }

    pub fn ledger(&self) -> LedgerSession {
        let hash = |s: &State| super::shared::blake3_ref(&blake3::hash(s.export_json().as_bytes()));
        LedgerSession {
            before: hash(&self.before),
            after: hash(&self.after),
        }
    }
}
