//! The finite model: each variable's domain cut into cells at the constants the pack
//! compares it with, each cell encoded in a few decision-diagram variables, and
//! conditions built as decision diagrams over those.
//!
//! Every atom compares one variable with constants, so all values inside one cell
//! answer every atom alike, and one representative value per cell decides it. Cells:
//!
//! - numbers: each constant (for an `int`, each integral constant) and the open
//!   intervals between and around them that hold a value of the type;
//! - strings: each constant, and one cell for every other string;
//! - enums (and `request.intent` over the declared intents, `run.safety_mode`): the
//!   variants; bools: `false`, `true`;
//! - optional variables: also `null` (absent);
//! - lists: one bit per constant tested for membership, and one for presence when the
//!   list is optional.
//!
//! A variable with `n` cells takes `ceil(log2 n)` diagram variables; codes past the
//! last cell stand for the last cell, so every assignment means a real value and no
//! domain constraint is needed.

use serde_json::Value;

use super::bdd::{Exhausted, Manager, Node};
use foldhash::HashMap;

use super::fragment::{holds, strict_eq, Cmp, Elem, Term, Test, Universe, VarId, VarKind};
use super::witness::Witness;

/// A domain constraint that an explanation may relax to see whether it matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Fact {
    /// An enum takes only its variants (a list of enums holds only variants).
    Variants,
    /// An `int` takes only integers (a list of ints holds only integers).
    Integer,
    /// A required field is never null.
    Present,
    /// `request.message` is never blank.
    NonBlank,
}

impl Fact {
    /// The facts that constrain a variable. (`request.intent` and `run.safety_mode`
    /// are never null by construction; only their variants matter.)
    pub fn of(var: &super::fragment::Var) -> Vec<Fact> {
        let (kind, optional) = (&var.kind, var.optional);
        let scoping = matches!(var.path.as_str(), "request.intent" | "run.safety_mode");
        let mut facts = Vec::new();
        match kind {
            VarKind::Enum(_) | VarKind::List(Elem::Enum(_)) => facts.push(Fact::Variants),
            VarKind::Number { int: true } | VarKind::List(Elem::Int) => facts.push(Fact::Integer),
            VarKind::Str { non_blank: true } => facts.push(Fact::NonBlank),
            _ => {}
        }
        if !optional && !scoping {
            facts.push(Fact::Present);
        }
        facts
    }
}

/// How one variable is encoded.
#[derive(Debug, Clone)]
enum Layout {
    /// Cells (their representative values) in diagram variables
    /// `first .. first + bits`, most significant first.
    Scalar {
        first: u32,
        bits: u32,
        cells: Vec<Value>,
    },
    /// A presence bit when the list may be absent, and one bit per possible member.
    List {
        presence: Option<u32>,
        members: Vec<(Value, u32)>,
    },
}

/// The model of a universe under some (usually no) relaxed facts.
pub(crate) struct Model<'u> {
    pub u: &'u Universe,
    pub bdd: Manager,
    /// How many diagram variables the encoding takes (the depth of every recursion
    /// over the diagrams).
    pub bits: u32,
    layouts: Vec<Layout>,
    /// Per variable with string cells (strings, enums, intents): each string's cell,
    /// so that equality and `in` atoms find their cells without scanning them all.
    string_cells: Vec<Option<HashMap<String, usize>>>,
    atoms: Vec<Option<Node>>,
}

