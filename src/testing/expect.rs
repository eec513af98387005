//! Checking a compile against a case's expectations, and saying why it failed: the
//! withheld reason of a missing tool, the policies that fired or did not (with their
//! conditions), what a bucket kept, dropped and truncated.

use std::collections::BTreeSet;

use crate::artifact::{Artifact, Effect, Policy};
use crate::runtime::{CompileError, CompiledContext};

use super::spec::Expect;

/// One failed expectation: `what` (`tools: expected [..], actual [..]`) and the lines
/// that explain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub what: String,
    pub why: Vec<String>,
}

impl Failure {
    fn new(what: String) -> Failure {
        Failure {
            what,
            why: Vec::new(),
        }
    }

    fn because(mut self, why: impl IntoIterator<Item = String>) -> Failure {
        self.why.extend(why);
        self
    }
}

/// How many policies an explanation names before it says "and N more".
const MAX_NAMED: usize = 4;

/// The failed expectations of one compile (empty when the case passes).
pub fn check(
    expect: &Expect,
    outcome: &Result<CompiledContext, CompileError>,
    artifact: &Artifact,
) -> Vec<Failure> {
    let cc = match (outcome, &expect.error) {
        (Err(e), Some(kind)) if e.kind() == kind => return Vec::new(),
        (Err(e), Some(kind)) => {
            return vec![Failure::new(format!(
                "error: expected `{kind}`, actual `{}` ({e})",
                e.kind()
            ))]
        }
        (Err(e), None) => return vec![Failure::new(format!("compile failed: {e} ({})", e.kind()))],
        (Ok(_), Some(kind)) => {
            return vec![Failure::new(format!(
                "error: expected `{kind}`, actual: the compile succeeded"
            ))]
        }
        (Ok(cc), None) => cc,
    };
    let why = Why { cc, artifact };
    let mut out = Vec::new();
    controls(expect, &why, &mut out);
    sets(expect, &why, &mut out);
    budget(expect, &why, &mut out);
    texts(expect, &why, &mut out);
    out
}

/// The flags and texts of `runtime_controls`, and the intent.
fn controls(expect: &Expect, why: &Why, out: &mut Vec<Failure>) {
    let cc = why.cc;
    let rc = &cc.runtime_controls;
    if let Some(e) = expect.must_refuse.filter(|e| *e != rc.must_refuse) {
        out.push(
            Failure::new(format!(
                "must_refuse: expected {e}, actual {}",
                rc.must_refuse
            ))
            .because(why.policies(is_refusal, "refuse")),
        );
    }
    if let Some(e) = expect.must_escalate.filter(|e| *e != rc.must_escalate) {
        out.push(
            Failure::new(format!(
                "must_escalate: expected {e}, actual {}",
                rc.must_escalate
            ))
            .because(why.policies(is_escalation, "escalate")),
        );
    }
    if let Some(e) = &expect.refusal_reason {
        if rc.refusal_reason.as_deref() != Some(e.as_str()) {
            out.push(
                Failure::new(format!(
                    "refusal_reason: expected {e:?}, actual {}",
                    shown(rc.refusal_reason.as_deref())
                ))
                .because(why.policies(is_refusal, "refuse")),
            );
        }
    }
    if let Some(e) = &expect.escalation_target {
        if rc.escalation_target.as_deref() != Some(e.as_str()) {
            out.push(
                Failure::new(format!(
                    "escalation_target: expected {e:?}, actual {}",
                    shown(rc.escalation_target.as_deref())
                ))
                .because(why.policies(is_escalation, "escalate")),
            );
        }
    }
    session(expect, cc, out);
    if let Some(e) = expect
        .fallback_used
        .filter(|e| *e != cc.intent.fallback_used)
    {
        out.push(
            Failure::new(format!(
                "fallback_used: expected {e}, actual {}",
                cc.intent.fallback_used
            ))
            .because([format!(
                "the request was served by intent `{}`",
                cc.intent.name
            )]),
        );
    }
}

