//! Tool surfacing per intent and safety mode, as the runtime decides it: a tool is
//! withheld when the intent does not permit it, the pack prohibits it, a fired policy
//! denies it, or its approval mode (after `require_approval` raises) is above what the
//! run's safety mode honors. Requests the pack refuses surface nothing that matters,
//! so they are set aside: a tool is *surfaced* when every request of the intent and
//! mode that is not refused surfaces it, *withheld* when none does, *conditional*
//! otherwise. The run's own `permissions` and `prohibitions` can only withhold more
//! and are not modelled.
//!
//! From the same table, W0405: a tool that some intent permits but that no request of
//! any such intent, in any safety mode, can surface.

use serde_json::{json, Value};

use super::bdd::{Exhausted, Node};
use foldhash::{HashMap, HashMapExt};

use super::{denies, names, refusal, Cond, Cx, Union, Witness};
use crate::artifact::{Approval, SafetyMode};
use crate::diagnostic::Diagnostic;
use crate::ir::{EffectIr, SymbolKind, ToolIr};

/// The safety modes, in order.
const MODES: [SafetyMode; 3] = [
    SafetyMode::Autonomous,
    SafetyMode::Supervised,
    SafetyMode::Reviewed,
];

/// Every tool in every intent and safety mode.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolTable {
    /// `scope/name@version`.
    pub pack: String,
    /// False when the analysis budget ran out: some entries are
    /// [`Status::NotAnalysed`].
    pub complete: bool,
    /// In declaration order.
    pub intents: Vec<IntentTools>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IntentTools {
    pub intent: String,
    pub fallback: bool,
    /// The safety mode the intent declares it is written for.
    pub safety: SafetyMode,
    /// `autonomous`, `supervised`, `reviewed`.
    pub modes: Vec<ModeTools>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModeTools {
    pub mode: SafetyMode,
    /// The tools the intent permits, by name. Every other tool is withheld as
    /// `not_permitted_by_intent` and not listed.
    pub tools: Vec<ToolStatus>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolStatus {
    pub tool: String,
    pub status: Status,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Every request that is not refused surfaces the tool.
    Surfaced,
    /// No request surfaces it.
    Withheld(Withheld),
    /// Some requests surface it and some do not; `policies` decide which.
    Conditional {
        policies: Vec<String>,
        /// A request that surfaces the tool, and one that withholds it.
        surfaced: Witness,
        withheld: Witness,
        /// Policies outside the analysed fragment that may also withhold the tool or
        /// refuse, so a witness is exact only if they do not fire.
        unknown: Vec<String>,
    },
    /// Every request of this intent and mode is refused, by these policies.
    Refused { policies: Vec<String> },
    /// Surfaced unless one of these policies, outside the analysed fragment, fires.
    Undetermined { policies: Vec<String> },
    /// The analysis budget ran out before this was decided.
    NotAnalysed,
}

/// Why a tool the intent permits is always withheld.
#[derive(Debug, Clone, PartialEq)]
pub enum Withheld {
    Prohibited,
    /// Its declared approval mode is above what the safety mode honors.
    ApprovalExceeds(Approval),
    /// These policies withhold it (deny it, or raise it above the mode's ceiling)
    /// in every request that is not refused.
    Policies(Vec<String>),
}

impl Status {
    /// `surfaced`, `withheld`, `conditional`, `refused`, `undetermined` or
    /// `not_analysed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Surfaced => "surfaced",
            Status::Withheld(_) => "withheld",
            Status::Conditional { .. } => "conditional",
            Status::Refused { .. } => "refused",
            Status::Undetermined { .. } => "undetermined",
            Status::NotAnalysed => "not_analysed",
        }
    }
}

impl Withheld {
    /// The runtime's `withheld_reason` where it has one; `policy` for policies.
    pub fn reason(&self) -> &'static str {
        match self {
            Withheld::Prohibited => "prohibited_by_pack",
            Withheld::ApprovalExceeds(_) => "approval_exceeds_safety_mode",
            Withheld::Policies(_) => "policy",
        }
    }
}

