//! `ctxpack fmt [PATHS] [--check]`: rewrite packs in the canonical layout (see
//! [`crate::fmt`]).
//!
//! Exit codes: 0 all files formatted (or already were); 1 with `--check`, some file is
//! not formatted, or some file has syntax errors (it is reported and left untouched);
//! 3 a path could not be read or written. `-` formats standard input to standard
//! output.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{exit, files, CliError, Failures};
use crate::diagnostic::{self, FileReport};
use crate::fmt::{format, FormatError};

#[derive(Debug, Clone, clap::Args)]
pub struct FmtArgs {
    /// Files and directories to format; directories are searched for `*.ctxpack`.
    /// `-` reads standard input and writes the result to standard output.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Change nothing: list the files that are not formatted and exit 1 if any.
    #[arg(long)]
    pub check: bool,
    /// With `--check`: print what would change, as a unified diff, instead of the
    /// file names.
    #[arg(long, requires = "check")]
    pub diff: bool,
    /// Print failures as one JSON object on stderr (syntax errors with their
    /// diagnostics, unformatted files under `--check` in `files`).
    #[arg(skip)]
    pub json_errors: bool,
}

pub fn run(args: &FmtArgs) -> i32 {
    let mut failures = Failures::new(args.json_errors);
    if args.paths.len() == 1 && args.paths[0] == Path::new("-") && !args.diff {
        stdin(args.check, &mut failures);
        return failures.finish(exit::OK);
    }
    // Each path on its own: one that cannot be read is reported, the others are
    // still formatted. Standard input is read once, however often `-` is given.
    let mut files = Vec::new();
    for path in &args.paths {
        match files::collect(std::slice::from_ref(path), ".ctxpack") {
            Ok(found) => {
                for file in found {
                    let stdin_again =
                        crate::source::is_stdin(&file) && files.iter().any(|f| f == &file);
                    if !stdin_again {
                        files.push(file);
                    }
                }
            }
            Err(message) => {
                failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message))
            }
        }
    }
    let mut unformatted = Vec::new();
    let mut failed = 0usize;
    for file in &files {
        let shown = files::display(file);
        let source = match crate::source::read_raw(file) {
            Ok(s) => s,
            Err(message) => {
                failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message));
                continue;
            }
        };
        // The formatted text never has a byte-order mark, so a file with one changes.
        let text = crate::source::strip_bom(&source);
        let formatted = match format(text) {
            Ok(f) => f,
            Err(e) => {
                report_failure(&shown, text, e, &mut failures);
                failed += 1;
                continue;
            }
        };
        if crate::source::is_stdin(file) && !args.check {
            // Standard input's text goes to standard output, changed or not, as for
            // `fmt -` alone; never to a file named `-`.
            if write_stdout(&formatted, &mut failures) && formatted != source {
                unformatted.push(shown);
            }
            continue;
        }
        if formatted == source {
            continue;
        }
        if args.check {
            if args.diff {
                out!("{}", unified_diff(&shown, &source, &formatted));
            } else {
                outln!("{shown}");
            }
            unformatted.push(shown);
        } else if let Err(e) = std::fs::write(file, formatted) {
            failures.push(CliError::new(
                "unwritable_output",
                exit::UNREADABLE,
                format!("cannot write `{shown}`: {e}"),
            ));
        } else {
            unformatted.push(shown);
        }
    }
    let changed = unformatted.len();
    if args.check && changed > 0 {
        let message = format!(
            "{changed} of {} file{} would be reformatted",
            files.len(),
            plural(files.len())
        );
        if failures.json() {
            failures.push(
                CliError::new("unformatted", exit::FAILED, message)
                    .with("files", json!(unformatted)),
            );
        } else {
            eprintln!("{message}");
        }
    }
    if failures.json() {
        // stderr carries only the JSON object.
    } else if files.is_empty() {
        eprintln!("warning: no `.ctxpack` files found");
    } else if !args.check {
        let done = files.len() - failed;
        eprintln!("formatted {done} file{}, {changed} changed", plural(done));
    }
    let code = if args.check && changed > 0 {
        exit::FAILED
    } else {
        exit::OK
    };
    failures.finish(code).max(code)
}

fn stdin(check: bool, failures: &mut Failures) {
    let mut source = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut source) {
        failures.push(CliError::new(
            "unreadable_input",
            exit::UNREADABLE,
            format!("cannot read standard input: {e}"),
        ));
        return;
    }
    let text = crate::source::strip_bom(&source);
    match format(text) {
        Ok(out) if check => {
            if out != source {
                outln!("-");
                if failures.json() {
                    failures.push(
                        CliError::new(
                            "unformatted",
                            exit::FAILED,
                            "standard input would be reformatted",
                        )
                        .with("files", json!(["-"])),
                    );
                } else {
                    failures.push_silent(exit::FAILED);
                }
            }
        }
        Ok(out) => {
            write_stdout(&out, failures);
        }
        Err(e) => report_failure("<stdin>", text, e, failures),
    }
}

/// Writes formatted text to standard output; whether that worked (else a failure).
fn write_stdout(text: &str, failures: &mut Failures) -> bool {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => true,
        Err(e) => {
            failures.push(CliError::new(
                "unwritable_output",
                exit::UNREADABLE,
                format!("cannot write standard output: {e}"),
            ));
            false
        }
    }
}

/// What formatting would change in `path`, as a unified diff (a removed byte-order
/// mark shows as a changed first line).
fn unified_diff(path: &str, before: &str, after: &str) -> String {
    crate::diff::line_diff(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

fn report_failure(path: &str, text: &str, error: FormatError, failures: &mut Failures) {
    let message = format!("cannot format `{path}`: {error}");
    match error {
        FormatError::Syntax(diagnostics) => {
            let report = FileReport {
                path: path.to_owned(),
                source: text.to_owned(),
                diagnostics,
            };
            if !failures.json() {
                eprintln!("error: {message}");
                eprint!("{}", diagnostic::to_human(&report, super::stderr_color()));
                failures.push_silent(exit::FAILED);
            } else {
                failures.push(CliError::diagnostics("syntax_error", &report, message));
            }
        }
        FormatError::Internal(_) => {
            failures.push(CliError::new("internal_error", exit::FAILED, message));
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
