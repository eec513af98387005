//! Tools against safety: approval ceilings (E0401, the core safety check), risk vs
//! approval (E0402), prohibited tools (E0403), names the providers refuse (E0404),
//! kinds one edit away from a standard one (W0404), unused and undescribed tools (W0401,
//! W0402) and approval raises that an intent cannot honor (W0403).

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use crate::artifact::Approval;
use crate::diagnostic::{nearest, Diagnostic};
use crate::ir::{EffectIr, Pack, SymbolKind, ToolIr};

/// The standard tool kinds: what a tool does to the world, from reading to
/// administering. A pack's own kind is written with an `x_` prefix (`x_billing`).
pub const TOOL_KINDS: &[&str] = &[
    "read", "search", "write", "delete", "notify", "execute", "deploy", "payment", "admin",
];

/// The longest tool name both providers accept (OpenAI's `function.name` and
/// Anthropic's tool `name`: `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME: usize = 64;

pub fn check(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    let prohibited: HashSet<&str> = pack.prohibitions.iter().map(|p| p.name.as_ref()).collect();
    intent_tools(pack, &prohibited, diags);
    // A misspelled tool reference is E0102, whose help names the nearest tool (the
    // same lookup as `names::resolve`): that tool is taken as the one meant, so that
    // the typo is not reported again as W0401 on the tool it was meant for.
    fn meant<'a>(pack: &'a Pack, name: &'a str) -> Option<&'a str> {
        if pack.declares(SymbolKind::Tool, name) {
            Some(name)
        } else {
            nearest(name, pack.names(SymbolKind::Tool))
        }
    }
    let mut permitted = HashSet::with_capacity(pack.tools.len());
    permitted.extend(
        pack.intents
            .iter()
            .flat_map(|i| i.tools.iter().filter_map(|t| meant(pack, &t.name))),
    );
    let unused_excepted: HashSet<&str> = pack
        .prohibitions
        .iter()
        .filter_map(|p| meant(pack, &p.name))
        .collect();
    let use_ = Use {
        prohibited: &unused_excepted,
        permitted: &permitted,
        // A broken intent may permit any tool: W0401 would be a guess.
        // So may a pack whose header did not parse: it may be a library.
        intent_broken: pack.header_broken || pack.broken_intent,
    };
    for tool in &pack.tools {
        risk_and_approval(tool, diags);
        kind_and_name(tool, diags);
        description_and_use(pack, tool, &use_, diags);
    }
    approval_raises(pack, diags);
}

