//! Policy analysis: which policies can never fire (W0301), which only fire when a
//! higher-priority refusal pre-empts them (W0302), which pairs of equal priority fire
//! together with contradictory effects (W0303), which tools no intent can surface
//! (W0405), and for `ctxpack explain --tools` how every tool fares in every intent
//! and safety mode.
//!
//! The questions are decided exactly, over the IR. Conditions are JsonLogic; in the
//! fragment packs use, every comparison sets one variable against constants
//! ([`fragment`]), so cutting each variable's domain at the constants the pack
//! mentions gives a finite model with exact answers ([`model`]), decided with
//! reduced ordered decision diagrams ([`bdd`]). A policy whose condition leaves the
//! fragment is one the analysis knows nothing about: it is never the subject of a
//! warning, and claims that it could undermine are not made. Every warning carries
//! its proof: a [`Witness`] the host can paste into a test case when two policies
//! fire together, or the conditions and constraints that rule a request out when the
//! claim is that none exists.
//!
//! The analysis has a budget in decision-diagram nodes and steps (counts, so the
//! answer is the same on every machine). What it could not decide within it is
//! reported once as W0304 ("not analysed") and never guessed at.
//!
//! See `docs/analysis.md` for the model in full.

mod bdd;
mod fragment;
mod model;
mod policies;
mod tools;
mod witness;

use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::ir::{EffectIr, Pack, PolicyIr, SymbolKind};

use bdd::{Exhausted, Node};
use fragment::{Term, Universe};
use model::Model;

pub use tools::{IntentTools, ModeTools, Status, ToolStatus, ToolTable, Withheld};
pub use witness::Witness;

/// How much work the analysis may do on one pack before it reports the rest as not
/// analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Decision-diagram nodes in the shared table.
    pub max_nodes: usize,
    /// Uncached steps of the diagram operations.
    pub max_steps: u64,
}

impl Default for Limits {
    /// Far more than real packs need (the bundled ones use a few hundred nodes and
    /// steps; a generated pack of 500 policies over 50 fields about 6,000 nodes and
    /// 25,000 steps), and small enough that `check` stays fast in an editor on any
    /// pack: reaching either limit takes well under 100 ms.
    fn default() -> Self {
        Limits {
            max_nodes: 200_000,
            max_steps: 1_000_000,
        }
    }
}

/// The most decision-diagram variables the analysis encodes a pack in.
const MAX_BITS: u32 = 2048;

/// Runs the analysis and appends its diagnostics. It runs only on packs without
/// errors: its claims are about what a well-typed pack does.
pub fn check(pack: &Pack, diagnostics: &mut Vec<Diagnostic>) {
    check_with(pack, Limits::default(), diagnostics);
}

/// [`check`] with explicit limits.
pub fn check_with(pack: &Pack, limits: Limits, diagnostics: &mut Vec<Diagnostic>) {
    if diagnostics.iter().any(Diagnostic::is_error) || !analysable(pack) {
        return;
    }
    let prepared = Prepared::new(pack);
    let mut cx = Cx::new(pack, &prepared, limits);
    policies::check(&mut cx, diagnostics);
    tools::check(&mut cx, diagnostics);
    if cx.exhausted {
        diagnostics.push(
            Diagnostic::new(
                "W0304",
                pack.header_span,
                format!(
                    "policy analysis stopped at its limit: {} of its checks {} not analysed",
                    cx.skipped,
                    if cx.skipped == 1 { "was" } else { "were" }
                ),
            )
            .with_label("policies not fully analysed")
            .with_help(
                "what was found before the limit is reported; the rest of the pack was not \
                 analysed. Conditions that combine many fields in many alternatives are the \
                 costly ones: split such a policy into several (`ctxpack explain W0304`)",
            ),
        );
    }
}

/// Every tool of the pack in every intent and safety mode: surfaced, withheld (and
/// why) or conditional (on which policies, with a witness for each side). `None`
/// for a pack with errors, or one that declares no intent.
pub fn tool_table(pack: &Pack) -> Option<ToolTable> {
    tool_table_with(pack, Limits::default())
}

/// [`tool_table`] with explicit limits.
pub fn tool_table_with(pack: &Pack, limits: Limits) -> Option<ToolTable> {
    if pack.intents.is_empty() || !analysable(pack) {
        return None;
    }
    let prepared = Prepared::new(pack);
    let mut cx = Cx::new(pack, &prepared, limits);
    Some(tools::table(&mut cx))
}

