//! Budget arithmetic: shares (E0501, W0501), the total (E0502), bucket minimums
//! (E0503), fixed text against the total (E0504) and runtime sources without a
//! bucket (W0502).

use std::collections::BTreeMap;

use crate::artifact::{TemplatePart, PPM};
use crate::diagnostic::Diagnostic;
use crate::ir::{Pack, TemplateIr};

/// The buckets the runtime routes its own inputs to.
pub const RUNTIME_SOURCES: &[&str] = &["policy", "tools", "evidence", "memory", "session"];

pub fn check(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    let Some(budget) = &pack.budget else { return };

    let shares: BTreeMap<&str, u64> = budget
        .buckets
        .iter()
        .filter_map(|b| b.share_ppm.map(|s| (b.name.as_str(), s)))
        .collect();
    // A duplicated bucket is E0101, a bucket without a share E0103 (either leaves
    // fewer shares than buckets); the sums are then anyone's guess, so they are not
    // checked until that is fixed.
    let unknown = shares.len() != budget.buckets.len();
    let sum: u64 = shares.values().sum();
    if unknown {
    } else if sum > PPM {
        let mut d = Diagnostic::new(
            "E0501",
            budget.keyword,
            format!("bucket shares sum to {}, over 100%", percent(sum)),
        )
        .with_label("over-allocated budget")
        .with_help("lower some `share`s so that they sum to 100%");
        for b in &budget.buckets {
            if let (Some(share), Some(span)) = (b.share_ppm, b.share_span) {
                d = d.with_secondary(span, format!("`{}`: {}", b.name, percent(share)));
            }
        }
        diags.push(d);
    } else if sum < PPM && !budget.buckets.is_empty() {
        diags.push(
            Diagnostic::new(
                "W0501",
                budget.keyword,
                format!("bucket shares sum to {}, under 100%", percent(sum)),
            )
            .with_label("part of the budget is never allocated")
            .with_help("raise some `share`s so that they sum to 100%"),
        );
    }
    // Over 100% already: the pack's E0501 is the mistake; an intent's sums are
    // checked once the pack's shares are right.
    for intent in pack.intents.iter().filter(|_| !unknown && sum <= PPM) {
        let Some(o) = &intent.budget else { continue };
        let mut effective = shares.clone();
        for (bucket, share) in &o.overrides {
            if effective.contains_key(bucket.name.as_ref()) {
                effective.insert(bucket.name.as_ref(), *share);
            }
        }
        let sum: u64 = effective.values().sum();
        if sum > PPM {
            diags.push(
                Diagnostic::new(
                    "E0501",
                    o.keyword,
                    format!("with intent `{}`'s overrides, bucket shares sum to {}, over 100%", intent.name, percent(sum)),
                )
                .with_label("over-allocated budget")
                .with_help("an override replaces that bucket's share; lower the overrides or the pack's other shares"),
            );
        }
    }

    let total = match budget.total {
        None => {
            diags.push(
                Diagnostic::new("E0502", budget.keyword, "budget has no `total`")
                    .with_label("missing `total`")
                    .with_help("declare the token budget of the whole prompt: `total 16_000`"),
            );
            None
        }
        Some((t, span)) if t <= 0 => {
            diags.push(
                Diagnostic::new(
                    "E0502",
                    span,
                    format!("budget total must be positive, found {t}"),
                )
                .with_label("not positive")
                .with_help("declare a positive number of tokens, e.g. `total 16_000`"),
            );
            None
        }
        Some((t, span)) => Some((t as u64, span)),
    };

    if let Some((total, total_span)) = total {
        // A second bucket of a name is E0101 and not checked further.
        let mut named = std::collections::HashSet::new();
        for b in budget
            .buckets
            .iter()
            .filter(|b| named.insert(b.name.as_str()))
        {
            let (Some((min, min_span)), Some(share)) = (b.min, b.share_ppm) else {
                continue;
            };
            let cap = (u128::from(total) * u128::from(share) / u128::from(PPM)) as u64;
            if min > 0 && min as u64 > cap {
                diags.push(
                    Diagnostic::new(
                        "E0503",
                        min_span,
                        format!("bucket `{}` needs at least {min} tokens but its share is {cap} of {total}", b.name),
                    )
                    .with_label("minimum above the share")
                    .with_help("lower `min` or raise the bucket's `share`"),
                );
            }
        }
        fixed_text(pack, budget, total, total_span, diags);
    }

    if !pack.library {
        for source in RUNTIME_SOURCES {
            if !budget.buckets.iter().any(|b| b.name == *source) {
                diags.push(
                    Diagnostic::new("W0502", budget.keyword, format!("no `{source}` bucket: its blocks will always be dropped"))
                        .with_label(format!("no `{source}` bucket"))
                        .with_help(format!("add `bucket {source} {{ share N% }}` to route the runtime's {source} blocks")),
                );
            }
        }
    }
}

