//! Human and JSON renderings of an [`ArtifactDiff`].
//!
//! The human form opens with the safety-relevant changes, then one section per kind
//! of item with `+` (added), `-` (removed) and `~` (changed) markers and `⚠` on every
//! safety-relevant line. Sections without changes are left out. Both forms are
//! deterministic: no colors, no widths taken from the terminal.

use std::fmt::Write;

use serde_json::Value;

use super::{ArtifactDiff, Entry, FieldChange, ItemChange, Section};
use crate::artifact::PPM;

/// The `--format json` document, pretty-printed, with a final newline.
pub fn to_json(diff: &ArtifactDiff) -> String {
    let mut out =
        serde_json::to_string_pretty(diff).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    out.push('\n');
    out
}

/// The human form.
pub fn to_human(diff: &ArtifactDiff) -> String {
    let mut out = String::new();
    let id = |p: &super::PackId| format!("{}@{}", p.name, p.version);
    let hash = |p: &super::PackId| p.hash.clone().unwrap_or_else(|| "(unsealed)".into());
    let _ = writeln!(out, "{} → {}", id(&diff.from), id(&diff.to));
    let _ = writeln!(out, "  from {}", hash(&diff.from));
    let _ = writeln!(out, "  to   {}", hash(&diff.to));
    if !diff.differs {
        out.push_str("\nno differences\n");
        return out;
    }

    if !diff.safety.is_empty() {
        let _ = writeln!(out, "\nSafety-relevant changes ({}):", diff.safety.len());
        for n in &diff.safety {
            let _ = write!(
                out,
                "  ⚠ {:<9} {}: {} `{}`",
                n.effect.as_str(),
                n.kind.describe(),
                singular(n.section),
                n.item
            );
            let _ = match (&n.field, n.detail.as_str()) {
                (_, "") => writeln!(out),
                (None, detail) => writeln!(out, " ({detail})"),
                (Some(_), detail) => writeln!(out, ": {detail}"),
            };
        }
    }

    if !diff.impact.is_empty() {
        out.push_str("\nImpact by intent:\n");
        for i in &diff.impact {
            for c in &i.changes {
                let mark = if c.weakens { "⚠ " } else { "" };
                let _ = writeln!(out, "  {mark}`{}`: {}", i.intent, c.change);
            }
        }
    }

    if !diff.pack.is_empty() {
        out.push_str("\nPack:\n");
        for c in &diff.pack {
            field_line(&mut out, "  ", c);
        }
    }
    section(&mut out, "Tools", &diff.tools);
    section(&mut out, "Policies", &diff.policies);
    if !diff.budget.changes.is_empty() || !diff.budget.buckets.is_empty() {
        // The budget's own fields (total, tokenizer) count as changes beside its
        // buckets', so that the count is the number of lines below it.
        let _ = writeln!(
            out,
            "\nBudget:{}",
            counts_with(&diff.budget.buckets, diff.budget.changes.len())
        );
        for c in &diff.budget.changes {
            field_line(&mut out, "  ", c);
        }
        items(&mut out, "bucket ", &diff.budget.buckets);
    }
    if !diff.prompts.is_empty() {
        out.push_str("\nPrompts:\n");
        for c in &diff.prompts {
            field_line(&mut out, "  ", c);
        }
    }
    section(&mut out, "Intents", &diff.intents);
    section(&mut out, "Context", &diff.context);
    section(&mut out, "Redactors", &diff.redactors);
    section(&mut out, "Blocks", &diff.blocks);
    section(&mut out, "Prohibitions", &diff.prohibitions);
    section(&mut out, "Dependencies", &diff.dependencies);
    out
}

fn section(out: &mut String, title: &str, s: &Section) {
    if s.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}:{}", counts(s));
    items(out, "", s);
}

/// ` 1 added, 2 changed`, or nothing when the section is empty.
fn counts(s: &Section) -> String {
    counts_with(s, 0)
}

/// The counts of `s`, with `more_changed` changes besides its changed items.
fn counts_with(s: &Section, more_changed: usize) -> String {
    let parts: Vec<String> = [
        (s.added.len(), "added"),
        (s.removed.len(), "removed"),
        (s.changed.len() + more_changed, "changed"),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" {}", parts.join(", "))
    }
}

fn items(out: &mut String, prefix: &str, s: &Section) {
    for e in &s.added {
        entry_line(out, '+', prefix, e);
    }
    for e in &s.removed {
        entry_line(out, '-', prefix, e);
    }
    for ItemChange { name, changes, did } in &s.changed {
        let _ = writeln!(out, "  ~ {prefix}{name}:");
        if !did.is_empty() {
            out.push_str("      was:\n");
            for line in did {
                let _ = writeln!(out, "        {line}");
            }
        }
        for c in changes {
            field_line(out, "      ", c);
        }
    }
}