/// The session decision and the state after it.
fn session(expect: &Expect, cc: &CompiledContext, out: &mut Vec<Failure>) {
    let session = cc.session.as_ref();
    if let Some(e) = &expect.directive {
        let actual = session
            .and_then(|s| s.decision.get("kind"))
            .and_then(serde_json::Value::as_str);
        if actual != Some(e.as_str()) {
            let shown = actual.map_or_else(
                || "none (the pack has no `session directives`)".to_owned(),
                |a| format!("`{a}`"),
            );
            let mut f = Failure::new(format!("directive: expected `{e}`, actual {shown}"));
            if let Some(s) = session {
                f.why.push(format!("decision: {}", s.decision));
            }
            out.push(f);
        }
    }
    if let Some(e) = &expect.session_state {
        let actual = session.map(|s| &s.state_after);
        if actual != Some(e) {
            out.push(Failure::new(format!(
                "session_state: expected {e}, actual {}",
                actual.map_or_else(|| "none".to_owned(), ToString::to_string)
            )));
        }
    }
}

/// Tools, approval gates and redactors.
fn sets(expect: &Expect, why: &Why, out: &mut Vec<Failure>) {
    let cc = why.cc;
    let rc = &cc.runtime_controls;
    let surfaced: Vec<String> = cc
        .manifests
        .tool_manifest
        .iter()
        .filter(|t| t.surfaced)
        .map(|t| t.name.to_string())
        .collect();
    set(out, "tools", &expect.tools, surfaced, |missing, extra| {
        why.tools(missing, extra)
    });
    set(
        out,
        "approval_gates",
        &expect.approval_gates,
        rc.approval_gates_active.clone(),
        |missing, extra| why.gates(missing, extra),
    );
    let redactors = rc
        .redaction_rules_active
        .iter()
        .map(|r| r.name.clone())
        .collect();
    set(out, "redactions", &expect.redactions, redactors, |_, _| {
        why.policies(redacts, "redact")
    });
}

/// What each bucket dropped and truncated.
fn budget(expect: &Expect, why: &Why, out: &mut Vec<Failure>) {
    let cc = why.cc;
    for (key, expected, truncated) in [
        ("dropped", &expect.dropped, false),
        ("truncated", &expect.truncated, true),
    ] {
        for (bucket, ids) in expected.iter().flatten() {
            let report = &cc.budget_report;
            if !report.allocations.contains_key(bucket)
                && !report.dropped_block_ids.contains_key(bucket)
            {
                // An expectation on a bucket that does not exist would hold vacuously.
                let known: Vec<&str> = report.allocations.keys().map(String::as_str).collect();
                out.push(Failure::new(format!(
                    "{key}.{bucket}: the pack has no bucket `{bucket}` (its buckets: {})",
                    known.join(", ")
                )));
                continue;
            }
            let actual = if truncated {
                why.truncated_in(bucket)
            } else {
                cc.budget_report
                    .dropped_block_ids
                    .get(bucket)
                    .map(|ids| ids.iter().map(|id| id.to_string()).collect())
                    .unwrap_or_default()
            };
            set(
                out,
                &format!("{key}.{bucket}"),
                &Some(ids.clone()),
                actual,
                |_, _| why.bucket(bucket),
            );
        }
    }
}

/// The prompt's texts and the runtime diagnostics.
fn texts(expect: &Expect, why: &Why, out: &mut Vec<Failure>) {
    let cc = why.cc;
    for needle in expect.contains.iter().flatten() {
        if !why.parts().any(|(_, text)| text.contains(needle.as_str())) {
            out.push(
                Failure::new(format!(
                    "contains: expected the prompt to contain {needle:?}, actual: not found"
                ))
                .because([format!(
                    "searched the system, developer and task texts, {} kept blocks and the message",
                    cc.compiled_prompt.context_blocks.len()
                )]),
            );
        }
    }
    for needle in expect.not_contains.iter().flatten() {
        let found: Vec<String> = why
            .parts()
            .filter(|(_, text)| text.contains(needle.as_str()))
            .map(|(part, _)| part)
            .collect();
        if !found.is_empty() {
            out.push(
                Failure::new(format!(
                    "not_contains: expected the prompt not to contain {needle:?}, actual: found"
                ))
                .because([format!("in {}", found.join(", "))]),
            );
        }
    }
    let codes = cc.diagnostics.iter().map(|d| d.code.clone()).collect();
    set(out, "diagnostics", &expect.diagnostics, codes, |_, _| {
        cc.diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect()
    });
}

