//! A reduced ordered binary decision diagram (ROBDD) manager with a hard budget.
//!
//! Every diagram lives in one shared node table, so equal functions are equal nodes:
//! a condition is unsatisfiable exactly when its node is [`Node::FALSE`]. Operations
//! count the nodes they create and the recursive steps they take; past either limit
//! they return [`Exhausted`] instead of growing without bound, and the caller reports
//! what it could not decide as "not analysed". The limits are counts, not times, so a
//! pack gets the same answer on every machine.

use foldhash::{HashMap, HashMapExt};

/// A node of the shared table. `FALSE` and `TRUE` are the two terminals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Node(u32);

impl Node {
    pub const FALSE: Node = Node(0);
    pub const TRUE: Node = Node(1);
}

/// The budget ran out: the question is left undecided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted;

/// The variable index of the terminals: after every real variable.
const TERMINAL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    And,
    Or,
    Not,
}

/// The node table, its unique table and the operation cache.
pub struct Manager {
    /// `(variable, low child, high child)`; entries 0 and 1 are the terminals.
    nodes: Vec<(u32, Node, Node)>,
    unique: HashMap<(u32, Node, Node), Node>,
    cache: HashMap<(Op, Node, Node), Node>,
    /// Answers of [`Manager::meets`] and [`Manager::implies`], which build no nodes.
    tests: HashMap<(bool, Node, Node), bool>,
    /// Answers of [`Manager::covered`], keyed by the sorted `bs` then `a`.
    covers: HashMap<Vec<Node>, bool>,
    max_nodes: usize,
    steps_left: u64,
}

impl Manager {
    /// A manager that creates at most `max_nodes` nodes and takes at most `max_steps`
    /// uncached recursive steps over its lifetime.
    pub fn new(max_nodes: usize, max_steps: u64) -> Manager {
        Manager {
            nodes: vec![
                (TERMINAL, Node::FALSE, Node::FALSE),
                (TERMINAL, Node::TRUE, Node::TRUE),
            ],
            unique: HashMap::with_capacity(256),
            cache: HashMap::with_capacity(256),
            tests: HashMap::with_capacity(256),
            covers: HashMap::with_capacity(256),
            max_nodes,
            steps_left: max_steps,
        }
    }

