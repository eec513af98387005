//! Conversions for the editor features that show what a pack costs and how it is
//! built: inlay hints, intent code lenses, folding, semantic tokens and workspace
//! symbols. The analyses are the library's (`ctxpack::ide`); this is protocol shape.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctxpack::ide::{Analysis, Fold, FoldKind, IntentLens, SemanticToken, TokenType};
use serde_json::{json, Value};
use tower_lsp_server::ls_types::*;

use crate::convert::{Encoding, Text};
use crate::workspace::Workspace;

/// The command a code lens runs: `ctxpack test FILE --filter` for an intent's cases.
pub const RUN_TESTS_COMMAND: &str = "ctxpack.runTests";

/// `{"inlayHints": {"enabled": false}, "codeLens": {"enabled": false}}` (also under
/// `ctxpack`) turns the features off.
pub fn apply_toggles(options: &Value, ws: &mut Workspace) {
    let section = options.get("ctxpack").unwrap_or(options);
    let enabled = |key: &str| {
        section
            .get(key)
            .and_then(|v| v.get("enabled").or(Some(v)))
            .and_then(Value::as_bool)
    };
    if let Some(on) = enabled("inlayHints") {
        ws.inlay_hints = on;
    }
    if let Some(on) = enabled("codeLens") {
        ws.code_lens = on;
    }
}

pub fn inlay_hints(t: &Text<'_>, hints: Vec<ctxpack::ide::InlayHint>) -> Vec<InlayHint> {
    hints
        .into_iter()
        .map(|h| InlayHint {
            position: t.position(h.offset),
            label: InlayHintLabel::String(h.label),
            kind: None,
            text_edits: None,
            tooltip: Some(InlayHintTooltip::String(h.tooltip)),
            padding_left: Some(true),
            padding_right: None,
            data: None,
        })
        .collect()
}

pub fn code_lenses(
    t: &Text<'_>,
    a: &Analysis,
    lenses: Vec<IntentLens>,
    tests: &(Vec<PathBuf>, BTreeMap<String, usize>),
) -> Vec<CodeLens> {
    let (files, counts) = tests;
    let intents = &a.checked().pack.intents;
    let fallback = intents.iter().find(|i| i.fallback).map(|i| i.name.clone());
    let declared: Vec<&str> = intents.iter().map(|i| i.name.as_str()).collect();
    lenses
        .into_iter()
        .map(|l| {
            let mut cases = counts.get(&l.intent).copied().unwrap_or(0);
            if fallback.as_deref() == Some(l.intent.as_str()) {
                // The fallback serves cases without an intent and those naming one
                // the pack does not declare.
                cases += counts
                    .iter()
                    .filter(|(name, _)| !declared.contains(&name.as_str()))
                    .map(|(_, n)| n)
                    .sum::<usize>();
            }
            let plural = |n: usize, one: &str, many: &str| {
                if n == 1 {
                    format!("1 {one}")
                } else {
                    format!("{n} {many}")
                }
            };
            let mut title = format!("{} in {}", plural(l.surfaced, "tool", "tools"), l.safety);
            if l.conditional > 0 {
                title.push_str(&format!(" (+{} conditional)", l.conditional));
            }
            title.push_str(&format!(
                " · {}{} fixed tokens · {}",
                l.fixed_tokens,
                if l.fixed_exact { "" } else { "+" },
                plural(cases, "test case", "test cases")
            ));
            let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            CodeLens {
                range: t.range(l.span),
                command: Some(Command {
                    title,
                    command: RUN_TESTS_COMMAND.to_owned(),
                    arguments: Some(vec![json!({ "files": files, "intent": l.intent })]),
                }),
                data: None,
            }
        })
        .collect()
}

pub fn folding_ranges(folds: Vec<Fold>) -> Vec<FoldingRange> {
    folds
        .into_iter()
        .map(|f| FoldingRange {
            start_line: u32::try_from(f.start_line).unwrap_or(u32::MAX),
            start_character: None,
            end_line: u32::try_from(f.end_line).unwrap_or(u32::MAX),
            end_character: None,
            kind: Some(match f.kind {
                FoldKind::Region => FoldingRangeKind::Region,
                FoldKind::Comment => FoldingRangeKind::Comment,
            }),
            collapsed_text: None,
        })
        .collect()
}

fn type_name(t: TokenType) -> SemanticTokenType {
    match t {
        TokenType::Keyword => SemanticTokenType::KEYWORD,
        TokenType::Type => SemanticTokenType::TYPE,
        TokenType::Tool => SemanticTokenType::FUNCTION,
        TokenType::Intent => SemanticTokenType::EVENT,
        TokenType::Bucket => SemanticTokenType::NAMESPACE,
        TokenType::Redactor => SemanticTokenType::REGEXP,
        TokenType::Block => SemanticTokenType::CLASS,
        TokenType::Policy => SemanticTokenType::INTERFACE,
        TokenType::Path => SemanticTokenType::VARIABLE,
        TokenType::Field => SemanticTokenType::PROPERTY,
        TokenType::String => SemanticTokenType::STRING,
        TokenType::Number => SemanticTokenType::NUMBER,
        TokenType::Operator => SemanticTokenType::OPERATOR,
        TokenType::Comment => SemanticTokenType::COMMENT,
    }
}