impl<'u> Model<'u> {
    pub fn new(
        u: &'u Universe,
        relaxed: &[(VarId, Fact)],
        max_nodes: usize,
        max_steps: u64,
    ) -> Self {
        let mut next = 0u32;
        let mut layouts = Vec::with_capacity(u.vars.len());
        for (id, var) in u.vars.iter().enumerate() {
            let relax = |f: Fact| relaxed.contains(&(id, f));
            let tests = u.atoms.iter().filter(|a| a.var == id).map(|a| &a.test);
            let nullable = var.optional || relax(Fact::Present);
            let layout = match &var.kind {
                VarKind::List(elem) => {
                    let presence = nullable.then(|| {
                        next += 1;
                        next - 1
                    });
                    let mut members: Vec<(Value, u32)> = Vec::new();
                    for test in tests {
                        let Test::Has(c) = test else { continue };
                        let possible =
                            relax(Fact::Variants) || relax(Fact::Integer) || member_of(elem, c);
                        if possible && !members.iter().any(|(m, _)| strict_eq(m, c)) {
                            members.push((c.clone(), next));
                            next += 1;
                        }
                    }
                    Layout::List { presence, members }
                }
                kind => {
                    let mut cells = scalar_cells(kind, tests, relax);
                    if nullable {
                        cells.push(Value::Null);
                    }
                    let bits = ceil_log2(cells.len());
                    let first = next;
                    next += bits;
                    Layout::Scalar { first, bits, cells }
                }
            };
            layouts.push(layout);
        }
        let string_cells = layouts
            .iter()
            .zip(&u.vars)
            .map(|(layout, var)| match (layout, &var.kind) {
                (Layout::Scalar { cells, .. }, VarKind::Str { .. } | VarKind::Enum(_)) => Some(
                    cells
                        .iter()
                        .enumerate()
                        .filter_map(|(i, c)| c.as_str().map(|s| (s.to_owned(), i)))
                        .collect(),
                ),
                _ => None,
            })
            .collect();
        Model {
            u,
            bdd: Manager::new(max_nodes, max_steps),
            bits: next,
            layouts,
            string_cells,
            atoms: vec![None; u.atoms.len()],
        }
    }

    /// The diagram of a condition.
    pub fn term(&mut self, t: &Term) -> Result<Node, Exhausted> {
        match t {
            Term::Const(true) => Ok(Node::TRUE),
            Term::Const(false) => Ok(Node::FALSE),
            Term::Atom(a) => self.atom(*a),
            Term::Not(inner) => {
                let n = self.term(inner)?;
                self.bdd.not(n)
            }
            Term::And(items) => {
                let mut acc = Node::TRUE;
                for item in items {
                    let n = self.term(item)?;
                    acc = self.bdd.and(acc, n)?;
                    if acc == Node::FALSE {
                        break;
                    }
                }
                Ok(acc)
            }
            Term::Or(items) => {
                let mut acc = Node::FALSE;
                for item in items {
                    let n = self.term(item)?;
                    acc = self.bdd.or(acc, n)?;
                    if acc == Node::TRUE {
                        break;
                    }
                }
                Ok(acc)
            }
        }
    }

    fn atom(&mut self, a: usize) -> Result<Node, Exhausted> {
        if let Some(n) = self.atoms[a] {
            return Ok(n);
        }
        let atom = &self.u.atoms[a];
        let n = match &atom.test {
            Test::Has(c) => {
                let Layout::List { presence, members } = &self.layouts[atom.var] else {
                    return Ok(Node::FALSE);
                };
                match members.iter().find(|(m, _)| strict_eq(m, c)) {
                    None => Node::FALSE,
                    Some(&(_, bit)) => {
                        let presence = *presence;
                        let m = self.bdd.var(bit)?;
                        match presence {
                            Some(p) => {
                                let p = self.bdd.var(p)?;
                                self.bdd.and(p, m)?
                            }
                            None => m,
                        }
                    }
                }
            }
            test => match self.sparse(atom.var, test) {
                Some((members, negate)) => self.cell_set(atom.var, &members, negate)?,
                None => {
                    let test = test.clone();
                    self.scalar(atom.var, |v| holds(&test, v))?
                }
            },
        };
        self.atoms[a] = Some(n);
        Ok(n)
    }

