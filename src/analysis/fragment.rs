//! The fragment of JsonLogic the analysis decides, and conditions parsed into it.
//!
//! A condition is in the fragment when every comparison sets one variable (a
//! `ctx.*`, `request.*` or `run.*` path) against constants: strict equality with a
//! scalar, loose equality with a constant of the variable's own kind, order
//! comparisons of numbers, `x in [constants]`, `"c" in list_field`, null checks
//! (`exists`), a `bool` field on its own, and `and`/`or`/`not`/`!!` over those.
//! Sub-conditions that read no variable are folded with the runtime's own JsonLogic
//! engine. Anything else — two variables compared, arithmetic, substrings, other
//! operators, timestamps — puts the whole condition outside the fragment, and the
//! analysis then says nothing about that policy.

use std::collections::HashMap;

use datalogic_rs::bumpalo::Bump;
use datalogic_rs::DataValue;
use serde_json::Value;

use crate::ir::scope::resolve;
use crate::ir::{Pack, Ty};

pub(crate) type VarId = usize;

/// The largest magnitude a numeric constant may have: beyond 2^53 not every integer
/// is a float, and the runtime compares numbers as floats.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// How deep a condition may nest before the analysis gives up on it.
const MAX_DEPTH: usize = 96;

/// The element type of a list variable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Elem {
    Str,
    Enum(Vec<String>),
    Int,
    Float,
    Bool,
}

/// What values a variable takes (besides `null` when it is optional).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum VarKind {
    Number {
        int: bool,
    },
    /// `non_blank`: the runtime refuses an empty or whitespace-only value
    /// (`request.message`).
    Str {
        non_blank: bool,
    },
    Enum(Vec<String>),
    Bool,
    List(Elem),
}

#[derive(Debug, Clone)]
pub(crate) struct Var {
    /// The path as conditions name it: `ctx.user.tier`, `request.channel`.
    pub path: String,
    pub kind: VarKind,
    pub optional: bool,
}

/// A comparison of a variable with a constant, the variable on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    /// `===`
    Eq,
    /// `!==`
    Ne,
    /// `==`, only with a constant of the variable's own kind.
    LooseEq,
    /// `!=`, likewise.
    LooseNe,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    /// The comparison with its operands swapped: `5 < x` is `x > 5`.
    fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            other => other,
        }
    }
}

/// What an atom asks of its variable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Test {
    Cmp(Cmp, Value),
    /// `x in [c1, c2, ...]`.
    In(Vec<Value>),
    /// A `bool` variable read on its own: true exactly when it is `true`.
    Truthy,
    /// `c in list_variable`.
    Has(Value),
}

#[derive(Debug, Clone)]
pub(crate) struct Atom {
    pub var: VarId,
    pub test: Test,
}

/// A condition in the fragment.
#[derive(Debug, Clone)]
pub(crate) enum Term {
    Const(bool),
    Atom(usize),
    Not(Box<Term>),
    And(Vec<Term>),
    Or(Vec<Term>),
}

/// Every variable and atom of the conditions parsed so far. Variables are numbered
/// in the order they are first met, which is also their order in the decision
/// diagrams.
#[derive(Debug, Clone, Default)]
pub(crate) struct Universe {
    pub vars: Vec<Var>,
    index: HashMap<String, VarId>,
    pub atoms: Vec<Atom>,
}

/// An operand of a comparison.
enum Operand {
    Var(VarId),
    Const(Value),
}

impl Universe {
    /// A universe that knows the pack's scoping variables first: `request.intent`
    /// (over the declared intents) and `run.safety_mode`, which every question about
    /// tools constrains.
    pub fn new(pack: &Pack) -> Universe {
        let mut u = Universe::default();
        if !pack.intents.is_empty() {
            u.var(pack, "request.intent");
        }
        u.var(pack, "run.safety_mode");
        u
    }

    /// The variable at `path`, added on first use; `None` when the path does not
    /// resolve or has a type outside the fragment (timestamps).
    pub fn var(&mut self, pack: &Pack, path: &str) -> Option<VarId> {
        if let Some(&id) = self.index.get(path) {
            return Some(id);
        }
        let (kind, optional) = kind_of(pack, path)?;
        let id = self.vars.len();
        self.vars.push(Var {
            path: path.to_owned(),
            kind,
            optional,
        });
        self.index.insert(path.to_owned(), id);
        Some(id)
    }

