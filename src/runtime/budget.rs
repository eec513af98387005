//! Stage 6: token budget allocation, in integer arithmetic only.
//!
//! 1. Buckets named by the run's `bucket_tokens` get exactly that many tokens (their sum
//!    may not exceed `available`: exit 4).
//! 2. The other buckets split what is left: each first gets its `min` (if the minimums
//!    do not fit: `budget_exhausted`, exit 5); the rest `R` is split by share,
//!    `floor(R × share_ppm / 1e6)` each, and the tokens left by flooring —
//!    `floor(R × Σshare_ppm / 1e6) − Σfloors`, fewer than the number of buckets — go one
//!    at a time by largest remainder, ties by higher priority, then name.
//!
//! Shares that sum under 100% leave the rest of the budget unused, as the pack author
//! asked (W0501 warns about it); shares over 100% are refused when the pack is
//! prepared, so allocations never exceed `available`.

use std::collections::BTreeMap;

use super::error::CompileError;

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
    let sum = explicit
        .into_iter()
        .flat_map(|e| e.values())
        .fold(0u64, |sum, &tokens| sum.saturating_add(tokens));
    if sum > available {
        return Err(CompileError::input(
            "run.budget.bucket_tokens",
            format!("explicit bucket tokens sum to {sum}, over the {available} tokens available after the fixed text"),
        ));
    }
    Ok(sum)
}

/// Allocations by bucket name; their sum never exceeds `available`.
pub(crate) fn allocate(
    buckets: &[BucketSpec],
    available: u64,
    explicit: Option<&BTreeMap<String, u64>>,
) -> Result<BTreeMap<String, u64>, CompileError> {
    let mut out = BTreeMap::new();
    let rest = available - check_explicit(explicit, available)?;
    for (name, &tokens) in explicit.into_iter().flatten() {
        out.insert(name.clone(), tokens);
    }
    let shared: Vec<&BucketSpec> = buckets
        .iter()
        .filter(|b| !out.contains_key(&b.name))
        .collect();
    let min_sum: u64 = shared.iter().map(|b| b.min).fold(0, u64::saturating_add);
    if min_sum > rest {
        return Err(CompileError::BudgetExhausted {
            message: format!(
                "bucket minimums need {min_sum} tokens but only {rest} are available after the fixed text"
            ),
        });
    }
    let r = u128::from(rest - min_sum);
    let ppm_sum: u128 = shared
        .iter()
        .map(|b| u128::from(b.share_ppm))
        .sum::<u128>()
        .min(PPM);
    let mut floors = Vec::with_capacity(shared.len());
    let mut floor_sum: u128 = 0;
    for b in &shared {
        let exact = r * u128::from(b.share_ppm);
        floors.push((exact / PPM, exact % PPM));
        floor_sum += exact / PPM;
    }
    let target = r * ppm_sum / PPM;
    let mut leftover = target.saturating_sub(floor_sum);
    let mut order: Vec<usize> = (0..shared.len()).collect();
    order.sort_by(|&a, &b| {
        floors[b]
            .1
            .cmp(&floors[a].1)
            .then(shared[b].priority.cmp(&shared[a].priority))
            .then(shared[a].name.cmp(&shared[b].name))
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
    for (b, (tokens, _)) in shared.iter().zip(floors) {
        // `tokens ≤ r ≤ u64::MAX`, so the conversion cannot fail.
        let tokens = u64::try_from(tokens).unwrap_or(u64::MAX);
        out.insert(b.name.clone(), b.min + tokens);
    }
    Ok(out)
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
    fn minimums_first() {
        let buckets = [b("a", 50, 0, 10), b("b", 50, 0, 0)];
        let a = allocate(&buckets, 30, None).unwrap();
        assert_eq!((a["a"], a["b"]), (20, 10));
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
        let explicit = BTreeMap::from([("a".to_owned(), 70)]);
        let a = allocate(&buckets, 100, Some(&explicit)).unwrap();
        assert_eq!((a["a"], a["b"]), (70, 15));
        let explicit = BTreeMap::from([("a".to_owned(), 170)]);
        let e = allocate(&buckets, 100, Some(&explicit)).unwrap_err();
        assert_eq!(e.exit_code(), 4);
    }
}
