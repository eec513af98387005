//! The semantic checks over the IR, one module per family. [`check_source`] runs the
//! whole front end: parse, build the IR, check, and sort diagnostics into source
//! order.

mod budget;
mod names;
mod redactors;
mod safety;

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

/// Parses and checks one file's text.
pub fn check_source(source: &str) -> Checked {
    let (ast, mut diagnostics) = syntax::parse(source);
    let (pack, ir_diags) = ir::build(&ast);
    diagnostics.extend(ir_diags);
    run_checks(&pack, &mut diagnostics);
    sort(&mut diagnostics);
    Checked {
        ast,
        pack,
        diagnostics,
    }
}

/// The checks that need the whole IR.
pub fn run_checks(pack: &Pack, diagnostics: &mut Vec<Diagnostic>) {
    names::check(pack, diagnostics);
    safety::check(pack, diagnostics);
    budget::check(pack, diagnostics);
    redactors::check(pack, diagnostics);
}

/// Source order; at one position, errors before warnings, then by code. The sort is
/// stable, so diagnostics at the same place keep the order they were found in.
pub fn sort(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| {
        (a.span.start, a.severity, a.code, a.span.end).cmp(&(b.span.start, b.severity, b.code, b.span.end))
    });
    diagnostics.dedup();
}