    pub fn lookup(&self, path: &str) -> Option<VarId> {
        self.index.get(path).copied()
    }

    /// Parses a lowered `when` condition; `None` when it is outside the fragment, in
    /// which case the universe is left as it was.
    pub fn parse(&mut self, pack: &Pack, when: &Value) -> Option<Term> {
        let (vars, atoms) = (self.vars.len(), self.atoms.len());
        let term = self.term(pack, when, 0);
        if term.is_none() {
            for v in self.vars.drain(vars..) {
                self.index.remove(&v.path);
            }
            self.atoms.truncate(atoms);
        }
        term
    }

    fn atom(&mut self, var: VarId, test: Test) -> Option<Term> {
        self.atoms.push(Atom { var, test });
        Some(Term::Atom(self.atoms.len() - 1))
    }

    fn term(&mut self, pack: &Pack, v: &Value, depth: usize) -> Option<Term> {
        if depth > MAX_DEPTH {
            return None;
        }
        let map = match v {
            Value::Bool(b) => return Some(Term::Const(*b)),
            Value::Null => return Some(Term::Const(false)),
            Value::Object(map) if map.len() == 1 => map,
            _ => return None,
        };
        if !mentions_var(v) {
            return fold(v).map(Term::Const);
        }
        let (op, args) = map.iter().next()?;
        let list: Vec<&Value> = match args {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        match (op.as_str(), list.as_slice()) {
            ("and" | "or", items) if !items.is_empty() && args.is_array() => {
                let mut terms = Vec::with_capacity(items.len());
                for item in items {
                    terms.push(self.term(pack, item, depth + 1)?);
                }
                Some(if op == "and" {
                    Term::And(terms)
                } else {
                    Term::Or(terms)
                })
            }
            ("!", [x]) => Some(Term::Not(Box::new(self.term(pack, x, depth + 1)?))),
            ("!!", [x]) => self.term(pack, x, depth + 1),
            ("var", _) => {
                let Operand::Var(var) = self.operand(pack, v)? else {
                    return None;
                };
                match self.vars[var].kind {
                    VarKind::Bool => self.atom(var, Test::Truthy),
                    _ => None,
                }
            }
            (name, [a, b]) if args.is_array() => {
                let cmp = match name {
                    "===" => Cmp::Eq,
                    "!==" => Cmp::Ne,
                    "==" => Cmp::LooseEq,
                    "!=" => Cmp::LooseNe,
                    "<" => Cmp::Lt,
                    "<=" => Cmp::Le,
                    ">" => Cmp::Gt,
                    ">=" => Cmp::Ge,
                    "in" => return self.membership(pack, a, b),
                    _ => return None,
                };
                let (var, cmp, constant) = match (self.operand(pack, a)?, self.operand(pack, b)?) {
                    (Operand::Var(x), Operand::Const(c)) => (x, cmp, c),
                    (Operand::Const(c), Operand::Var(x)) => (x, cmp.flipped(), c),
                    _ => return None,
                };
                self.comparison(var, cmp, constant)
            }
            _ => None,
        }
    }

    fn comparison(&mut self, var: VarId, cmp: Cmp, c: Value) -> Option<Term> {
        if !scalar(&c) {
            return None;
        }
        let kind = &self.vars[var].kind;
        let ok = match cmp {
            Cmp::Eq | Cmp::Ne => !matches!(kind, VarKind::List(_)) || c.is_null(),
            Cmp::LooseEq | Cmp::LooseNe => matches!(
                (kind, &c),
                (VarKind::Number { .. }, Value::Number(_))
                    | (VarKind::Str { .. } | VarKind::Enum(_), Value::String(_))
                    | (VarKind::Bool, Value::Bool(_))
            ),
            Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge => {
                matches!(kind, VarKind::Number { .. }) && c.is_number()
            }
        };
        if ok {
            self.atom(var, Test::Cmp(cmp, c))
        } else {
            None
        }
    }

    fn membership(&mut self, pack: &Pack, a: &Value, b: &Value) -> Option<Term> {
        match (self.operand(pack, a)?, self.operand(pack, b)?) {
            (Operand::Var(x), Operand::Const(Value::Array(items)))
                if !matches!(self.vars[x].kind, VarKind::List(_)) =>
            {
                self.atom(x, Test::In(items))
            }
            (Operand::Const(c), Operand::Var(list))
                if scalar(&c) && matches!(self.vars[list].kind, VarKind::List(_)) =>
            {
                self.atom(list, Test::Has(c))
            }
            _ => None,
        }
    }

    fn operand(&mut self, pack: &Pack, v: &Value) -> Option<Operand> {
        match v {
            Value::Object(map) if map.len() == 1 => {
                let path = match map.get("var")? {
                    Value::String(p) => p.as_str(),
                    Value::Array(items) if items.len() == 1 => items[0].as_str()?,
                    _ => return None,
                };
                self.var(pack, path).map(Operand::Var)
            }
            Value::Array(items) if items.iter().all(scalar) => Some(Operand::Const(v.clone())),
            other if scalar(other) => Some(Operand::Const(other.clone())),
            _ => None,
        }
    }
}

/// A scalar the fragment compares with: `null`, a bool, a string, or a number small
/// enough that the runtime compares it exactly.
fn scalar(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|f| f.is_finite() && f.abs() < MAX_EXACT),
        _ => false,
    }
}

