//! Findings about policies: never fires (W0301), pre-empted by a higher-priority
//! refusal (W0302), fires together with an equal-priority policy whose effects
//! contradict its own (W0303).

use std::collections::BTreeSet;

use serde_json::Value;

use super::bdd::{Exhausted, Node};
use super::fragment::{mentions_var, Term};
use super::model::{Fact, Model};
use super::{escalation, names, refusal, source, Cond, Cx, Union};
use crate::diagnostic::Diagnostic;
use crate::ir::EffectIr;

pub(super) fn check(cx: &mut Cx<'_>, diags: &mut Vec<Diagnostic>) {
    unreachable(cx, diags);
    if let Err(Exhausted) = by_priority(cx, diags) {
        cx.give_up();
    }
}

// ── W0301 ────────────────────────────────────────────────────────────────────────

fn unreachable(cx: &mut Cx<'_>, diags: &mut Vec<Diagnostic>) {
    for &i in &cx.prepared.order {
        let p = cx.policy(i);
        // A condition that reads no field is the checker's W0202.
        if cx.imported(i) || !mentions_var(&p.when) {
            continue;
        }
        if cx.conds[i] == Cond::Known(Node::TRUE) {
            // Every request satisfies it: a constant condition in all but form.
            diags.push(
                Diagnostic::new(
                    "W0202",
                    p.when_span,
                    "condition is constant: the policy always or never fires",
                )
                .with_label("always true, for every request")
                .with_help(format!(
                    "every request satisfies `{}` under the context schema and the \
                     declared intents; write `when true` if policy `{}` is meant to \
                     always apply, or fix the condition",
                    source(&p.when),
                    p.name
                )),
            );
            continue;
        }
        if cx.conds[i] != Cond::Known(Node::FALSE) {
            continue;
        }
        let Some(term) = &cx.prepared.terms[i] else {
            continue;
        };
        let because = explain_impossible(cx, term, &p.when);
        diags.push(
            Diagnostic::new(
                "W0301",
                p.when_span,
                format!(
                    "policy `{}` can never fire: no request satisfies its condition",
                    p.name
                ),
            )
            .with_label("never true")
            .with_help(format!("{because}; fix the condition or delete the policy")),
        );
    }
}

/// Why no request satisfies `term` (whose lowered JSON is `when`): a smallest set of
/// its conjuncts that cannot hold together, and the domain constraints they need.
fn explain_impossible(cx: &mut Cx<'_>, term: &Term, when: &Value) -> String {
    let mut parts = Vec::new();
    conjuncts(term, when, &mut parts);
    let core = core(&mut cx.model, &parts).unwrap_or_else(|_| (0..parts.len()).collect());
    let texts: Vec<String> = core.iter().map(|&k| source(parts[k].1)).collect();
    let mut out = match texts.as_slice() {
        [one] => format!("`{one}` never holds"),
        [a, b] => format!("`{a}` and `{b}` cannot both hold"),
        many => format!("{} cannot all hold", names(many, "and")),
    };
    let core_terms: Vec<&Term> = core.iter().map(|&k| parts[k].0).collect();
    let facts = needed_facts(cx, &core_terms);
    if !facts.is_empty() {
        // One clause per variable: `ctx.tier` is required and one of "a", "b".
        let mut clauses: Vec<String> = Vec::new();
        let mut k = 0;
        while k < facts.len() {
            let var = facts[k].0;
            let mine: Vec<Fact> = facts[k..]
                .iter()
                .take_while(|(v, _)| *v == var)
                .map(|&(_, f)| f)
                .collect();
            k += mine.len();
            clauses.push(facts_text(&cx.prepared.universe.vars[var], &mine));
        }
        out.push_str(", given that ");
        out.push_str(&clauses.join(" and "));
    }
    out
}

