//! `ctxpack session`: the session-directive engine ([`crate::session`]) for hosts and
//! for debugging.
//!
//! - `step --state FILE --input TEXT`: one raw user input;
//! - `apply --state FILE --directive TEXT`: one canonical directive (a repair, say);
//! - `conformance DIR`: every fixture file under DIR, one line each, then
//!   `N passed, N failed, N skipped`.
//!
//! `step` and `apply` print `{"decision": ..., "state": ...}` as canonical JSON (keys
//! sorted, one line) and exit 0 whatever the decision: a semantic `error` is an answer
//! for the user, not a failure of the command. Without `--state` the state is the
//! empty one; `--state -` reads standard input. A state file that cannot be read, is
//! not UTF-8 or is not JSON is exit 3; JSON that is not a valid state is exit 4
//! (`invalid_input`, with the JSONPath of the member at fault in `path`). An
//! `--directive` that is not exactly one canonical directive is exit 4
//! (`invalid_directive`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::error::CliError;
use super::exit;
use crate::session::conformance::{run_fixture, run_structured, Outcome, STRUCTURED_KIND};
use crate::session::{CanonicalDirective, Classification, ImportErrorKind, State};

/// Arguments of `ctxpack session`.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub command: SessionCommand,
}

/// The subcommands of `ctxpack session`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SessionCommand {
    /// Classify one raw user input and, if it is a canonical directive, apply it.
    ///
    /// Prints `{"decision": ..., "state": ...}`: the decision (`no_directive`,
    /// `update` with `changed`, or `error` with `failure`, `directive`, `repairs` and
    /// `message`) and the state after it.
    ///
    /// Exit codes: 0 decided (whatever the decision), 3 the state file is unreadable or
    /// not JSON, 4 it is not a valid state.
    #[command(
        after_help = "Examples:\n  ctxpack session step --input 'use podman instead of docker' --state state.json\n  ctxpack session step --input 'prohibit peanuts'"
    )]
    Step(StepArgs),
    /// Apply one canonical directive, such as a repair from an `error` decision.
    ///
    /// Prints `{"decision": ..., "state": ...}`; the decision is `update` or `error`.
    ///
    /// Exit codes: 0 decided, 3 the state file is unreadable or not JSON, 4 it is not a
    /// valid state, or the directive is not exactly one canonical directive.
    #[command(
        after_help = "Examples:\n  ctxpack session apply --state state.json --directive 'remove policy docker'"
    )]
    Apply(ApplyArgs),
    /// Run the conformance fixtures under DIR and report `N passed, N failed`.
    ///
    /// Every `*.json` file under DIR gets one line; the closing line adds `, N skipped`
    /// for fixture kinds that are not run, which are named. Runs the `grammar`, `step`, `apply_directive`, `state_json` and `controller`
    /// kinds of the context-compiler fixture format.
    ///
    /// Exit codes: 0 all passed, 1 a fixture failed or there was none, 3 DIR unreadable.
    #[command(after_help = "Examples:\n  ctxpack session conformance tests/session")]
    Conformance(ConformanceArgs),
}

/// Arguments of `ctxpack session step`.
#[derive(Debug, Clone, clap::Args)]
pub struct StepArgs {
    /// The exported state (JSON) to start from; `-` for standard input. Default: the
    /// empty state.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The user's raw input.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub input: String,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Arguments of `ctxpack session apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    /// The exported state (JSON) to start from; `-` for standard input. Default: the
    /// empty state.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// One canonical directive, e.g. `remove policy docker`.
    #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
    pub directive: String,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Arguments of `ctxpack session conformance`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConformanceArgs {
    /// A directory of fixture files (searched recursively), or one fixture file.
    pub dir: PathBuf,
    /// Print failures as one JSON object on stderr (`conformance_failed`, with every
    /// failing fixture and its reasons in `failures`).
    #[arg(skip)]
    pub json_errors: bool,
}

/// Runs `ctxpack session ...`; returns the exit code.
pub fn run(args: &SessionArgs) -> i32 {
    match &args.command {
        SessionCommand::Step(a) => report(step(a), a.json_errors),
        SessionCommand::Apply(a) => report(apply(a), a.json_errors),
        SessionCommand::Conformance(a) => conformance_command(a),
    }
}

fn report(result: Result<(), CliError>, json_errors: bool) -> i32 {
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            e.report(json_errors);
            e.exit_code
        }
    }
}

