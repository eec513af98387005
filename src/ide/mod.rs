//! Editor analyses over one document: diagnostics, hover, go to definition, find
//! references, completion, the outline, rename and quick fixes.
//!
//! Everything here is a pure function of the document's text (and, for imports, of
//! the registry it was checked against): [`Analysis::new`] checks the text once and
//! every query reads that result. Offsets are byte offsets into the text; queries
//! accept any offset (past the end, inside a character) and never panic. The language
//! server (`lsp/`) converts positions and calls these; it holds no language logic.

mod completion;
mod economics;
mod highlight;
mod hover;
mod rawjson;
mod regions;
mod symbols;
mod tests_yaml;

use crate::check::Checked;
use crate::diagnostic::Diagnostic;
use crate::imports::{Lockfile, PackSource};
use crate::ir::{EffectIr, SymbolKind};
use crate::span::{clamp_to_char_boundary, LineIndex, Span};

pub use completion::{CompletionItem, CompletionKind};
pub use economics::{InlayHint, IntentLens};
pub use highlight::{SemanticToken, TokenType};
pub use hover::Hover;
pub use regions::{Fold, FoldKind};
pub use symbols::{OutlineKind, OutlineSymbol};
pub use tests_yaml::TestDiagnostic;

/// One use or declaration of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub kind: SymbolKind,
    /// The name, or for context fields the path below `ctx`.
    pub name: String,
    /// The written name: for field references, the whole path (`ctx.user.tier`); for
    /// intent references, the string literal (quotes included).
    pub span: Span,
    pub is_definition: bool,
    /// Declared by an imported pack (its span is the import's name).
    pub imported: bool,
}

/// A text edit: replace `span` with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    pub span: Span,
    pub text: String,
}

/// A quick fix offered for a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuickFix {
    pub title: String,
    /// Index into [`Analysis::diagnostics`].
    pub diagnostic: usize,
    pub edit: TextEdit,
}

/// An import as it resolved: for hover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedImport {
    pub name: String,
    pub version: String,
    /// `blake3:…` of the artifact.
    pub hash: String,
    /// Where it was loaded from (a registry file), when the source says.
    pub location: Option<String>,
    /// Whether `ctxpack.lock` pins it.
    pub locked: bool,
}

/// The analysis of one version of one document.
#[derive(Debug, Clone)]
pub struct Analysis {
    text: String,
    checked: Checked,
    lines: LineIndex,
    /// Every declaration and use of a name, computed on first request: publishing
    /// an edit's diagnostics does not wait for it.
    occurrences: std::sync::OnceLock<Vec<Occurrence>>,
    imports: Vec<ResolvedImport>,
    /// The parser's own diagnostics, for the next [`Analysis::edited`].
    parse_diagnostics: Vec<Diagnostic>,
    /// What the policy analysis found, when it ran: the next [`Analysis::edited`]
    /// reuses it when the edit leaves what it reads as it was.
    policy_analysis: Option<Vec<Diagnostic>>,
    /// What the pack costs, computed on first request (see [`economics`]).
    economics: std::sync::OnceLock<economics::Economics>,
}

impl Analysis {
    /// Checks `text` without a registry (imports report E0702).
    pub fn new(text: impl Into<String>) -> Self {
        Self::with_imports(text, &crate::imports::NoSource, None)
    }

    /// Checks `text`, resolving imports from `source` and checking them against
    /// `lock` when there is one.
    pub fn with_imports(
        text: impl Into<String>,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
    ) -> Self {
        let text = text.into();
        let (ast, parse_diagnostics) = crate::syntax::parse(&text);
        Self::from_parsed(text, ast, parse_diagnostics, source, lock)
    }

    /// The analysis of `text`, an edit of this analysis's text: only the items the
    /// edit touches are parsed again ([`crate::syntax::reparse`]), and the policy
    /// analysis is reused when the edit leaves what it reads as it was
    /// ([`crate::check::reuse`]); the result is the same as
    /// [`Analysis::with_imports`] of `text`.
    pub fn edited(
        &self,
        text: impl Into<String>,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
    ) -> Self {
        self.edited_with(text.into(), source, lock, &|| Ok(()))
            .unwrap_or_else(|(_, never): (String, std::convert::Infallible)| match never {})
    }

