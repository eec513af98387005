//! Stage 3: tool surfacing.
//!
//! `registry ∩ intent.tools ∩ run.permissions (if given) − prohibit − policy deny −
//! run.prohibitions`, then `require_approval` raises, then every tool whose approval
//! mode exceeds what `run.safety_mode` honors is withheld. Every tool of the registry
//! appears in the manifest; a withheld one carries the first reason that applies, in
//! this order (each a stable string):
//!
//! | reason | meaning |
//! | --- | --- |
//! | `not_permitted_by_intent` | the resolved intent does not list the tool |
//! | `not_in_run_permissions` | the run gives `permissions` and the tool is not in them |
//! | `prohibited_by_pack` | the pack (or an import) `prohibit`s the tool |
//! | `denied_by_policy:<policy>` | a fired policy `deny`s it (the first in evaluation order) |
//! | `prohibited_by_run` | the run's `prohibitions` list it |
//! | `approval_exceeds_safety_mode` | its approval mode (after raises) is above the run's safety mode's ceiling |
//!
//! `capability_metadata.derivation` is `declared` when the approval mode is the tool's
//! own, or `raised_by:<policy>` when a fired `require_approval` raised it (the first
//! such policy in evaluation order). A raise to `confirm` of a tool that already needs
//! `confirm` or `review` changes nothing and keeps `declared`.

use serde::Serialize;
use serde_json::Value;

use crate::artifact::{Approval, Artifact, Effect, Intent};

use super::inputs::RunContext;
use super::policy::PolicyResult;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolManifestEntry {
    pub capability_metadata: CapabilityMetadata,
    #[serde(serialize_with = "super::envelope::sorted_value")]
    pub json_schema: Value,
    pub name: String,
    pub surfaced: bool,
    pub withheld_reason: Option<String>,
    /// The tool's description, for the provider renders (the envelope carries it as the
    /// `tools` block's text, which the budget may drop).
    #[serde(skip)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityMetadata {
    pub approval_mode: String,
    pub derivation: String,
    pub kind: String,
    pub risk_level: String,
}

/// The manifest (sorted by name, as the registry is) and the gates that fired
/// `require_approval` effects activated.
pub(crate) fn surface(
    artifact: &Artifact,
    intent: &Intent,
    run: &RunContext,
    results: &[PolicyResult],
) -> (Vec<ToolManifestEntry>, Vec<String>) {
    let fired = || {
        artifact
            .policies
            .iter()
            .zip(results)
            .filter(|(_, r)| r.fired)
            .map(|(p, _)| p)
    };
    let mut gates: Vec<String> = Vec::new();
    for policy in fired() {
        for effect in &policy.effects {
            if let Effect::RequireApproval(tools) = effect {
                gates.extend(
                    tools
                        .iter()
                        .filter(|t| artifact.tools.iter().any(|x| &x.name == *t))
                        .cloned(),
                );
            }
        }
    }
    gates.sort();
    gates.dedup();

    let ceiling = run.safety_mode.ceiling();
    let manifest = artifact
        .tools
        .iter()
        .map(|tool| {
            let named = |f: fn(&Effect) -> Option<&Vec<String>>| {
                fired()
                    .find(|p| {
                        p.effects
                            .iter()
                            .any(|e| f(e).is_some_and(|ts| ts.contains(&tool.name)))
                    })
                    .map(|p| p.name.clone())
            };
            let denied_by = named(|e| match e {
                Effect::Deny(t) => Some(t),
                _ => None,
            });
            let raised_by = named(|e| match e {
                Effect::RequireApproval(t) => Some(t),
                _ => None,
            });
            let (approval, derivation) = match raised_by {
                Some(policy) if tool.approval < Approval::Confirm => {
                    (Approval::Confirm, format!("raised_by:{policy}"))
                }
                _ => (tool.approval, "declared".to_owned()),
            };
            let listed = |list: &Option<Vec<String>>| list.as_ref().map(|l| l.contains(&tool.name));
            let reason = if !intent.tools.contains(&tool.name) {
                Some("not_permitted_by_intent".to_owned())
            } else if listed(&run.permissions) == Some(false) {
                Some("not_in_run_permissions".to_owned())
            } else if artifact.prohibitions.iter().any(|p| p.tool == tool.name) {
                Some("prohibited_by_pack".to_owned())
            } else if let Some(policy) = denied_by {
                Some(format!("denied_by_policy:{policy}"))
            } else if listed(&run.prohibitions) == Some(true) {
                Some("prohibited_by_run".to_owned())
            } else if approval > ceiling {
                Some("approval_exceeds_safety_mode".to_owned())
            } else {
                None
            };
            ToolManifestEntry {
                name: tool.name.clone(),
                surfaced: reason.is_none(),
                withheld_reason: reason,
                json_schema: tool.input.clone(),
                capability_metadata: CapabilityMetadata {
                    kind: tool.kind.clone(),
                    risk_level: tool.risk.as_str().to_owned(),
                    approval_mode: approval.as_str().to_owned(),
                    derivation,
                },
                description: tool.description.clone(),
            }
        })
        .collect();
    (manifest, gates)
}