/// The top-level conjuncts of a condition, each with its JSON.
fn conjuncts<'t>(term: &'t Term, json: &'t Value, out: &mut Vec<(&'t Term, &'t Value)>) {
    if let (Term::And(items), Some(Value::Array(js))) = (term, json.get("and")) {
        if items.len() == js.len() && json.as_object().is_some_and(|m| m.len() == 1) {
            for (t, j) in items.iter().zip(js) {
                conjuncts(t, j, out);
            }
            return;
        }
    }
    out.push((term, json));
}

/// A smallest subset (by deletion) of `parts` whose conjunction is unsatisfiable.
fn core(model: &mut Model<'_>, parts: &[(&Term, &Value)]) -> Result<Vec<usize>, Exhausted> {
    let nodes: Vec<Node> = parts
        .iter()
        .map(|(t, _)| model.term(t))
        .collect::<Result<_, _>>()?;
    let mut keep: Vec<usize> = (0..parts.len()).collect();
    let mut k = 0;
    while k < keep.len() {
        let mut acc = Node::TRUE;
        for (j, &idx) in keep.iter().enumerate() {
            if j != k {
                acc = model.bdd.and(acc, nodes[idx])?;
            }
        }
        if acc == Node::FALSE {
            keep.remove(k);
        } else {
            k += 1;
        }
    }
    Ok(keep)
}

/// The domain constraints (of the variables `terms` read) without which `terms`
/// could hold together, found by relaxing each in turn.
fn needed_facts(cx: &Cx<'_>, terms: &[&Term]) -> Vec<(usize, Fact)> {
    let u = &cx.prepared.universe;
    let mut vars = BTreeSet::new();
    for t in terms {
        vars_of(t, u, &mut vars);
    }
    let candidates: Vec<(usize, Fact)> = vars
        .iter()
        .flat_map(|&v| Fact::of(&u.vars[v]).into_iter().map(move |f| (v, f)))
        .collect();
    let budget = (cx.limits.max_nodes / 8, cx.limits.max_steps / 8);
    let unsat_with = |relaxed: &[(usize, Fact)]| -> bool {
        let mut m = Model::new(u, relaxed, budget.0, budget.1);
        let mut acc = Node::TRUE;
        for t in terms {
            match m.term(t).and_then(|n| m.bdd.and(acc, n)) {
                Ok(n) => acc = n,
                // Undecided: keep the constraint in the explanation.
                Err(Exhausted) => return false,
            }
        }
        acc == Node::FALSE
    };
    if unsat_with(&candidates) {
        return Vec::new();
    }
    let mut relaxed: Vec<(usize, Fact)> = Vec::new();
    let mut needed = Vec::new();
    for &c in &candidates {
        relaxed.push(c);
        if !unsat_with(&relaxed) {
            relaxed.pop();
            needed.push(c);
        }
    }
    needed
}

fn vars_of(t: &Term, u: &super::fragment::Universe, out: &mut BTreeSet<usize>) {
    match t {
        Term::Const(_) => {}
        Term::Atom(a) => {
            out.insert(u.atoms[*a].var);
        }
        Term::Not(inner) => vars_of(inner, u, out),
        Term::And(items) | Term::Or(items) => items.iter().for_each(|i| vars_of(i, u, out)),
    }
}

/// What `facts` say of one variable, as one clause.
fn facts_text(var: &super::fragment::Var, facts: &[Fact]) -> String {
    use super::fragment::{Elem, VarKind};
    let path = &var.path;
    let quoted = |vs: &[String]| -> String {
        let q: Vec<String> = vs.iter().map(|v| format!("\"{v}\"")).collect();
        q.join(", ")
    };
    let mut predicates: Vec<String> = Vec::new();
    if facts.contains(&Fact::Present) {
        predicates.push(if path.starts_with("ctx.") {
            "is required".to_owned()
        } else {
            "is always set".to_owned()
        });
    }
    for fact in facts {
        let text = match (fact, &var.kind) {
            (Fact::Present, _) => continue,
            (Fact::Variants, VarKind::Enum(vs)) if path == "request.intent" => {
                format!("is one of the declared intents ({})", quoted(vs))
            }
            (Fact::Variants, VarKind::Enum(vs)) => format!("is one of {}", quoted(vs)),
            (Fact::Variants, VarKind::List(Elem::Enum(vs))) => format!("holds only {}", quoted(vs)),
            (Fact::Variants, _) => "takes only its declared values".to_owned(),
            (Fact::Integer, VarKind::List(_)) => "holds only integers".to_owned(),
            (Fact::Integer, _) => "is an integer".to_owned(),
            (Fact::NonBlank, _) => "is never blank".to_owned(),
        };
        predicates.push(text);
    }
    if predicates.len() == 1 && facts == [Fact::Present] && path.starts_with("ctx.") {
        return format!("`{path}` is required, so never null");
    }
    format!("`{path}` {}", predicates.join(" and "))
}

