//! Reusing the item bodies of an earlier build of the same file.
//!
//! Building an item's body (typing its conditions and templates, lowering them to
//! JsonLogic, resolving its references) reads the item and the pack's declarations,
//! nothing else. So when an edit keeps an item as it was (the reparse says which:
//! [`Kept`]) and leaves the declarations as they were, what the earlier build made
//! of that item is the answer, its spans moved by the edit. [`ItemBody`] records
//! what each item added to the pack; [`same_declarations`] is the comparison. The
//! property test in `tests/reparse.rs` holds every incremental build to a build
//! from scratch.

use std::ops::Range;

use super::{
    BlockIr, Definition, EffectIr, IntentBudgetIr, IntentIr, NameRef, Pack, PolicyIr, RedactorIr,
    Reference, TemplateIr, ToolIr,
};
use crate::diagnostic::Diagnostic;
use crate::span::{Span, TextEdit};
use crate::syntax::Kept;

/// An earlier build of the file being built: its pack, the edit from its text to
/// the new one, and which items the reparse kept.
#[derive(Clone, Copy)]
pub struct EarlierBuild<'a> {
    pub pack: &'a Pack,
    pub edit: &'a TextEdit,
    pub kept: Kept,
}

/// Where the pack's lists stood: what an item's body adds lies between two marks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    tools: u32,
    intents: u32,
    policies: u32,
    blocks: u32,
    redactors: u32,
    prohibitions: u32,
    references: u32,
}

/// What building one item's body added to the pack.
#[derive(Debug, Clone, Default)]
pub(crate) struct ItemBody {
    /// Whether the body reads nothing but the item and the declarations (a
    /// singleton, an import or a fallback intent also reads what came before it).
    reusable: bool,
    from: Marks,
    to: Marks,
    /// The body's own diagnostics.
    diagnostics: Vec<Diagnostic>,
}

