//! `ctxpack diff`: the semantic diff of two artifacts, snapshotted in both formats for
//! a realistic version bump, and driven through the CLI.

mod common;

use std::path::Path;
use std::process::Command;

use common::{sealed, support_v1, support_v1_1};
use ctxpack::artifact::{Approval, Risk, SafetyMode};
use ctxpack::diff::{diff, render, SafetyEffect, SafetyKind};
use ctxpack::registry::Registry;

#[test]
fn version_bump_human() {
    let d = diff(&sealed(support_v1()), &sealed(support_v1_1()));
    insta::assert_snapshot!("support_1_0_0_to_1_1_0_human", render::to_human(&d));
}

#[test]
fn version_bump_json() {
    let d = diff(&sealed(support_v1()), &sealed(support_v1_1()));
    insta::assert_snapshot!("support_1_0_0_to_1_1_0_json", render::to_json(&d));
}

#[test]
fn version_bump_safety_list() {
    let d = diff(&support_v1(), &support_v1_1());
    let kinds: Vec<(SafetyKind, &str)> =
        d.safety.iter().map(|n| (n.kind, n.item.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (SafetyKind::PolicyRemoved, "minors_refused"),
            (SafetyKind::IntentToolGranted, "refund"),
            (SafetyKind::ToolAdded, "escalate_ticket"),
            (SafetyKind::PolicyConditionChanged, "large_refunds"),
            (SafetyKind::ApprovalRaised, "issue_refund"),
        ]
    );
    // Weakening changes come first.
    assert!(d.safety.windows(2).all(|w| w[0].effect <= w[1].effect));
}

#[test]
fn lowering_approval_risk_and_safety_is_called_out() {
    let a = support_v1();
    let mut b = a.clone();
    b.tools[0].approval = Approval::Auto;
    b.tools[0].risk = Risk::Medium;
    b.tools[1].risk = Risk::Critical;
    b.intents[1].safety = SafetyMode::Autonomous;
    b.intents[1].tools.retain(|t| t != "issue_refund");
    b.policies[0].enforcing = false;
    b.prohibitions.clear();
    b.redactors[0].pattern = "x".into();
    let d = diff(&a, &b);
    let kinds: Vec<(SafetyKind, SafetyEffect)> =
        d.safety.iter().map(|n| (n.kind, n.effect)).collect();
    assert_eq!(
        kinds,
        [
            (SafetyKind::RiskLowered, SafetyEffect::Weakens),
            (SafetyKind::ApprovalLowered, SafetyEffect::Weakens),
            (SafetyKind::PolicyMadeAdvisory, SafetyEffect::Weakens),
            (SafetyKind::IntentSafetyLowered, SafetyEffect::Weakens),
            (SafetyKind::ProhibitionRemoved, SafetyEffect::Weakens),
            (SafetyKind::RiskRaised, SafetyEffect::Review),
            (SafetyKind::RedactorPatternChanged, SafetyEffect::Review),
            (SafetyKind::IntentToolRevoked, SafetyEffect::Tightens),
        ]
    );
    let human = render::to_human(&d);
    assert!(
        human.contains("⚠ weakens   approval lowered: tool `issue_refund`: confirm → auto"),
        "{human}"
    );
    assert!(
        human.contains("~ approval: confirm → auto  ⚠ approval lowered"),
        "{human}"
    );
    assert!(
        human.contains("~ tools: -issue_refund  ⚠ tool revoked"),
        "{human}"
    );
}

#[test]
fn identical_artifacts_have_no_differences() {
    let a = sealed(support_v1());
    let d = diff(&a, &a);
    assert!(!d.differs);
    assert!(d.safety.is_empty());
    assert!(render::to_human(&d).ends_with("\nno differences\n"));
}