fn step(args: &StepArgs) -> Result<(), CliError> {
    let state = load_state(args.state.as_deref())?;
    let (decision, next) = state.step(&args.input);
    print_json(&json!({ "decision": decision, "state": next }));
    Ok(())
}

fn apply(args: &ApplyArgs) -> Result<(), CliError> {
    let state = load_state(args.state.as_deref())?;
    let directive = CanonicalDirective::parse(&args.directive).map_err(|c| {
        let (reason, syntax) = match &c {
            Classification::Invalid(i) => {
                (i.to_string(), serde_json::to_value(i).unwrap_or_default())
            }
            _ => ("not a directive".to_owned(), Value::Null),
        };
        CliError::new(
            "invalid_directive",
            exit::INVALID,
            format!(
                "`{}` is not a canonical directive: {reason}",
                args.directive
            ),
        )
        .with("syntax", syntax)
    })?;
    let (applied, next) = state.apply(&directive);
    print_json(&json!({ "decision": applied, "state": next }));
    Ok(())
}

/// The state in `path`, or the empty state.
pub fn load_state(path: Option<&Path>) -> Result<State, CliError> {
    let Some(path) = path else {
        return Ok(State::new());
    };
    let shown = super::files::display(path);
    let bytes = crate::source::read_bytes(path)
        .map_err(|e| CliError::new("unreadable_input", exit::UNREADABLE, e))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        CliError::new(
            "unparseable_input",
            exit::UNREADABLE,
            format!("`{shown}` is not valid UTF-8"),
        )
    })?;
    let text = crate::source::strip_bom(&text);
    State::import_json(text).map_err(|e| match e.kind() {
        ImportErrorKind::InvalidJson => CliError::new(
            "unparseable_input",
            exit::UNREADABLE,
            format!("`{shown}`: {e}"),
        ),
        ImportErrorKind::InvalidPayload | ImportErrorKind::UnsupportedVersion => {
            CliError::new("invalid_input", exit::INVALID, format!("`{shown}`: {e}"))
                .with("path", json!(e.path()))
        }
    })
}

fn print_json(value: &Value) {
    super::emit_bytes(&crate::artifact::canonical_bytes(value));
}

/// One fixture file's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureResult {
    /// The path relative to the directory run (forward slashes).
    pub file: String,
    pub outcome: Outcome,
}

/// The results of a conformance run, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConformanceReport {
    pub results: Vec<FixtureResult>,
}

impl ConformanceReport {
    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Passed { .. }))
    }

    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed { .. }))
    }

    pub fn skipped(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Skipped { .. }))
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.outcome)).count()
    }

    /// The fixture kinds skipped and how many of each, by name.
    pub fn skipped_kinds(&self) -> BTreeMap<&str, usize> {
        let mut kinds = BTreeMap::new();
        for r in &self.results {
            if let Outcome::Skipped { kind } = &r.outcome {
                *kinds.entry(kind.as_str()).or_insert(0) += 1;
            }
        }
        kinds
    }

    /// Passed, failed and, by kind, per kind run.
    pub fn by_kind(&self) -> BTreeMap<&str, (usize, usize)> {
        let mut kinds: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for r in &self.results {
            match &r.outcome {
                Outcome::Passed { kind } => kinds.entry(kind).or_default().0 += 1,
                Outcome::Failed { kind, .. } => {
                    kinds
                        .entry(kind.as_deref().unwrap_or("(none)"))
                        .or_default()
                        .1 += 1
                }
                Outcome::Skipped { .. } => {}
            }
        }
        kinds
    }

    /// The closing line: `N passed, N failed`, and `, N skipped` when any was.
    pub fn summary(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed(), self.failed());
        if self.skipped() > 0 {
            line.push_str(&format!(", {} skipped", self.skipped()));
        }
        line
    }

    /// Every line the command prints on stdout.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for r in &self.results {
            match &r.outcome {
                Outcome::Passed { .. } => lines.push(format!("ok   {}", r.file)),
                Outcome::Failed { reasons, .. } => {
                    lines.push(format!("FAIL {}", r.file));
                    for reason in reasons {
                        for line in reason.lines() {
                            lines.push(format!("       {line}"));
                        }
                    }
                }
                Outcome::Skipped { kind } => {
                    lines.push(format!("skip {} (kind `{kind}` is not run)", r.file))
                }
            }
        }
        let skipped = self.skipped_kinds();
        if !skipped.is_empty() {
            let names: Vec<String> = skipped.iter().map(|(k, n)| format!("{k} ({n})")).collect();
            lines.push(format!("skipped kinds: {}", names.join(", ")));
        }
        lines.push(self.summary());
        lines
    }
}