    /// For a strict equality or `in` test on a variable with string cells, the cells
    /// it accepts (sorted) and whether it accepts the others instead.
    fn sparse(&self, var: VarId, test: &Test) -> Option<(Vec<usize>, bool)> {
        let index = self.string_cells[var].as_ref()?;
        let Layout::Scalar { cells, .. } = &self.layouts[var] else {
            return None;
        };
        let null_cell = cells.iter().position(Value::is_null);
        let cell_of = |c: &Value| match c {
            Value::String(s) => index.get(s.as_str()).copied(),
            Value::Null => null_cell,
            _ => None,
        };
        let (mut members, negate): (Vec<usize>, bool) = match test {
            Test::Cmp(Cmp::Eq, c) => (cell_of(c).into_iter().collect(), false),
            Test::Cmp(Cmp::Ne, c) => (cell_of(c).into_iter().collect(), true),
            Test::In(items) => (items.iter().filter_map(cell_of).collect(), false),
            _ => return None,
        };
        members.sort_unstable();
        members.dedup();
        Some((members, negate))
    }

    /// The diagram of "variable `var` is in one of the cells `members` (sorted)", or
    /// in none of them when `negate`.
    fn cell_set(&mut self, var: VarId, members: &[usize], negate: bool) -> Result<Node, Exhausted> {
        let Layout::Scalar { first, bits, cells } = &self.layouts[var] else {
            return Ok(Node::FALSE);
        };
        let (first, bits, n) = (*first, *bits, cells.len());
        let count = |lo: usize, hi: usize| -> usize {
            let inside =
                members.partition_point(|&m| m <= hi) - members.partition_point(|&m| m < lo);
            if negate {
                hi + 1 - lo - inside
            } else {
                inside
            }
        };
        cells_bdd(&mut self.bdd, first, bits, 0, 0, n, &count)
    }

    /// The diagram of "variable `var` holds a value that `pred` accepts". For a list,
    /// `pred` is asked about `null` only (absent or present).
    pub fn scalar(&mut self, var: VarId, pred: impl Fn(&Value) -> bool) -> Result<Node, Exhausted> {
        match &self.layouts[var] {
            Layout::List { presence, .. } => {
                // Lists are compared with `null` only: absent, or present.
                let absent = pred(&Value::Null);
                let present = pred(&Value::Array(Vec::new()));
                match (*presence, absent, present) {
                    (_, true, true) => Ok(Node::TRUE),
                    (None, _, present) => Ok(if present { Node::TRUE } else { Node::FALSE }),
                    (Some(_), false, false) => Ok(Node::FALSE),
                    (Some(p), false, true) => self.bdd.var(p),
                    (Some(p), true, false) => {
                        let p = self.bdd.var(p)?;
                        self.bdd.not(p)
                    }
                }
            }
            Layout::Scalar { first, bits, cells } => {
                let (first, bits, n) = (*first, *bits, cells.len());
                // Prefix sums, so that a run of cells is known uniform in O(1).
                let mut ones = vec![0usize; n + 1];
                for (i, c) in cells.iter().enumerate() {
                    ones[i + 1] = ones[i] + usize::from(pred(c));
                }
                let count = |lo: usize, hi: usize| ones[hi + 1] - ones[lo];
                cells_bdd(&mut self.bdd, first, bits, 0, 0, n, &count)
            }
        }
    }

    /// The diagram of "variable `var` equals `value`".
    pub fn equals(&mut self, var: VarId, value: &Value) -> Result<Node, Exhausted> {
        let test = Test::Cmp(Cmp::Eq, value.clone());
        match self.sparse(var, &test) {
            Some((members, negate)) => self.cell_set(var, &members, negate),
            None => self.scalar(var, |v| strict_eq(v, value)),
        }
    }

    /// A concrete assignment that satisfies `n`: the values of the variables its
    /// path tests (any value of the others will do), or `None` when `n` is `FALSE`.
    pub fn witness(&self, n: Node) -> Option<Witness> {
        let path = self.bdd.sat_path(n)?;
        Some(self.witness_of(&path))
    }

    /// A witness of `a` and none of `bs`, or `None` when there is none.
    pub fn witness_avoiding(&mut self, a: Node, bs: &[Node]) -> Result<Option<Witness>, Exhausted> {
        Ok(self
            .bdd
            .path_avoiding(a, bs)?
            .map(|path| self.witness_of(&path)))
    }

