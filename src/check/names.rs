//! E0102: references to tools, redactors and buckets that no item declares.

use crate::diagnostic::{nearest, Diagnostic};
use crate::ir::{EffectIr, NameRef, Pack, SymbolKind};

pub fn check(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    for intent in &pack.intents {
        for tool in &intent.tools {
            resolve(pack, SymbolKind::Tool, tool, diags);
        }
        // Without a budget (missing, or one that did not parse) the buckets are
        // unknown: the budget's own diagnostic is the mistake, as for blocks below.
        if let (Some(b), Some(_)) = (&intent.budget, &pack.budget) {
            for (bucket, _) in &b.overrides {
                resolve(pack, SymbolKind::Bucket, bucket, diags);
            }
        }
    }
    for tool in &pack.prohibitions {
        resolve(pack, SymbolKind::Tool, tool, diags);
    }
    for policy in &pack.policies {
        for effect in &policy.effects {
            let (kind, names) = match effect {
                EffectIr::RequireApproval(n) | EffectIr::Deny(n) => (SymbolKind::Tool, n),
                EffectIr::Redact(n) => (SymbolKind::Redactor, n),
                _ => continue,
            };
            for name in names {
                resolve(pack, kind, name, diags);
            }
        }
    }
    // A library's blocks name buckets of the packs that import it.
    if !pack.library && pack.budget.is_some() {
        for block in &pack.blocks {
            resolve(pack, SymbolKind::Bucket, &block.bucket, diags);
        }
    }
}

/// Reports E0102 unless `name` is declared as `kind`.
pub fn resolve(pack: &Pack, kind: SymbolKind, name: &NameRef, diags: &mut Vec<Diagnostic>) -> bool {
    if pack.declares(kind, &name.name) {
        return true;
    }
    // A missing import may declare tools or redactors, never buckets (a library has
    // no budget), so unknown buckets are reported all the same.
    if pack.unresolved_imports && kind != SymbolKind::Bucket {
        return false;
    }
    let mut d = Diagnostic::new(
        "E0102",
        name.span,
        format!("unknown {} `{}`", kind.as_str(), name.name),
    )
    .with_label(format!("no {} of this name", kind.as_str()));
    match nearest(&name.name, pack.names(kind)) {
        Some(best) => d = d.with_suggestion(name.span, best),
        None => {
            d = d.with_help(match kind {
                SymbolKind::Tool => "declare it with `tool NAME { ... }`",
                SymbolKind::Redactor => "declare it with `redactor NAME pattern \"...\"`",
                SymbolKind::Bucket => "declare it in the budget: `bucket NAME { share 10% }`",
                _ => "declare it first",
            })
        }
    }
    diags.push(d);
    false
}