/// Runs every `*.json` fixture under `dir` (or the one file `dir`), in path order.
/// A structured regression runs as one fixture, listed under its scenario file.
/// Fails only when `dir` cannot be read; a file that cannot be read or is not a
/// fixture is a failed fixture.
pub fn conformance(dir: &Path) -> Result<ConformanceReport, CliError> {
    let files = super::files::collect(&[dir.to_path_buf()], ".json")
        .map_err(|e| CliError::new("unreadable_input", exit::UNREADABLE, e))?;
    let mut report = ConformanceReport::default();
    for path in &files {
        let outcome = match structured_partner(path, "expected", "scenarios") {
            // Run with its scenario.
            Some(scenario) if files.contains(&scenario) => continue,
            _ => match structured_partner(path, "scenarios", "expected") {
                Some(expected) if files.contains(&expected) => structured_pair(path, &expected),
                _ => match crate::source::read(path) {
                    Ok(text) => run_fixture(&stem(path), &text),
                    Err(e) => Outcome::Failed {
                        kind: None,
                        reasons: vec![e],
                    },
                },
            },
        };
        let shown = path
            .strip_prefix(dir)
            .ok()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(path);
        report.results.push(FixtureResult {
            file: super::files::display(shown),
            outcome,
        });
    }
    Ok(report)
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// For `.../FROM/NAME.json`, the path `.../TO/NAME.json`: the two halves of a
/// structured regression are `scenarios/ID.json` and `expected/ID.json`.
fn structured_partner(path: &Path, from: &str, to: &str) -> Option<PathBuf> {
    let parent = path.parent()?;
    if parent.file_name()? != from {
        return None;
    }
    Some(parent.parent()?.join(to).join(path.file_name()?))
}

fn structured_pair(scenario: &Path, expected: &Path) -> Outcome {
    match (crate::source::read(scenario), crate::source::read(expected)) {
        (Ok(s), Ok(e)) => run_structured(&stem(scenario), &s, &stem(expected), &e),
        (Err(e), _) | (_, Err(e)) => Outcome::Failed {
            kind: Some(STRUCTURED_KIND.into()),
            reasons: vec![e],
        },
    }
}

fn conformance_command(args: &ConformanceArgs) -> i32 {
    let report = match conformance(&args.dir) {
        Ok(r) => r,
        Err(e) => return report(Err(e), args.json_errors),
    };
    for line in report.lines() {
        outln!("{line}");
    }
    if report.failed() == 0 && report.passed() > 0 {
        return exit::OK;
    }
    let message = if report.passed() + report.failed() == 0 {
        format!(
            "no fixture to run under `{}`",
            super::files::display(&args.dir)
        )
    } else {
        format!(
            "{} of {} fixtures failed",
            report.failed(),
            report.passed() + report.failed()
        )
    };
    let failures: Vec<Value> = report
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed { kind, reasons } => {
                Some(json!({ "file": r.file, "kind": kind, "reasons": reasons }))
            }
            _ => None,
        })
        .collect();
    let error = CliError::new("conformance_failed", exit::FAILED, message)
        .with("failures", Value::Array(failures));
    if args.json_errors {
        error.report(true);
    } else if report.passed() + report.failed() == 0 {
        error.report(false);
    }
    exit::FAILED
}
