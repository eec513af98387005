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

use foldhash::{HashMap, HashMapExt, HashSet};
use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::artifact::{Approval, Artifact, Effect, Intent};

use super::inputs::RunContext;
use super::policy::PolicyResult;
use super::shared::{raw_field, Derived, SortedValue, StaticText};
use crate::tokens::Tokenizer;

#[derive(Debug, Clone, PartialEq)]
pub struct ToolManifestEntry {
    pub capability_metadata: CapabilityMetadata,
    /// The tool's input schema, shared with the prepared pack (never copied per compile).
    pub json_schema: Arc<Value>,
    pub name: Arc<str>,
    pub surfaced: bool,
    pub withheld_reason: Option<Cow<'static, str>>,
    /// The tool's description, for the provider renders (the envelope carries it as the
    /// `tools` block's text, which the budget may drop). Not serialized.
    pub description: Arc<str>,
    /// `json_schema` as canonical JSON, written once by the prepared pack, so that
    /// every envelope copies it instead of sorting and writing the schema again.
    pub(crate) schema_json: Derived<Option<Arc<str>>>,
}

impl Serialize for ToolManifestEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Members in sorted order, as the canonical envelope writes them; a field
        // added to the struct is added here too.
        let mut st = s.serialize_struct("ToolManifestEntry", 5)?;
        st.serialize_field("capability_metadata", &self.capability_metadata)?;
        let schema = SortedValue(&self.json_schema);
        raw_field(&mut st, "json_schema", &schema, &self.schema_json)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("surfaced", &self.surfaced)?;
        st.serialize_field("withheld_reason", &self.withheld_reason)?;
        st.end()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityMetadata {
    pub approval_mode: &'static str,
    /// `declared`, or `raised_by:<policy>`.
    pub derivation: Cow<'static, str>,
    pub kind: Arc<str>,
    pub risk_level: &'static str,
}

/// What surfacing and the `tools` bucket need of each registry tool, built once per
/// prepared pack.
#[derive(Debug)]
pub(crate) struct PreparedTool {
    pub name: Arc<str>,
    pub json_schema: Arc<Value>,
    /// `json_schema` as the envelope writes it (see [`ToolManifestEntry`]).
    pub schema_json: Option<Arc<str>>,
    pub description: Arc<str>,
    pub kind: Arc<str>,
    /// The `tools` block text (see [`block_text`]), counted with the pack's tokenizer.
    pub block: StaticText,
}

impl PreparedTool {
    pub fn new(tool: &crate::artifact::Tool, kind: Tokenizer) -> PreparedTool {
        PreparedTool {
            name: Arc::from(tool.name.as_str()),
            json_schema: Arc::new(tool.input.clone()),
            schema_json: crate::artifact::json::raw(&SortedValue(&tool.input)).ok(),
            description: Arc::from(tool.description.as_str()),
            kind: Arc::from(tool.kind.as_str()),
            block: StaticText::new(block_text(tool), kind),
        }
    }
}

/// A tool's `tools` block: what its definition costs in a provider body, which sends
/// the name, the description and the input schema. `NAME: DESCRIPTION` (or `NAME`
/// without a description), then the schema as canonical JSON on its own line.
pub(crate) fn block_text(tool: &crate::artifact::Tool) -> String {
    let schema = crate::artifact::canonical_bytes(&tool.input);
    let schema = String::from_utf8_lossy(&schema);
    let head = if tool.description.is_empty() {
        Cow::Borrowed(tool.name.as_str())
    } else {
        Cow::Owned(format!("{}: {}", tool.name, tool.description))
    };
    format!("{head}\n{}", schema.trim_end())
}

/// Stage 3's result.
#[derive(Debug, Clone)]
pub(crate) struct ToolSurface {
    /// Every registry tool, sorted by name as the registry is.
    pub manifest: Vec<ToolManifestEntry>,
    /// The tools fired `require_approval` effects name, sorted and unique.
    pub gates: Vec<String>,
}

/// Stage 3: surfaces the tools (see the module docs).
pub(crate) fn surface<'a>(
    artifact: &'a Artifact,
    prepared: &[PreparedTool],
    intent: &'a Intent,
    run: &'a RunContext,
    results: &[PolicyResult],
) -> ToolSurface {
    // Each tool's first denying and first raising policy, in evaluation order.
    let mut denied_by: HashMap<&str, &str> = HashMap::new();
    let mut raised_by: HashMap<&str, &str> = HashMap::new();
    let fired = artifact
        .policies
        .iter()
        .zip(results)
        .filter(|(_, r)| r.fired)
        .map(|(p, _)| p);
    for policy in fired {
        for effect in &policy.effects {
            let (map, tools) = match effect {
                Effect::Deny(tools) => (&mut denied_by, tools),
                Effect::RequireApproval(tools) => (&mut raised_by, tools),
                _ => continue,
            };
            for tool in tools {
                map.entry(tool.as_str()).or_insert(policy.name.as_str());
            }
        }
    }
    let registered: HashSet<&str> = artifact.tools.iter().map(|t| t.name.as_str()).collect();
    let mut gates: Vec<String> = raised_by
        .keys()
        .filter(|t| registered.contains(*t))
        .map(|t| (*t).to_owned())
        .collect();
    gates.sort();

    let set =
        |names: &'a [String]| -> HashSet<&'a str> { names.iter().map(String::as_str).collect() };
    let intent_tools = set(&intent.tools);
    let permissions = run.permissions.as_deref().map(set);
    let run_prohibitions = run.prohibitions.as_deref().map(set);
    let pack_prohibitions: HashSet<&str> = artifact
        .prohibitions
        .iter()
        .map(|p| p.tool.as_str())
        .collect();
    let ceiling = run.safety_mode.ceiling();
    let manifest = artifact
        .tools
        .iter()
        .zip(prepared)
        .map(|(tool, prepared)| {
            let name = tool.name.as_str();
            let (approval, derivation) = match raised_by.get(name) {
                Some(policy) if tool.approval < Approval::Confirm => {
                    (Approval::Confirm, Cow::Owned(format!("raised_by:{policy}")))
                }
                _ => (tool.approval, Cow::Borrowed("declared")),
            };
            let reason = if !intent_tools.contains(name) {
                Some(Cow::Borrowed("not_permitted_by_intent"))
            } else if permissions.as_ref().is_some_and(|p| !p.contains(name)) {
                Some(Cow::Borrowed("not_in_run_permissions"))
            } else if pack_prohibitions.contains(name) {
                Some(Cow::Borrowed("prohibited_by_pack"))
            } else if let Some(policy) = denied_by.get(name) {
                Some(Cow::Owned(format!("denied_by_policy:{policy}")))
            } else if run_prohibitions.as_ref().is_some_and(|p| p.contains(name)) {
                Some(Cow::Borrowed("prohibited_by_run"))
            } else if approval > ceiling {
                Some(Cow::Borrowed("approval_exceeds_safety_mode"))
            } else {
                None
            };
            ToolManifestEntry {
                name: Arc::clone(&prepared.name),
                surfaced: reason.is_none(),
                withheld_reason: reason,
                json_schema: Arc::clone(&prepared.json_schema),
                capability_metadata: CapabilityMetadata {
                    kind: Arc::clone(&prepared.kind),
                    risk_level: tool.risk.as_str(),
                    approval_mode: approval.as_str(),
                    derivation,
                },
                description: Arc::clone(&prepared.description),
                schema_json: Derived(prepared.schema_json.clone()),
            }
        })
        .collect();
    ToolSurface { manifest, gates }
}