impl ToolTable {
    /// The table as `explain --tools --format json` prints it.
    pub fn to_json(&self) -> Value {
        let intents: Vec<Value> = self
            .intents
            .iter()
            .map(|i| {
                let modes: Vec<Value> = i
                    .modes
                    .iter()
                    .map(|m| {
                        let tools: Vec<Value> = m.tools.iter().map(ToolStatus::to_json).collect();
                        json!({ "mode": m.mode.as_str(), "tools": tools })
                    })
                    .collect();
                json!({
                    "intent": i.intent,
                    "fallback": i.fallback,
                    "safety": i.safety.as_str(),
                    "modes": modes,
                })
            })
            .collect();
        json!({ "pack": self.pack, "complete": self.complete, "intents": intents })
    }
}

impl ToolStatus {
    fn to_json(&self) -> Value {
        let mut v = json!({ "tool": self.tool, "status": self.status.as_str() });
        let Some(map) = v.as_object_mut() else {
            return v;
        };
        match &self.status {
            Status::Withheld(w) => {
                map.insert("reason".into(), json!(w.reason()));
                match w {
                    Withheld::Policies(p) => {
                        map.insert("policies".into(), json!(p));
                    }
                    Withheld::ApprovalExceeds(a) => {
                        map.insert("approval".into(), json!(a.as_str()));
                    }
                    _ => {}
                }
            }
            Status::Conditional {
                policies,
                surfaced,
                withheld,
                unknown,
            } => {
                map.insert("policies".into(), json!(policies));
                map.insert("witness_surfaced".into(), surfaced.to_json());
                map.insert("witness_withheld".into(), withheld.to_json());
                if !unknown.is_empty() {
                    map.insert("also_depends_on".into(), json!(unknown));
                }
            }
            Status::Refused { policies } | Status::Undetermined { policies } => {
                map.insert("policies".into(), json!(policies));
            }
            Status::Surfaced | Status::NotAnalysed => {}
        }
        v
    }
}

/// What the policies can do to one tool.
struct ToolPolicies {
    /// Known policies that deny it.
    deny: Vec<usize>,
    /// Known policies that raise it with `require_approval`.
    raise: Vec<usize>,
    /// Policies outside the analysis that deny or raise it.
    deny_unknown: Vec<String>,
    raise_unknown: Vec<String>,
}

/// The policies that deny and that raise each tool, in evaluation order.
type EffectIndex<'p> = HashMap<&'p str, (Vec<usize>, Vec<usize>)>;