/// The token types (in `TokenType::ALL` order) and the one modifier, `declaration`.
pub fn legend() -> SemanticTokensLegend {
    SemanticTokensLegend {
        token_types: TokenType::ALL.iter().map(|t| type_name(*t)).collect(),
        token_modifiers: vec![SemanticTokenModifier::DECLARATION],
    }
}

/// The relative encoding of the protocol, one token per line (a token that spans
/// lines, such as a `"""` string, is split at line ends).
pub fn encode(t: &Text<'_>, tokens: &[SemanticToken]) -> SemanticTokens {
    let mut data = Vec::new();
    let (mut prev_line, mut prev_start) = (0u32, 0u32);
    for token in tokens {
        let Some(index) = TokenType::ALL.iter().position(|x| *x == token.ty) else {
            continue;
        };
        let mut start = token.span.start;
        while start < token.span.end {
            let line_end = t.text[start..token.span.end]
                .find('\n')
                .map_or(token.span.end, |i| start + i);
            if line_end > start {
                let from = t.position(start);
                let to = t.position(line_end);
                let delta_line = from.line - prev_line;
                let delta_start = if delta_line == 0 {
                    from.character - prev_start
                } else {
                    from.character
                };
                data.push(tower_lsp_server::ls_types::SemanticToken {
                    delta_line,
                    delta_start,
                    length: to.character.saturating_sub(from.character),
                    token_type: u32::try_from(index).unwrap_or(0),
                    token_modifiers_bitset: u32::from(token.declaration),
                });
                (prev_line, prev_start) = (from.line, from.character);
            }
            start = line_end + 1;
        }
    }
    SemanticTokens {
        result_id: None,
        data,
    }
}

/// The most files a workspace symbol search reads.
const MAX_FILES: usize = 2_000;

/// Every item of every pack in the workspace (open documents as edited, the others
/// from disk) whose name contains `query` (case-insensitive).
pub fn workspace_symbols(
    folders: &[PathBuf],
    open: Vec<(Uri, String)>,
    query: &str,
    encoding: Encoding,
) -> Vec<SymbolInformation> {
    let mut files = open;
    let mut on_disk = Vec::new();
    for folder in folders {
        collect(folder, &mut on_disk);
    }
    on_disk.sort();
    for path in on_disk.into_iter().take(MAX_FILES) {
        let Some(uri) = Uri::from_file_path(&path) else {
            continue;
        };
        if files.iter().any(|(u, _)| *u == uri) {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            files.push((uri, text));
        }
    }
    let query = query.to_lowercase();
    let mut out = Vec::new();
    for (uri, text) in &files {
        symbols_of(uri, text, &query, encoding, &mut out);
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() && !name.starts_with('.') && name != "target" && name != "node_modules" {
            collect(&path, out);
        } else if name.ends_with(".ctxpack") {
            out.push(path);
        }
        if out.len() > MAX_FILES {
            return;
        }
    }
}

#[expect(
    deprecated,
    reason = "`SymbolInformation::deprecated` must still be written"
)]
fn symbols_of(
    uri: &Uri,
    text: &str,
    query: &str,
    encoding: Encoding,
    out: &mut Vec<SymbolInformation>,
) {
    let (file, _) = ctxpack::syntax::parse(text);
    let lines = ctxpack::span::LineIndex::new(text);
    let t = Text {
        text,
        lines: &lines,
        encoding,
    };
    let pack = file.header.as_ref().map(|h| h.name.value.clone());
    for item in &file.items {
        use ctxpack::syntax::ast::ItemKind;
        let (name, kind) = match &item.kind {
            ItemKind::Tool(x) => (&x.name, SymbolKind::FUNCTION),
            ItemKind::Intent(x) => (&x.name, SymbolKind::EVENT),
            ItemKind::Policy(x) => (&x.name, SymbolKind::INTERFACE),
            ItemKind::Redactor(x) => (&x.name, SymbolKind::CONSTANT),
            ItemKind::Block(x) => (&x.name, SymbolKind::OBJECT),
            _ => continue,
        };
        if !query.is_empty() && !name.name.to_lowercase().contains(query) {
            continue;
        }
        out.push(SymbolInformation {
            name: name.name.to_string(),
            kind,
            tags: None,
            deprecated: None,
            location: Location {
                uri: uri.clone(),
                range: t.range(name.span),
            },
            container_name: pack.clone(),
        });
    }
}