fn shown(value: Option<&str>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| format!("{v:?}"))
}

fn sorted(v: impl IntoIterator<Item = String>) -> Vec<String> {
    v.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
}

/// Compares an expected set with the actual one; on a difference, explains the
/// missing and the unexpected members with `explain`.
fn set(
    out: &mut Vec<Failure>,
    name: &str,
    expected: &Option<Vec<String>>,
    actual: Vec<String>,
    explain: impl FnOnce(&[String], &[String]) -> Vec<String>,
) {
    let Some(expected) = expected else {
        return;
    };
    let (e, a) = (sorted(expected.clone()), sorted(actual));
    if e == a {
        return;
    }
    let missing: Vec<String> = e.iter().filter(|x| !a.contains(x)).cloned().collect();
    let extra: Vec<String> = a.iter().filter(|x| !e.contains(x)).cloned().collect();
    out.push(
        Failure::new(format!("{name}: expected {e:?}, actual {a:?}"))
            .because(explain(&missing, &extra)),
    );
}

fn is_refusal(e: &Effect) -> bool {
    matches!(e, Effect::Refuse(_))
}

fn is_escalation(e: &Effect) -> bool {
    matches!(e, Effect::Escalate(_))
}

fn redacts(e: &Effect) -> bool {
    matches!(e, Effect::Redact(_))
}

/// Explanations drawn from the envelope and the artifact.
struct Why<'a> {
    cc: &'a CompiledContext,
    artifact: &'a Artifact,
}

