//! IR → the pinned `ctxpack.pack/v1` artifact.
//!
//! Lowering is total over a checked pack (no errors): every collection is emitted in
//! a documented order so that the same source always gives the same bytes, wherever
//! and whenever it is built. Items brought in by imports keep their provenance.

use crate::artifact::*;
use crate::ir::{self, EffectIr, Pack, TemplateIr};

/// The toolchain that builds artifacts, recorded in each one.
pub fn compiler() -> Compiler {
    Compiler {
        name: "ctxpack".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Lowers a checked pack. `dependencies` are the resolved imports, transitively.
/// Every collection is sorted (see the artifact format), so the same pack gives the
/// same bytes.
pub fn lower(pack: &Pack, dependencies: Vec<Dependency>) -> Artifact {
    let origin = Origin {
        pack,
        own: pack.provenance(),
    };
    let mut dependencies = dependencies;
    dependencies.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    dependencies.dedup();
    Artifact {
        format: ARTIFACT_FORMAT.to_owned(),
        name: pack.name.clone(),
        version: pack.version.clone(),
        library: pack.library,
        description: pack.description.clone(),
        compiler: compiler(),
        dependencies,
        context: context(pack, &origin),
        prompts: prompts(pack),
        budget: budget(pack),
        tools: tools(pack, &origin),
        prohibitions: prohibitions(pack, &origin),
        intents: intents(pack),
        redactors: redactors(pack, &origin),
        policies: policies(pack, &origin),
        blocks: blocks(pack, &origin),
        session: pack
            .session
            .map(|_| crate::artifact::Session { directives: true }),
        hash: None,
    }
}

/// Where an item came from: the pack that defined it, `scope/name@version`.
struct Origin<'a> {
    pack: &'a Pack,
    /// This pack's own provenance.
    own: String,
}

impl Origin<'_> {
    fn of(&self, kind: ir::SymbolKind, name: &str) -> String {
        self.pack
            .origins
            .get(&(kind, name.to_owned()))
            .cloned()
            .unwrap_or_else(|| self.own.clone())
    }
}

fn context(pack: &Pack, origin: &Origin<'_>) -> Vec<ContextField> {
    let mut context: Vec<ContextField> = pack
        .fields
        .iter()
        .map(|f| ContextField {
            path: String::from(&*f.path),
            ty: f.ty.to_artifact(),
            optional: f.optional,
            doc: f.doc.clone(),
            provenance: origin.of(ir::SymbolKind::Field, &f.path),
        })
        .collect();
    context.sort_by(|a, b| a.path.cmp(&b.path));
    context
}

fn prompts(pack: &Pack) -> Option<Prompts> {
    if pack.library {
        None
    } else {
        pack.system.as_ref().map(|s| Prompts {
            system: template(s),
            developer: pack.developer.as_ref().map(template),
        })
    }
}

fn budget(pack: &Pack) -> Option<Budget> {
    if pack.library {
        None
    } else {
        pack.budget.as_ref().map(|b| {
            let mut buckets: Vec<Bucket> = b
                .buckets
                .iter()
                .map(|bk| Bucket {
                    name: bk.name.clone(),
                    share_ppm: bk.share_ppm.unwrap_or(0),
                    priority: bk.priority,
                    min: bk.min.map_or(0, |(m, _)| m.max(0) as u64),
                    overflow: bk.overflow,
                })
                .collect();
            buckets.sort_by(|a, b| a.name.cmp(&b.name));
            Budget {
                total: b.total.map_or(0, |(t, _)| t.max(0) as u64),
                tokenizer: b.tokenizer,
                buckets,
            }
        })
    }
}

