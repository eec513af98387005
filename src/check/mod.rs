//! The semantic checks over the IR, one module per family. [`check_source`] runs the
//! whole front end: parse, build the IR, check, and sort diagnostics into source
//! order.

mod budget;
mod names;
mod redactors;
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
    mut diagnostics: Vec<Diagnostic>,
    source: &dyn crate::imports::PackSource,
    lock: Option<&crate::imports::Lockfile>,
) -> (Checked, Vec<crate::artifact::Dependency>) {
    let own_name = ast
        .header
        .as_ref()
        .map(|h| h.name.value.clone())
        .unwrap_or_default();
    let resolution = crate::imports::resolve(&own_name, &ir::import_decls(&ast), source, lock);
    diagnostics.extend(resolution.diagnostics);
    let (pack, ir_diags) = ir::build(&ast, &resolution.imported, resolution.unresolved);
    diagnostics.extend(ir_diags);
    run_checks(&pack, &mut diagnostics);
    sort(&mut diagnostics);
    (
        Checked {
            ast,
            pack,
            diagnostics,
        },
        resolution.dependencies,
    )
}

/// The checks that need the whole IR.
pub fn run_checks(pack: &Pack, diagnostics: &mut Vec<Diagnostic>) {
    names::check(pack, diagnostics);
    safety::check(pack, diagnostics);
    budget::check(pack, diagnostics);
    redactors::check(pack, diagnostics);
    // Last: the policy analysis runs only on packs the checks above found no error in.
    crate::analysis::check(pack, diagnostics);
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