// ── W0302 and W0303 ──────────────────────────────────────────────────────────────

/// Walks the policies a priority at a time, highest first, with the union of the
/// refusals (and of the escalations) of strictly higher priority.
fn by_priority(cx: &mut Cx<'_>, diags: &mut Vec<Diagnostic>) -> Result<(), Exhausted> {
    let order = cx.prepared.order.clone();
    // The refusing and escalating policies of strictly higher priority (known ones),
    // and the unions of their conditions.
    let mut refusers: Vec<usize> = Vec::new();
    let mut refused_nodes: Vec<Node> = Vec::new();
    let mut escalated_nodes: Vec<Node> = Vec::new();
    let mut refused = Union::new();
    let mut escalated = Union::new();
    let mut start = 0;
    while start < order.len() {
        let priority = cx.policy(order[start]).priority;
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| cx.policy(i).priority == priority)
                .count();
        let group = &order[start..end];
        for &i in group {
            if let Err(Exhausted) =
                shadowed(cx, i, refused.parts(), &refused_nodes, &refusers, diags)
            {
                cx.give_up();
            }
        }
        for (a, b) in candidate_pairs(cx, group) {
            let checked = cx
                .model
                .bdd
                .charge()
                .and_then(|()| conflict(cx, a, b, refused.parts(), escalated.parts(), diags));
            if let Err(Exhausted) = checked {
                cx.give_up();
            }
        }
        for &i in group {
            let Some(n) = cx.conds[i].known() else {
                continue;
            };
            if refusal(cx.policy(i)).is_some() {
                refused.push(&mut cx.model.bdd, n, &mut refused_nodes)?;
                refusers.push(i);
            }
            if escalation(cx.policy(i)).is_some() {
                escalated.push(&mut cx.model.bdd, n, &mut escalated_nodes)?;
            }
        }
        start = end;
    }
    Ok(())
}

