//! `ctxpack check [PATHS]`: the front end over files and directories, with human,
//! JSON, SARIF and GitHub output.

use std::path::PathBuf;

use super::error::{CliError, Failures};
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
    /// Set by the global `--json-errors`: failures are one JSON object on stderr —
    /// `check_failed` (exit 1) with the diagnostics as `--format json` writes them,
    /// `no_packs`, or `unreadable_input` (exit 3) — and nothing else is written there.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Checks every file that can be read: the reports, and why each path that could not
/// be read (a missing file, a directory that cannot be listed, a file that is not
/// UTF-8, a broken lockfile) could not.
pub fn check_all(
    paths: &[PathBuf],
    registry: Option<&std::path::Path>,
) -> (Vec<FileReport>, Vec<String>) {
    let mut unreadable = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        match files::collect(std::slice::from_ref(path), ".ctxpack") {
            Ok(found) => files.extend(found),
            Err(message) => unreadable.push(message),
        }
    }
    files.sort();
    files.dedup();
    let mut reports = Vec::with_capacity(files.len());
    // Files of one project share its registry (and what it has loaded).
    let mut registries: Vec<(PathBuf, crate::registry::Registry)> = Vec::new();
    for file in files {
        let root = crate::registry::root_for_pack(registry, &file);
        let at = match registries.iter().position(|(r, _)| *r == root) {
            Some(at) => at,
            None => {
                let opened = crate::registry::Registry::open_trusted(root.clone());
                registries.push((root, opened));
                registries.len() - 1
            }
        };
        let registry = &registries[at].1;
        let read = crate::source::read(&file).and_then(|source| {
            let lock = crate::imports::Lockfile::read(&crate::imports::Lockfile::path_for(&file))?;
            Ok((source, lock))
        });
        let (source, lock) = match read {
            Ok(read) => read,
            Err(message) => {
                unreadable.push(message);
                continue;
            }
        };
        let (checked, _) = check_source_with(&source, registry, lock.as_ref());
        reports.push(FileReport {
            path: files::display(&file),
            source,
            diagnostics: checked.diagnostics,
        });
    }
    (reports, unreadable)
}

/// Runs `check`. A path that cannot be read is exit 3, reported on stderr; the files
/// that could be read are still checked and reported. With `--format json`, `sarif`
/// or `github`, stdout still holds one document of those files, and it names the
/// inputs that could not be read (`unreadable`, a failed SARIF invocation, an
/// `::error::` line), so that a reader of stdout alone does not see a clean check.
pub fn run(args: &CheckArgs) -> i32 {
    let (reports, unreadable) = check_all(&args.paths, args.registry.as_deref());
    let (errors, warnings) = diagnostic::tally(&reports);
    match args.format {
        // With `--json-errors`, stderr holds the one object, which carries the
        // diagnostics the human report would have shown.
        Format::Human if args.json_errors => {}
        Format::Human => {
            let color = super::stderr_color();
            for report in &reports {
                eprint!("{}", diagnostic::to_human(report, color));
            }
            if !reports.is_empty() || !unreadable.is_empty() {
                eprintln!(
                    "checked {} file{}: {errors} error{}, {warnings} warning{}",
                    reports.len(),
                    plural(reports.len()),
                    plural(errors),
                    plural(warnings)
                );
            }
        }
        Format::Json => outln!(
            "{}",
            pretty(&diagnostic::to_json_with(&reports, &unreadable))
        ),
        Format::Sarif => outln!("{}", pretty(&diagnostic::to_sarif(&reports, &unreadable))),
        Format::Github => out!("{}", diagnostic::to_github(&reports, &unreadable)),
    }
    let mut failures = Failures::new(args.json_errors);
    for message in unreadable {
        failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message));
    }
    if reports.is_empty() && failures.exit_code() == 0 {
        let message = "no `.ctxpack` files found (a check of nothing would pass silently)";
        failures.push(CliError::new("no_packs", exit::FAILED, message));
    } else if errors > 0 || (args.deny_warnings && warnings > 0) {
        let message = format!(
            "{errors} error{}, {warnings} warning{} in {} file{}{}",
            plural(errors),
            plural(warnings),
            reports.len(),
            plural(reports.len()),
            if errors == 0 {
                " (warnings denied)"
            } else {
                ""
            }
        );
        let diagnostics = diagnostic::to_json(&reports)
            .get("diagnostics")
            .cloned()
            .unwrap_or_default();
        let failed = CliError::new("check_failed", exit::FAILED, message);
        if args.json_errors {
            failures.push(failed.with("diagnostics", diagnostics));
        } else {
            // People read the reports above; the exit code says the rest.
            failures.push_silent(exit::FAILED);
        }
    }
    failures.finish(exit::OK)
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
