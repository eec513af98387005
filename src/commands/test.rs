//! `ctxpack test`: runs the `*.tests.yaml` files beside packs ([`crate::testing`]) and
//! reports like a test harness: `ok  FILE :: CASE`, or `FAIL FILE:LINE :: CASE` with
//! each failed expectation, why, and a command that reproduces the case; then
//! `N passed, N failed`.
//!
//! Exit codes: 0 every case passed; 1 a case failed, or no case was found (unless
//! `--allow-empty`); 3 a test file or its pack could not be read; 4 a test file or
//! its pack is invalid. The other files still run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::compile::CliError;
use crate::artifact::Artifact;
use crate::testing::{self, Options, Results};

/// The expectation keys, for `--help` (the same list as `docs/testing.md`; a test
/// holds both to [`testing::EXPECTATIONS`]).
const EXPECTATIONS_HELP: &str = "\
A test file:
  pack: support.ctxpack            # relative to this file: a .ctxpack source or a .json artifact
  defaults: { run: {...}, request: {...}, evidence: [...] | FILE, memory: [...] | FILE, expect: {...} }
  cases:
    - name: minors are refused on the phone
      request: { channel: voice, context: { user: { age: 16 } } }   # merged over defaults
      expect: { must_refuse: true, refusal_reason: \"...\" }

Expectations (each optional; null leaves it unchecked; an unknown or malformed key
fails its case, naming the key and its line):
  must_refuse        true|false: runtime_controls.must_refuse (a refuse policy fired)
  must_escalate      true|false: runtime_controls.must_escalate (an escalate policy fired)
  fallback_used      true|false: the fallback intent served the request
  tools              [names]: the exact set of surfaced tools
  approval_gates     [names]: the exact set of runtime_controls.approval_gates_active
  redactions         [names]: the exact set of active redactors
  dropped            {bucket: [ids]}: per bucket named, the exact set of dropped block ids
  truncated          {bucket: [ids]}: per bucket named, the exact set of truncated block ids
  refusal_reason     text: runtime_controls.refusal_reason, exactly
  escalation_target  text: runtime_controls.escalation_target, exactly
  contains           [texts]: substrings the prompt must contain
  not_contains       [texts]: substrings the prompt must not contain
  diagnostics        [codes]: the exact set of runtime diagnostic codes (R0201, ...)
  directive          kind: the session decision (no_directive, update, error)
  session_state      {premise, policies, version}: the session state after the step
  error              kind: the compile fails with this kind (invalid_input, unknown_intent,
                     policy_eval_error, budget_exhausted, overflow_error, ...); alone

Exit codes: 0 every case passed; 1 a case failed or no case was found; 3 a test file
or pack could not be read; 4 a test file or pack is invalid.

Examples:
  ctxpack test
  ctxpack test packs/support/support.ctxpack
  ctxpack test --filter refund --junit target/ctxpack-test.xml packs/";

/// Arguments of `ctxpack test`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(after_long_help = EXPECTATIONS_HELP)]
pub struct TestArgs {
    /// Test files, directories to search for `*.tests.yaml`, or packs (`x.ctxpack`:
    /// the test files beside it that name it). Default: `.`.
    pub paths: Vec<PathBuf>,
    /// Run only the cases whose name contains PATTERN (repeatable: any of them).
    #[arg(long, value_name = "PATTERN")]
    pub filter: Vec<String>,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Finding no test case is a success (exit 0) instead of exit 1.
    #[arg(long)]
    pub allow_empty: bool,
    /// Where a failing case's merged inputs are written for its reproduce command.
    #[arg(long, value_name = "DIR", default_value = "target/ctxpack-test")]
    pub repro_dir: PathBuf,
    /// Registry to resolve the imports of `.ctxpack` sources from, a directory or
    /// `oci://HOST[:PORT]/NAMESPACE` [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Print failures as one JSON object on stderr: unreadable or invalid test files,
    /// `tests_failed` with every failing case and its failed expectations, or
    /// `no_tests`.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Runs the tests, building `.ctxpack` sources on the fly (imports resolve from
/// `--registry`, `$CTXPACK_REGISTRY` or `.ctxpack/registry`, checked against
/// `ctxpack.lock`).
pub fn run(args: &TestArgs) -> i32 {
    let options = crate::build::BuildOptions {
        registry: args.registry.clone(),
        ..Default::default()
    };
    run_with_loader(args, &|path| {
        crate::build::build_file(path, &options)
            .map(|built| built.artifact)
            .map_err(|e| {
                // A pack that cannot be read is exit 3, as for every command; one that
                // does not build is invalid (4).
                let (kind, code) = match e {
                    crate::build::BuildError::Unreadable(_) => ("unreadable_input", 3),
                    _ => ("invalid_pack", 4),
                };
                CliError::new(kind, code, e.summary())
            })
    })
}

/// Runs the tests; `load_source` builds a `.ctxpack` source into an artifact.
pub fn run_with_loader(
    args: &TestArgs,
    load_source: &dyn Fn(&Path) -> Result<Artifact, CliError>,
) -> i32 {
    let report = execute(args, load_source);
    styled_out!("{}", report.stdout);
    anstream::eprint!("{}", report.stderr);
    report.exit_code
}

/// What a test run printed and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// Runs the tests and returns the report instead of printing it (the JUnit file, if
/// asked for, is written).
pub fn execute(
    args: &TestArgs,
    load_source: &dyn Fn(&Path) -> Result<Artifact, CliError>,
) -> TestReport {
    let roots = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let options = Options {
        filters: args.filter.clone(),
        repro_dir: Some(args.repro_dir.clone()),
    };
    let results = testing::run(&roots, &options, load_source);
    let mut stdout = human(&results);
    let mut errors: Vec<CliError> = results.unreadable.clone();
    for (file, e) in results.file_errors() {
        let mut e = e.clone();
        e.message = format!("{}: {}", file.path.display(), e.message);
        errors.push(e);
    }
    let (passed, failed) = (results.passed(), results.failed());
    let _ = write!(stdout, "{passed} passed, {failed} failed");
    if results.filtered_out() > 0 {
        let _ = write!(stdout, ", {} filtered out", results.filtered_out());
    }
    stdout.push('\n');
    let mut exit_code = errors.iter().map(|e| e.exit_code).max().unwrap_or(0);
    if failed > 0 {
        exit_code = exit_code.max(1);
        let failing: Vec<Value> = results
            .cases()
            .filter(|(_, c)| !c.passed())
            .map(|(f, c)| {
                json!({
                    "file": f.path.display().to_string(),
                    "case": c.name,
                    "line": c.line,
                    "failures": c.failures.iter().map(|x| x.what.clone()).collect::<Vec<_>>(),
                    "why": c.failures.iter().map(|x| x.why.clone()).collect::<Vec<_>>(),
                    "reproduce": c.reproduce,
                })
            })
            .collect();
        let message = format!("{failed} of {} cases failed", passed + failed);
        errors.push(
            CliError::new("tests_failed", 1, message).with("failures", Value::Array(failing)),
        );
    } else if passed == 0 && errors.is_empty() && !args.allow_empty {
        exit_code = 1;
        errors.push(CliError::new(
            "no_tests",
            1,
            no_tests(&roots, &results, args),
        ));
    }
    if let Some(path) = &args.junit {
        let written = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => std::fs::create_dir_all(dir),
            None => Ok(()),
        }
        .and_then(|()| std::fs::write(path, testing::junit::render(&results)));
        if let Err(e) = written {
            exit_code = exit_code.max(3);
            errors.push(CliError::new(
                "unwritable_output",
                3,
                format!("cannot write `{}`: {e}", path.display()),
            ));
        }
    }
    let mut stderr = String::new();
    if args.json_errors {
        if let Some(error) = super::error::combine(errors) {
            let _ = writeln!(stderr, "{}", error.to_json());
        }
    } else {
        for e in errors.iter().filter(|e| e.kind != "tests_failed") {
            let _ = writeln!(stderr, "error: {}", e.message);
        }
    }
    TestReport {
        stdout,
        stderr,
        exit_code,
    }
}

/// Why nothing ran, and what to do about it.
fn no_tests(roots: &[PathBuf], results: &Results, args: &TestArgs) -> String {
    let shown: Vec<String> = roots.iter().map(|r| format!("`{}`", r.display())).collect();
    let mut message = if !args.filter.is_empty() && results.filtered_out() > 0 {
        format!(
            "no test case matches {} ({} cases left out)",
            args.filter
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            results.filtered_out()
        )
    } else if results.files.is_empty() {
        format!("no `*.tests.yaml` file found in {}", shown.join(", "))
    } else {
        format!("the test files in {} hold no case", shown.join(", "))
    };
    for pack in &results.untested_packs {
        let _ = write!(
            message,
            "; no `*.tests.yaml` beside `{}` names it as its `pack`",
            pack.display()
        );
    }
    message.push_str(" (pass --allow-empty to accept a run without tests)");
    message
}

fn human(results: &Results) -> String {
    let mut out = String::new();
    for (file, case) in results.cases() {
        let path = file.path.display();
        if case.passed() {
            let _ = writeln!(out, "ok  {path} :: {}", case.name);
            continue;
        }
        match case.line {
            Some(line) => {
                let _ = writeln!(out, "FAIL {path}:{line} :: {}", case.name);
            }
            None => {
                let _ = writeln!(out, "FAIL {path} :: {}", case.name);
            }
        }
        for f in &case.failures {
            let _ = writeln!(out, "    {}", f.what);
            for why in &f.why {
                let _ = writeln!(out, "      {why}");
            }
        }
        if let Some(cmd) = &case.reproduce {
            let _ = writeln!(out, "    reproduce: {cmd}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_expectation() {
        for (key, _) in testing::EXPECTATIONS {
            assert!(
                EXPECTATIONS_HELP.contains(&format!("\n  {key} ")),
                "`{key}` is missing from the --help text"
            );
        }
        let listed = EXPECTATIONS_HELP
            .lines()
            .skip_while(|l| !l.starts_with("Expectations"))
            .skip(2)
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .count();
        assert_eq!(listed, testing::EXPECTATIONS.len());
    }
}
