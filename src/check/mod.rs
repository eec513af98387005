//! The semantic checks over the IR, one module per family. [`check_source`] runs the
//! whole front end: parse, build the IR, check, and sort diagnostics into source
//! order.

mod budget;
mod names;
mod redactors;
pub mod reuse;
mod safety;

pub use safety::{MAX_TOOL_NAME, TOOL_KINDS};

use crate::diagnostic::Diagnostic;
use crate::ir::{self, Pack};
use crate::syntax::{self, ast};

/// The result of checking one file.
#[derive(Debug, Clone)]
pub struct Checked {
    pub ast: ast::File,
    pub pack: Pack,
    /// Every diagnostic, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Parses and checks one file's text, without a registry: imports that name a
/// version are reported as not found (E0702).
pub fn check_source(source: &str) -> Checked {
    check_source_with(source, &crate::imports::NoSource, None).0
}

/// Parses and checks one file's text, resolving imports from `source` and checking
/// them against `lock`. Also returns the resolved dependencies, for lowering.
pub fn check_source_with(
    text: &str,
    source: &dyn crate::imports::PackSource,
    lock: Option<&crate::imports::Lockfile>,
) -> (Checked, Vec<crate::artifact::Dependency>) {
    let (ast, diagnostics) = syntax::parse(text);
    check_parsed_with(ast, diagnostics, source, lock)
}

/// [`check_source_with`] over a file already parsed (`diagnostics` are the parse's),
/// for a caller that parses incrementally ([`syntax::reparse`]).
pub fn check_parsed_with(
    ast: crate::syntax::ast::File,
    diagnostics: Vec<Diagnostic>,
    source: &dyn crate::imports::PackSource,
    lock: Option<&crate::imports::Lockfile>,
) -> (Checked, Vec<crate::artifact::Dependency>) {
    let (checked, dependencies, _) = check_parsed_keeping(ast, diagnostics, source, lock);
    (checked, dependencies)
}

/// [`check_parsed_with`], also returning the policy analysis's own diagnostics
/// (when it ran) for a later [`check_parsed_reusing`] to reuse.
pub fn check_parsed_keeping(
    ast: crate::syntax::ast::File,
    diagnostics: Vec<Diagnostic>,
    source: &dyn crate::imports::PackSource,
    lock: Option<&crate::imports::Lockfile>,
) -> Reusable {
    check_parsed_reusing(ast, diagnostics, source, lock, None, &|| Ok(()))
        .unwrap_or_else(|never: std::convert::Infallible| match never {})
}

/// An earlier check of the same file: its IR, what its policy analysis found (when
/// it ran), the edit from its text to the one being checked and the items the
/// reparse kept.
pub struct Earlier<'a> {
    pub pack: &'a Pack,
    pub analysis: Option<&'a [Diagnostic]>,
    pub edit: crate::span::TextEdit,
    /// The items of the new file that are the earlier file's, moved by the edit.
    pub kept: crate::syntax::Kept,
}

/// A check given up because the text it checks is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

/// The result of [`check_parsed_reusing`]: the check, the resolved dependencies and
/// the policy analysis's own diagnostics (when it ran).
pub type Reusable = (
    Checked,
    Vec<crate::artifact::Dependency>,
    Option<Vec<Diagnostic>>,
);

/// [`check_parsed_with`], reusing what an `earlier` check found where the edit
/// cannot have changed it (see [`reuse`]). The result is the same as without
/// `earlier`. Also returns the policy analysis's diagnostics when it ran, for the
/// next check to reuse. Between its phases it asks `stop`, and gives up with its
/// error once it returns one.
pub fn check_parsed_reusing<E>(
    ast: crate::syntax::ast::File,
    mut diagnostics: Vec<Diagnostic>,
    source: &dyn crate::imports::PackSource,
    lock: Option<&crate::imports::Lockfile>,
    earlier: Option<Earlier<'_>>,
    stop: &dyn Fn() -> Result<(), E>,
) -> Result<Reusable, E> {
    let own_name = ast
        .header
        .as_ref()
        .map(|h| h.name.value.clone())
        .unwrap_or_default();
    let resolution = crate::imports::resolve(&own_name, &ir::import_decls(&ast), source, lock);
    diagnostics.extend(resolution.diagnostics);
    let build_from = earlier.as_ref().map(|e| ir::EarlierBuild {
        pack: e.pack,
        edit: &e.edit,
        kept: e.kept,
    });
    let (pack, ir_diags) = ir::build_unless(
        &ast,
        &resolution.imported,
        resolution.unresolved,
        build_from,
        stop,
    )?;
    diagnostics.extend(ir_diags);
    let analysis = run_checks_reusing(&pack, &mut diagnostics, earlier, stop)?;
    sort(&mut diagnostics);
    Ok((
        Checked {
            ast,
            pack,
            diagnostics,
        },
        resolution.dependencies,
        analysis,
    ))
}

/// The checks that need the whole IR.
pub fn run_checks(pack: &Pack, diagnostics: &mut Vec<Diagnostic>) {
    run_checks_reusing(pack, diagnostics, None, &|| Ok(()))
        .unwrap_or_else(|never: std::convert::Infallible| match never {});
}

/// [`run_checks`], reusing the policy analysis of an `earlier` check when the edit
/// left everything it reads as it was. Returns the policy analysis's diagnostics
/// when it ran; `stop` is asked between the families of checks.
fn run_checks_reusing<E>(
    pack: &Pack,
    diagnostics: &mut Vec<Diagnostic>,
    earlier: Option<Earlier<'_>>,
    stop: &dyn Fn() -> Result<(), E>,
) -> Result<Option<Vec<Diagnostic>>, E> {
    stop()?;
    names::check(pack, diagnostics);
    safety::check(pack, diagnostics);
    stop()?;
    budget::check(pack, diagnostics);
    redactors::check(pack, diagnostics);
    // Last: the policy analysis runs only on packs the checks above found no error in.
    if diagnostics.iter().any(Diagnostic::is_error) {
        return Ok(None);
    }
    let reused = earlier.and_then(|e| {
        let found = e.analysis?;
        reuse::same_analysis_input(e.pack, pack, &e.edit)
            .then(|| reuse::moved(found, &e.edit))
            .flatten()
    });
    let found = match reused {
        Some(found) => found,
        None => {
            stop()?;
            let mut found = Vec::new();
            crate::analysis::check(pack, &mut found);
            found
        }
    };
    // A condition the checker already calls constant (W0202: `X and false`) is not
    // reported again by the analysis (W0301, or its own W0202 for `X or true`).
    let constant: Vec<crate::span::Span> = diagnostics
        .iter()
        .filter(|d| d.code == "W0202")
        .map(|d| d.span)
        .collect();
    diagnostics.extend(
        found
            .iter()
            .filter(|d| !matches!(d.code, "W0301" | "W0202") || !constant.contains(&d.span))
            .cloned(),
    );
    Ok(Some(found))
}

/// Source order; at one position, errors before warnings, then by code. The sort is
/// stable, so diagnostics at the same place keep the order they were found in.
pub fn sort(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| {
        (a.span.start, a.severity, a.code, a.span.end).cmp(&(
            b.span.start,
            b.severity,
            b.code,
            b.span.end,
        ))
    });
    diagnostics.dedup();
}