    /// The values a path gives the variables it tests.
    fn witness_of(&self, path: &[(u32, bool)]) -> Witness {
        let is_set = |bit: u32| path.iter().any(|&(b, v)| b == bit && v);
        let tested = |bit: u32| path.iter().any(|&(b, _)| b == bit);
        let mut values = Vec::new();
        for (id, layout) in self.layouts.iter().enumerate() {
            let value = match layout {
                Layout::Scalar { first, bits, cells } => {
                    if !(*first..first + bits).any(tested) {
                        continue;
                    }
                    let mut code = 0usize;
                    for b in *first..first + bits {
                        code = code * 2 + usize::from(is_set(b));
                    }
                    cells[code.min(cells.len() - 1)].clone()
                }
                Layout::List { presence, members } => {
                    let bits: Vec<u32> = presence
                        .iter()
                        .copied()
                        .chain(members.iter().map(|m| m.1))
                        .collect();
                    if !bits.iter().any(|&b| tested(b)) {
                        continue;
                    }
                    if presence.is_some_and(|p| !is_set(p)) {
                        Value::Null
                    } else {
                        Value::Array(
                            members
                                .iter()
                                .filter(|(_, b)| is_set(*b))
                                .map(|(m, _)| m.clone())
                                .collect(),
                        )
                    }
                }
            };
            values.push((self.u.vars[id].path.clone(), value));
        }
        Witness::new(values)
    }
}

/// The diagram of the cells whose codes start with the `depth` bits of `prefix`,
/// where `count(lo, hi)` says how many of the cells `lo..=hi` (of `n`) are members.
fn cells_bdd(
    bdd: &mut Manager,
    first: u32,
    bits: u32,
    depth: u32,
    prefix: usize,
    n: usize,
    count: &dyn Fn(usize, usize) -> usize,
) -> Result<Node, Exhausted> {
    let width = bits - depth;
    let lo_code = prefix << width;
    let hi_code = ((prefix + 1) << width) - 1;
    // Codes past the last cell stand for the last cell.
    let (lo_cell, hi_cell) = (lo_code.min(n - 1), hi_code.min(n - 1));
    let inside = count(lo_cell, hi_cell);
    if inside == 0 {
        return Ok(Node::FALSE);
    }
    if inside == hi_cell + 1 - lo_cell {
        return Ok(Node::TRUE);
    }
    let lo = cells_bdd(bdd, first, bits, depth + 1, prefix << 1, n, count)?;
    let hi = cells_bdd(bdd, first, bits, depth + 1, (prefix << 1) | 1, n, count)?;
    bdd.mk(first + depth, lo, hi)
}