    /// The diagnostics of `text`, an edit of this analysis's text, when the edit
    /// changed one tool, intent, policy, redactor or block alone and nothing of it
    /// that the checks over the whole pack read: the wording of a tool's or intent's
    /// description, a doc comment, a block's text, a policy's `instruct` text, an
    /// intent's task while the fixed text fits the budget counted in bytes (see
    /// [`crate::check::reuse::one_item_edited`]), or no item at all (comments,
    /// blank lines). Then that item is all that is checked again, and the answer
    /// costs what the edit touches, not what the file holds. Equal to the diagnostics
    /// of [`Analysis::edited`] of `text` whenever it is `Some` (the property test in
    /// `tests/reparse.rs`). Of the same text, this analysis's own diagnostics.
    /// Imports are taken as this analysis resolved them: a caller whose registry or
    /// lockfile changed since asks [`Analysis::edited`] instead.
    pub fn quick_diagnostics(&self, text: &str) -> Option<Vec<Diagnostic>> {
        let edit = crate::span::TextEdit::between(&self.text, text);
        if edit.start == edit.old_end && edit.start == edit.new_end {
            // The same text (an edit undone since): the same diagnostics.
            return Some(self.diagnostics().to_vec());
        }
        match crate::syntax::reparse_item(&self.checked.ast, &self.parse_diagnostics, text, edit)? {
            Some((k, item)) => crate::check::reuse::one_item_edited(&self.checked, k, &item, &edit),
            // Comments or blank lines: every item as it was, moved.
            None => crate::check::reuse::moved(self.diagnostics(), &edit),
        }
    }

    /// [`Analysis::edited`], given up between its phases once `cancelled` is set
    /// (the text is stale: a newer one waits). A cancelled analysis gives the text
    /// back.
    pub fn edited_unless(
        &self,
        text: String,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
        cancelled: &std::sync::atomic::AtomicBool,
    ) -> Result<Self, (String, crate::check::Cancelled)> {
        let stop = || match cancelled.load(std::sync::atomic::Ordering::Relaxed) {
            true => Err(crate::check::Cancelled),
            false => Ok(()),
        };
        self.edited_with(text, source, lock, &stop)
    }

    /// [`Analysis::edited`], asking `stop` between its phases.
    fn edited_with<E>(
        &self,
        text: String,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
        stop: &dyn Fn() -> Result<(), E>,
    ) -> Result<Self, (String, E)> {
        let edit = crate::span::TextEdit::between(&self.text, &text);
        let (ast, parse_diagnostics, kept) =
            crate::syntax::reparse_at(&self.checked.ast, &self.parse_diagnostics, &text, edit)
                .unwrap_or_else(|| {
                    let (ast, diagnostics) = crate::syntax::parse(&text);
                    (ast, diagnostics, crate::syntax::Kept::default())
                });
        if let Err(e) = stop() {
            return Err((text, e));
        }
        let earlier = crate::check::Earlier {
            pack: &self.checked.pack,
            analysis: self.policy_analysis.as_deref(),
            edit,
            kept,
        };
        let checked = crate::check::check_parsed_reusing(
            ast,
            parse_diagnostics.clone(),
            source,
            lock,
            Some(earlier),
            stop,
        );
        match checked {
            Ok(checked) => {
                let lines = self.lines.edited(&text, &edit);
                Ok(Self::from_reusable(
                    text,
                    checked,
                    parse_diagnostics,
                    source,
                    lock,
                    Some(lines),
                ))
            }
            Err(e) => Err((text, e)),
        }
    }

    fn from_parsed(
        text: String,
        ast: crate::syntax::ast::File,
        parse_diagnostics: Vec<Diagnostic>,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
    ) -> Self {
        let checked =
            crate::check::check_parsed_keeping(ast, parse_diagnostics.clone(), source, lock);
        Self::from_reusable(text, checked, parse_diagnostics, source, lock, None)
    }

    fn from_reusable(
        text: String,
        (checked, dependencies, policy_analysis): crate::check::Reusable,
        parse_diagnostics: Vec<Diagnostic>,
        source: &dyn PackSource,
        lock: Option<&Lockfile>,
        lines: Option<LineIndex>,
    ) -> Self {
        let imports = dependencies
            .into_iter()
            .map(|d| ResolvedImport {
                location: source.location(&d.name, &d.version),
                locked: lock.is_some_and(|l| {
                    l.packages
                        .iter()
                        .any(|p| p.name == d.name && p.version == d.version)
                }),
                name: d.name,
                version: d.version,
                hash: d.hash,
            })
            .collect();
        let mut analysis = Self::from_checked(text, checked, lines);
        analysis.imports = imports;
        analysis.parse_diagnostics = parse_diagnostics;
        analysis.policy_analysis = policy_analysis;
        analysis
    }

    /// The packs the document's imports resolved to (transitively), sorted.
    pub fn imports(&self) -> &[ResolvedImport] {
        &self.imports
    }