/// The type of a path as the fragment sees it, and whether it may be null.
fn kind_of(pack: &Pack, path: &str) -> Option<(VarKind, bool)> {
    if path == "request.intent" {
        let kind = if pack.intents.is_empty() {
            // A library: the importing pack declares the intents.
            VarKind::Str { non_blank: false }
        } else {
            VarKind::Enum(pack.intents.iter().map(|i| i.name.clone()).collect())
        };
        return Some((kind, false));
    }
    let resolved = resolve(pack, path)?;
    let kind = match &resolved.ty {
        Ty::String => VarKind::Str {
            non_blank: path == "request.message",
        },
        Ty::Int => VarKind::Number { int: true },
        Ty::Float => VarKind::Number { int: false },
        Ty::Bool => VarKind::Bool,
        // An enum without variants has no valid value: no request exists at all.
        Ty::Enum(variants) if variants.is_empty() => return None,
        Ty::Enum(variants) => VarKind::Enum(dedup(variants)),
        Ty::List(item) => VarKind::List(match item.as_ref() {
            Ty::String => Elem::Str,
            Ty::Enum(variants) if !variants.is_empty() => Elem::Enum(dedup(variants)),
            Ty::Int => Elem::Int,
            Ty::Float => Elem::Float,
            Ty::Bool => Elem::Bool,
            _ => return None,
        }),
        _ => return None,
    };
    Some((kind, resolved.optional))
}

fn dedup(variants: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(variants.len());
    for v in variants {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

/// Does the rule read any variable?
pub(crate) fn mentions_var(v: &Value) -> bool {
    match v {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "var" || k == "val" || mentions_var(v)),
        Value::Array(items) => items.iter().any(mentions_var),
        _ => false,
    }
}

/// The operators a constant sub-condition may use to be folded: pure functions of
/// their operands (no clock, no randomness).
const FOLDABLE: &[&str] = &[
    "===", "!==", "==", "!=", "<", "<=", ">", ">=", "in", "!", "!!", "and", "or",
];

fn foldable(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            map.len() == 1
                && map
                    .iter()
                    .all(|(op, args)| FOLDABLE.contains(&op.as_str()) && foldable(args))
        }
        Value::Array(items) => items.iter().all(foldable),
        _ => true,
    }
}

/// The truth of a sub-condition that reads no variable, as the runtime's engine
/// decides it; `None` when it uses other operators or fails to evaluate.
fn fold(v: &Value) -> Option<bool> {
    if !foldable(v) {
        return None;
    }
    let engine = crate::ir::expr::engine();
    let logic = engine.compile(v.to_string().as_str()).ok()?;
    let arena = Bump::new();
    let data = DataValue::from_str("{}", &arena).ok()?;
    let data: &DataValue = arena.alloc(data);
    engine
        .evaluate(&logic, data, &arena)
        .ok()
        .map(|r| engine.truthy(r))
}

// ── The semantics of one atom on one value ─────────────────────────────────────────

/// Strict equality as the runtime's engine decides it: numbers by value (`1` and
/// `1.0` are equal), otherwise the same kind and the same value.
pub(crate) fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Null, Value::Null) => true,
        _ => false,
    }
}

