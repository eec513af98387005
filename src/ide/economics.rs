//! What a pack costs, in the editor: inlay hints with the tokens of each tool's
//! block, each untemplated block and prompt, and each bucket's share of the total;
//! and per intent, the tools it surfaces in its own safety mode and its fixed text.
//!
//! The counts are the runtime's: each item is lowered as for an artifact and rendered
//! by the runtime's own functions (a tool's `tools` block text, a static block's text)
//! and counted with the pack's tokenizer, so a tool's or an untemplated block's hint
//! is exactly the `tokens` of that block in a compiled context. Hints are counted for
//! the requested range only (an editor asks for what is on screen), so their cost
//! follows the range, not the file; they are given for every complete item even while
//! other parts of the pack have errors. The intents' lenses are computed once per
//! analysis, on first request.

use crate::analysis::Status;
use crate::artifact::Tokenizer;
use crate::ir::{Pack, SymbolKind, TemplateIr};
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
    /// Tokens of the system, developer and task text, each counted as the runtime
    /// counts it.
    pub fixed_tokens: usize,
    /// False when a template interpolates request values: `fixed_tokens` counts its
    /// literal text only.
    pub fixed_exact: bool,
}

/// The economics of one version of a pack: the intents' lenses.
#[derive(Debug, Clone, Default)]
pub struct Economics {
    lenses: Vec<IntentLens>,
}

