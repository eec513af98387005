//! `ctxpack fmt [PATHS] [--check]`: rewrite packs in the canonical layout (see
//! [`crate::fmt`]).
//!
//! Exit codes: 0 all files formatted (or already were); 1 with `--check`, some file is
//! not formatted, or some file has syntax errors (it is reported and left untouched);
//! 3 a path could not be read or written. `-` formats standard input to standard
//! output.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::{exit, files};
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
}

pub fn run(args: &FmtArgs) -> i32 {
    if args.paths.len() == 1 && args.paths[0] == Path::new("-") {
        return stdin(args.check);
    }
    let files = match files::collect(&args.paths, ".ctxpack") {
        Ok(f) => f,
        Err(message) => {
            eprintln!("error: {message}");
            return exit::UNREADABLE;
        }
    };
    let mut worst = exit::OK;
    let mut changed = 0usize;
    let mut failed = 0usize;
    for file in &files {
        let shown = files::display(file);
        let source = match read(file) {
            Ok(s) => s,
            Err(message) => {
                eprintln!("error: {message}");
                worst = worst.max(exit::UNREADABLE);
                continue;
            }
        };
        let formatted = match format(&source) {
            Ok(f) => f,
            Err(e) => {
                report_failure(&shown, source, e);
                worst = worst.max(exit::FAILED);
                failed += 1;
                continue;
            }
        };
        if formatted == source {
            continue;
        }
        changed += 1;
        if args.check {
            println!("{shown}");
            worst = worst.max(exit::FAILED);
        } else if let Err(e) = std::fs::write(file, formatted) {
            eprintln!("error: cannot write `{shown}`: {e}");
            worst = worst.max(exit::UNREADABLE);
        }
    }
    if files.is_empty() {
        eprintln!("warning: no `.ctxpack` files found");
    } else if args.check {
        if changed > 0 {
            eprintln!(
                "{changed} of {} file{} would be reformatted",
                files.len(),
                plural(files.len())
            );
        }
    } else {
        let done = files.len() - failed;
        eprintln!("formatted {done} file{}, {changed} changed", plural(done));
    }
    worst
}

fn stdin(check: bool) -> i32 {
    let mut source = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut source) {
        eprintln!("error: cannot read standard input: {e}");
        return exit::UNREADABLE;
    }
    match format(&source) {
        Ok(out) if check => {
            if out == source {
                exit::OK
            } else {
                println!("-");
                exit::FAILED
            }
        }
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(out.as_bytes()).is_err() {
                return exit::UNREADABLE;
            }
            exit::OK
        }
        Err(e) => {
            report_failure("<stdin>", source, e);
            exit::FAILED
        }
    }
}

fn read(file: &Path) -> Result<String, String> {
    let bytes =
        std::fs::read(file).map_err(|e| format!("cannot read `{}`: {e}", file.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("`{}` is not valid UTF-8", file.display()))
}

fn report_failure(path: &str, source: String, error: FormatError) {
    eprintln!("error: cannot format `{path}`: {error}");
    if let FormatError::Syntax(diagnostics) = error {
        let report = FileReport {
            path: path.to_owned(),
            source,
            diagnostics,
        };
        eprint!("{}", diagnostic::to_human(&report, super::stderr_color()));
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