fn ceil_log2(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

/// Can constant `c` be an element of a list of `elem`?
fn member_of(elem: &Elem, c: &Value) -> bool {
    match (elem, c) {
        (Elem::Str, Value::String(_))
        | (Elem::Float, Value::Number(_))
        | (Elem::Bool, Value::Bool(_)) => true,
        (Elem::Enum(variants), Value::String(s)) => variants.contains(s),
        (Elem::Int, Value::Number(n)) => n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// The representatives of a scalar variable's cells, `null` aside.
fn scalar_cells<'t>(
    kind: &VarKind,
    tests: impl Iterator<Item = &'t Test>,
    relax: impl Fn(Fact) -> bool,
) -> Vec<Value> {
    let constants: Vec<&Value> = tests
        .flat_map(|t| match t {
            Test::Cmp(_, c) | Test::Has(c) => std::slice::from_ref(c).iter(),
            Test::In(items) => items.iter(),
            Test::Truthy => [].iter(),
        })
        .collect();
    match kind {
        VarKind::Number { int } => {
            let numbers: Vec<f64> = constants.iter().filter_map(|c| c.as_f64()).collect();
            number_cells(numbers, *int && !relax(Fact::Integer))
        }
        VarKind::Str { non_blank } => {
            let blank_ok = !non_blank || relax(Fact::NonBlank);
            let mut strings: Vec<&str> = constants
                .iter()
                .filter_map(|c| c.as_str())
                .filter(|s| blank_ok || !s.trim().is_empty())
                .collect();
            strings.sort_unstable();
            strings.dedup();
            let mut cells: Vec<Value> = strings.iter().map(|s| Value::from(*s)).collect();
            cells.push(Value::from(fresh(&strings)));
            cells
        }
        VarKind::Enum(variants) => {
            let mut cells: Vec<Value> = variants.iter().map(|v| Value::from(v.as_str())).collect();
            if relax(Fact::Variants) {
                let mut taken: Vec<&str> = variants.iter().map(String::as_str).collect();
                taken.extend(constants.iter().filter_map(|c| c.as_str()));
                cells.push(Value::from(fresh(&taken)));
            }
            cells
        }
        VarKind::Bool => vec![Value::Bool(false), Value::Bool(true)],
        VarKind::List(_) => Vec::new(),
    }
}

/// A string none of `taken` is: `"other"`, else `"other-2"`, ...
fn fresh(taken: &[&str]) -> String {
    let mut candidate = "other".to_owned();
    let mut i = 1;
    while taken.contains(&candidate.as_str()) {
        i += 1;
        candidate = format!("other-{i}");
    }
    candidate
}

/// The cells of a number variable: the constants and the intervals around them, each
/// by a representative (an integer where the interval holds one).
fn number_cells(mut cs: Vec<f64>, int: bool) -> Vec<Value> {
    for c in &mut cs {
        if *c == 0.0 {
            *c = 0.0; // -0.0 is 0.0
        }
    }
    cs.sort_by(f64::total_cmp);
    cs.dedup();
    let num = |x: f64| -> Value {
        if int {
            Value::from(x as i64)
        } else {
            Value::from(x)
        }
    };
    let Some(&lowest) = cs.first() else {
        return vec![num(0.0)];
    };
    // The largest integer below `c`, and the smallest above it.
    let below = |c: f64| if c.floor() < c { c.floor() } else { c - 1.0 };
    let above = |c: f64| c.floor() + 1.0;
    let mut cells = vec![num(below(lowest))];
    for (i, &c) in cs.iter().enumerate() {
        if !int || c.fract() == 0.0 {
            cells.push(num(c));
        }
        match cs.get(i + 1) {
            Some(&d) => {
                let k = above(c);
                if k < d {
                    cells.push(num(k));
                } else if !int {
                    let mid = c + (d - c) / 2.0;
                    if c < mid && mid < d {
                        cells.push(num(mid));
                    }
                }
            }
            None => cells.push(num(above(c))),
        }
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn number_cells_cut_at_the_constants() {
        assert_eq!(
            number_cells(vec![18.0, 65.0], true),
            vec![json!(17), json!(18), json!(19), json!(65), json!(66)]
        );
        // No integer strictly between 18 and 19; 18.5 is not an int.
        assert_eq!(
            number_cells(vec![18.0, 19.0, 18.5], true),
            vec![json!(17), json!(18), json!(19), json!(20)]
        );
        assert_eq!(
            number_cells(vec![0.5, 0.75], false),
            vec![
                json!(0.0),
                json!(0.5),
                json!(0.625),
                json!(0.75),
                json!(1.0)
            ]
        );
        assert_eq!(
            number_cells(vec![-0.0, 0.0], false),
            vec![json!(-1.0), json!(0.0), json!(1.0)]
        );
        assert_eq!(number_cells(vec![], true), vec![json!(0)]);
    }

    #[test]
    fn codes_past_the_last_cell_are_the_last_cell() {
        let mut bdd = Manager::new(100, 1000);
        // Three cells in two bits; the set {cell 2} covers codes 2 and 3: "bit 0".
        let ones = [0, 0, 0, 1];
        let count = |lo: usize, hi: usize| ones[hi + 1] - ones[lo];
        let n = cells_bdd(&mut bdd, 0, 2, 0, 0, 3, &count).unwrap();
        assert_eq!(n, bdd.var(0).unwrap());
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(4), 2);
        assert_eq!(ceil_log2(5), 3);
    }
}
