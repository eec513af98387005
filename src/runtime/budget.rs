//! Stage 6: token budget allocation, in integer arithmetic only.
//!
//! 1. Every bucket's *base* allotment is its share of `available`,
//!    `floor(available × share_ppm / 1e6)`, and the tokens left by flooring —
//!    `floor(available × Σshare_ppm / 1e6) − Σfloors`, fewer than the number of
//!    buckets — go one at a time by largest remainder, ties by higher priority, then
//!    name. A `min` is a floor under that share (Σmin > `available` is
//!    `budget_exhausted`, exit 5): a bucket whose share is smaller is held at its
//!    `min` as if pinned there, and the others are fitted into what is left as for a
//!    pin (step 2).
//! 2. Buckets named by the run's `bucket_tokens` (pins) get exactly that many tokens
//!    (their sum may not exceed `available`: exit 4). A pin moves only its own bucket:
//!    every other bucket keeps its base allotment, unless what the pins leave,
//!    `L = available − Σpins`, is less than those allotments sum to. Then the unpinned
//!    buckets are scaled down in proportion: each keeps its `min` (Σmin > `L` is
//!    `budget_exhausted`) and the `L − Σmin` tokens above the minimums are split in
//!    proportion to what each base allotment has above its `min` — floors, then the
//!    tokens left by flooring one at a time by largest remainder, ties by higher
//!    priority, then name. Tokens a pin frees stay unused.
//!
//! Shares that sum under 100% leave the rest of the budget unused, as the pack author
//! asked (W0501 warns about it); shares over 100% are refused when the pack is
//! prepared, so allocations never exceed `available`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::artifact::{Budget, Intent, Prompts};
use crate::tokens::Tokenizer;

use super::error::CompileError;
use super::inputs::RunContext;
use super::shared::Diagnostic;
use super::template::{self, Redact};

/// What the run sets of the budget: the total (`run.budget.total_tokens`, else the
/// pack's), the tokenizer (likewise) and the pinned buckets (`bucket_tokens`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits<'a> {
    pub total: u64,
    pub tokenizer: Tokenizer,
    pub pins: Option<&'a BTreeMap<String, u64>>,
}

