//! E0801: redactor patterns must compile with the regex engine the runtime uses.

use crate::diagnostic::Diagnostic;
use crate::ir::Pack;

pub fn check(pack: &Pack, diags: &mut Vec<Diagnostic>) {
    for r in &pack.redactors {
        if let Err(e) = regex::Regex::new(&r.pattern) {
            let detail = match &e {
                regex::Error::Syntax(s) => s
                    .lines()
                    .last()
                    .unwrap_or("invalid syntax")
                    .trim()
                    .to_owned(),
                other => other.to_string(),
            };
            diags.push(
                Diagnostic::new(
                    "E0801",
                    r.pattern_span,
                    format!("redactor `{}` has an invalid regular expression", r.name),
                )
                .with_label(detail)
                .with_help("patterns use Rust `regex` syntax; in a ctxpack string a backslash is written `\\\\`, e.g. `\"\\\\d{4}\"`"),
            );
        }
    }
}