/// E0403 and E0401: each tool an intent permits, against the pack's prohibitions and
/// the intent's approval ceiling.
fn intent_tools(pack: &Pack, prohibited: &HashSet<&str>, diags: &mut Vec<Diagnostic>) {
    for intent in &pack.intents {
        let ceiling = intent.safety.ceiling();
        for r in &intent.tools {
            if prohibited.contains(r.name.as_ref()) {
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
}

/// E0402: a tool's approval mode against its risk.
fn risk_and_approval(tool: &ToolIr, diags: &mut Vec<Diagnostic>) {
    if let (Some((risk, risk_span)), Some((approval, approval_span))) = (tool.risk, tool.approval) {
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
}

/// The standard kind `kind` is a probable misspelling of: one edit away (a letter
/// added, dropped, changed, or two swapped), but not the standard kind with a suffix
/// (`reads`, `payments` are kinds of their own).
fn misspelt_kind(kind: &str) -> Option<&'static str> {
    if TOOL_KINDS.contains(&kind) || kind.starts_with("x_") {
        return None;
    }
    TOOL_KINDS
        .iter()
        .copied()
        .find(|k| strsim::damerau_levenshtein(kind, k) == 1 && !kind.starts_with(k))
}

/// W0404 and E0404: a kind that looks like a misspelt standard kind, and the length
/// of a tool's name. Kinds are free (`kind query` is fine): only a near miss of a
/// standard one (`kind wirte`) is reported.
fn kind_and_name(tool: &ToolIr, diags: &mut Vec<Diagnostic>) {
    if let (Some(kind), Some(span)) = (&tool.kind, tool.kind_span) {
        if let Some(near) = misspelt_kind(kind) {
            diags.push(
                Diagnostic::new(
                    "W0404",
                    span,
                    format!(
                        "tool `{}` has kind `{kind}`, one edit away from the standard kind `{near}`",
                        tool.name
                    ),
                )
                .with_label(format!("one letter from `{near}`"))
                .with_help(format!(
                    "did you mean `{near}`? The standard kinds are {}; a kind of your own is fine (write it as `x_{kind}` to say that it is meant)",
                    kinds_list()
                )),
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
}

/// What the pack's intents and prohibitions make of its tools, gathered once.
struct Use<'a> {
    prohibited: &'a HashSet<&'a str>,
    permitted: &'a HashSet<&'a str>,
    intent_broken: bool,
}

/// W0402 and W0401: a tool without a description, or that no intent permits.
fn description_and_use(pack: &Pack, tool: &ToolIr, use_: &Use<'_>, diags: &mut Vec<Diagnostic>) {
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
            .with_help("the model chooses tools by their description: add `description \"...\"`"),
        );
    }
    if !pack.library
        && !use_.intent_broken
        && !pack.unresolved_imports
        && !use_.prohibited.contains(tool.name.as_str())
        && !use_.permitted.contains(tool.name.as_str())
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

/// W0403: a `require_approval` raise above the ceiling of an intent that permits
/// the tool.
fn approval_raises(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    let raised: HashSet<&str> = pack
        .policies
        .iter()
        .flat_map(|p| &p.effects)
        .filter_map(|e| match e {
            EffectIr::RequireApproval(tools) => Some(tools),
            _ => None,
        })
        .flatten()
        .map(|r| r.name.as_ref())
        .collect();
    if raised.is_empty() {
        return;
    }
    // Raised tool name → the intents that permit it, with their index in the pack.
    let mut permitted_by: HashMap<&str, Vec<(usize, &crate::ir::IntentIr)>> =
        HashMap::with_capacity(raised.len());
    for (k, intent) in pack.intents.iter().enumerate() {
        for t in &intent.tools {
            if let Some(name) = raised.get(t.name.as_ref()) {
                permitted_by.entry(name).or_default().push((k, intent));
            }
        }
    }
    // Computed on the first candidate only: most packs raise nothing that could
    // exceed a ceiling, and they never pay for the analysis.
    let mut scopes: Option<Option<Vec<Option<Vec<bool>>>>> = None;
    for (p, policy) in pack.policies.iter().enumerate() {
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
                    .get(r.name.as_ref())
                    .into_iter()
                    .flatten()
                    .filter(|(_, i)| approval <= i.safety.ceiling() && raised > i.safety.ceiling())
                    .filter(|(k, _)| {
                        // An intent whose requests (in the mode it is written for)
                        // can never fire the policy is never affected by it.
                        let scopes =
                            scopes.get_or_insert_with(|| crate::analysis::firing_scopes(pack));
                        let fires = scopes
                            .as_ref()
                            .and_then(|s| s.get(p)?.as_ref()?.get(*k).copied());
                        fires != Some(false)
                    })
                    .map(|(_, i)| i.name.as_str())
                    .collect();
                if !over.is_empty() {
                    let (noun, verb) = if over.len() == 1 {
                        ("intent", "honors")
                    } else {
                        ("intents", "honor")
                    };
                    diags.push(
                        Diagnostic::new(
                            "W0403",
                            r.span,
                            format!(
                                "policy `{}` raises `{}` to `{}`, above what {noun} {} {verb}",
                                policy.name,
                                r.name,
                                raised.as_str(),
                                crate::analysis::names(&over, "and"),
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