impl<'a> Limits<'a> {
    pub fn new(budget: &Budget, run: &'a RunContext) -> Limits<'a> {
        let own = run.budget.as_ref();
        Limits {
            total: own.and_then(|b| b.total_tokens).unwrap_or(budget.total),
            tokenizer: own.and_then(|b| b.tokenizer).unwrap_or(budget.tokenizer),
            pins: own.and_then(|b| b.bucket_tokens.as_ref()),
        }
    }

    /// Pins over what `fixed` tokens leave of the total are invalid input (exit 4). A
    /// fixed text over the total is left to [`plan`], which reports it as exhausted.
    pub fn check_pins(&self, fixed: u64) -> Result<(), CompileError> {
        match self.total.checked_sub(fixed) {
            Some(available) => check_explicit(self.pins, available).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// The fixed text — the rendered system, developer and task — and its tokens, paid
/// for before the buckets are split.
#[derive(Debug, Clone)]
pub(crate) struct FixedText {
    pub system: String,
    pub developer: Option<String>,
    pub task: String,
    pub tokens: u64,
    /// `R0501` for optional fields rendered empty.
    pub diagnostics: Vec<Diagnostic>,
}

impl FixedText {
    /// Renders the fixed text over `data`, interpolated values passed through
    /// `redact`, and counts it with `count`.
    pub fn render(
        prompts: &Prompts,
        intent: &Intent,
        data: &Value,
        redact: Option<Redact<'_>>,
        count: &dyn Fn(&str) -> usize,
    ) -> FixedText {
        let mut diagnostics = Vec::new();
        let d = &mut diagnostics;
        let system =
            template::render_redacted(&prompts.system, data, "the system prompt", d, redact);
        let developer = prompts
            .developer
            .as_ref()
            .map(|t| template::render_redacted(t, data, "the developer prompt", d, redact));
        let place = format!("the task of intent `{}`", intent.name);
        let task = template::render_redacted(&intent.task, data, &place, d, redact);
        let tokens = [&system, developer.as_deref().unwrap_or(""), &task]
            .iter()
            .map(|t| count(t) as u64)
            .sum();
        FixedText {
            system,
            developer,
            task,
            tokens,
            diagnostics,
        }
    }

    /// Appends trusted text (the session state) to the developer prompt, recounting
    /// it.
    pub fn append_developer(&mut self, text: &str, count: &dyn Fn(&str) -> usize) {
        let before = self.developer.as_deref().map_or(0, |d| count(d) as u64);
        let developer = match self.developer.take() {
            Some(d) if !d.is_empty() => format!("{d}\n\n{text}"),
            _ => text.to_owned(),
        };
        self.tokens = self.tokens - before + count(&developer) as u64;
        self.developer = Some(developer);
    }

    /// Whether the fixed text interpolates nothing (so redaction cannot change it).
    pub fn is_static(prompts: &Prompts, intent: &Intent) -> bool {
        [
            Some(&prompts.system),
            prompts.developer.as_ref(),
            Some(&intent.task),
        ]
        .into_iter()
        .flatten()
        .all(template::is_static)
    }
}

/// Stage 6's result.
#[derive(Debug, Clone)]
pub(crate) struct BudgetPlan {
    pub total: u64,
    pub fixed: u64,
    pub available: u64,
    pub tokenizer: Tokenizer,
    /// Tokens by bucket name; their sum never exceeds `available`.
    pub allocations: BTreeMap<String, u64>,
}

/// Stage 6: what the fixed text leaves (`budget_exhausted` when it exceeds the total),
/// split among the buckets with `intent`'s share overrides and the run's pins.
pub(crate) fn plan(
    budget: &Budget,
    intent: &Intent,
    limits: &Limits<'_>,
    fixed: u64,
) -> Result<BudgetPlan, CompileError> {
    let total = limits.total;
    let Some(available) = total.checked_sub(fixed) else {
        return Err(CompileError::BudgetExhausted {
            message: format!(
                "the system, developer and task text take {fixed} tokens, over the total of {total}"
            ),
        });
    };
    let specs: Vec<BucketSpec> = budget
        .buckets
        .iter()
        .map(|b| BucketSpec {
            name: b.name.clone(),
            share_ppm: intent.budget.get(&b.name).copied().unwrap_or(b.share_ppm),
            priority: b.priority,
            min: b.min,
        })
        .collect();
    Ok(BudgetPlan {
        total,
        fixed,
        available,
        tokenizer: limits.tokenizer,
        allocations: allocate(&specs, available, limits.pins)?,
    })
}

/// One bucket as the allocator sees it (intent overrides already applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BucketSpec {
    pub name: String,
    pub share_ppm: u64,
    pub priority: i64,
    pub min: u64,
}

const PPM: u128 = crate::artifact::PPM as u128;

/// The sum of the run's explicit bucket tokens, which may not exceed `available`
/// (invalid input, exit 4).
pub(crate) fn check_explicit(
    explicit: Option<&BTreeMap<String, u64>>,
    available: u64,
) -> Result<u64, CompileError> {
    // Summed wide: the message says the true sum, however large the pins.
    let sum: u128 = explicit
        .into_iter()
        .flat_map(|e| e.values())
        .map(|&tokens| u128::from(tokens))
        .sum();
    match u64::try_from(sum) {
        Ok(sum) if sum <= available => Ok(sum),
        _ => Err(CompileError::input(
            "run.budget.bucket_tokens",
            format!("explicit bucket tokens sum to {sum}, over the {available} tokens available after the fixed text"),
        )),
    }
}

/// Allocations by bucket name; their sum never exceeds `available`.
pub(crate) fn allocate(
    buckets: &[BucketSpec],
    available: u64,
    explicit: Option<&BTreeMap<String, u64>>,
) -> Result<BTreeMap<String, u64>, CompileError> {
    let pinned = check_explicit(explicit, available)?;
    let mut out = BTreeMap::new();
    for (name, &tokens) in explicit.into_iter().flatten() {
        out.insert(name.clone(), tokens);
    }
    // A pin replaces its bucket's `min` too: if the minimums fit only without the
    // pinned buckets', the base allotments are those the others would have had then.
    let base = match shares(buckets, available) {
        Err(_) if !out.is_empty() => {
            let unpinned: Vec<BucketSpec> = buckets
                .iter()
                .map(|b| BucketSpec {
                    min: if out.contains_key(&b.name) { 0 } else { b.min },
                    ..b.clone()
                })
                .collect();
            shares(&unpinned, available)?
        }
        other => other?,
    };
    let free: Vec<(&BucketSpec, u64)> = buckets
        .iter()
        .zip(base)
        .filter(|(b, _)| !out.contains_key(&b.name))
        .collect();
    let fitted = fit(&free, available - pinned, " and the pinned buckets")?;
    out.extend(
        free.iter()
            .zip(fitted)
            .map(|((b, _), t)| (b.name.clone(), t)),
    );
    Ok(out)
}

/// Every bucket's allotment, in `buckets` order: `floor(available × share)` with the
/// tokens left by flooring going by largest remainder; a bucket whose allotment falls
/// below its `min` gets its `min`, and the tokens that takes come first from what the
/// shares leave unused, then from the other buckets (scaled down as for a pin).
fn shares(buckets: &[BucketSpec], available: u64) -> Result<Vec<u64>, CompileError> {
    let min_sum: u64 = buckets.iter().map(|b| b.min).fold(0, u64::saturating_add);
    if min_sum > available {
        return Err(exhausted(min_sum, available, ""));
    }
    let weights: Vec<u128> = buckets.iter().map(|b| u128::from(b.share_ppm)).collect();
    let weight_sum: u128 = weights.iter().sum::<u128>().min(PPM);
    let specs: Vec<&BucketSpec> = buckets.iter().collect();
    let mut base = split(&specs, u128::from(available), &weights, weight_sum, PPM);
    let lifted: u64 = buckets
        .iter()
        .zip(&base)
        .filter(|(b, &t)| t < b.min)
        .map(|(b, _)| b.min)
        .sum();
    if lifted == 0 {
        return Ok(base);
    }
    // A lifted bucket is held at its `min` like a pin; the others keep their
    // allotments unless what is left cannot hold them.
    let free: Vec<(&BucketSpec, u64)> = buckets
        .iter()
        .zip(base.iter().copied())
        .filter(|(b, t)| *t >= b.min)
        .collect();
    // `min_sum ≤ available`, so the minimums of the others fit in what is left.
    let mut fitted = fit(&free, available - lifted, "")?.into_iter();
    for (tokens, b) in base.iter_mut().zip(buckets) {
        // The free buckets, in order, take their fitted allotments.
        *tokens = if *tokens < b.min {
            b.min
        } else {
            fitted.next().unwrap_or(*tokens)
        };
    }
    Ok(base)
}

/// The allotments of `free` (bucket, wanted) within `left` tokens: as wanted when they
/// fit; otherwise every bucket keeps its `min` and the tokens above the minimums are
/// split in proportion to what each wanted above its `min`, so they use all of `left`
/// and none grows.
fn fit(free: &[(&BucketSpec, u64)], left: u64, after: &str) -> Result<Vec<u64>, CompileError> {
    let wanted = free.iter().map(|(_, t)| *t).fold(0u64, u64::saturating_add);
    if wanted <= left {
        return Ok(free.iter().map(|(_, t)| *t).collect());
    }
    let min_sum = free
        .iter()
        .map(|(b, _)| b.min)
        .fold(0u64, u64::saturating_add);
    if min_sum > left {
        return Err(exhausted(min_sum, left, after));
    }
    let above: Vec<u128> = free
        .iter()
        .map(|(b, t)| u128::from(t.saturating_sub(b.min)))
        .collect();
    let above_sum: u128 = above.iter().sum();
    let specs: Vec<&BucketSpec> = free.iter().map(|(b, _)| *b).collect();
    // `wanted > left ≥ min_sum`, so `above_sum > 0`.
    let scaled = split(
        &specs,
        u128::from(left - min_sum),
        &above,
        above_sum,
        above_sum,
    );
    Ok(specs
        .iter()
        .zip(scaled)
        .map(|(b, tokens)| b.min + tokens)
        .collect())
}

/// Splits `amount × weight_sum / denominator` tokens by `weights / denominator`: floors
/// first, then the tokens left by flooring one at a time by largest remainder, ties by
/// higher priority, then name. Each result is at most `amount`.
fn split(
    buckets: &[&BucketSpec],
    amount: u128,
    weights: &[u128],
    weight_sum: u128,
    denominator: u128,
) -> Vec<u64> {
    let mut floors: Vec<(u128, u128)> = weights
        .iter()
        .map(|w| {
            let exact = amount * w;
            (exact / denominator, exact % denominator)
        })
        .collect();
    let floor_sum: u128 = floors.iter().map(|f| f.0).sum();
    let mut leftover = (amount * weight_sum / denominator).saturating_sub(floor_sum);
    let mut order: Vec<usize> = (0..buckets.len()).collect();
    order.sort_by(|&a, &b| {
        floors[b]
            .1
            .cmp(&floors[a].1)
            .then(buckets[b].priority.cmp(&buckets[a].priority))
            .then(buckets[a].name.cmp(&buckets[b].name))
    });
    for i in order {
        if leftover == 0 {
            break;
        }
        if floors[i].1 > 0 {
            floors[i].0 += 1;
            leftover -= 1;
        }
    }
    // Each share is at most `amount ≤ u64::MAX`, so the conversion cannot fail.
    floors
        .into_iter()
        .map(|(tokens, _)| u64::try_from(tokens).unwrap_or(u64::MAX))
        .collect()
}

fn exhausted(needed: u64, left: u64, after: &str) -> CompileError {
    CompileError::BudgetExhausted {
        message: format!(
            "bucket minimums need {needed} tokens but only {left} are available after the fixed text{after}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str, pct: u64, priority: i64, min: u64) -> BucketSpec {
        BucketSpec {
            name: name.into(),
            share_ppm: pct * 10_000,
            priority,
            min,
        }
    }

    #[test]
    fn floors_then_largest_remainder() {
        let buckets = [b("a", 33, 0, 0), b("b", 33, 0, 0), b("c", 34, 0, 0)];
        let a = allocate(&buckets, 10, None).unwrap();
        // 3.3, 3.3, 3.4 → 3, 3, 3 and one left: c has the largest remainder.
        assert_eq!(a.values().copied().collect::<Vec<_>>(), vec![3, 3, 4]);
    }

    #[test]
    fn ties_go_to_priority_then_name() {
        let buckets = [b("a", 50, 0, 0), b("b", 50, 1, 0)];
        let a = allocate(&buckets, 3, None).unwrap();
        assert_eq!((a["a"], a["b"]), (1, 2));
        let buckets = [b("a", 50, 0, 0), b("b", 50, 0, 0)];
        let a = allocate(&buckets, 3, None).unwrap();
        assert_eq!((a["a"], a["b"]), (2, 1));
    }

    #[test]
    fn a_minimum_is_a_floor_under_the_share() {
        // Shares that cover the minimums: the formula alone.
        let buckets = [b("a", 50, 0, 10), b("b", 50, 0, 0)];
        let a = allocate(&buckets, 30, None).unwrap();
        assert_eq!((a["a"], a["b"]), (15, 15));
        // 10% of 30 is under a's minimum: a gets 10, taken from b.
        let buckets = [b("a", 10, 0, 10), b("b", 90, 0, 0)];
        let a = allocate(&buckets, 30, None).unwrap();
        assert_eq!((a["a"], a["b"]), (10, 20));
        // ... or first from what the shares leave unused: b keeps its 15.
        let buckets = [b("a", 10, 0, 10), b("b", 50, 0, 0)];
        let a = allocate(&buckets, 30, None).unwrap();
        assert_eq!((a["a"], a["b"]), (10, 15));
        // Taking from the others keeps their minimums: c (60% of 30 = 18, min 15)
        // gives only 3, d (30% = 9, min 0) gives the rest.
        let buckets = [b("a", 10, 0, 10), b("c", 60, 0, 15), b("d", 30, 0, 0)];
        let a = allocate(&buckets, 30, None).unwrap();
        assert_eq!(a.values().sum::<u64>(), 30);
        assert!(a["a"] == 10 && a["c"] >= 15, "{a:?}");
        // Minimums over what is available: budget exhausted.
        let buckets = [b("a", 50, 0, 10), b("b", 50, 0, 0)];
        let e = allocate(&buckets, 5, None).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), ("budget_exhausted", 5));
    }

    #[test]
    fn shares_under_100_percent_leave_tokens_unused() {
        let a = allocate(&[b("a", 50, 0, 0)], 101, None).unwrap();
        assert_eq!(a["a"], 50);
    }

    #[test]
    fn explicit_bucket_tokens() {
        let buckets = [b("a", 50, 0, 0), b("b", 50, 0, 0)];
        // A pin below the bucket's share leaves the others as they were.
        let explicit = BTreeMap::from([("a".to_owned(), 20)]);
        let a = allocate(&buckets, 100, Some(&explicit)).unwrap();
        assert_eq!((a["a"], a["b"]), (20, 50));
        // A pin above it leaves too little: the others shrink to what is left.
        let explicit = BTreeMap::from([("a".to_owned(), 70)]);
        let a = allocate(&buckets, 100, Some(&explicit)).unwrap();
        assert_eq!((a["a"], a["b"]), (70, 30));
        let explicit = BTreeMap::from([("a".to_owned(), 170)]);
        let e = allocate(&buckets, 100, Some(&explicit)).unwrap_err();
        assert_eq!(e.exit_code(), 4);
    }

    #[test]
    fn pins_scale_the_others_in_proportion_keeping_minimums() {
        // Base: a 40% of 100 = 40 (min 10), b 30, c 30.
        let buckets = [
            b("a", 40, 0, 10),
            b("b", 30, 0, 0),
            b("c", 30, 1, 0),
            b("p", 0, 0, 0),
        ];
        let base = allocate(&buckets, 100, None).unwrap();
        assert_eq!((base["a"], base["b"], base["c"]), (40, 30, 30));
        // Pinning `p` to 50 leaves 50 for 100 wanted: minimums first (10), then the
        // 40 tokens above them split 30:30:30 → 13.3 each: floors 13, and the one left
        // goes to the higher priority (c).
        let explicit = BTreeMap::from([("p".to_owned(), 50)]);
        let a = allocate(&buckets, 100, Some(&explicit)).unwrap();
        assert_eq!((a["a"], a["b"], a["c"], a["p"]), (23, 13, 14, 50));
        // 41 tokens above the minimums → 13.7 each: two left, to c then a (by name).
        let a = allocate(&buckets, 100, Some(&BTreeMap::from([("p".to_owned(), 49)]))).unwrap();
        assert_eq!((a["a"], a["b"], a["c"]), (24, 13, 14));
        assert_eq!(a.values().sum::<u64>(), 100);
        // Pins that leave less than the minimums: budget exhausted.
        let e = allocate(&buckets, 100, Some(&BTreeMap::from([("p".to_owned(), 95)]))).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), ("budget_exhausted", 5));
    }
}