    /// The text with no analysis at all: no diagnostics, no names. For a caller that
    /// must keep a document's text when checking it failed.
    pub fn unchecked(text: impl Into<String>) -> Self {
        let checked = Checked {
            ast: crate::syntax::ast::File {
                header: None,
                header_broken: false,
                items: Vec::new(),
            },
            pack: crate::ir::Pack::default(),
            diagnostics: Vec::new(),
        };
        Self::from_checked(text.into(), checked, None)
    }

    /// `lines`, when given, is the index of `text` (the edit's, from the index before).
    fn from_checked(text: String, checked: Checked, lines: Option<LineIndex>) -> Self {
        Analysis {
            lines: lines.unwrap_or_else(|| LineIndex::new(&text)),
            text,
            checked,
            occurrences: std::sync::OnceLock::new(),
            imports: Vec::new(),
            parse_diagnostics: Vec::new(),
            policy_analysis: None,
            economics: std::sync::OnceLock::new(),
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    fn economics(&self) -> &economics::Economics {
        self.economics
            .get_or_init(|| economics::Economics::compute(self))
    }

    pub fn line_index(&self) -> &LineIndex {
        &self.lines
    }

    pub fn checked(&self) -> &Checked {
        &self.checked
    }

    /// Every diagnostic, in source order.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.checked.diagnostics
    }

    /// Every declaration and use of a name, in no particular order.
    pub fn occurrences(&self) -> &[Occurrence] {
        self.occurrences
            .get_or_init(|| occurrences(&self.checked, &self.text))
    }

    /// The innermost occurrence at `offset` (a cursor just after a name counts).
    pub fn occurrence_at(&self, offset: usize) -> Option<&Occurrence> {
        let offset = clamp_to_char_boundary(&self.text, offset);
        self.occurrences()
            .iter()
            .filter(|o| o.span.contains(offset))
            .min_by_key(|o| (o.span.len(), !o.is_definition))
    }

    /// Where the name at `offset` is declared.
    pub fn definition(&self, offset: usize) -> Vec<Span> {
        let Some(at) = self.occurrence_at(offset) else {
            return Vec::new();
        };
        self.occurrences()
            .iter()
            .filter(|o| o.is_definition && o.kind == at.kind && o.name == at.name)
            .map(|o| o.span)
            .collect()
    }

    /// Every occurrence of the name at `offset`, in source order.
    pub fn references(&self, offset: usize, include_declaration: bool) -> Vec<Span> {
        let Some(at) = self.occurrence_at(offset) else {
            return Vec::new();
        };
        // On an import's name: the uses of everything it brings in, not only of the
        // first name declared there.
        let brought: Vec<(SymbolKind, &str)> = if at.imported && at.is_definition {
            self.occurrences()
                .iter()
                .filter(|o| o.imported && o.is_definition && o.span == at.span)
                .map(|o| (o.kind, o.name.as_str()))
                .collect()
        } else {
            vec![(at.kind, at.name.as_str())]
        };
        let mut spans: Vec<Span> = self
            .occurrences()
            .iter()
            .filter(|o| brought.contains(&(o.kind, o.name.as_str())))
            .filter(|o| include_declaration || !o.is_definition)
            .map(|o| o.span)
            .collect();
        spans.sort();
        spans.dedup();
        spans
    }

    pub fn hover(&self, offset: usize) -> Option<Hover> {
        hover::hover(self, offset)
    }

    pub fn completion(&self, offset: usize) -> Vec<CompletionItem> {
        completion::complete(self, offset)
    }

    pub fn document_symbols(&self) -> Vec<OutlineSymbol> {
        symbols::outline(self)
    }

    /// The whole document formatted, or `None` when it has syntax errors.
    pub fn format(&self) -> Option<String> {
        crate::fmt::format(&self.text).ok()
    }

    /// The quick fixes of the diagnostics whose span touches `range`.
    pub fn quick_fixes(&self, range: Span) -> Vec<QuickFix> {
        self.diagnostics()
            .iter()
            .enumerate()
            .filter(|(_, d)| d.span.start <= range.end && range.start <= d.span.end)
            .filter_map(|(i, d)| {
                let s = d.suggestion.as_ref()?;
                let span = self.json_path_span(s.span)?;
                Some(QuickFix {
                    title: format!("Replace with `{}`", s.replacement),
                    diagnostic: i,
                    edit: TextEdit {
                        span,
                        text: s.replacement.clone(),
                    },
                })
            })
            .collect()
    }

    /// Where a suggestion applies: its span, unless that is a whole `json { ... }`.
    /// The checker points a mistake inside raw JSON at the string it is about; it
    /// reports on the whole JSON only a string written with escapes, whose text is not
    /// its value, so that no edit of it could be exact.
    fn json_path_span(&self, span: Span) -> Option<Span> {
        let text = self.text().get(span.start..span.end)?;
        (!text.starts_with("json")).then_some(span)
    }

    /// The span a rename at `offset` would change (the name itself), when the name
    /// there can be renamed: a tool, context field, intent, redactor, bucket or block
    /// declared in this file (not by an import).
    pub fn prepare_rename(&self, offset: usize) -> Option<Span> {
        let at = self.occurrence_at(offset)?;
        if at.kind == SymbolKind::Policy {
            return None;
        }
        let declared_here = self
            .occurrences()
            .iter()
            .any(|o| o.is_definition && !o.imported && o.kind == at.kind && o.name == at.name);
        let imported = self
            .occurrences()
            .iter()
            .any(|o| o.imported && o.kind == at.kind && o.name == at.name);
        if !declared_here || imported {
            return None;
        }
        Some(self.name_span(at))
    }

    /// The edits that rename the name at `offset` to `new_name` everywhere in the file
    /// (raw JsonLogic included), or why it cannot be renamed. The renamed text is
    /// checked again without imports: see [`Analysis::rename_checked`].
    pub fn rename(&self, offset: usize, new_name: &str) -> Result<Vec<TextEdit>, String> {
        self.rename_checked(offset, new_name, &|text| Analysis::new(text))
    }

    /// [`Analysis::rename`], checking the renamed text with `recheck` (which should
    /// resolve imports as this analysis did): a rename after which any diagnostic
    /// appears that was not there before (by code and line) is refused, with it as
    /// the reason.
    pub fn rename_checked(
        &self,
        offset: usize,
        new_name: &str,
        recheck: &dyn Fn(String) -> Analysis,
    ) -> Result<Vec<TextEdit>, String> {
        let edits = self.rename_edits(offset, new_name)?;
        if edits.is_empty() {
            return Ok(edits);
        }
        let mut renamed = self.text.clone();
        for e in edits.iter().rev() {
            renamed.replace_range(e.span.start..e.span.end, &e.text);
        }
        let after = recheck(renamed);
        let key = |a: &Analysis, d: &Diagnostic| (d.code, a.lines.line_of(d.span.start) + 1);
        let mut before: Vec<_> = self.diagnostics().iter().map(|d| key(self, d)).collect();
        for d in after.diagnostics() {
            let k = key(&after, d);
            match before.iter().position(|b| *b == k) {
                Some(i) => {
                    before.swap_remove(i);
                }
                None => {
                    return Err(format!(
                        "the rename would break the pack: {} at line {}: {}",
                        d.code, k.1, d.message
                    ))
                }
            }
        }
        Ok(edits)
    }

    fn rename_edits(&self, offset: usize, new_name: &str) -> Result<Vec<TextEdit>, String> {
        if self.prepare_rename(offset).is_none() {
            return Err(
                "only tools, context fields, intents, redactors, buckets and blocks declared in this file can be renamed"
                    .to_owned(),
            );
        }
        let at = self
            .occurrence_at(offset)
            .ok_or_else(|| "nothing to rename here".to_owned())?;
        let new_name = new_name.trim();
        let new_name = match at.kind {
            SymbolKind::Field => new_name.strip_prefix("ctx.").unwrap_or(new_name),
            _ => new_name,
        };
        validate_name(at.kind, new_name)?;
        if new_name == at.name {
            return Ok(Vec::new());
        }
        let pack = &self.checked.pack;
        if pack.declares(at.kind, new_name) {
            let kind = at.kind.as_str();
            let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            return Err(format!(
                "{article} {kind} named `{new_name}` already exists"
            ));
        }
        if at.kind == SymbolKind::Field {
            for f in pack.fields.iter().filter(|f| *f.path != *at.name) {
                let (a, b) = (&*f.path, new_name);
                if a.starts_with(&format!("{b}.")) || b.starts_with(&format!("{a}.")) {
                    return Err(format!(
                        "`ctx.{new_name}` would clash with the field `ctx.{a}`: a path cannot be both a field and a prefix"
                    ));
                }
            }
        }
        let mut edits: Vec<TextEdit> = self
            .occurrences()
            .iter()
            .filter(|o| o.kind == at.kind && o.name == at.name)
            .map(|o| TextEdit {
                span: self.name_span(o),
                text: new_name.to_owned(),
            })
            .collect();
        edits.sort_by_key(|e| e.span);
        edits.dedup();
        Ok(edits)
    }

    /// The part of an occurrence that is the name: a field reference written
    /// `ctx.user.tier` is renamed from after `ctx.`.
    fn name_span(&self, o: &Occurrence) -> Span {
        let written = self.text.get(o.span.start..o.span.end).unwrap_or("");
        if o.kind == SymbolKind::Field && !o.is_definition && written.starts_with("ctx.") {
            return Span::new(o.span.start + 4, o.span.end);
        }
        // An intent named in a condition is a string literal: its quotes stay.
        if o.kind == SymbolKind::Intent
            && written.len() >= 2
            && written.starts_with('"')
            && written.ends_with('"')
        {
            return Span::new(o.span.start + 1, o.span.end - 1);
        }
        o.span
    }
}

fn is_ident(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// A new name must be an identifier (tools) or a dotted path of identifiers (fields).
fn validate_name(kind: SymbolKind, name: &str) -> Result<(), String> {
    let ok = match kind {
        SymbolKind::Field => !name.is_empty() && name.split('.').all(is_ident),
        _ => is_ident(name),
    };
    if ok {
        Ok(())
    } else if kind == SymbolKind::Field {
        Err(format!(
            "`{name}` is not a field path: write identifiers `[a-z_][a-z0-9_]*` separated by dots"
        ))
    } else {
        Err(format!(
            "`{name}` is not an identifier: names are `[a-z_][a-z0-9_]*`"
        ))
    }
}

/// Collects every declaration and use of a name. The IR records definitions and the
/// references made from expressions and templates (fields, intents); the name lists
/// (`tools`, `prohibit`, effects, a block's bucket, intent budget overrides) are read
/// from the IR's own items. Items brought in by imports are declarations at the
/// import; their internal references are not part of this file.
fn occurrences(checked: &Checked, text: &str) -> Vec<Occurrence> {
    let pack = &checked.pack;
    let import_spans: Vec<Span> = pack.imports.iter().map(|i| i.name_span).collect();
    let mut out = Vec::new();
    for d in pack
        .definitions
        .iter()
        .chain(pack.broken.iter())
        .chain(pack.duplicates.iter())
    {
        let imported =
            !pack.origins.is_empty() && pack.origins.contains_key(&(d.kind, d.name.to_string()));
        out.push(Occurrence {
            kind: d.kind,
            name: d.name.to_string(),
            span: d.span,
            is_definition: true,
            imported,
        });
    }
    let mut reference = |kind: SymbolKind, name: &str, span: Span| {
        if import_spans.contains(&span) {
            return;
        }
        out.push(Occurrence {
            kind,
            name: name.to_owned(),
            span,
            is_definition: false,
            imported: false,
        });
    };
    for r in &pack.references {
        reference(r.kind, &r.name, r.span);
    }
    for i in &pack.intents {
        for t in &i.tools {
            reference(SymbolKind::Tool, &t.name, t.span);
        }
        for (b, _) in i.budget.iter().flat_map(|b| &b.overrides) {
            reference(SymbolKind::Bucket, &b.name, b.span);
        }
    }
    for t in &pack.prohibitions {
        reference(SymbolKind::Tool, &t.name, t.span);
    }
    for p in &pack.policies {
        for e in &p.effects {
            let (kind, names) = match e {
                EffectIr::RequireApproval(n) | EffectIr::Deny(n) => (SymbolKind::Tool, n),
                EffectIr::Redact(n) => (SymbolKind::Redactor, n),
                _ => continue,
            };
            for n in names {
                reference(kind, &n.name, n.span);
            }
        }
    }
    for b in &pack.blocks {
        reference(SymbolKind::Bucket, &b.bucket.name, b.bucket.span);
    }
    // Raw JsonLogic: `var` paths of declared fields, intents compared with
    // `request.intent`.
    for found in rawjson::find(text, &checked.ast) {
        match found {
            rawjson::Found::Var(path, span) => {
                if let Some(field) = path.strip_prefix("ctx.") {
                    if pack.declares(SymbolKind::Field, field) {
                        reference(SymbolKind::Field, field, span);
                    }
                }
            }
            rawjson::Found::Intent(name, span) => {
                if pack.declares(SymbolKind::Intent, &name) {
                    reference(SymbolKind::Intent, &name, span);
                }
            }
        }
    }
    out
}

/// Formats parts per million as a percentage: `450000` → `45%`, `125000` → `12.5%`.
pub(crate) fn percent(ppm: u64) -> String {
    let whole = ppm / 10_000;
    let frac = ppm % 10_000;
    if frac == 0 {
        format!("{whole}%")
    } else {
        let frac = format!("{frac:04}");
        format!("{whole}.{}%", frac.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests;
