//! Tools against safety: approval ceilings (E0401, the core safety check), risk vs
//! approval (E0402), prohibited tools (E0403), names the providers refuse (E0404),
//! kinds outside the standard set (W0404), unused and undescribed tools (W0401,
//! W0402) and approval raises that an intent cannot honor (W0403).

use std::collections::{HashMap, HashSet};

use crate::artifact::Approval;
use crate::diagnostic::Diagnostic;
use crate::ir::{EffectIr, Pack};

/// The standard tool kinds: what a tool does to the world, from reading to
/// administering. A pack's own kind is written with an `x_` prefix (`x_billing`).
pub const TOOL_KINDS: &[&str] = &[
    "read", "search", "write", "delete", "notify", "execute", "deploy", "payment", "admin",
];

/// The longest tool name both providers accept (OpenAI's `function.name` and
/// Anthropic's tool `name`: `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME: usize = 64;

pub fn check(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    let prohibited: HashSet<&str> = pack.prohibitions.iter().map(|p| p.name.as_str()).collect();
    // Tool name → the intents that permit it.
    let mut permitted_by: HashMap<&str, Vec<&crate::ir::IntentIr>> = HashMap::new();
    for intent in &pack.intents {
        for t in &intent.tools {
            permitted_by
                .entry(t.name.as_str())
                .or_default()
                .push(intent);
        }
    }

    for intent in &pack.intents {
        let ceiling = intent.safety.ceiling();
        for r in &intent.tools {
            if prohibited.contains(r.name.as_str()) {
                let first = pack.prohibitions.iter().find(|p| p.name == r.name);
                let mut d = Diagnostic::new(
                    "E0403",
                    r.span,
                    format!(
                        "intent `{}` permits `{}`, which the pack prohibits",
                        intent.name, r.name
                    ),
                )
                .with_label("prohibited tool")
                .with_help(format!(
                    "remove `{}` from the intent's `tools`, or lift the prohibition",
                    r.name
                ));
                if let Some(p) = first {
                    d = d.with_secondary(p.span, "prohibited here");
                }
                diags.push(d);
                continue;
            }
            let Some(tool) = pack.tool(&r.name) else {
                continue;
            };
            let Some((approval, approval_span)) = tool.approval else {
                continue;
            };
            if approval > ceiling {
                diags.push(
                    Diagnostic::new(
                        "E0401",
                        r.span,
                        format!(
                            "intent `{}` is `{}` but permits `{}`, whose approval is `{}`",
                            intent.name,
                            intent.safety.as_str(),
                            r.name,
                            approval.as_str()
                        ),
                    )
                    .with_label(format!(
                        "`{}` honors approval up to `{}`",
                        intent.safety.as_str(),
                        ceiling.as_str()
                    ))
                    .with_secondary(
                        approval_span,
                        format!("`{}` approval declared here", approval.as_str()),
                    )
                    .with_help(format!(
                        "raise the intent's safety (`safety {}`), or remove `{}` from its `tools`",
                        needed_safety(approval),
                        r.name
                    )),
                );
            }
        }
    }

    for tool in &pack.tools {
        if let (Some((risk, risk_span)), Some((approval, approval_span))) =
            (tool.risk, tool.approval)
        {
            let needed = match risk {
                crate::artifact::Risk::Critical => Approval::Review,
                crate::artifact::Risk::High => Approval::Confirm,
                _ => Approval::Auto,
            };
            if approval < needed {
                diags.push(
                    Diagnostic::new(
                        "E0402",
                        approval_span,
                        format!(
                            "tool `{}` has `{}` risk but `{}` approval",
                            tool.name,
                            risk.as_str(),
                            approval.as_str()
                        ),
                    )
                    .with_label(format!("`{}` risk needs at least `{}`", risk.as_str(), needed.as_str()))
                    .with_secondary(risk_span, "risk declared here")
                    .with_help(format!(
                        "`critical` tools need `approval review`, `high` ones at least `approval confirm`: write `approval {}`",
                        needed.as_str()
                    )),
                );
            }
        }
        if let (Some(kind), Some(span)) = (&tool.kind, tool.kind_span) {
            if !TOOL_KINDS.contains(&kind.as_str()) && !kind.starts_with("x_") {
                let help = match crate::diagnostic::nearest(kind, TOOL_KINDS.iter().copied()) {
                    Some(near) => format!("did you mean `{near}`? The standard kinds are {}; write a kind of your own as `x_{kind}`", kinds_list()),
                    None => format!("the standard kinds are {}; write a kind of your own as `x_{kind}`", kinds_list()),
                };
                diags.push(
                    Diagnostic::new(
                        "W0404",
                        span,
                        format!(
                            "tool `{}` has kind `{kind}`, which is not a standard kind",
                            tool.name
                        ),
                    )
                    .with_label("not a standard kind")
                    .with_help(help),
                );
            }
        }
        if tool.name.chars().count() > MAX_TOOL_NAME {
            diags.push(
                Diagnostic::new(
                    "E0404",
                    tool.name_span,
                    format!(
                        "tool name `{}` is {} characters long; providers accept at most {MAX_TOOL_NAME}",
                        tool.name,
                        tool.name.chars().count()
                    ),
                )
                .with_label(format!("longer than {MAX_TOOL_NAME} characters"))
                .with_help("OpenAI and Anthropic take tool names of 1 to 64 characters: shorten the name and put the detail in the description"),
            );
        }
        if tool
            .description
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
        {
            diags.push(
                Diagnostic::new(
                    "W0402",
                    tool.name_span,
                    format!("tool `{}` has no description", tool.name),
                )
                .with_label("no description")
                .with_help(
                    "the model chooses tools by their description: add `description \"...\"`",
                ),
            );
        }
        let intent_broken = pack
            .broken
            .iter()
            .any(|d| d.kind == crate::ir::SymbolKind::Intent);
        if !pack.library
            && !intent_broken
            && !pack.unresolved_imports
            && !prohibited.contains(tool.name.as_str())
            && !pack
                .intents
                .iter()
                .any(|i| i.tools.iter().any(|t| t.name == tool.name))
        {
            diags.push(
                Diagnostic::new(
                    "W0401",
                    tool.name_span,
                    format!("tool `{}` is permitted by no intent", tool.name),
                )
                .with_label("never surfaced")
                .with_help("add it to an intent's `tools`, prohibit it, or remove it"),
            );
        }
    }

    for policy in &pack.policies {
        for effect in &policy.effects {
            let EffectIr::RequireApproval(tools) = effect else {
                continue;
            };
            for r in tools {
                let Some(tool) = pack.tool(&r.name) else {
                    continue;
                };
                let Some((approval, _)) = tool.approval else {
                    continue;
                };
                let raised = approval.max(Approval::Confirm);
                let over: Vec<&str> = permitted_by
                    .get(r.name.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|i| approval <= i.safety.ceiling() && raised > i.safety.ceiling())
                    .map(|i| i.name.as_str())
                    .collect();
                if !over.is_empty() {
                    diags.push(
                        Diagnostic::new(
                            "W0403",
                            r.span,
                            format!(
                                "policy `{}` raises `{}` to `{}`, above what intent {} honors",
                                policy.name,
                                r.name,
                                raised.as_str(),
                                over.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                            ),
                        )
                        .with_label("the tool will be withheld when this fires")
                        .with_help("when the policy fires, those intents lose the tool; raise their safety mode if that is not intended"),
                    );
                }
            }
        }
    }
}

fn needed_safety(approval: Approval) -> &'static str {
    match approval {
        Approval::Auto => "autonomous",
        Approval::Confirm => "supervised",
        Approval::Review => "reviewed",
    }
}

/// `read`, `search`, … and `admin`, for help texts.
fn kinds_list() -> String {
    let quoted: Vec<String> = TOOL_KINDS.iter().map(|k| format!("`{k}`")).collect();
    quoted.join(", ")
}
