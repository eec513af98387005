//! `ctxpack check [PATHS]`: the front end over files and directories, with human,
//! JSON, SARIF and GitHub output.

use std::path::PathBuf;

use super::{exit, files};
use crate::check::check_source_with;
use crate::diagnostic::{self, FileReport};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Graphical reports with source excerpts (on stderr).
    #[default]
    Human,
    /// One JSON document on stdout.
    Json,
    /// SARIF 2.1.0 on stdout, for code-scanning uploads.
    Sarif,
    /// GitHub workflow annotations on stdout.
    Github,
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Files and directories to check; directories are searched for `*.ctxpack`.
    #[arg(default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    pub deny_warnings: bool,
    /// Registry to resolve imports from, a directory or `oci://HOST[:PORT]/NAMESPACE`
    /// [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
}

/// Checks every file and returns the reports, or an unreadable path.
pub fn check_paths(
    paths: &[PathBuf],
    registry: Option<&std::path::Path>,
) -> Result<Vec<FileReport>, String> {
    let files = files::collect(paths, ".ctxpack")?;
    let registry = crate::registry::Registry::from_env_or(registry);
    let mut reports = Vec::with_capacity(files.len());
    for file in files {
        let source = crate::source::read(&file)?;
        let lock = crate::imports::Lockfile::read(&crate::imports::Lockfile::path_for(&file))?;
        let (checked, _) = check_source_with(&source, &registry, lock.as_ref());
        reports.push(FileReport {
            path: files::display(&file),
            source,
            diagnostics: checked.diagnostics,
        });
    }
    Ok(reports)
}

pub fn run(args: &CheckArgs) -> i32 {
    let reports = match check_paths(&args.paths, args.registry.as_deref()) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("error: {message}");
            return exit::UNREADABLE;
        }
    };
    let (errors, warnings) = diagnostic::tally(&reports);
    match args.format {
        Format::Human => {
            let color = super::stderr_color();
            for report in &reports {
                eprint!("{}", diagnostic::to_human(report, color));
            }
            if reports.is_empty() {
                eprintln!(
                    "error: no `.ctxpack` files found (a check of nothing would pass silently)"
                );
            } else {
                eprintln!(
                    "checked {} file{}: {errors} error{}, {warnings} warning{}",
                    reports.len(),
                    plural(reports.len()),
                    plural(errors),
                    plural(warnings)
                );
            }
        }
        Format::Json => outln!("{}", pretty(&diagnostic::to_json(&reports))),
        Format::Sarif => outln!("{}", pretty(&diagnostic::to_sarif(&reports))),
        Format::Github => out!("{}", diagnostic::to_github(&reports)),
    }
    if reports.is_empty() || errors > 0 || (args.deny_warnings && warnings > 0) {
        exit::FAILED
    } else {
        exit::OK
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}