/// Where each policy can fire: per policy (by index into `pack.policies`), per
/// intent (by index into `pack.intents`), whether some request that resolves to that
/// intent, in a run of the safety mode the intent declares, satisfies the policy's
/// condition. `None` for a policy the analysis knows nothing about (its condition is
/// outside the fragment, or beyond the budget), and for the whole pack when it cannot
/// be analysed. W0403 uses it to stay silent about intents a policy cannot fire in.
pub fn firing_scopes(pack: &Pack) -> Option<Vec<Option<Vec<bool>>>> {
    if !analysable(pack) {
        return None;
    }
    let prepared = Prepared::new(pack);
    let mut cx = Cx::new(pack, &prepared, Limits::default());
    let intent_var = prepared.universe.lookup("request.intent");
    let mode_var = prepared.universe.lookup("run.safety_mode");
    let mut scopes = Vec::with_capacity(pack.intents.len());
    for intent in &pack.intents {
        let scope = (|| -> Result<Node, Exhausted> {
            let mut scope = Node::TRUE;
            if let Some(v) = intent_var {
                scope = cx.model.equals(v, &serde_json::json!(intent.name))?;
            }
            if let Some(v) = mode_var {
                let mode = cx
                    .model
                    .equals(v, &serde_json::json!(intent.safety.as_str()))?;
                scope = cx.model.bdd.and(scope, mode)?;
            }
            Ok(scope)
        })();
        scopes.push(scope.ok());
    }
    let mut out = Vec::with_capacity(pack.policies.len());
    for i in 0..pack.policies.len() {
        let Some(cond) = cx.conds[i].known() else {
            out.push(None);
            continue;
        };
        let fires: Option<Vec<bool>> = scopes
            .iter()
            .map(|scope| cx.model.bdd.meets(cond, (*scope)?).ok())
            .collect();
        out.push(fires);
    }
    Some(out)
}

/// Is the IR complete enough for claims about it? Unresolved imports or fields and
/// items whose body failed to parse leave policies or names out.
fn analysable(pack: &Pack) -> bool {
    !pack.unresolved_imports && !pack.unresolved_fields && pack.broken.is_empty()
}

/// The parsed conditions of a pack, in evaluation order.
struct Prepared {
    universe: Universe,
    /// Indices into `pack.policies`, higher priority first, ties by name: the order
    /// the runtime evaluates them in.
    order: Vec<usize>,
    /// Per policy (by index into `pack.policies`), its place in `order`.
    rank: Vec<usize>,
    /// Per policy (by index into `pack.policies`), its condition in the fragment.
    terms: Vec<Option<Term>>,
}

impl Prepared {
    fn new(pack: &Pack) -> Prepared {
        let mut order: Vec<usize> = (0..pack.policies.len()).collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&pack.policies[a], &pack.policies[b]);
            pb.priority
                .cmp(&pa.priority)
                .then_with(|| pa.name.cmp(&pb.name))
        });
        let mut universe = Universe::new(pack);
        let mut terms = vec![None; pack.policies.len()];
        let mut rank = vec![0; pack.policies.len()];
        for (k, &i) in order.iter().enumerate() {
            rank[i] = k;
            terms[i] = universe.parse(pack, &pack.policies[i].when);
        }
        Prepared {
            universe,
            order,
            rank,
            terms,
        }
    }
}

/// What the analysis knows of one policy's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cond {
    /// Decided: the policy fires exactly on this diagram.
    Known(Node),
    /// Outside the fragment: nothing is known.
    Outside,
    /// The budget ran out before it was built.
    NotAnalysed,
}

impl Cond {
    fn known(self) -> Option<Node> {
        match self {
            Cond::Known(n) => Some(n),
            _ => None,
        }
    }
}

/// The analysis of one pack in progress.
struct Cx<'a> {
    pack: &'a Pack,
    prepared: &'a Prepared,
    limits: Limits,
    model: Model<'a>,
    /// Per policy (by index into `pack.policies`).
    conds: Vec<Cond>,
    /// The budget ran out at least once.
    exhausted: bool,
    /// How many checks were skipped for it.
    skipped: usize,
}

