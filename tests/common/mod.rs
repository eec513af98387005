//! Artifacts built by hand for the registry and diff tests: a realistic support pack
//! at 1.0.0 and its 1.1.0 successor.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

use std::collections::BTreeMap;

use ctxpack::artifact::*;
use serde_json::{json, Value};

const BASE: &str = "acme/base-safety@2.1.0";

/// A template with its parts: `{{ path }}` interpolations split out of the text.
pub fn tpl(text: &str) -> Template {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            parts.push(TemplatePart::Text(rest[..start].to_owned()));
        }
        let after = &rest[start + 2..];
        let end = after.find("}}").unwrap_or(after.len());
        parts.push(TemplatePart::Path {
            path: after[..end].trim().to_owned(),
            default: None,
        });
        rest = after.get(end + 2..).unwrap_or("");
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Text(rest.to_owned()));
    }
    Template {
        text: text.to_owned(),
        parts,
    }
}

pub fn tool(name: &str, description: &str, risk: Risk, approval: Approval, own: &str) -> Tool {
    Tool {
        name: name.into(),
        description: description.into(),
        kind: "function".into(),
        risk,
        approval,
        input: json!({
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": false
        }),
        doc: None,
        provenance: own.into(),
    }
}

pub fn policy(
    name: &str,
    priority: i64,
    when: Value,
    effects: Vec<Effect>,
    bundle: &str,
) -> Policy {
    Policy {
        name: name.into(),
        priority,
        enforcing: true,
        when,
        effects,
        bundle: bundle.into(),
        doc: None,
    }
}

pub fn bucket(name: &str, percent: u64, priority: i64, overflow: Overflow) -> Bucket {
    Bucket {
        name: name.into(),
        share_ppm: percent * PPM / 100,
        priority,
        min: 0,
        overflow,
    }
}

pub fn intent(
    name: &str,
    safety: SafetyMode,
    tools: &[&str],
    task: &str,
    fallback: bool,
) -> Intent {
    Intent {
        name: name.into(),
        description: None,
        safety,
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        task: tpl(task),
        budget: BTreeMap::new(),
        fallback,
        doc: None,
    }
}

pub fn field(path: &str, ty: Type, optional: bool, own: &str) -> ContextField {
    ContextField {
        path: path.into(),
        ty,
        optional,
        doc: None,
        provenance: own.into(),
    }
}

/// A minimal application pack, for registry tests that only need distinct artifacts.
pub fn artifact(name: &str, version: &str) -> Artifact {
    let own = format!("{name}@{version}");
    Artifact {
        format: ARTIFACT_FORMAT.into(),
        name: name.into(),
        version: version.into(),
        library: false,
        description: Some("A test pack.".into()),
        compiler: Compiler {
            name: "ctxpack".into(),
            version: "0.1.0".into(),
        },
        dependencies: vec![],
        context: vec![field("user.tier", Type::String, false, &own)],
        prompts: Some(Prompts {
            system: tpl("You help {{ ctx.user.tier }} customers."),
            developer: None,
        }),
        budget: Some(Budget {
            total: 1000,
            tokenizer: Tokenizer::Approx,
            buckets: vec![bucket("evidence", 100, 10, Overflow::Drop)],
        }),
        tools: vec![tool(
            "lookup_order",
            "Fetch an order.",
            Risk::Low,
            Approval::Auto,
            &own,
        )],
        prohibitions: vec![],
        intents: vec![intent(
            "general",
            SafetyMode::Autonomous,
            &["lookup_order"],
            "Help.",
            true,
        )],
        redactors: vec![],
        policies: vec![],
        blocks: vec![],
        session: None,
        hash: None,
    }
}

/// A library pack: shared definitions, no prompts, budget or intents.
pub fn library(name: &str, version: &str) -> Artifact {
    let own = format!("{name}@{version}");
    Artifact {
        library: true,
        prompts: None,
        budget: None,
        intents: vec![],
        redactors: vec![Redactor {
            name: "email".into(),
            pattern: "[^@\\s]+@[^@\\s]+".into(),
            doc: None,
            provenance: own,
        }],
        ..artifact(name, version)
    }
}

/// Seals an artifact: the hash filled in, as `build` leaves it.
pub fn sealed(mut artifact: Artifact) -> Artifact {
    artifact.hash = Some(artifact.seal().1);
    artifact
}

/// `acme/support@1.0.0`: the language spec's support pack, lowered by hand.
pub fn support_v1() -> Artifact {
    support("1.0.0")
}

