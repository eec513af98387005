//! Reusing the policy analysis of an earlier version of a file.
//!
//! The policy analysis ([`crate::analysis`]) is the costliest check and the one an
//! edit least often concerns: it reads the pack's policies, intents, tools and
//! context fields, but not descriptions, tasks, prompts, blocks or the budget. When
//! an edit leaves everything the analysis reads as it was (the same values, at the
//! same places once the edit's shift is undone), the earlier run's diagnostics are
//! the answer, moved by the edit. [`same_analysis_input`] is that comparison; it is
//! deliberately wider than what the analysis reads today, so that a later change to
//! the analysis cannot make a reuse stale without a test noticing (the property test
//! in `tests/reparse.rs` compares every incremental check with a full one).

use std::sync::Arc;

use crate::diagnostic::Diagnostic;
use crate::ir::{
    Definition, EffectIr, Field, IntentIr, NameRef, Pack, PolicyIr, TemplateIr, ToolIr,
};
use crate::span::{Span, TextEdit};

/// Moves every span of `diagnostics` (of the old text) by `edit`; `None` when one of
/// them touches the replaced text.
pub fn moved<'a>(
    diagnostics: impl IntoIterator<Item = &'a Diagnostic>,
    edit: &TextEdit,
) -> Option<Vec<Diagnostic>> {
    diagnostics
        .into_iter()
        .map(|d| {
            let mut d = d.clone();
            d.span = edit.forward(d.span)?;
            for l in &mut d.labels {
                l.span = edit.forward(l.span)?;
            }
            if let Some(s) = &mut d.suggestion {
                s.span = edit.forward(s.span)?;
            }
            Some(d)
        })
        .collect()
}

/// Is everything the policy analysis may read the same in `new` (a pack of the new
/// text) as in `old` (of the old text), spans moved by `edit` included?
pub fn same_analysis_input(old: &Pack, new: &Pack, edit: &TextEdit) -> bool {
    let e = edit;
    old.name == new.name
        && old.version == new.version
        && old.library == new.library
        && same_place(e, old.header_span, new.header_span)
        && old.unresolved_imports == new.unresolved_imports
        && old.unresolved_fields == new.unresolved_fields
        && old.fields_unknown == new.fields_unknown
        && old.field_holes == new.field_holes
        && opt_place(e, old.session, new.session)
        && old.origins == new.origins
        && old.prohibition_origins == new.prohibition_origins
        && all(&old.broken, &new.broken, |a, b| definition(e, a, b))
        && all(&old.fields, &new.fields, |a, b| field(e, a, b))
        && all(&old.prohibitions, &new.prohibitions, |a, b| {
            name_ref(e, a, b)
        })
        && all(&old.tools, &new.tools, |a, b| tool(e, a, b))
        && all(&old.intents, &new.intents, |a, b| intent(e, a, b))
        && all(&old.policies, &new.policies, |a, b| policy(e, a, b))
}

/// Does the span `new` (of the new text) stand where `old` (of the old text) did,
/// over the same text?
fn same_place(e: &TextEdit, old: Span, new: Span) -> bool {
    e.forward(old) == Some(new)
}

fn all<T>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

fn opt_place(e: &TextEdit, a: Option<Span>, b: Option<Span>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_place(e, a, b),
        _ => false,
    }
}

fn definition(e: &TextEdit, a: &Definition, b: &Definition) -> bool {
    a.kind == b.kind && a.name == b.name && same_place(e, a.span, b.span)
}

fn name_ref(e: &TextEdit, a: &NameRef, b: &NameRef) -> bool {
    a.name == b.name && same_place(e, a.span, b.span)
}

fn field(e: &TextEdit, a: &Field, b: &Field) -> bool {
    a.path == b.path && a.ty == b.ty && a.optional == b.optional && same_place(e, a.span, b.span)
}

/// Descriptions and doc comments aside: the analysis says nothing about them.
fn tool(e: &TextEdit, a: &ToolIr, b: &ToolIr) -> bool {
    a.name == b.name
        && same_place(e, a.name_span, b.name_span)
        && a.kind == b.kind
        && opt_place(e, a.kind_span, b.kind_span)
        && a.risk.map(|r| r.0) == b.risk.map(|r| r.0)
        && opt_place(e, a.risk.map(|r| r.1), b.risk.map(|r| r.1))
        && a.approval.map(|r| r.0) == b.approval.map(|r| r.0)
        && opt_place(e, a.approval.map(|r| r.1), b.approval.map(|r| r.1))
        && (Arc::ptr_eq(&a.input, &b.input) || a.input == b.input)
}