fn len(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Marks {
    /// Where `pack`'s lists stand now (references still being collected apart).
    pub(crate) fn of(pack: &Pack, references: &[Reference]) -> Marks {
        Marks {
            tools: len(pack.tools.len()),
            intents: len(pack.intents.len()),
            policies: len(pack.policies.len()),
            blocks: len(pack.blocks.len()),
            redactors: len(pack.redactors.len()),
            prohibitions: len(pack.prohibitions.len()),
            references: len(references.len()),
        }
    }

    /// Drops what was added after these marks.
    fn truncate(&self, pack: &mut Pack, references: &mut Vec<Reference>) {
        pack.tools.truncate(self.tools as usize);
        pack.intents.truncate(self.intents as usize);
        pack.policies.truncate(self.policies as usize);
        pack.blocks.truncate(self.blocks as usize);
        pack.redactors.truncate(self.redactors as usize);
        pack.prohibitions.truncate(self.prohibitions as usize);
        references.truncate(self.references as usize);
    }
}

impl ItemBody {
    pub(crate) fn new(reusable: bool, from: Marks, to: Marks, diagnostics: &[Diagnostic]) -> Self {
        ItemBody {
            reusable,
            from,
            to,
            diagnostics: diagnostics.to_vec(),
        }
    }
}

fn range(from: u32, to: u32) -> Range<usize> {
    from as usize..to as usize
}

/// Adds to `new` (and to `references` and `diagnostics`) what item `index` of the
/// earlier build added to its pack, moved by the edit. Adds nothing and returns
/// false when the item cannot be reused: not kept, not reusable, or something it
/// points at touches the edit.
pub(crate) fn reuse_body(
    earlier: &EarlierBuild<'_>,
    index: usize,
    new: &mut Pack,
    references: &mut Vec<Reference>,
    diagnostics: &mut Vec<Diagnostic>,
) -> bool {
    let Some(body) = earlier
        .kept
        .old_index(index)
        .and_then(|j| earlier.pack.bodies.get(j))
        .filter(|b| b.reusable)
    else {
        return false;
    };
    let marks = Marks::of(new, references);
    let copied = copy(earlier.pack, body, earlier.edit, new, references);
    let moved = copied
        .then(|| crate::check::reuse::moved(&body.diagnostics, earlier.edit))
        .flatten();
    match moved {
        Some(moved) => {
            diagnostics.extend(moved);
            true
        }
        None => {
            marks.truncate(new, references);
            false
        }
    }
}

/// Copies the body's items, moved; false at the first span that touches the edit.
fn copy(
    old: &Pack,
    body: &ItemBody,
    e: &TextEdit,
    new: &mut Pack,
    references: &mut Vec<Reference>,
) -> bool {
    let (a, b) = (&body.from, &body.to);
    fn each<T>(from: &[T], into: &mut Vec<T>, f: impl Fn(&T) -> Option<T>) -> bool {
        from.iter().all(|x| f(x).map(|y| into.push(y)).is_some())
    }
    let Some(old_refs) = old.references.get(range(a.references, b.references)) else {
        return false;
    };
    let lists = (
        old.tools.get(range(a.tools, b.tools)),
        old.intents.get(range(a.intents, b.intents)),
        old.policies.get(range(a.policies, b.policies)),
        old.blocks.get(range(a.blocks, b.blocks)),
        old.redactors.get(range(a.redactors, b.redactors)),
        old.prohibitions.get(range(a.prohibitions, b.prohibitions)),
    );
    let (
        Some(tools),
        Some(intents),
        Some(policies),
        Some(blocks),
        Some(redactors),
        Some(prohibitions),
    ) = lists
    else {
        return false;
    };
    each(tools, &mut new.tools, |t| tool(e, t))
        && each(intents, &mut new.intents, |i| intent(e, i))
        && each(policies, &mut new.policies, |p| policy(e, p))
        && each(blocks, &mut new.blocks, |bl| block(e, bl))
        && each(redactors, &mut new.redactors, |r| redactor(e, r))
        && each(prohibitions, &mut new.prohibitions, |n| name_ref(e, n))
        && each(old_refs, references, |r| {
            Some(Reference {
                kind: r.kind,
                name: r.name.clone(),
                span: e.forward(r.span)?,
            })
        })
}

fn opt(e: &TextEdit, s: Option<Span>) -> Option<Option<Span>> {
    match s {
        Some(s) => e.forward(s).map(Some),
        None => Some(None),
    }
}

fn with_span<T: Copy>(e: &TextEdit, x: Option<(T, Span)>) -> Option<Option<(T, Span)>> {
    match x {
        Some((v, s)) => e.forward(s).map(|s| Some((v, s))),
        None => Some(None),
    }
}

fn name_ref(e: &TextEdit, n: &NameRef) -> Option<NameRef> {
    Some(NameRef {
        name: n.name.clone(),
        span: e.forward(n.span)?,
    })
}

fn names(e: &TextEdit, ns: &[NameRef]) -> Option<Vec<NameRef>> {
    ns.iter().map(|n| name_ref(e, n)).collect()
}

fn template(e: &TextEdit, t: &TemplateIr) -> Option<TemplateIr> {
    Some(TemplateIr {
        text: t.text.clone(),
        parts: t.parts.clone(),
        span: e.forward(t.span)?,
    })
}

fn tool(e: &TextEdit, t: &ToolIr) -> Option<ToolIr> {
    Some(ToolIr {
        name: t.name.clone(),
        name_span: e.forward(t.name_span)?,
        description: t.description.clone(),
        kind: t.kind.clone(),
        kind_span: opt(e, t.kind_span)?,
        risk: with_span(e, t.risk)?,
        approval: with_span(e, t.approval)?,
        input: t.input.clone(),
        doc: t.doc.clone(),
    })
}

fn intent(e: &TextEdit, i: &IntentIr) -> Option<IntentIr> {
    let budget = match &i.budget {
        Some(b) => Some(IntentBudgetIr {
            keyword: e.forward(b.keyword)?,
            overrides: b
                .overrides
                .iter()
                .map(|(n, share)| Some((name_ref(e, n)?, *share)))
                .collect::<Option<_>>()?,
        }),
        None => None,
    };
    let task = match &i.task {
        Some(t) => Some(template(e, t)?),
        None => None,
    };
    Some(IntentIr {
        name: i.name.clone(),
        name_span: e.forward(i.name_span)?,
        fallback: i.fallback,
        description: i.description.clone(),
        safety: i.safety,
        tools: names(e, &i.tools)?,
        task,
        budget,
        doc: i.doc.clone(),
    })
}

fn policy(e: &TextEdit, p: &PolicyIr) -> Option<PolicyIr> {
    let effects = p
        .effects
        .iter()
        .map(|x| {
            Some(match x {
                EffectIr::Refuse(s) => EffectIr::Refuse(s.clone()),
                EffectIr::Escalate(s) => EffectIr::Escalate(s.clone()),
                EffectIr::RequireApproval(n) => EffectIr::RequireApproval(names(e, n)?),
                EffectIr::Deny(n) => EffectIr::Deny(names(e, n)?),
                EffectIr::Redact(n) => EffectIr::Redact(names(e, n)?),
                EffectIr::Instruct(t) => EffectIr::Instruct(template(e, t)?),
            })
        })
        .collect::<Option<_>>()?;
    Some(PolicyIr {
        name: p.name.clone(),
        name_span: e.forward(p.name_span)?,
        priority: p.priority,
        advisory: p.advisory,
        when: p.when.clone(),
        when_span: e.forward(p.when_span)?,
        effects,
        doc: p.doc.clone(),
    })
}

fn block(e: &TextEdit, b: &BlockIr) -> Option<BlockIr> {
    Some(BlockIr {
        name: b.name.clone(),
        name_span: e.forward(b.name_span)?,
        bucket: name_ref(e, &b.bucket)?,
        priority: b.priority,
        text: template(e, &b.text)?,
        doc: b.doc.clone(),
    })
}

fn redactor(e: &TextEdit, r: &RedactorIr) -> Option<RedactorIr> {
    Some(RedactorIr {
        name: r.name.clone(),
        name_span: e.forward(r.name_span)?,
        pattern: r.pattern.clone(),
        pattern_span: e.forward(r.pattern_span)?,
        doc: r.doc.clone(),
    })
}

/// Is everything an item's body reads besides the item the same in `new` as in
/// `old`: the declarations (at the same places once the edit is undone), the
/// context's fields and their types, and the pack's flags?
pub(crate) fn same_declarations(old: &Pack, new: &Pack, e: &TextEdit) -> bool {
    let defs = |a: &[Definition], b: &[Definition]| {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                x.kind == y.kind && x.name == y.name && e.forward(x.span) == Some(y.span)
            })
    };
    old.library == new.library
        && old.session.is_some() == new.session.is_some()
        && old.unresolved_imports == new.unresolved_imports
        && old.unresolved_fields == new.unresolved_fields
        && old.fields_unknown == new.fields_unknown
        && old.field_holes == new.field_holes
        && old.broken_intent == new.broken_intent
        && old.origins == new.origins
        && defs(&old.definitions, &new.definitions)
        && defs(&old.broken, &new.broken)
        && defs(&old.duplicates, &new.duplicates)
        && old.fields.len() == new.fields.len()
        && old
            .fields
            .iter()
            .zip(&new.fields)
            .all(|(x, y)| x.path == y.path && x.ty == y.ty && x.optional == y.optional)
}

