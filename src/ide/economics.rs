//! What a pack costs, in the editor: inlay hints with the tokens of each tool's
//! block, each untemplated block and prompt, and each bucket's share of the total;
//! and per intent, the tools it surfaces in its own safety mode and its fixed text.
//!
//! The counts are the runtime's: the pack is lowered and prepared as for a compile,
//! and a tool's or an untemplated block's hint is exactly the `tokens` of that block
//! in a compiled context. Computed once per analysis, on first request, and only for
//! a pack without errors (there is no artifact to count otherwise).

use crate::analysis::Status;
use crate::artifact::TemplatePart;
use crate::ir::{Pack, TemplateIr};
use crate::runtime::PreparedPack;
use crate::span::Span;

use super::Analysis;

/// A label shown after `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlayHint {
    /// Byte offset the hint is shown at (the end of the name it is about).
    pub offset: usize,
    pub label: String,
    pub tooltip: String,
}

/// What one intent costs and surfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentLens {
    pub intent: String,
    /// The intent's name.
    pub span: Span,
    /// Its own safety mode.
    pub safety: String,
    /// Tools every request of the intent (not refused) surfaces in that mode.
    pub surfaced: usize,
    /// Tools that policies surface for some requests and withhold for others.
    pub conditional: usize,
    /// Tokens of the system, developer and task text.
    pub fixed_tokens: usize,
    /// False when a template interpolates request values: `fixed_tokens` counts its
    /// literal text only.
    pub fixed_exact: bool,
}

/// The economics of one version of a pack.
#[derive(Debug, Clone, Default)]
pub struct Economics {
    hints: Vec<InlayHint>,
    lenses: Vec<IntentLens>,
}

fn is_static(t: &TemplateIr) -> bool {
    t.parts.iter().all(|p| matches!(p, TemplatePart::Text(_)))
}

/// The literal text of a template (all of it when it interpolates nothing).
fn literal(t: &TemplateIr) -> String {
    t.parts
        .iter()
        .filter_map(|p| match p {
            TemplatePart::Text(s) => Some(s.as_str()),
            _ => None,
        })
        .collect()
}

fn tokens_label(n: usize, exact: bool) -> String {
    if exact {
        format!("{n} tokens")
    } else {
        format!("{n}+ tokens")
    }
}

impl Economics {
    pub(super) fn compute(a: &Analysis) -> Economics {
        if a.diagnostics().iter().any(|d| d.is_error()) {
            return Economics::default();
        }
        let pack = &a.checked().pack;
        if pack.library || pack.budget.is_none() {
            return Economics::default();
        }
        let Ok(prepared) = PreparedPack::new(crate::lower::lower(pack, Vec::new())) else {
            return Economics::default();
        };
        let mut hints = Vec::new();
        let tokenizer = pack
            .budget
            .as_ref()
            .map_or("o200k", |b| b.tokenizer.as_str());
        for (name, n) in prepared.tool_tokens() {
            if let Some(t) = pack.tools.iter().find(|t| t.name == name) {
                hints.push(InlayHint {
                    offset: t.name_span.end,
                    label: tokens_label(n, true),
                    tooltip: format!(
                        "the `tools` block of `{name}` (name, description and input schema), {tokenizer}"
                    ),
                });
            }
        }
        for (name, n) in prepared.block_tokens() {
            if let (Some(b), Some(n)) = (pack.blocks.iter().find(|b| b.name == name), n) {
                hints.push(InlayHint {
                    offset: b.name_span.end,
                    label: tokens_label(n, true),
                    tooltip: format!("block `{name}` in bucket `{}`, {tokenizer}", b.bucket.name),
                });
            }
        }
        for (prompt, what) in [(&pack.system, "system"), (&pack.developer, "developer")] {
            if let Some(t) = prompt {
                let exact = is_static(t);
                hints.push(InlayHint {
                    offset: t.span.start,
                    label: tokens_label(prepared.tokens_of(&literal(t)), exact),
                    tooltip: format!(
                        "the {what} prompt, {tokenizer}{}",
                        if exact {
                            ""
                        } else {
                            " (its literal text; interpolated values add more)"
                        }
                    ),
                });
            }
        }
        bucket_hints(pack, &mut hints);
        hints.sort_by_key(|h| h.offset);
        Economics {
            hints,
            lenses: lenses(pack, &prepared),
        }
    }
}