/// Descriptions, tasks, budgets and doc comments aside.
fn intent(e: &TextEdit, a: &IntentIr, b: &IntentIr) -> bool {
    a.name == b.name
        && same_place(e, a.name_span, b.name_span)
        && a.fallback == b.fallback
        && a.safety == b.safety
        && all(&a.tools, &b.tools, |x, y| name_ref(e, x, y))
}

/// Doc comments aside.
fn policy(e: &TextEdit, a: &PolicyIr, b: &PolicyIr) -> bool {
    policy_with(e, a, b, |x, y| template(e, x, y))
}

/// [`policy`], with `instruct` templates compared by `instruct`.
fn policy_with(
    e: &TextEdit,
    a: &PolicyIr,
    b: &PolicyIr,
    instruct: impl Fn(&TemplateIr, &TemplateIr) -> bool,
) -> bool {
    a.name == b.name
        && same_place(e, a.name_span, b.name_span)
        && a.priority == b.priority
        && a.advisory == b.advisory
        && (Arc::ptr_eq(&a.when, &b.when) || a.when == b.when)
        && same_place(e, a.when_span, b.when_span)
        && all(&a.effects, &b.effects, |x, y| effect(e, x, y, &instruct))
}

fn effect(
    e: &TextEdit,
    a: &EffectIr,
    b: &EffectIr,
    instruct: &dyn Fn(&TemplateIr, &TemplateIr) -> bool,
) -> bool {
    match (a, b) {
        (EffectIr::Refuse(x), EffectIr::Refuse(y))
        | (EffectIr::Escalate(x), EffectIr::Escalate(y)) => x == y,
        (EffectIr::RequireApproval(x), EffectIr::RequireApproval(y))
        | (EffectIr::Deny(x), EffectIr::Deny(y))
        | (EffectIr::Redact(x), EffectIr::Redact(y)) => all(x, y, |p, q| name_ref(e, p, q)),
        (EffectIr::Instruct(x), EffectIr::Instruct(y)) => instruct(x, y),
        _ => false,
    }
}

fn template(e: &TextEdit, a: &TemplateIr, b: &TemplateIr) -> bool {
    a.text == b.text && a.parts == b.parts && same_place(e, a.span, b.span)
}

/// The diagnostics of a text in which an edit changed one item alone: item `k` of
/// `checked`, reparsed as `item` ([`crate::syntax::reparse_item`]). Its body is
/// built again against `checked`'s declarations (the edit left its name where it
/// was, so they are the same) and every other diagnostic is moved by the edit.
/// `None` when that is not the answer: the item is not a tool, (not `fallback`)
/// intent, policy, redactor or block that an earlier body could be reused for; its
/// new IR differs from the old in something the checks over the whole pack read
/// ([`same_for_checks`]); an error appears in its body's diagnostics or leaves them
/// (an error anywhere decides whether the policy analysis runs); or a diagnostic
/// touches the edit.
pub fn one_item_edited(
    checked: &crate::check::Checked,
    k: usize,
    item: &crate::syntax::ast::Item,
    edit: &TextEdit,
) -> Option<Vec<Diagnostic>> {
    let (old, old_diagnostics) = crate::ir::old_item(&checked.pack, k)?;
    let (new, mut diagnostics) = crate::ir::item_alone(&checked.pack, item)?;
    let error = |d: &[Diagnostic]| d.iter().any(Diagnostic::is_error);
    let same = same_for_checks(&checked.pack, edit, old, &new);
    if !same || error(old_diagnostics) != error(&diagnostics) {
        return None;
    }
    // The item's old body diagnostics, each matched to one of the check's.
    let all_old = &checked.diagnostics;
    let mut body = vec![false; all_old.len()];
    for d in old_diagnostics {
        let at = (0..all_old.len()).find(|&i| !body[i] && all_old[i] == *d)?;
        body[at] = true;
    }
    let others = all_old.iter().zip(&body).filter(|(_, b)| !**b);
    let mut all = moved(others.map(|(d, _)| d), edit)?;
    all.append(&mut diagnostics);
    crate::check::sort(&mut all);
    Some(all)
}