impl<'a> Cx<'a> {
    fn new(pack: &'a Pack, prepared: &'a Prepared, limits: Limits) -> Cx<'a> {
        let mut model = Model::new(&prepared.universe, &[], limits.max_nodes, limits.max_steps);
        let mut conds = vec![Cond::Outside; pack.policies.len()];
        let mut exhausted = false;
        let mut skipped = 0;
        // The diagrams are walked recursively, one level per encoding variable: past
        // this depth (thousands of fields and constants) nothing is analysed.
        let too_deep = model.bits > MAX_BITS;
        for &i in &prepared.order {
            let Some(term) = &prepared.terms[i] else {
                continue;
            };
            let built = if too_deep {
                Err(Exhausted)
            } else {
                model.term(term)
            };
            conds[i] = match built {
                Ok(n) => Cond::Known(n),
                Err(Exhausted) => {
                    exhausted = true;
                    skipped += 1;
                    Cond::NotAnalysed
                }
            };
        }
        Cx {
            pack,
            prepared,
            limits,
            model,
            conds,
            exhausted,
            skipped,
        }
    }

    /// Records a check the budget did not allow.
    fn give_up(&mut self) {
        self.exhausted = true;
        self.skipped += 1;
    }

    fn policy(&self, i: usize) -> &'a PolicyIr {
        &self.pack.policies[i]
    }

    /// Was the policy brought in by an import?
    fn imported(&self, i: usize) -> bool {
        self.pack
            .origins
            .contains_key(&(SymbolKind::Policy, self.pack.policies[i].name.clone()))
    }

    /// A witness for `n`, which must not be `FALSE`.
    fn witness(&self, n: Node) -> Witness {
        self.model
            .witness(n)
            .unwrap_or_else(|| Witness::new(Vec::new()))
    }
}

/// The union of some policies' conditions, for "is this covered by one of them"
/// questions. Built as one diagram while that stays small (with the variable order
/// a pack's structure gives, such as `request.intent` first, it usually does);
/// past [`Union::SOFT_NODES`] new nodes it is kept as the list of its members
/// instead, which the manager searches without building their union.
#[derive(Debug, Clone)]
enum Union {
    Node(Node),
    List(Vec<Node>),
}

impl Union {
    const SOFT_NODES: usize = 8_000;

    fn new() -> Union {
        Union::Node(Node::FALSE)
    }

    fn push(
        &mut self,
        bdd: &mut bdd::Manager,
        n: Node,
        built: &mut Vec<Node>,
    ) -> Result<(), Exhausted> {
        built.push(n);
        match self {
            Union::Node(u) => {
                let before = bdd.len();
                let joined = bdd.or(*u, n)?;
                if bdd.len() - before > Union::SOFT_NODES || bdd.len() > Union::SOFT_NODES * 4 {
                    *self = Union::List(built.clone());
                } else {
                    *u = joined;
                }
            }
            Union::List(items) => items.push(n),
        }
        Ok(())
    }

    /// The union as a list of diagrams whose disjunction it is.
    fn parts(&self) -> &[Node] {
        match self {
            Union::Node(n) => std::slice::from_ref(n),
            Union::List(items) => items,
        }
    }
}

// ── Effects ──────────────────────────────────────────────────────────────────────

fn refusal(p: &PolicyIr) -> Option<&str> {
    p.effects.iter().find_map(|e| match e {
        EffectIr::Refuse(r) => Some(r.as_str()),
        _ => None,
    })
}

fn escalation(p: &PolicyIr) -> Option<&str> {
    p.effects.iter().find_map(|e| match e {
        EffectIr::Escalate(t) => Some(t.as_str()),
        _ => None,
    })
}

fn denies(p: &PolicyIr, tool: &str) -> bool {
    p.effects.iter().any(|e| match e {
        EffectIr::Deny(tools) => tools.iter().any(|t| &*t.name == tool),
        _ => false,
    })
}

/// `` `a` ``, `` `a` and `b` ``, `` `a`, `b` and `c` ``.
pub(crate) fn names<S: AsRef<str>>(items: &[S], last: &str) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("`{}`", s.as_ref())).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., tail] => format!("{} {last} {tail}", init.join(", ")),
    }
}

/// A condition as the pack's source writes it.
fn source(rule: &Value) -> String {
    crate::diff::logic::condition(rule)
}