fn effect_index<'p>(cx: &Cx<'p>) -> EffectIndex<'p> {
    let mut index: EffectIndex<'p> = HashMap::new();
    for &i in &cx.prepared.order {
        for effect in &cx.pack.policies[i].effects {
            let (tools, deny) = match effect {
                EffectIr::Deny(tools) => (tools, true),
                EffectIr::RequireApproval(tools) => (tools, false),
                _ => continue,
            };
            for t in tools {
                let entry = index.entry(t.name.as_ref()).or_default();
                let list = if deny { &mut entry.0 } else { &mut entry.1 };
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
    }
    index
}

pub(super) fn table(cx: &mut Cx<'_>) -> ToolTable {
    let index = effect_index(cx);
    let refusers: Vec<usize> = cx
        .prepared
        .order
        .iter()
        .copied()
        .filter(|&i| refusal(cx.policy(i)).is_some())
        .collect();
    let unknown_refusers: Vec<String> = refusers
        .iter()
        .filter(|&&i| cx.conds[i].known().is_none())
        .map(|&i| cx.policy(i).name.clone())
        .collect();
    let refused: Result<Vec<Node>, Exhausted> = (|| {
        let mut union = Union::new();
        let mut nodes = Vec::new();
        for &i in &refusers {
            if let Some(n) = cx.conds[i].known() {
                union.push(&mut cx.model.bdd, n, &mut nodes)?;
            }
        }
        Ok(union.parts().to_vec())
    })();
    let mut per_tool: HashMap<String, ToolPolicies> = HashMap::new();
    let intent_var = cx.prepared.universe.lookup("request.intent");
    let mode_var = cx.prepared.universe.lookup("run.safety_mode");
    let pack = cx.pack;
    let mut intents = Vec::with_capacity(pack.intents.len());
    for intent in &pack.intents {
        let mut tools: Vec<&ToolIr> = intent
            .tools
            .iter()
            .filter_map(|r| pack.tool(&r.name))
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools.dedup_by(|a, b| a.name == b.name);
        let intent_node = match intent_var {
            Some(v) => cx.model.equals(v, &json!(intent.name)),
            None => Ok(Node::TRUE),
        };
        let mut modes = Vec::with_capacity(MODES.len());
        for mode in MODES {
            // The requests of this intent and mode, and whether the pack refuses
            // them all.
            let scope = (|| -> Result<(Node, bool), Exhausted> {
                let mut c = intent_node?;
                if let Some(v) = mode_var {
                    let n = cx.model.equals(v, &json!(mode.as_str()))?;
                    c = cx.model.bdd.and(c, n)?;
                }
                let all_refused = cx
                    .model
                    .bdd
                    .covered(c, refused.as_deref().map_err(|e| *e)?)?;
                Ok((c, all_refused))
            })();
            let refused_by = match scope {
                Ok((c, true)) => meeting(cx, &refusers, c, &[]).ok(),
                _ => None,
            };
            let mut statuses = Vec::with_capacity(tools.len());
            for t in &tools {
                let approval = t.approval.map_or(Approval::Auto, |a| a.0);
                let status = if pack.prohibitions.iter().any(|p| *p.name == *t.name) {
                    Status::Withheld(Withheld::Prohibited)
                } else if approval > mode.ceiling() {
                    Status::Withheld(Withheld::ApprovalExceeds(approval))
                } else if let Some(policies) = &refused_by {
                    Status::Refused {
                        policies: policies.clone(),
                    }
                } else {
                    if !per_tool.contains_key(&t.name) {
                        let tp = tool_policies(cx, index.get(t.name.as_str()));
                        per_tool.insert(t.name.clone(), tp);
                    }
                    let raise_counts =
                        approval == Approval::Auto && mode.ceiling() == Approval::Auto;
                    let decided = match (scope, per_tool.get(&t.name), &refused) {
                        (Ok((c, _)), Some(tp), Ok(refused)) => {
                            decide(cx, c, refused, tp, raise_counts, &unknown_refusers)
                        }
                        _ => Err(Exhausted),
                    };
                    decided.unwrap_or_else(|Exhausted| {
                        cx.give_up();
                        Status::NotAnalysed
                    })
                };
                statuses.push(ToolStatus {
                    tool: t.name.clone(),
                    status,
                });
            }
            modes.push(ModeTools {
                mode,
                tools: statuses,
            });
        }
        intents.push(IntentTools {
            intent: intent.name.clone(),
            fallback: intent.fallback,
            safety: intent.safety,
            modes,
        });
    }
    ToolTable {
        pack: pack.provenance(),
        complete: !cx.exhausted,
        intents,
    }
}

fn tool_policies(cx: &Cx<'_>, effects: Option<&(Vec<usize>, Vec<usize>)>) -> ToolPolicies {
    let mut tp = ToolPolicies {
        deny: Vec::new(),
        raise: Vec::new(),
        deny_unknown: Vec::new(),
        raise_unknown: Vec::new(),
    };
    let Some((deny, raise)) = effects else {
        return tp;
    };
    for (policies, known, unknown) in [
        (deny, &mut tp.deny, &mut tp.deny_unknown),
        (raise, &mut tp.raise, &mut tp.raise_unknown),
    ] {
        for &i in policies {
            match cx.conds[i] {
                Cond::Known(_) => known.push(i),
                _ => unknown.push(cx.policy(i).name.clone()),
            }
        }
    }
    tp
}

/// The names of `policies` whose conditions meet `scope` outside every `refused`.
fn meeting(
    cx: &mut Cx<'_>,
    policies: &[usize],
    scope: Node,
    refused: &[Node],
) -> Result<Vec<String>, Exhausted> {
    let mut out = Vec::new();
    for &i in policies {
        if let Some(n) = cx.conds[i].known() {
            let both = cx.model.bdd.and(scope, n)?;
            if !cx.model.bdd.covered(both, refused)? {
                out.push(cx.policy(i).name.clone());
            }
        }
    }
    Ok(out)
}

/// The status of a tool the intent permits and the mode's ceiling allows, over the
/// requests of `scope` (this intent and mode) that no `refused` condition refuses.
fn decide(
    cx: &mut Cx<'_>,
    scope: Node,
    refused: &[Node],
    tp: &ToolPolicies,
    raise_counts: bool,
    unknown_refusers: &[String],
) -> Result<Status, Exhausted> {
    let mut deciders = tp.deny.clone();
    let mut unknown = tp.deny_unknown.clone();
    if raise_counts {
        deciders.extend(tp.raise.iter().copied());
        unknown.extend(tp.raise_unknown.iter().cloned());
    }
    deciders.sort_by_key(|&i| cx.prepared.rank[i]);
    deciders.dedup();
    // The deciding policies that fire in some request that is not refused, and one
    // such request.
    let mut policies = Vec::new();
    let mut withheld = None;
    for &i in &deciders {
        let Some(n) = cx.conds[i].known() else {
            continue;
        };
        let both = cx.model.bdd.and(scope, n)?;
        if let Some(w) = cx.model.witness_avoiding(both, refused)? {
            policies.push(cx.policy(i).name.clone());
            withheld.get_or_insert(w);
        }
    }
    let Some(withheld) = withheld else {
        return Ok(if unknown.is_empty() {
            Status::Surfaced
        } else {
            Status::Undetermined { policies: unknown }
        });
    };
    let mut avoid: Vec<Node> = refused.to_vec();
    avoid.extend(deciders.iter().filter_map(|&i| cx.conds[i].known()));
    let Some(surfaced) = cx.model.witness_avoiding(scope, &avoid)? else {
        return Ok(Status::Withheld(Withheld::Policies(policies)));
    };
    unknown.extend(unknown_refusers.iter().cloned());
    Ok(Status::Conditional {
        policies,
        surfaced,
        withheld,
        unknown,
    })
}

// ── W0405 ────────────────────────────────────────────────────────────────────────

pub(super) fn check(cx: &mut Cx<'_>, diags: &mut Vec<Diagnostic>) {
    if cx.pack.library || cx.pack.intents.is_empty() {
        return;
    }
    let table = table(cx);
    // Per tool: the intents that permit it, and its status in each of their modes.
    let mut seen: HashMap<&str, (Vec<&str>, Vec<&Status>)> = HashMap::new();
    for row in &table.intents {
        for m in &row.modes {
            for s in &m.tools {
                let entry = seen.entry(s.tool.as_str()).or_default();
                if entry.0.last() != Some(&row.intent.as_str()) {
                    entry.0.push(row.intent.as_str());
                }
                entry.1.push(&s.status);
            }
        }
    }
    for tool in &cx.pack.tools {
        let Some((permitting, statuses)) = seen.get(tool.name.as_str()) else {
            continue; // permitted by no intent: W0401
        };
        if cx.pack.prohibitions.iter().any(|p| *p.name == *tool.name) {
            continue;
        }
        let never = statuses
            .iter()
            .all(|s| matches!(s, Status::Withheld(_) | Status::Refused { .. }));
        let mut deciders: Vec<&str> = Vec::new();
        for s in statuses {
            if let Status::Withheld(Withheld::Policies(ps)) = s {
                for p in ps {
                    if !deciders.contains(&p.as_str()) {
                        deciders.push(p);
                    }
                }
            }
        }
        if !never || deciders.is_empty() {
            continue;
        }
        let imported = |kind, name: &str| cx.pack.origins.contains_key(&(kind, name.to_owned()));
        if imported(SymbolKind::Tool, &tool.name)
            && deciders.iter().all(|p| imported(SymbolKind::Policy, p))
        {
            continue;
        }
        let mut d = Diagnostic::new(
            "W0405",
            tool.name_span,
            format!(
                "tool `{}` is never surfaced: {} withhold{} it from every request of {} that is not refused",
                tool.name,
                names(&deciders, "and"),
                if deciders.len() == 1 { "s" } else { "" },
                if permitting.len() == 1 {
                    format!("intent `{}`", permitting[0])
                } else {
                    format!("intents {}", names(permitting, "and"))
                }
            ),
        )
        .with_label("never surfaced");
        for p in cx
            .pack
            .policies
            .iter()
            .filter(|p| deciders.contains(&p.name.as_str()))
        {
            let how = if denies(p, &tool.name) {
                format!("denies `{}`", tool.name)
            } else {
                format!("raises `{}` above what `autonomous` honors", tool.name)
            };
            d = d.with_secondary(p.name_span, how);
        }
        diags.push(d.with_help(format!(
            "in every safety mode, each request that reaches `{}` also fires a policy that \
             withholds it (run `ctxpack explain --tools` for the table); narrow {}, or remove \
             `{}` from the intents if it is not meant to be used",
            tool.name,
            names(&deciders, "or"),
            tool.name
        )));
    }
}