/// E0504: the fixed text (system and developer prompts, the longest task) against
/// the total.
fn fixed_text(
    pack: &Pack,
    budget: &crate::ir::BudgetIr,
    total: u64,
    total_span: crate::span::Span,
    diags: &mut Vec<Diagnostic>,
) {
    let tokenizer = budget.tokenizer;
    // A token covers at least one byte, so the bytes bound the count: when even
    // they fit, nothing needs counting (an editor checks on every keystroke).
    if fixed_bytes(pack, longest_task(pack)) as u64 <= total {
        return;
    }
    let count = |t: &Option<TemplateIr>| t.as_ref().map_or(0, |t| literal_tokens(tokenizer, t));
    let fixed = count(&pack.system) + count(&pack.developer);
    let longest = pack
        .intents
        .iter()
        .map(|i| (count(&i.task), i.name.as_str()))
        .max_by_key(|(n, _)| *n);
    let (task, task_name) = longest.unwrap_or((0, ""));
    let needed = (fixed + task) as u64;
    if needed > total {
        diags.push(
            Diagnostic::new(
                "E0504",
                total_span,
                format!("the fixed text needs {needed} tokens, over the total of {total}"),
            )
            .with_label("too small for the prompts")
            .with_help(format!(
                "system + developer prompts take {fixed} {} tokens and the longest task (`{task_name}`) {task}; raise `total` or shorten the prompts",
                tokenizer.as_str()
            )),
        );
    }
}

/// The bytes of the literal text of the prompts and of a task `task` bytes long.
fn fixed_bytes(pack: &Pack, task: usize) -> usize {
    let bytes = |t: &Option<TemplateIr>| t.as_ref().map_or(0, literal_len);
    bytes(&pack.system) + bytes(&pack.developer) + task
}

/// The bytes of the literal text of the pack's longest task.
pub(crate) fn longest_task(pack: &Pack) -> usize {
    pack.intents
        .iter()
        .map(|i| i.task.as_ref().map_or(0, literal_len))
        .max()
        .unwrap_or(0)
}

/// Whether the fixed-text check (E0504) finds nothing without reading any task
/// beyond its length, were the longest `longest` bytes: the pack has no positive
/// total, or the prompts and such a task fit it even counted in bytes.
pub(crate) fn tasks_fit(pack: &Pack, longest: usize) -> bool {
    match pack.budget.as_ref().and_then(|b| b.total) {
        Some((total, _)) if total > 0 => fixed_bytes(pack, longest) as u64 <= total as u64,
        _ => true,
    }
}

/// The literal pieces of a template: its text and its defaults.
fn literal_parts(t: &TemplateIr) -> impl Iterator<Item = &str> {
    t.parts.iter().filter_map(|part| match part {
        TemplatePart::Text(s) => Some(s.as_str()),
        TemplatePart::Path { default, .. } => default.as_deref(),
    })
}

/// The length in bytes of a template's literal text plus its defaults.
pub(crate) fn literal_len(t: &TemplateIr) -> usize {
    literal_parts(t).map(str::len).sum()
}

/// Tokens of a template's literal text plus its defaults: a lower bound of what it
/// renders to, since interpolated values are only known at run time.
fn literal_tokens(tokenizer: crate::artifact::Tokenizer, t: &TemplateIr) -> usize {
    crate::tokens::count(tokenizer, &literal_parts(t).collect::<String>())
}

fn percent(ppm: u64) -> String {
    let whole = ppm / 10_000;
    let frac = ppm % 10_000;
    if frac == 0 {
        format!("{whole}%")
    } else {
        let f = format!("{frac:04}");
        format!("{whole}.{}%", f.trim_end_matches('0'))
    }
}