/// `refused` is the union of the conditions of `refusers` (one diagram, or the list
/// `nodes` of them).
fn shadowed(
    cx: &mut Cx<'_>,
    i: usize,
    refused: &[Node],
    nodes: &[Node],
    refusers: &[usize],
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Exhausted> {
    let Some(n) = cx.conds[i].known() else {
        return Ok(());
    };
    if n == Node::FALSE || nodes.is_empty() || !cx.model.bdd.covered(n, refused)? {
        return Ok(());
    }
    // The refusals that take a part of it, greedily, until they cover it all.
    let mut cover: Vec<usize> = Vec::new();
    let mut cover_nodes: Vec<Node> = Vec::new();
    for (&r, &rn) in refusers.iter().zip(nodes) {
        let part = cx.model.bdd.and(n, rn)?;
        if !cx.model.bdd.covered(part, &cover_nodes)? {
            cover.push(r);
            cover_nodes.push(rn);
            if cx.model.bdd.covered(n, &cover_nodes)? {
                break;
            }
        }
    }
    // Then a smallest covering set, by deletion (for the few refusals a cover has).
    if cover.len() <= 8 {
        let mut k = 0;
        while k < cover.len() && cover.len() > 1 {
            let others: Vec<Node> = cover_nodes
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != k)
                .map(|(_, &r)| r)
                .collect();
            if cx.model.bdd.covered(n, &others)? {
                cover.remove(k);
                cover_nodes.remove(k);
            } else {
                k += 1;
            }
        }
    }
    let Some(&first_node) = cover_nodes.first() else {
        return Ok(());
    };
    if cx.imported(i) && cover.iter().all(|&r| cx.imported(r)) {
        return Ok(());
    }
    let both = cx.model.bdd.and(n, first_node)?;
    let witness = cx.witness(both);
    let p = cx.policy(i);
    let cover_names: Vec<&str> = cover.iter().map(|&r| cx.policy(r).name.as_str()).collect();
    let top = cover
        .iter()
        .map(|&r| cx.policy(r).priority)
        .max()
        .unwrap_or(p.priority);
    let mut d = Diagnostic::new(
        "W0302",
        p.name_span,
        format!(
            "policy `{}` is shadowed: whenever it fires, {} refuses at a higher priority",
            p.name,
            names(&cover_names, "or")
        ),
    )
    .with_label("its effects never apply");
    for &r in &cover {
        let rp = cx.policy(r);
        d = d.with_secondary(
            rp.name_span,
            format!("refuses first (priority {})", rp.priority),
        );
    }
    let by = if cover.len() == 1 {
        format!("`{}`", cover_names[0])
    } else {
        format!("one of {}", names(&cover_names, "and"))
    };
    diags.push(
        d.with_help(format!(
            "every request that satisfies `{}`'s condition is refused by {by}; for example \
             {}, where `{}` and `{}` both fire. Raise `{}`'s priority above {top}, narrow the \
             refusal, or delete `{}`",
            p.name,
            witness.text(),
            p.name,
            cover_names[0],
            p.name,
            p.name
        ))
        .with_witness(witness.to_json()),
    );
    Ok(())
}

/// The pairs of a priority group whose effects contradict (different refusal
/// reasons or escalation targets, a gate on a tool the other denies), each in
/// evaluation order, without looking at the pairs that agree.
fn candidate_pairs(cx: &Cx<'_>, group: &[usize]) -> Vec<(usize, usize)> {
    use std::collections::BTreeMap;
    let mut pairs = BTreeSet::new();
    let mut add = |x: usize, y: usize| {
        let (a, b) = if cx.prepared.rank[x] < cx.prepared.rank[y] {
            (x, y)
        } else {
            (y, x)
        };
        pairs.insert((cx.prepared.rank[a], a, b));
    };
    for effect in [
        refusal as fn(&crate::ir::PolicyIr) -> Option<&str>,
        escalation,
    ] {
        let mut by_value: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in group {
            if let Some(v) = effect(cx.policy(i)) {
                by_value.entry(v).or_default().push(i);
            }
        }
        let classes: Vec<&Vec<usize>> = by_value.values().collect();
        for (k, xs) in classes.iter().enumerate() {
            for ys in &classes[k + 1..] {
                for &x in xs.iter() {
                    for &y in ys.iter() {
                        add(x, y);
                    }
                }
            }
        }
    }
    let mut gates: BTreeMap<&str, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for &i in group {
        for e in &cx.policy(i).effects {
            let (tools, deny) = match e {
                EffectIr::Deny(tools) => (tools, true),
                EffectIr::RequireApproval(tools) => (tools, false),
                _ => continue,
            };
            for t in tools {
                let entry = gates.entry(t.name.as_ref()).or_default();
                if deny {
                    entry.1.push(i);
                } else {
                    entry.0.push(i);
                }
            }
        }
    }
    for (raisers, deniers) in gates.values() {
        for &r in raisers {
            for &d in deniers {
                if r != d {
                    add(r, d);
                }
            }
        }
    }
    let mut pairs: Vec<(usize, usize, usize)> = pairs.into_iter().collect();
    pairs.sort_by_key(|&(ra, _, b)| (ra, cx.prepared.rank[b]));
    pairs.into_iter().map(|(_, a, b)| (a, b)).collect()
}

/// One way two equal-priority policies contradict each other.
enum Clash<'p> {
    Refusals,
    Escalations(&'p str, &'p str),
    /// `(tool, raiser, denier)`.
    Gate(String, &'p str, &'p str),
}