/// Is everything the checks over the whole pack (names, safety, budget, redactors,
/// the policy analysis) read of an item the same in `new` as in `old`, spans moved
/// by the edit? What they do not read: a tool's description beyond whether it is
/// blank, an intent's description, a block's text, a policy's `instruct` text, doc
/// comments; and an intent's task beyond its length, which the fixed-text check
/// (E0504) needs only when the prompts and the longest task, counted in bytes, do
/// not fit the total (`old` is an item of `pack`). Like [`same_analysis_input`],
/// held to a full check by the property test in `tests/reparse.rs`.
fn same_for_checks(
    pack: &Pack,
    e: &TextEdit,
    old: crate::ir::ItemRef<'_>,
    new: &crate::ir::ItemIr,
) -> bool {
    use crate::ir::{ItemIr, ItemRef};
    let blank = |d: &Option<String>| d.as_deref().is_none_or(|d| d.trim().is_empty());
    match (old, new) {
        (ItemRef::Tool(a), ItemIr::Tool(b)) => {
            tool(e, a, b) && blank(&a.description) == blank(&b.description)
        }
        (ItemRef::Intent(a), ItemIr::Intent(b)) => {
            let budgets = match (&a.budget, &b.budget) {
                (None, None) => true,
                (Some(x), Some(y)) => {
                    same_place(e, x.keyword, y.keyword)
                        && all(&x.overrides, &y.overrides, |(p, s), (q, t)| {
                            s == t && name_ref(e, p, q)
                        })
                }
                _ => false,
            };
            let tasks = match (&a.task, &b.task) {
                (None, None) => true,
                (Some(x), Some(y)) => {
                    use crate::check::budget::{literal_len, longest_task, tasks_fit};
                    template(e, x, y) || tasks_fit(pack, longest_task(pack).max(literal_len(y)))
                }
                _ => false,
            };
            intent(e, a, b) && tasks && budgets
        }
        (ItemRef::Policy(a), ItemIr::Policy(b)) => policy_with(e, a, b, |_, _| true),
        (ItemRef::Redactor(a), ItemIr::Redactor(b)) => {
            a.name == b.name
                && same_place(e, a.name_span, b.name_span)
                && a.pattern == b.pattern
                && same_place(e, a.pattern_span, b.pattern_span)
        }
        (ItemRef::Block(a), ItemIr::Block(b)) => {
            a.name == b.name
                && same_place(e, a.name_span, b.name_span)
                && name_ref(e, &a.bucket, &b.bucket)
                && a.priority == b.priority
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edited(text: &str, at: usize, old_len: usize, insert: &str) -> (Pack, Pack, TextEdit) {
        let mut new = text.to_owned();
        new.replace_range(at..at + old_len, insert);
        let old = crate::check::check_source(text).pack;
        let fresh = crate::check::check_source(&new).pack;
        (old, fresh, TextEdit::between(text, &new))
    }

    const PACK: &str = include_str!("../../packs/support/support.ctxpack");

    #[test]
    fn a_description_comment_or_bucket_leaves_the_input_as_it_was() {
        let at = PACK.find("description \"").unwrap() + 13;
        let (old, new, edit) = edited(PACK, at, 0, "Quickly ");
        assert!(same_analysis_input(&old, &new, &edit));
        let at = PACK.find("\ntool ").unwrap() + 1;
        let (old, new, edit) = edited(PACK, at, 0, "// a comment\n");
        assert!(same_analysis_input(&old, &new, &edit));
        // The budget is not the analysis's business.
        let at = PACK.find("priority 90").unwrap() + 9;
        let (old, new, edit) = edited(PACK, at, 2, "95");
        assert!(same_analysis_input(&old, &new, &edit));
    }

    #[test]
    fn a_priority_or_a_name_changes_the_input() {
        let policy = PACK.find("\npolicy ").unwrap();
        let at = policy + PACK[policy..].find("priority ").unwrap() + 9;
        let (old, new, edit) = edited(PACK, at, 0, "1");
        assert!(!same_analysis_input(&old, &new, &edit));
        let at = PACK.find("\ntool ").unwrap() + 6;
        let (old, new, edit) = edited(PACK, at, 0, "x");
        assert!(!same_analysis_input(&old, &new, &edit));
    }

    #[test]
    fn a_raised_flag_stops_the_check_and_a_lowered_one_does_not() {
        let run = |raised: bool| {
            let (ast, diagnostics) = crate::syntax::parse(PACK);
            let source = crate::imports::NoSource;
            let stop = || {
                if raised {
                    Err(crate::check::Cancelled)
                } else {
                    Ok(())
                }
            };
            crate::check::check_parsed_reusing(ast, diagnostics, &source, None, None, &stop)
        };
        assert!(matches!(run(true), Err(crate::check::Cancelled)));
        let (checked, _, analysis) = run(false).unwrap_or_else(|_| panic!("not stopped"));
        assert_eq!(
            checked.diagnostics,
            crate::check::check_source(PACK).diagnostics
        );
        assert!(
            analysis.is_some(),
            "the support pack has no errors: the analysis ran"
        );
    }
}