fn entry_line(out: &mut String, marker: char, prefix: &str, e: &Entry) {
    let _ = write!(out, "  {marker} {prefix}{}: {}", e.name, e.summary);
    if let Some(kind) = e.safety {
        let _ = write!(out, "  ⚠ {}", kind.describe());
    }
    out.push('\n');
    for line in &e.does {
        let _ = writeln!(out, "      {line}");
    }
}

fn field_line(out: &mut String, indent: &str, c: &FieldChange) {
    let label = if c.field == "share_ppm" {
        "share"
    } else {
        c.field.as_str()
    };
    let _ = write!(out, "{indent}~ {label}:");
    match (&c.diff, &c.from, &c.to) {
        (Some(_), _, _) => {}
        (None, Some(from), Some(to)) if c.field == "tools" && from.is_array() => {
            let (gained, lost) = super::string_set_delta(from, to);
            let mut parts: Vec<String> = gained.iter().map(|t| format!("+{t}")).collect();
            parts.extend(lost.iter().map(|t| format!("-{t}")));
            if parts.is_empty() {
                let _ = write!(out, " reordered {} → {}", compact(from), compact(to));
            } else {
                let _ = write!(out, " {}", parts.join(" "));
            }
        }
        (None, from, to) => {
            let show = |v: &Option<Value>| match v {
                Some(Value::Number(n)) if c.field == "share_ppm" => {
                    n.as_u64().map_or_else(|| n.to_string(), percent)
                }
                // An intent's share overrides, by bucket.
                Some(Value::Object(shares)) if c.field == "budget" => shares_line(shares),
                Some(v) => compact(v),
                None => "none".into(),
            };
            let _ = write!(out, " {} → {}", show(from), show(to));
        }
    }
    if !c.safety.is_empty() {
        let kinds: Vec<&str> = c.safety.iter().map(|k| k.describe()).collect();
        let _ = write!(out, "  ⚠ {}", kinds.join(", "));
    }
    out.push('\n');
    if let Some(diff) = &c.diff {
        for line in diff.lines() {
            let _ = writeln!(out, "{indent}    {line}");
        }
    }
}

/// An intent's bucket shares (`evidence 40%, memory 15%`), or `none`.
fn shares_line(shares: &serde_json::Map<String, Value>) -> String {
    if shares.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = shares
        .iter()
        .map(|(bucket, ppm)| match ppm.as_u64() {
            Some(ppm) => format!("{bucket} {}", percent(ppm)),
            None => format!("{bucket} {}", compact(ppm)),
        })
        .collect();
    parts.join(", ")
}

/// A value on one line: identifiers, numbers and versions bare, other strings quoted,
/// anything else as compact JSON; `none` for null.
pub fn compact(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::String(s)
            if !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.:/@+-".contains(&b)) =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// Parts per million as a percentage of the budget; exact, no float rounding.
pub fn percent(ppm: u64) -> String {
    let per_cent = PPM / 100;
    let (whole, frac) = (ppm / per_cent, ppm % per_cent);
    if frac == 0 {
        format!("{whole}%")
    } else {
        format!("{whole}.{}%", format!("{frac:04}").trim_end_matches('0'))
    }
}

fn singular(section: &str) -> &str {
    match section {
        "tools" => "tool",
        "policies" => "policy",
        "buckets" => "bucket",
        "intents" => "intent",
        "redactors" => "redactor",
        "blocks" => "block",
        "prohibitions" => "prohibition of",
        "dependencies" => "dependency",
        "context" => "context field",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentages_are_exact() {
        assert_eq!(percent(300_000), "30%");
        assert_eq!(percent(125_000), "12.5%");
        assert_eq!(percent(1), "0.0001%");
        assert_eq!(percent(0), "0%");
        assert_eq!(percent(1_000_000), "100%");
    }

    #[test]
    fn intent_shares_are_percentages() {
        let shares = |v: Value| shares_line(v.as_object().unwrap());
        assert_eq!(shares(json!({})), "none");
        assert_eq!(
            shares(json!({"evidence": 400_000, "memory": 125_000})),
            "evidence 40%, memory 12.5%"
        );
        let mut out = String::new();
        field_line(
            &mut out,
            "  ",
            &FieldChange {
                field: "budget".into(),
                from: Some(json!({})),
                to: Some(json!({"evidence": 400_000})),
                diff: None,
                safety: Vec::new(),
            },
        );
        assert_eq!(out, "  ~ budget: none → evidence 40%\n");
    }

    #[test]
    fn compact_values() {
        assert_eq!(compact(&json!("review")), "review");
        assert_eq!(compact(&json!("acme/x@1.0.0")), "acme/x@1.0.0");
        assert_eq!(compact(&json!("two words")), "\"two words\"");
        assert_eq!(compact(&json!("")), "\"\"");
        assert_eq!(compact(&json!(null)), "none");
        assert_eq!(compact(&json!({"a": [1, 2]})), "{\"a\":[1,2]}");
    }
}