/// `a` comes before `b` in evaluation order (same priority, `a`'s name first).
fn conflict(
    cx: &mut Cx<'_>,
    a: usize,
    b: usize,
    refused: &[Node],
    escalated: &[Node],
    diags: &mut Vec<Diagnostic>,
) -> Result<(), Exhausted> {
    let (pa, pb) = (cx.policy(a), cx.policy(b));
    let mut clashes = Vec::new();
    if let (Some(ra), Some(rb)) = (refusal(pa), refusal(pb)) {
        if ra != rb {
            clashes.push(Clash::Refusals);
        }
    }
    if let (Some(ea), Some(eb)) = (escalation(pa), escalation(pb)) {
        if ea != eb {
            clashes.push(Clash::Escalations(ea, eb));
        }
    }
    for (raiser, denier) in [(pa, pb), (pb, pa)] {
        for e in &raiser.effects {
            let EffectIr::RequireApproval(tools) = e else {
                continue;
            };
            for t in tools {
                if super::denies(denier, &t.name)
                    && !clashes
                        .iter()
                        .any(|c| matches!(c, Clash::Gate(x, ..) if **x == *t.name))
                {
                    clashes.push(Clash::Gate(t.name.to_string(), &raiser.name, &denier.name));
                }
            }
        }
    }
    if clashes.is_empty() || (cx.imported(a) && cx.imported(b)) {
        return Ok(());
    }
    let (Some(na), Some(nb)) = (cx.conds[a].known(), cx.conds[b].known()) else {
        return Ok(());
    };
    if !cx.model.bdd.meets(na, nb)? {
        return Ok(());
    }
    let both = cx.model.bdd.and(na, nb)?;
    // A clash matters only where no higher-priority policy already decides it: a
    // refusal decides refusals (and makes a gate moot), an escalation escalations.
    let mut shown = Vec::new();
    let mut witness = None;
    for clash in clashes {
        let decided = match clash {
            Clash::Escalations(..) => escalated,
            _ => refused,
        };
        if let Some(w) = cx.model.witness_avoiding(both, decided)? {
            witness.get_or_insert(w);
            shown.push(clash);
        }
    }
    let Some(witness) = witness else {
        return Ok(());
    };
    let consequences: Vec<String> = shown
        .iter()
        .map(|c| match c {
            Clash::Refusals => format!(
                "the refusal reason is `{}`'s only because `{}` sorts first by name",
                pa.name, pa.name
            ),
            Clash::Escalations(ta, tb) => format!(
                "the request escalates to \"{ta}\" rather than \"{tb}\" only because `{}` sorts first by name",
                pa.name
            ),
            Clash::Gate(tool, raiser, denier) => format!(
                "`{denier}` denies `{tool}`, so `{raiser}`'s approval gate on it never applies"
            ),
        })
        .collect();
    let what: Vec<String> = shown
        .iter()
        .map(|c| match c {
            Clash::Refusals => "different refusal reasons".to_owned(),
            Clash::Escalations(..) => "different escalation targets".to_owned(),
            Clash::Gate(tool, raiser, denier) => {
                format!("`{raiser}` requires approval for `{tool}`, which `{denier}` denies")
            }
        })
        .collect();
    // The diagnostic sits on the one written later; the other is a secondary label.
    let (here, there) = if pb.name_span.start >= pa.name_span.start {
        (pb, pa)
    } else {
        (pa, pb)
    };
    diags.push(
        Diagnostic::new(
            "W0303",
            here.name_span,
            format!(
                "policies `{}` and `{}` (priority {}) can fire together with contradictory effects: {}",
                pa.name,
                pb.name,
                pa.priority,
                what.join("; ")
            ),
        )
        .with_label(format!("conflicts with `{}`", there.name))
        .with_secondary(there.name_span, "fires together with it")
        .with_help(format!(
            "for example {}, where both fire: {}. Give one of them a higher priority, or make \
             their conditions exclusive",
            witness.text(),
            consequences.join("; ")
        ))
        .with_witness(witness.to_json()),
    );
    Ok(())
}