/// One item of an earlier build, as it is in the pack.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ItemRef<'a> {
    Tool(&'a ToolIr),
    Intent(&'a IntentIr),
    Policy(&'a PolicyIr),
    Redactor(&'a RedactorIr),
    Block(&'a BlockIr),
}

/// What an earlier build made of its item `k`: the one tool, intent, policy,
/// redactor or block it added and the body's own diagnostics. `None` when the body
/// is not reusable (see [`ItemBody`]) or added anything else (nothing, for a
/// duplicate; prohibitions).
pub(crate) fn old_item(pack: &Pack, k: usize) -> Option<(ItemRef<'_>, &[Diagnostic])> {
    let body = pack.bodies.get(k).filter(|b| b.reusable)?;
    let (a, b) = (&body.from, &body.to);
    let added = |from: u32, to: u32| to.checked_sub(from);
    let counts = [
        added(a.tools, b.tools)?,
        added(a.intents, b.intents)?,
        added(a.policies, b.policies)?,
        added(a.redactors, b.redactors)?,
        added(a.blocks, b.blocks)?,
    ];
    if counts.iter().sum::<u32>() != 1 || a.prohibitions != b.prohibitions {
        return None;
    }
    let item = if counts[0] == 1 {
        ItemRef::Tool(pack.tools.get(a.tools as usize)?)
    } else if counts[1] == 1 {
        ItemRef::Intent(pack.intents.get(a.intents as usize)?)
    } else if counts[2] == 1 {
        ItemRef::Policy(pack.policies.get(a.policies as usize)?)
    } else if counts[3] == 1 {
        ItemRef::Redactor(pack.redactors.get(a.redactors as usize)?)
    } else {
        ItemRef::Block(pack.blocks.get(a.blocks as usize)?)
    };
    Some((item, &body.diagnostics))
}