/// Each bucket's share of the total, after its name.
fn bucket_hints(pack: &Pack, hints: &mut Vec<InlayHint>) {
    let Some(budget) = &pack.budget else {
        return;
    };
    let Some((total, _)) = budget.total.filter(|(t, _)| *t > 0) else {
        return;
    };
    for b in &budget.buckets {
        if let Some(ppm) = b.share_ppm {
            let n = (total as u128 * u128::from(ppm) / 1_000_000) as u64;
            hints.push(InlayHint {
                offset: b.name_span.end,
                label: format!("≤ {n} tokens"),
                tooltip: format!(
                    "{} of the total {total}; at compile time the share applies to what the fixed text and the buckets' minimums leave",
                    super::percent(ppm)
                ),
            });
        }
    }
}

fn lenses(pack: &Pack, prepared: &PreparedPack) -> Vec<IntentLens> {
    let table = crate::analysis::tool_table(pack);
    let prompts: Vec<&TemplateIr> = [&pack.system, &pack.developer]
        .into_iter()
        .flatten()
        .collect();
    pack.intents
        .iter()
        .map(|i| {
            let mode = table
                .as_ref()
                .and_then(|t| t.intents.iter().find(|x| x.intent == i.name))
                .and_then(|x| x.modes.iter().find(|m| m.mode == i.safety));
            let count = |f: fn(&Status) -> bool| {
                mode.map_or(0, |m| m.tools.iter().filter(|t| f(&t.status)).count())
            };
            let texts: Vec<&TemplateIr> = prompts.iter().copied().chain(i.task.as_ref()).collect();
            IntentLens {
                intent: i.name.clone(),
                span: i.name_span,
                safety: i.safety.as_str().to_owned(),
                surfaced: count(|s| matches!(s, Status::Surfaced)),
                conditional: count(|s| matches!(s, Status::Conditional { .. })),
                fixed_tokens: texts.iter().map(|t| prepared.tokens_of(&literal(t))).sum(),
                fixed_exact: texts.iter().all(|t| is_static(t)),
            }
        })
        .collect()
}

impl Analysis {
    /// The inlay hints whose offset lies in `range`.
    pub fn inlay_hints(&self, range: Span) -> Vec<InlayHint> {
        self.economics()
            .hints
            .iter()
            .filter(|h| h.offset >= range.start && h.offset <= range.end)
            .cloned()
            .collect()
    }

    /// What each intent surfaces and costs.
    pub fn intent_lenses(&self) -> Vec<IntentLens> {
        self.economics().lenses.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::decode_inputs;

    /// A tool's and a static block's hints are the `tokens` of their blocks in a
    /// compiled context of the bundled support pack.
    #[test]
    fn hints_are_the_runtime_counts() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("packs/support/support.ctxpack")).unwrap();
        let a = Analysis::new(text.as_str());
        let hints = a.inlay_hints(Span::new(0, text.len()));
        let built = crate::build::build_source("support.ctxpack", text.clone()).unwrap();
        let pack = PreparedPack::new(built.artifact).unwrap();
        let read = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(root.join(p)).unwrap()).unwrap()
        };
        let inputs = decode_inputs(
            read("packs/support/inputs/run.json"),
            read("packs/support/inputs/request.json"),
            None,
            None,
        )
        .unwrap();
        let cc = pack.compile(&inputs).unwrap();
        let mut compared = 0;
        for block in &cc.compiled_prompt.context_blocks {
            if !matches!(&*block.bucket, "tools" | "business") {
                continue;
            }
            let at = text
                .find(&format!(" {} ", block.id))
                .or_else(|| text.find(&format!(" {} {{", block.id)))
                .unwrap();
            let end = at + 1 + block.id.len();
            let hint = hints.iter().find(|h| h.offset == end).unwrap();
            assert_eq!(
                hint.label,
                format!("{} tokens", block.tokens),
                "{}",
                block.id
            );
            compared += 1;
        }
        assert!(compared >= 5, "{compared}");
        let lenses = a.intent_lenses();
        let refund = lenses.iter().find(|l| l.intent == "refund").unwrap();
        assert_eq!(refund.safety, "supervised");
        assert!(refund.surfaced + refund.conditional >= 3, "{refund:?}");
        assert!(refund.fixed_tokens > 0);
    }

    #[test]
    fn a_pack_with_errors_has_no_economics() {
        let a = Analysis::new("pack \"a/b\" version \"1.0.0\"\ntool t {");
        assert!(a.inlay_hints(Span::new(0, 100)).is_empty());
        assert!(a.intent_lenses().is_empty());
    }
}