#[test]
fn a_version_bump_alone_does_not_change_provenance() {
    let a = support_v1();
    let mut b = a.clone();
    b.version = "1.0.1".into();
    for t in &mut b.tools {
        t.provenance = "acme/support@1.0.1".into();
    }
    let d = diff(&a, &b);
    assert!(d.tools.is_empty(), "{:?}", d.tools);
    assert_eq!(d.pack.len(), 1);
    // A provenance that moves to another pack is a change.
    b.tools[0].provenance = "acme/base-safety@2.1.0".into();
    assert_eq!(diff(&a, &b).tools.changed[0].changes[0].field, "provenance");
}

#[test]
fn json_output_is_deterministic() {
    let (a, b) = (sealed(support_v1()), sealed(support_v1_1()));
    assert_eq!(
        render::to_json(&diff(&a, &b)),
        render::to_json(&diff(&a.clone(), &b.clone()))
    );
}

// ---------------------------------------------------------------------------------
// The CLI
// ---------------------------------------------------------------------------------

fn ctxpack() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctxpack"));
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = ctxpack().args(args).current_dir(dir).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn diff_cli() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    std::fs::write(dir.join("v1.json"), support_v1().canonical_bytes()).unwrap();
    std::fs::write(dir.join("v2.json"), support_v1_1().canonical_bytes()).unwrap();
    let expected = render::to_human(&diff(&sealed(support_v1()), &sealed(support_v1_1())));

    let (code, stdout, stderr) = run(dir, &["diff", "v1.json", "v2.json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, expected);
    let (code, stdout, _) = run(dir, &["diff", "--format", "json", "v1.json", "v2.json"]);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["differs"], true);

    let (code, _, stderr) = run(dir, &["diff", "--exit-code", "v1.json", "v2.json"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("acme/support@1.0.0 and acme/support@1.1.0 differ"),
        "{stderr}"
    );
    // Exit 1 says why in one JSON object under `--json-errors`, like every failure.
    for gate in [&["--exit-code"][..], &["--fail-on", "changed"]] {
        let args = [
            &["--json-errors", "diff"][..],
            gate,
            &["v1.json", "v2.json"],
        ]
        .concat();
        let (code, _, stderr) = run(dir, &args);
        assert_eq!(code, Some(1));
        let error: serde_json::Value = serde_json::from_str(&stderr).unwrap();
        assert_eq!(error["error"]["kind"], "artifacts_differ", "{stderr}");
        assert_eq!(error["error"]["exit_code"], 1);
    }
    let (code, _, stderr) = run(dir, &["diff", "--exit-code", "v1.json", "v1.json"]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));

    // Registry references, resolved when no such file exists.
    let registry = Registry::open(dir.join(".ctxpack/registry"));
    registry.publish(&support_v1()).unwrap();
    registry.publish(&support_v1_1()).unwrap();
    let (code, stdout, stderr) = run(dir, &["diff", "acme/support@1.0.0", "acme/support@1.1.0"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, expected);
    let (code, _, stderr) = run(dir, &["diff", "acme/support", "v2.json"]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(
        stderr.contains("unpinned pack reference `acme/support`"),
        "{stderr}"
    );
    let (code, _, stderr) = run(dir, &["diff", "acme/support@9.9.9", "v2.json"]);
    assert_eq!(code, Some(3), "{stderr}");

    let (code, _, _) = run(dir, &["diff", "missing.json", "v2.json"]);
    assert_eq!(code, Some(3));
    let mut tampered = std::fs::read_to_string(dir.join("v2.json")).unwrap();
    tampered = tampered.replacen("after review", "after reviev", 1);
    std::fs::write(dir.join("tampered.json"), tampered).unwrap();
    let (code, _, stderr) = run(dir, &["diff", "v1.json", "tampered.json"]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("hash mismatch"), "{stderr}");
}

#[test]
fn fail_on_weakened_gates_only_weakening_changes() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let v1 = support_v1();
    // Only tightening: approval raised, a new prohibition of a tool no intent has.
    let mut tighter = v1.clone();
    tighter.version = "1.0.1".into();
    tighter.tools[0].approval = Approval::Review;
    let mut weaker = v1.clone();
    weaker.version = "1.0.2".into();
    weaker.policies[0].enforcing = false;
    for (name, a) in [("v1", &v1), ("tighter", &tighter), ("weaker", &weaker)] {
        std::fs::write(
            dir.join(format!("{name}.json")),
            sealed(a.clone()).canonical_bytes(),
        )
        .unwrap();
    }
    let (code, _, stderr) = run(
        dir,
        &["diff", "--fail-on", "weakened", "v1.json", "tighter.json"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (code, _, stderr) = run(
        dir,
        &["diff", "--fail-on", "weakened", "v1.json", "weaker.json"],
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("weakens safety"), "{stderr}");
    // The 1.0.0 → 1.1.0 bump removes a policy and grants a tool.
    std::fs::write(dir.join("v2.json"), support_v1_1().canonical_bytes()).unwrap();
    let (code, _, stderr) = run(
        dir,
        &[
            "diff",
            "--fail-on",
            "weakened",
            "--json-errors",
            "v1.json",
            "v2.json",
        ],
    );
    assert_eq!(code, Some(1));
    let e: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    assert_eq!(e["error"]["kind"], "safety_weakened");
    let weakening = e["error"]["weakening"].as_array().unwrap();
    assert!(
        weakening.iter().any(|w| w["kind"] == "policy_removed"),
        "{e}"
    );
    assert!(
        weakening
            .iter()
            .any(|w| w["change"] == "`escalate_ticket` now surfaces with `confirm` approval"),
        "{e}"
    );
    // `changed` fails on any difference, tightening included.
    let (code, _, _) = run(
        dir,
        &["diff", "--fail-on", "changed", "v1.json", "tighter.json"],
    );
    assert_eq!(code, Some(1));
    let (code, _, _) = run(dir, &["diff", "--fail-on", "changed", "v1.json", "v1.json"]);
    assert_eq!(code, Some(0));
}

#[test]
fn intents_show_the_impact_on_their_tool_surface() {
    let a = support_v1();
    let mut b = a.clone();
    b.tools[0].approval = Approval::Auto;
    let d = diff(&a, &b);
    let tool = &a.tools[0].name;
    let hits: Vec<(&str, &str, bool)> = d
        .impact
        .iter()
        .flat_map(|i| {
            i.changes
                .iter()
                .map(move |c| (i.intent.as_str(), c.change.as_str(), c.weakens))
        })
        .collect();
    assert!(!hits.is_empty());
    for (_, change, weakens) in &hits {
        assert!(
            change.starts_with(&format!(
                "`{tool}` now surfaces with `auto` approval (was `"
            )),
            "{change}"
        );
        assert!(weakens);
    }
    assert!(d.weakens());
    let human = render::to_human(&d);
    assert!(human.contains("Impact by intent:\n  ⚠ `"), "{human}");
}

/// Where requests for an unknown intent go is safety-relevant: a fallback moved to
/// an intent with more tools widens what they reach, one with fewer only moves, and
/// none at all refuses them.
#[test]
fn moving_the_fallback_is_called_out() {
    let a = support_v1();
    let kinds = |b: &ctxpack::artifact::Artifact| -> Vec<(SafetyKind, SafetyEffect, String)> {
        diff(&a, b)
            .safety
            .iter()
            .filter(|n| n.field.as_deref() == Some("fallback"))
            .map(|n| (n.kind, n.effect, n.detail.clone()))
            .collect()
    };
    let mut widened = a.clone();
    widened.intents[0].fallback = false;
    widened.intents[1].fallback = true;
    assert_eq!(
        kinds(&widened),
        [(
            SafetyKind::FallbackWidened,
            SafetyEffect::Weakens,
            "unknown intents go to `refund` (before: `general`); tools issue_refund".to_owned()
        )]
    );
    let d = diff(&a, &widened);
    assert!(d.weakens());
    assert!(render::to_human(&d).contains("fallback widened: intent `refund`"));

    // Back to an intent with fewer tools and no lower safety mode: a move to review.
    let mut moved = widened.clone();
    moved.intents[0].fallback = true;
    moved.intents[0].safety = SafetyMode::Reviewed;
    moved.intents[1].fallback = false;
    let d = diff(&widened, &moved);
    assert_eq!(
        d.safety
            .iter()
            .filter(|n| n.field.as_deref() == Some("fallback"))
            .map(|n| (n.kind, n.effect))
            .collect::<Vec<_>>(),
        [(SafetyKind::FallbackMoved, SafetyEffect::Review)]
    );
    assert!(!d.weakens());
    // To an intent with a lower safety mode, and no new tool: widened all the same.
    moved.intents[0].safety = SafetyMode::Autonomous;
    assert_eq!(
        diff(&widened, &moved).safety.first().map(|n| n.kind),
        Some(SafetyKind::FallbackWidened)
    );

    let mut removed = a.clone();
    removed.intents[0].fallback = false;
    assert_eq!(
        kinds(&removed).first().map(|k| (k.0, k.1)),
        Some((SafetyKind::FallbackRemoved, SafetyEffect::Tightens))
    );
    // A fallback where there was none: unknown intents were refused.
    assert_eq!(
        diff(&removed, &a)
            .safety
            .first()
            .map(|n| (n.kind, n.effect)),
        Some((SafetyKind::FallbackWidened, SafetyEffect::Weakens))
    );
}

/// An added intent grants its tools; `session directives` added or removed is a change
/// of the pack, and removing it weakens safety (the user's constraints are no longer
/// kept).
#[test]
fn added_intents_and_session_directives_are_called_out() {
    let a = support_v1();
    let mut b = a.clone();
    let mut sneaky = b.intents[1].clone();
    sneaky.name = "sneaky".into();
    b.intents.push(sneaky);
    let d = diff(&a, &b);
    assert_eq!(
        d.safety
            .iter()
            .map(|n| (n.kind, n.item.as_str()))
            .collect::<Vec<_>>(),
        [(SafetyKind::IntentToolGranted, "sneaky")]
    );

    let mut with = a.clone();
    with.session = Some(ctxpack::artifact::Session { directives: true });
    for (from, to, kind, effect) in [
        (
            &a,
            &with,
            SafetyKind::SessionDirectivesAdded,
            SafetyEffect::Tightens,
        ),
        (
            &with,
            &a,
            SafetyKind::SessionDirectivesRemoved,
            SafetyEffect::Weakens,
        ),
    ] {
        let d = diff(from, to);
        assert!(d.differs);
        assert_eq!(
            d.safety
                .iter()
                .map(|n| (n.kind, n.effect))
                .collect::<Vec<_>>(),
            [(kind, effect)]
        );
        assert_eq!(
            d.pack.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
            ["session"]
        );
    }
}

/// The budget's header counts every change listed under it: its own fields (total,
/// tokenizer) beside its buckets'.
#[test]
fn the_budget_header_counts_its_own_fields_too() {
    let a = support_v1();
    let mut b = a.clone();
    let budget = b.budget.as_mut().unwrap();
    budget.total *= 2;
    let text = render::to_human(&diff(&a, &b));
    assert!(text.contains("\nBudget: 1 changed\n  ~ total: "), "{text}");
    b.budget.as_mut().unwrap().buckets[0].share_ppm -= 10_000;
    b.budget.as_mut().unwrap().buckets[1].share_ppm += 10_000;
    let text = render::to_human(&diff(&a, &b));
    assert!(text.contains("\nBudget: 3 changed\n  ~ total: "), "{text}");
    assert_eq!(text.matches("  ~ bucket ").count(), 2, "{text}");
}