/// Loose equality of a variable's value with a constant of the variable's own kind
/// (the only loose comparisons in the fragment). The engine treats a missing value as
/// equal to `null`, `0`, `""` and `false`.
fn loose_eq(value: &Value, c: &Value) -> bool {
    if value.is_null() {
        return match c {
            Value::Null => true,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            _ => false,
        };
    }
    strict_eq(value, c)
}

/// The value as an order comparison sees it: a missing value counts as 0.
fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Null => Some(0.0),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Does a scalar variable holding `value` pass `test`? (`Has` is about lists and is
/// decided by the list's membership bits instead.)
pub(crate) fn holds(test: &Test, value: &Value) -> bool {
    match test {
        Test::Cmp(Cmp::Eq, c) => strict_eq(value, c),
        Test::Cmp(Cmp::Ne, c) => !strict_eq(value, c),
        Test::Cmp(Cmp::LooseEq, c) => loose_eq(value, c),
        Test::Cmp(Cmp::LooseNe, c) => !loose_eq(value, c),
        Test::Cmp(op, c) => {
            let (Some(x), Some(y)) = (as_number(value), as_number(c)) else {
                return false;
            };
            match op {
                Cmp::Lt => x < y,
                Cmp::Le => x <= y,
                Cmp::Gt => x > y,
                _ => x >= y,
            }
        }
        Test::In(items) => items.iter().any(|c| strict_eq(value, c)),
        Test::Truthy => *value == Value::Bool(true),
        Test::Has(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The evaluator agrees with the runtime's engine on every comparison the fragment
    /// admits, for values of each kind and for a missing value.
    #[test]
    fn holds_agrees_with_the_engine() {
        let engine = datalogic_rs::Engine::new();
        let values = [
            json!(null),
            json!(0),
            json!(0.0),
            json!(17),
            json!(18),
            json!(18.0),
            json!(18.5),
            json!(-3),
            json!("voice"),
            json!(""),
            json!("other"),
            json!(true),
            json!(false),
        ];
        let constants = [
            json!(null),
            json!(0),
            json!(18),
            json!(18.0),
            json!(18.25),
            json!(-0.5),
            json!("voice"),
            json!(""),
            json!(" "),
            json!(true),
            json!(false),
        ];
        let ops = [
            ("===", Cmp::Eq),
            ("!==", Cmp::Ne),
            ("==", Cmp::LooseEq),
            ("!=", Cmp::LooseNe),
            ("<", Cmp::Lt),
            ("<=", Cmp::Le),
            (">", Cmp::Gt),
            (">=", Cmp::Ge),
        ];
        for value in &values {
            for c in &constants {
                for (name, cmp) in ops {
                    let same_kind = matches!(
                        (value, c),
                        (Value::Null, _)
                            | (Value::Number(_), Value::Number(_))
                            | (Value::String(_), Value::String(_))
                            | (Value::Bool(_), Value::Bool(_))
                    );
                    let admitted = match cmp {
                        Cmp::Eq | Cmp::Ne => true,
                        Cmp::LooseEq | Cmp::LooseNe => same_kind && !c.is_null(),
                        _ => matches!(value, Value::Null | Value::Number(_)) && c.is_number(),
                    };
                    if !admitted {
                        continue;
                    }
                    let rule = json!({ name: [{"var": "x"}, c] }).to_string();
                    let data = json!({ "x": value }).to_string();
                    let expected = engine.eval_str(rule.as_str(), data.as_str()).unwrap();
                    let ours = holds(&Test::Cmp(cmp, c.clone()), value);
                    assert_eq!(expected, ours.to_string(), "{rule} with x = {value}");
                }
            }
            let list = json!(["voice", 18, null, false]);
            let rule = json!({"in": [{"var": "x"}, list]}).to_string();
            let data = json!({ "x": value }).to_string();
            let expected = engine.eval_str(rule.as_str(), data.as_str()).unwrap();
            let items = list.as_array().unwrap().clone();
            assert_eq!(
                expected,
                holds(&Test::In(items), value).to_string(),
                "{rule} {value}"
            );
        }
    }

    #[test]
    fn constant_sub_conditions_fold_with_the_engine() {
        assert_eq!(fold(&json!({"<": [1, 2]})), Some(true));
        assert_eq!(fold(&json!({"in": ["a", ["b"]]})), Some(false));
        assert_eq!(fold(&json!({"+": [1, 2]})), None);
    }
}