fn tools(pack: &Pack, origin: &Origin<'_>) -> Vec<Tool> {
    let mut tools: Vec<Tool> = pack
        .tools
        .iter()
        .map(|t| tool(t, origin.of(ir::SymbolKind::Tool, &t.name)))
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// One tool as the artifact holds it.
pub(crate) fn tool(t: &ir::ToolIr, provenance: String) -> Tool {
    Tool {
        name: t.name.clone(),
        description: t.description.clone().unwrap_or_default(),
        kind: t.kind.clone().unwrap_or_default(),
        risk: t.risk.map_or(Risk::Low, |(r, _)| r),
        approval: t.approval.map_or(Approval::Review, |(a, _)| a),
        input: serde_json::Value::clone(&t.input),
        doc: t.doc.clone(),
        provenance,
    }
}

fn prohibitions(pack: &Pack, origin: &Origin<'_>) -> Vec<Prohibition> {
    let mut prohibitions: Vec<Prohibition> = pack
        .prohibitions
        .iter()
        .map(|p| Prohibition {
            tool: p.name.to_string(),
            provenance: pack
                .prohibition_origins
                .get(&*p.name)
                .cloned()
                .unwrap_or_else(|| origin.own.clone()),
        })
        .collect();
    prohibitions.sort_by(|a, b| (&a.tool, &a.provenance).cmp(&(&b.tool, &b.provenance)));
    prohibitions.dedup_by(|a, b| a.tool == b.tool);
    prohibitions
}

fn intents(pack: &Pack) -> Vec<Intent> {
    let mut intents: Vec<Intent> = if pack.library {
        Vec::new()
    } else {
        pack.intents
            .iter()
            .map(|i| Intent {
                name: i.name.clone(),
                description: i.description.clone(),
                safety: i.safety,
                tools: i.tools.iter().map(|t| t.name.to_string()).collect(),
                task: i.task.as_ref().map(template).unwrap_or(Template {
                    text: String::new(),
                    parts: Vec::new(),
                }),
                budget: i
                    .budget
                    .iter()
                    .flat_map(|b| b.overrides.iter())
                    .map(|(n, s)| (n.name.to_string(), *s))
                    .collect(),
                fallback: i.fallback,
                doc: i.doc.clone(),
            })
            .collect()
    };
    intents.sort_by(|a, b| a.name.cmp(&b.name));
    intents
}

fn redactors(pack: &Pack, origin: &Origin<'_>) -> Vec<Redactor> {
    let mut redactors: Vec<Redactor> = pack
        .redactors
        .iter()
        .map(|r| Redactor {
            name: r.name.clone(),
            pattern: r.pattern.clone(),
            doc: r.doc.clone(),
            provenance: origin.of(ir::SymbolKind::Redactor, &r.name),
        })
        .collect();
    redactors.sort_by(|a, b| a.name.cmp(&b.name));
    redactors
}

fn policies(pack: &Pack, origin: &Origin<'_>) -> Vec<Policy> {
    let mut policies: Vec<Policy> = pack
        .policies
        .iter()
        .map(|p| Policy {
            name: p.name.clone(),
            priority: p.priority,
            enforcing: !p.advisory,
            when: serde_json::Value::clone(&p.when),
            effects: p
                .effects
                .iter()
                .map(|e| match e {
                    EffectIr::Refuse(s) => Effect::Refuse(s.clone()),
                    EffectIr::Escalate(s) => Effect::Escalate(s.clone()),
                    EffectIr::RequireApproval(n) => Effect::RequireApproval(names(n)),
                    EffectIr::Deny(n) => Effect::Deny(names(n)),
                    EffectIr::Redact(n) => Effect::Redact(names(n)),
                    EffectIr::Instruct(t) => Effect::Instruct(template(t)),
                })
                .collect(),
            bundle: origin.of(ir::SymbolKind::Policy, &p.name),
            doc: p.doc.clone(),
        })
        .collect();
    policies.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.name.cmp(&b.name))
    });
    policies
}

fn blocks(pack: &Pack, origin: &Origin<'_>) -> Vec<Block> {
    let mut blocks: Vec<Block> = pack
        .blocks
        .iter()
        .map(|b| Block {
            name: b.name.clone(),
            bucket: b.bucket.name.to_string(),
            priority: b.priority,
            text: template(&b.text),
            doc: b.doc.clone(),
            provenance: origin.of(ir::SymbolKind::Block, &b.name),
        })
        .collect();
    blocks.sort_by(|a, b| a.name.cmp(&b.name));
    blocks
}

pub(crate) fn template(t: &TemplateIr) -> Template {
    Template {
        text: t.text.to_string(),
        parts: t.parts.to_vec(),
    }
}

fn names(n: &[ir::NameRef]) -> Vec<String> {
    n.iter().map(|r| r.name.to_string()).collect()
}