    /// How many nodes the table holds, terminals included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    fn var_of(&self, n: Node) -> u32 {
        self.nodes[n.0 as usize].0
    }

    fn children(&self, n: Node) -> (Node, Node) {
        let (_, lo, hi) = self.nodes[n.0 as usize];
        (lo, hi)
    }

    /// The node `if var then hi else lo`, reduced and shared.
    pub fn mk(&mut self, var: u32, lo: Node, hi: Node) -> Result<Node, Exhausted> {
        if lo == hi {
            return Ok(lo);
        }
        if let Some(&n) = self.unique.get(&(var, lo, hi)) {
            return Ok(n);
        }
        if self.nodes.len() >= self.max_nodes {
            return Err(Exhausted);
        }
        let n = Node(u32::try_from(self.nodes.len()).map_err(|_| Exhausted)?);
        self.nodes.push((var, lo, hi));
        self.unique.insert((var, lo, hi), n);
        Ok(n)
    }

    /// The function that is true exactly when `var` is.
    pub fn var(&mut self, var: u32) -> Result<Node, Exhausted> {
        self.mk(var, Node::FALSE, Node::TRUE)
    }

    /// Counts one unit of work done outside the diagrams (a pair of policies
    /// compared), so that quadratic loops stay within the budget too.
    pub fn charge(&mut self) -> Result<(), Exhausted> {
        self.step()
    }

    fn charge_n(&mut self, n: u64) -> Result<(), Exhausted> {
        if self.steps_left < n {
            self.steps_left = 0;
            return Err(Exhausted);
        }
        self.steps_left -= n;
        Ok(())
    }

    fn step(&mut self) -> Result<(), Exhausted> {
        if self.steps_left == 0 {
            return Err(Exhausted);
        }
        self.steps_left -= 1;
        Ok(())
    }

    pub fn not(&mut self, a: Node) -> Result<Node, Exhausted> {
        match a {
            Node::FALSE => return Ok(Node::TRUE),
            Node::TRUE => return Ok(Node::FALSE),
            _ => {}
        }
        if let Some(&n) = self.cache.get(&(Op::Not, a, a)) {
            return Ok(n);
        }
        self.step()?;
        let var = self.var_of(a);
        let (lo, hi) = self.children(a);
        let lo = self.not(lo)?;
        let hi = self.not(hi)?;
        let n = self.mk(var, lo, hi)?;
        self.cache.insert((Op::Not, a, a), n);
        Ok(n)
    }

    pub fn and(&mut self, a: Node, b: Node) -> Result<Node, Exhausted> {
        self.apply(Op::And, a, b)
    }

    pub fn or(&mut self, a: Node, b: Node) -> Result<Node, Exhausted> {
        self.apply(Op::Or, a, b)
    }

    /// Does `a` imply `b`? Decided without building nodes.
    pub fn implies(&mut self, a: Node, b: Node) -> Result<bool, Exhausted> {
        if a == Node::FALSE || b == Node::TRUE || a == b {
            return Ok(true);
        }
        if a == Node::TRUE || b == Node::FALSE {
            // TRUE implies only TRUE; only FALSE implies FALSE.
            return Ok(false);
        }
        self.test(true, a, b)
    }

    /// Is `a and b` satisfiable? Decided without building nodes.
    pub fn meets(&mut self, a: Node, b: Node) -> Result<bool, Exhausted> {
        if a == Node::FALSE || b == Node::FALSE {
            return Ok(false);
        }
        if a == Node::TRUE || b == Node::TRUE || a == b {
            return Ok(true);
        }
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        self.test(false, a, b)
    }

    /// Does `a` imply `b1 or b2 or ...`? Decided without building nodes, by a search
    /// over the variables that stops at the first assignment that satisfies `a` and
    /// none of the `bs`, so that no union of the `bs` is ever built.
    pub fn covered(&mut self, a: Node, bs: &[Node]) -> Result<bool, Exhausted> {
        // Most questions have an answer of "no" that a greedy descent finds at once.
        if bs.len() > 1 && self.greedy(a, bs).is_some() {
            return Ok(false);
        }
        self.covered_rec(a, bs)
    }

    /// An assignment satisfying `a` and none of `bs`, found by walking down the
    /// variables and taking at each the branch that keeps `a` possible, makes no `b`
    /// certain and rules out the most `b`s; `None` when that walk gets stuck (which
    /// proves nothing). Linear in the depth times the number of `bs`.
    fn greedy(&self, a: Node, bs: &[Node]) -> Option<Vec<(u32, bool)>> {
        let mut a = a;
        let mut bs: Vec<Node> = bs.iter().copied().filter(|&b| b != Node::FALSE).collect();
        let mut path = Vec::new();
        loop {
            if a == Node::FALSE || bs.contains(&Node::TRUE) {
                return None;
            }
            if bs.is_empty() {
                path.extend(self.sat_path(a)?);
                return Some(path);
            }
            let var = bs
                .iter()
                .fold(self.var_of(a), |v, &b| v.min(self.var_of(b)));
            let mut best: Option<(usize, bool)> = None;
            for bit in [false, true] {
                let pick = |n: Node| {
                    let (lo, hi) = self.cofactors(n, var);
                    if bit {
                        hi
                    } else {
                        lo
                    }
                };
                if pick(a) == Node::FALSE || bs.iter().any(|&b| pick(b) == Node::TRUE) {
                    continue;
                }
                let ruled_out = bs.iter().filter(|&&b| pick(b) == Node::FALSE).count();
                if best.is_none_or(|(score, _)| ruled_out > score) {
                    best = Some((ruled_out, bit));
                }
            }
            let (_, bit) = best?;
            let pick = |n: Node| {
                let (lo, hi) = self.cofactors(n, var);
                if bit {
                    hi
                } else {
                    lo
                }
            };
            path.push((var, bit));
            a = pick(a);
            bs = bs
                .iter()
                .map(|&b| pick(b))
                .filter(|&b| b != Node::FALSE)
                .collect();
        }
    }

    fn covered_rec(&mut self, a: Node, bs: &[Node]) -> Result<bool, Exhausted> {
        if a == Node::FALSE {
            return Ok(true);
        }
        let mut key: Vec<Node> = Vec::with_capacity(bs.len() + 1);
        for &b in bs {
            if b == Node::TRUE || b == a {
                return Ok(true);
            }
            // A `b` that misses `a` covers none of it.
            if b != Node::FALSE && self.meets(a, b)? {
                key.push(b);
            }
        }
        match key.as_slice() {
            [] => return Ok(false),
            [b] => return self.implies(a, *b),
            _ => {}
        }
        key.sort_unstable();
        key.dedup();
        key.push(a);
        if let Some(&answer) = self.covers.get(&key) {
            return Ok(answer);
        }
        // The work of a step grows with the number of conditions it carries.
        self.charge_n(key.len() as u64)?;
        let a = key.pop().unwrap_or(a);
        let var = key
            .iter()
            .fold(self.var_of(a), |v, &b| v.min(self.var_of(b)));
        let (a0, a1) = self.cofactors(a, var);
        let (b0, b1): (Vec<Node>, Vec<Node>) = key.iter().map(|&b| self.cofactors(b, var)).unzip();
        let answer = self.covered_rec(a0, &b0)? && self.covered_rec(a1, &b1)?;
        key.push(a);
        self.covers.insert(key, answer);
        Ok(answer)
    }

    /// A path satisfying `a` and none of `bs` (preferring `false` at each variable),
    /// or `None` when there is none. Builds no nodes.
    pub fn path_avoiding(
        &mut self,
        a: Node,
        bs: &[Node],
    ) -> Result<Option<Vec<(u32, bool)>>, Exhausted> {
        if bs.len() > 1 {
            if let Some(path) = self.greedy(a, bs) {
                return Ok(Some(path));
            }
        }
        if self.covered_rec(a, bs)? {
            return Ok(None);
        }
        let mut a = a;
        let mut bs: Vec<Node> = bs.iter().copied().filter(|&b| b != Node::FALSE).collect();
        let mut path = Vec::new();
        while a != Node::TRUE || !bs.is_empty() {
            let var = bs
                .iter()
                .fold(self.var_of(a), |v, &b| v.min(self.var_of(b)));
            let (a0, a1) = self.cofactors(a, var);
            let (b0, b1): (Vec<Node>, Vec<Node>) =
                bs.iter().map(|&b| self.cofactors(b, var)).unzip();
            if !self.covered_rec(a0, &b0)? {
                path.push((var, false));
                (a, bs) = (a0, b0);
            } else {
                path.push((var, true));
                (a, bs) = (a1, b1);
            }
            bs.retain(|&b| b != Node::FALSE);
        }
        Ok(Some(path))
    }

    /// The children of `n` for `var` at or above its own variable.
    fn cofactors(&self, n: Node, var: u32) -> (Node, Node) {
        if self.var_of(n) == var {
            self.children(n)
        } else {
            (n, n)
        }
    }

    /// `implies` (when `implication`) or `meets`, on two inner nodes, by their
    /// cofactors.
    fn test(&mut self, implication: bool, a: Node, b: Node) -> Result<bool, Exhausted> {
        if let Some(&answer) = self.tests.get(&(implication, a, b)) {
            return Ok(answer);
        }
        self.step()?;
        let (va, vb) = (self.var_of(a), self.var_of(b));
        let var = va.min(vb);
        let (a0, a1) = if va == var { self.children(a) } else { (a, a) };
        let (b0, b1) = if vb == var { self.children(b) } else { (b, b) };
        let answer = if implication {
            self.implies(a0, b0)? && self.implies(a1, b1)?
        } else {
            self.meets(a0, b0)? || self.meets(a1, b1)?
        };
        self.tests.insert((implication, a, b), answer);
        Ok(answer)
    }

    fn apply(&mut self, op: Op, a: Node, b: Node) -> Result<Node, Exhausted> {
        let (absorbing, neutral) = match op {
            Op::And => (Node::FALSE, Node::TRUE),
            _ => (Node::TRUE, Node::FALSE),
        };
        if a == absorbing || b == absorbing {
            return Ok(absorbing);
        }
        if a == neutral || a == b {
            return Ok(b);
        }
        if b == neutral {
            return Ok(a);
        }
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        if let Some(&n) = self.cache.get(&(op, a, b)) {
            return Ok(n);
        }
        self.step()?;
        let (va, vb) = (self.var_of(a), self.var_of(b));
        let var = va.min(vb);
        let (a0, a1) = if va == var { self.children(a) } else { (a, a) };
        let (b0, b1) = if vb == var { self.children(b) } else { (b, b) };
        let lo = self.apply(op, a0, b0)?;
        let hi = self.apply(op, a1, b1)?;
        let n = self.mk(var, lo, hi)?;
        self.cache.insert((op, a, b), n);
        Ok(n)
    }

    /// One satisfying path of `n`, as the variables it tests and the value each takes
    /// (preferring `false`), or `None` for `FALSE`. Variables off the path are free.
    pub fn sat_path(&self, mut n: Node) -> Option<Vec<(u32, bool)>> {
        if n == Node::FALSE {
            return None;
        }
        let mut path = Vec::new();
        while n != Node::TRUE {
            let (var, lo, hi) = self.nodes[n.0 as usize];
            if lo != Node::FALSE {
                path.push((var, false));
                n = lo;
            } else {
                path.push((var, true));
                n = hi;
            }
        }
        Some(path)
    }

    /// The value of `n` under `assignment` (variables it does not list are `false`).
    #[cfg(test)]
    pub fn eval(&self, mut n: Node, assignment: &dyn Fn(u32) -> bool) -> bool {
        while n != Node::TRUE && n != Node::FALSE {
            let (var, lo, hi) = self.nodes[n.0 as usize];
            n = if assignment(var) { hi } else { lo };
        }
        n == Node::TRUE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_functions_are_equal_nodes() {
        let mut m = Manager::new(1000, 10_000);
        let (x, y) = (m.var(0).unwrap(), m.var(1).unwrap());
        let a = m.and(x, y).unwrap();
        let ny = m.not(y).unwrap();
        let nx = m.not(x).unwrap();
        let o = m.or(nx, ny).unwrap();
        let b = m.not(o).unwrap();
        assert_eq!(a, b);
        let contradiction = m.and(a, nx).unwrap();
        assert_eq!(contradiction, Node::FALSE);
        assert!(!m.meets(a, nx).unwrap());
        assert!(m.meets(x, ny).unwrap());
        assert!(m.implies(a, x).unwrap());
        assert!(!m.implies(x, a).unwrap());
        assert!(m.implies(Node::FALSE, nx).unwrap());
        // x implies (x and y) or (x and not y); not (x or y) avoids both.
        let xny = m.and(x, ny).unwrap();
        assert!(m.covered(x, &[a, xny]).unwrap());
        assert!(!m.covered(Node::TRUE, &[a, xny]).unwrap());
        let nxny = m.path_avoiding(Node::TRUE, &[x, y]).unwrap().unwrap();
        assert_eq!(nxny, vec![(0, false), (1, false)]);
        assert_eq!(m.path_avoiding(x, &[a, xny]).unwrap(), None);
        let z = m.var(2).unwrap();
        assert!(!m.covered(Node::TRUE, &[x, y, z]).unwrap());
        let nz = m.not(z).unwrap();
        assert!(m.covered(Node::TRUE, &[x, y, z, nz]).unwrap());
        assert!(!m.implies(Node::TRUE, x).unwrap());
        let path = m.sat_path(a).unwrap();
        assert_eq!(path, vec![(0, true), (1, true)]);
        assert!(m.eval(a, &|v| v < 2));
        assert!(!m.eval(a, &|v| v == 0));
    }

    #[test]
    fn the_budget_stops_growth() {
        // (x0 and x10) or (x1 and x11) or ... with the x's ordered first: exponential.
        let mut m = Manager::new(200, 1_000_000);
        let mut acc = Node::FALSE;
        let mut failed = false;
        for i in 0..10 {
            let a = m.var(i).unwrap();
            let b = m.var(i + 10).unwrap();
            let step = m.and(a, b).and_then(|ab| m.or(acc, ab));
            match step {
                Ok(n) => acc = n,
                Err(Exhausted) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed);
        assert!(m.len() <= 200);
    }
}