/// A template's text as the runtime renders it when it interpolates nothing, else
/// its literal text; and whether it interpolates nothing.
fn rendered(t: &TemplateIr) -> (String, bool) {
    let lowered = crate::lower::template(t);
    if crate::runtime::template::is_static(&lowered) {
        (crate::runtime::render_static(&lowered), true)
    } else {
        let literal = lowered
            .parts
            .iter()
            .filter_map(|p| match p {
                crate::artifact::TemplatePart::Text(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        (literal, false)
    }
}

fn tokens_label(n: usize, exact: bool) -> String {
    if exact {
        format!("{n} tokens")
    } else {
        format!("{n}+ tokens")
    }
}

/// The tokenizer a compile of the pack counts with; `None` for a pack that cannot be
/// compiled (a library, or no budget).
fn tokenizer(pack: &Pack) -> Option<Tokenizer> {
    match &pack.budget {
        Some(b) if !pack.library => Some(b.tokenizer),
        _ => None,
    }
}

/// Declared by an import: its name span is the import's, not a place in this file.
fn imported(pack: &Pack, kind: SymbolKind, name: &str) -> bool {
    pack.origins.contains_key(&(kind, name.to_owned()))
}

impl Economics {
    pub(super) fn compute(a: &Analysis) -> Economics {
        let pack = &a.checked().pack;
        match tokenizer(pack) {
            Some(kind) => Economics {
                lenses: lenses(pack, kind),
            },
            None => Economics::default(),
        }
    }
}

/// The hints of the items whose name (or prompt) starts in `range`.
fn hints(pack: &Pack, kind: Tokenizer, range: Span) -> Vec<InlayHint> {
    let inside = |s: Span| s.end >= range.start && s.end <= range.end;
    let count = |text: &str| crate::tokens::count(kind, text);
    let tokenizer = kind.as_str();
    let mut out = Vec::new();
    for t in pack.tools.iter().filter(|t| inside(t.name_span)) {
        if imported(pack, SymbolKind::Tool, &t.name) {
            continue;
        }
        let tool = crate::lower::tool(t, String::new());
        let n = count(&crate::runtime::tools::block_text(&tool));
        out.push(InlayHint {
            offset: t.name_span.end,
            label: tokens_label(n, true),
            tooltip: format!(
                "the `tools` block of `{}` (name, description and input schema), {tokenizer}",
                t.name
            ),
        });
    }
    for b in pack.blocks.iter().filter(|b| inside(b.name_span)) {
        let (text, exact) = rendered(&b.text);
        if !exact || imported(pack, SymbolKind::Block, &b.name) {
            continue;
        }
        out.push(InlayHint {
            offset: b.name_span.end,
            label: tokens_label(count(&text), true),
            tooltip: format!(
                "block `{}` in bucket `{}`, {tokenizer}",
                b.name, b.bucket.name
            ),
        });
    }
    for (prompt, what) in [(&pack.system, "system"), (&pack.developer, "developer")] {
        let Some(t) = prompt
            .as_ref()
            .filter(|t| inside(Span::new(t.span.start, t.span.start)))
        else {
            continue;
        };
        let (text, exact) = rendered(t);
        out.push(InlayHint {
            offset: t.span.start,
            label: tokens_label(count(&text), exact),
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
    bucket_hints(pack, range, &mut out);
    out.sort_by_key(|h| h.offset);
    out
}

/// Each bucket's share of the total, after its name.
fn bucket_hints(pack: &Pack, range: Span, hints: &mut Vec<InlayHint>) {
    let Some(budget) = &pack.budget else {
        return;
    };
    let Some((total, _)) = budget.total.filter(|(t, _)| *t > 0) else {
        return;
    };
    for b in &budget.buckets {
        if b.name_span.end < range.start || b.name_span.end > range.end {
            continue;
        }
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

fn lenses(pack: &Pack, kind: Tokenizer) -> Vec<IntentLens> {
    let table = crate::analysis::tool_table(pack);
    let modes: std::collections::HashMap<&str, &crate::analysis::IntentTools> = table
        .as_ref()
        .map(|t| t.intents.iter().map(|x| (x.intent.as_str(), x)).collect())
        .unwrap_or_default();
    let count = |t: &TemplateIr| {
        let (text, exact) = rendered(t);
        (crate::tokens::count(kind, &text), exact)
    };
    // The system and developer prompts are the same for every intent: counted once.
    let (prompts, prompts_exact) = [&pack.system, &pack.developer]
        .into_iter()
        .flatten()
        .map(count)
        .fold((0, true), |(n, all), (m, exact)| (n + m, all && exact));
    pack.intents
        .iter()
        .map(|i| {
            let mode = modes
                .get(i.name.as_str())
                .and_then(|x| x.modes.iter().find(|m| m.mode == i.safety));
            let surfaced = |f: fn(&Status) -> bool| {
                mode.map_or(0, |m| m.tools.iter().filter(|t| f(&t.status)).count())
            };
            let (task, task_exact) = i.task.as_ref().map_or((0, true), count);
            IntentLens {
                intent: i.name.clone(),
                span: i.name_span,
                safety: i.safety.as_str().to_owned(),
                surfaced: surfaced(|s| matches!(s, Status::Surfaced)),
                conditional: surfaced(|s| matches!(s, Status::Conditional { .. })),
                fixed_tokens: prompts + task,
                fixed_exact: prompts_exact && task_exact,
            }
        })
        .collect()
}

impl Analysis {
    /// The inlay hints whose offset lies in `range` (byte offsets; any range is
    /// accepted): the tokens of each tool's `tools` block, each untemplated block and
    /// each prompt, counted as the runtime counts them, and each bucket's share of the
    /// total. Only the items in `range` are counted.
    pub fn inlay_hints(&self, range: Span) -> Vec<InlayHint> {
        let pack = &self.checked().pack;
        match tokenizer(pack) {
            Some(kind) => hints(pack, kind, range),
            None => Vec::new(),
        }
    }

    /// What each intent surfaces and costs.
    pub fn intent_lenses(&self) -> Vec<IntentLens> {
        self.economics().lenses.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{decode_inputs, PreparedPack};

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
    fn a_pack_without_budget_has_no_economics() {
        let a = Analysis::new("pack \"a/b\" version \"1.0.0\"\ntool t {");
        assert!(a.inlay_hints(Span::new(0, 100)).is_empty());
        assert!(a.intent_lenses().is_empty());
    }

    const STATIC: &str = "pack \"a/b\" version \"1.0.0\"\nprompt system \"You help.\"\nprompt developer \"\"\"\n  Be brief.\n\"\"\"\nbudget {\n  total 1000\n  tokenizer o200k\n  bucket tools { share 50% }\n  bucket notes { share 50% }\n}\ntool look {\n  description \"Look an order up.\"\n  kind read\n  risk low\n  approval auto\n  input {\n    id: string\n  }\n}\nblock rules in notes \"Be kind to everyone.\"\nintent help {\n  safety autonomous\n  tools look\n  task \"Help the user.\"\n}\n";

    /// The fixed text of an intent whose prompts and task interpolate nothing is the
    /// `fixed` tokens of a compile's budget.
    #[test]
    fn fixed_text_is_the_runtime_count() {
        let a = Analysis::new(STATIC);
        assert!(
            a.diagnostics().iter().all(|d| !d.is_error()),
            "{:?}",
            a.diagnostics()
        );
        let lens = a.intent_lenses().pop().unwrap();
        assert!(lens.fixed_exact);
        assert_eq!((lens.surfaced, lens.conditional), (1, 0));
        let built = crate::build::build_source("a.ctxpack", STATIC.to_owned()).unwrap();
        let pack = PreparedPack::new(built.artifact).unwrap();
        let inputs = decode_inputs(
            serde_json::json!({"run_id": "r", "tenant": "t", "safety_mode": "autonomous", "user": {"id": "u"}}),
            serde_json::json!({"request_id": "q", "intent": "help", "message": "hi", "channel": "web", "locale": "en"}),
            None,
            None,
        )
        .unwrap();
        let cc = pack.compile(&inputs).unwrap();
        // Every `fixed` the envelope reports (the budget plan's, the ledger's).
        fn fixed(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, x) in m {
                        if k == "fixed" {
                            out.push(x.clone());
                        }
                        fixed(x, out);
                    }
                }
                serde_json::Value::Array(xs) => xs.iter().for_each(|x| fixed(x, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        fixed(&serde_json::to_value(&cc).unwrap(), &mut found);
        assert!(!found.is_empty());
        for f in found {
            assert_eq!(f, serde_json::json!(lens.fixed_tokens));
        }
    }

    /// Only what is in the range is counted; a pack with errors elsewhere still has
    /// the hints of its complete items.
    #[test]
    fn hints_follow_the_range_and_survive_errors() {
        let text = format!("{STATIC}\ntool broken {{\n  kind\n");
        let a = Analysis::new(text.as_str());
        assert!(a.diagnostics().iter().any(|d| d.is_error()));
        let all = a.inlay_hints(Span::new(0, text.len()));
        let labels: Vec<&str> = all.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(labels.len(), 6, "{all:?}");
        let look = text.find("look {").unwrap() + "look".len();
        assert!(all.iter().any(|h| h.offset == look));
        let only = a.inlay_hints(Span::new(look - 1, look + 1));
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].offset, look);
        for (start, end) in [
            (usize::MAX, 0),
            (0, usize::MAX),
            (text.len() + 5, text.len() + 9),
        ] {
            let _ = a.inlay_hints(Span { start, end });
        }
    }
}