impl Why<'_> {
    fn fired(&self, name: &str) -> bool {
        self.cc
            .manifests
            .policy_manifest
            .iter()
            .any(|p| &*p.policy == name && p.fired)
    }

    fn policy(&self, name: &str) -> Option<&Policy> {
        self.artifact.policies.iter().find(|p| p.name == name)
    }

    /// `` `name` (when COND) ``.
    fn with_condition(&self, name: &str) -> String {
        match self.policy(name) {
            Some(p) => format!("`{name}` (when {})", crate::diff::logic::condition(&p.when)),
            None => format!("`{name}`"),
        }
    }

    /// Which policies with an effect of this kind fired, and which did not.
    fn policies(&self, has: fn(&Effect) -> bool, effect: &str) -> Vec<String> {
        let with: Vec<&Policy> = self
            .artifact
            .policies
            .iter()
            .filter(|p| p.effects.iter().any(has))
            .collect();
        if with.is_empty() {
            return vec![format!("the pack has no `{effect}` policy")];
        }
        let (fired, quiet): (Vec<&Policy>, Vec<&Policy>) =
            with.into_iter().partition(|p| self.fired(&p.name));
        let mut lines = Vec::new();
        if fired.is_empty() {
            lines.push(format!("no `{effect}` policy fired"));
        } else {
            let names: Vec<String> = fired.iter().map(|p| format!("`{}`", p.name)).collect();
            lines.push(format!("fired: {}", names.join(", ")));
        }
        for p in quiet.iter().take(MAX_NAMED) {
            lines.push(format!("did not fire: {}", self.with_condition(&p.name)));
        }
        if quiet.len() > MAX_NAMED {
            lines.push(format!(
                "and {} more `{effect}` policies that did not fire",
                quiet.len() - MAX_NAMED
            ));
        }
        lines
    }

    fn tools(&self, missing: &[String], extra: &[String]) -> Vec<String> {
        let manifest = &self.cc.manifests.tool_manifest;
        let mut lines = Vec::new();
        for name in missing {
            let Some(t) = manifest.iter().find(|t| &*t.name == name) else {
                lines.push(format!("`{name}` is not a tool of the pack"));
                continue;
            };
            let reason = t.withheld_reason.as_deref().unwrap_or("withheld");
            let mut line = format!("`{name}` withheld: {reason}");
            if let Some(policy) = reason.strip_prefix("denied_by_policy:") {
                line = format!("{line}; {}", self.with_condition(policy));
            } else if reason == "approval_exceeds_safety_mode" {
                line = format!(
                    "{line} (approval `{}`, {}; the run's safety mode does not honor it)",
                    t.capability_metadata.approval_mode, t.capability_metadata.derivation
                );
            } else if reason == "not_permitted_by_intent" {
                line = format!("{line} (intent `{}`)", self.cc.intent.name);
            }
            lines.push(line);
        }
        for name in extra {
            if let Some(t) = manifest.iter().find(|t| &*t.name == name) {
                lines.push(format!(
                    "`{name}` surfaced (approval `{}`, {})",
                    t.capability_metadata.approval_mode, t.capability_metadata.derivation
                ));
            }
        }
        lines
    }

    fn gates(&self, missing: &[String], extra: &[String]) -> Vec<String> {
        let raisers = |tool: &str| -> Vec<&Policy> {
            self.artifact
                .policies
                .iter()
                .filter(|p| {
                    p.effects.iter().any(
                        |e| matches!(e, Effect::RequireApproval(tools) if tools.iter().any(|t| t == tool)),
                    )
                })
                .collect()
        };
        let mut lines = Vec::new();
        for tool in missing.iter().chain(extra) {
            let policies = raisers(tool);
            let (fired, quiet): (Vec<&Policy>, Vec<&Policy>) =
                policies.into_iter().partition(|p| self.fired(&p.name));
            if fired.is_empty() && quiet.is_empty() {
                lines.push(format!("no policy requires approval for `{tool}`"));
            }
            for p in fired {
                lines.push(format!(
                    "`{tool}`: `{}` fired and requires approval",
                    p.name
                ));
            }
            for p in quiet.iter().take(MAX_NAMED) {
                lines.push(format!(
                    "`{tool}`: did not fire: {}",
                    self.with_condition(&p.name)
                ));
            }
        }
        lines
    }

    fn truncated_in(&self, bucket: &str) -> Vec<String> {
        self.cc
            .compiled_prompt
            .context_blocks
            .iter()
            .filter(|b| b.truncated && &*b.bucket == bucket)
            .map(|b| b.id.to_string())
            .collect()
    }

    fn bucket(&self, bucket: &str) -> Vec<String> {
        let report = &self.cc.budget_report;
        let Some(allocation) = report.allocations.get(bucket) else {
            return vec![format!("the pack has no bucket `{bucket}`")];
        };
        let kept: Vec<String> = self
            .cc
            .compiled_prompt
            .context_blocks
            .iter()
            .filter(|b| &*b.bucket == bucket)
            .map(|b| format!("{} ({} tokens)", b.id, b.tokens))
            .collect();
        let dropped: Vec<String> = report
            .dropped_block_ids
            .get(bucket)
            .map(|ids| ids.iter().map(|id| id.to_string()).collect())
            .unwrap_or_default();
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        vec![
            format!(
                "bucket `{bucket}`: {allocation} tokens allotted, {} used",
                report.used_at_compile.get(bucket).copied().unwrap_or(0)
            ),
            format!("kept: {}", list(&kept)),
            format!("dropped: {}", list(&dropped)),
        ]
    }

    /// The prompt's texts, each with what to call it.
    fn parts(&self) -> impl Iterator<Item = (String, &str)> {
        let p = &self.cc.compiled_prompt;
        [("system".to_owned(), p.system.as_str())]
            .into_iter()
            .chain(
                p.developer
                    .iter()
                    .map(|d| ("developer".to_owned(), d.as_str())),
            )
            .chain([("task".to_owned(), p.task.as_str())])
            .chain(
                p.context_blocks
                    .iter()
                    .map(|b| (format!("block `{}` ({})", b.id, b.bucket), &*b.text)),
            )
            .chain([("the message".to_owned(), p.message.as_str())])
    }
}