fn support(version: &str) -> Artifact {
    let own = format!("acme/support@{version}");
    let own = own.as_str();
    let mut policies = vec![
        policy(
            "minors_refused",
            100,
            json!({"<": [{"var": "ctx.user.age"}, 18]}),
            vec![Effect::Refuse("We cannot serve minors.".into())],
            own,
        ),
        policy(
            "large_refunds",
            80,
            json!({"and": [{"===": [{"var": "request.intent"}, "refund"]},
                           {">": [{"var": "ctx.order.total"}, 500]}]}),
            vec![
                Effect::RequireApproval(vec!["issue_refund".into()]),
                Effect::Instruct(tpl("Tell the customer that large refunds are reviewed.")),
            ],
            own,
        ),
        policy(
            "pii",
            0,
            json!(true),
            vec![Effect::Redact(vec!["email".into()])],
            BASE,
        ),
    ];
    policies.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
    Artifact {
        format: ARTIFACT_FORMAT.into(),
        name: "acme/support".into(),
        version: version.into(),
        library: false,
        description: Some("ACME's customer support agent.".into()),
        compiler: Compiler {
            name: "ctxpack".into(),
            version: "0.1.0".into(),
        },
        dependencies: vec![Dependency {
            name: "acme/base-safety".into(),
            version: "2.1.0".into(),
            hash: format!("blake3:{}", "ab".repeat(32)),
        }],
        context: vec![
            field("order.id", Type::String, true, own),
            field("user.age", Type::Int, false, own),
            field(
                "user.tier",
                Type::Enum {
                    variants: vec!["free".into(), "pro".into(), "enterprise".into()],
                },
                false,
                own,
            ),
        ],
        prompts: Some(Prompts {
            system: tpl("You are ACME's support assistant.\n\
                 Be brief and polite.\n\
                 Reply in {{ request.locale }}.\n\
                 Never promise a refund before it is issued.\n"),
            developer: Some(tpl("Cite evidence by its id.\n")),
        }),
        budget: Some(Budget {
            total: 8000,
            tokenizer: Tokenizer::O200k,
            buckets: vec![
                bucket("evidence", 50, 50, Overflow::Truncate),
                bucket("history", 30, 30, Overflow::Drop),
                bucket("policy", 20, 90, Overflow::Error),
            ],
        }),
        tools: vec![
            tool(
                "issue_refund",
                "Refund an order, up to its total.",
                Risk::High,
                Approval::Confirm,
                own,
            ),
            tool(
                "lookup_order",
                "Fetch an order by its id.",
                Risk::Low,
                Approval::Auto,
                own,
            ),
        ],
        prohibitions: vec![Prohibition {
            tool: "close_account".into(),
            provenance: BASE.into(),
        }],
        intents: vec![
            intent(
                "general",
                SafetyMode::Autonomous,
                &["lookup_order"],
                "Answer the customer's question.\n",
                true,
            ),
            intent(
                "refund",
                SafetyMode::Supervised,
                &["lookup_order", "issue_refund"],
                "Look up order {{ ctx.order.id }}.\nRefund it if it is eligible.\n",
                false,
            ),
        ],
        redactors: vec![Redactor {
            name: "email".into(),
            pattern: "[^@\\s]+@[^@\\s]+".into(),
            doc: None,
            provenance: BASE.into(),
        }],
        policies,
        blocks: vec![Block {
            name: "tone".into(),
            bucket: "policy".into(),
            priority: 10,
            text: tpl("Stay calm and factual.\n"),
            doc: None,
            provenance: own.into(),
        }],
        session: None,
        hash: None,
    }
}

/// `acme/support@1.1.0`: refunds need review, a new escalation tool, the minors policy
/// moved out (removed), evidence and history shares rebalanced, a changed system
/// prompt and refund task, and a new context field.
pub fn support_v1_1() -> Artifact {
    let mut a = support("1.1.0");
    let own = "acme/support@1.1.0";
    a.description = Some("ACME's customer support agent, with escalation.".into());
    let refund = &mut a.tools[0];
    refund.approval = Approval::Review;
    refund.description = "Refund an order, up to its total, after review.".into();
    a.tools.insert(
        0,
        tool(
            "escalate_ticket",
            "Hand the conversation to a human agent.",
            Risk::Medium,
            Approval::Confirm,
            own,
        ),
    );
    a.policies.retain(|p| p.name != "minors_refused");
    if let Some(p) = a.policies.iter_mut().find(|p| p.name == "large_refunds") {
        p.when = json!({"and": [{"===": [{"var": "request.intent"}, "refund"]},
                                {">": [{"var": "ctx.order.total"}, 250]}]});
    }
    if let Some(budget) = &mut a.budget {
        budget.buckets[0].share_ppm = 45 * PPM / 100;
        budget.buckets[1].share_ppm = 35 * PPM / 100;
    }
    if let Some(prompts) = &mut a.prompts {
        prompts.system = tpl("You are ACME's support assistant.\n\
             Be brief, polite and precise.\n\
             Reply in {{ request.locale }}.\n\
             Never promise a refund before it is issued.\n\
             Offer a human agent when the customer asks for one.\n");
    }
    let refund_intent = &mut a.intents[1];
    refund_intent.tools.push("escalate_ticket".into());
    refund_intent.task = tpl(
        "Look up order {{ ctx.order.id }}.\nRefund it if it is eligible; escalate otherwise.\n",
    );
    a.context
        .insert(1, field("order.total", Type::Float, true, own));
    a
}
