//! How subcommands report failures: `error: MESSAGE` lines for people, or, with
//! `--json-errors`, exactly one JSON object on stderr for machines:
//!
//! ```json
//! {"error": {"kind": "...", "message": "...", "exit_code": 4, ...}}
//! ```
//!
//! `kind` is a stable name; members beyond the three are per kind (`policy` for a
//! `policy_eval_error`, `refusal_reason` for `refused`, `diagnostics` for a pack with
//! errors, `files` for unformatted files, `failures` for failing test cases). A command
//! that fails on several inputs reports one object: the worst failure's kind and exit
//! code, a summary message and every failure in `errors`.

use serde_json::{json, Map, Value};

use crate::diagnostic::{self, FileReport};

/// A failure of a CLI command, with its exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct CliError {
    pub kind: &'static str,
    pub message: String,
    pub exit_code: i32,
    /// The policy a `policy_eval_error` names.
    pub policy: Option<String>,
    /// Why the pack refused, for kind `refused`.
    pub refusal_reason: Option<String>,
    /// Further members of the JSON object, by name.
    pub details: Vec<(&'static str, Value)>,
}

impl CliError {
    pub fn new(kind: &'static str, exit_code: i32, message: impl Into<String>) -> Self {
        CliError {
            kind,
            message: message.into(),
            exit_code,
            policy: None,
            refusal_reason: None,
            details: Vec::new(),
        }
    }

    /// Adds a member to the JSON object.
    pub fn with(mut self, name: &'static str, value: Value) -> Self {
        self.details.push((name, value));
        self
    }

    /// A pack whose check found errors (exit 1), with its diagnostics: the JSON object
    /// carries them as `check --format json` writes them.
    pub fn diagnostics(kind: &'static str, report: &FileReport, message: String) -> Self {
        let json = diagnostic::to_json(std::slice::from_ref(report));
        CliError::new(kind, super::exit::FAILED, message).with(
            "diagnostics",
            json.get("diagnostics").cloned().unwrap_or_default(),
        )
    }

    /// The `{"error": {...}}` object.
    pub fn to_json(&self) -> Value {
        let mut error = Map::new();
        error.insert("kind".into(), json!(self.kind));
        error.insert("message".into(), json!(self.message));
        error.insert("exit_code".into(), json!(self.exit_code));
        if let Some(p) = &self.policy {
            error.insert("policy".into(), json!(p));
        }
        if let Some(r) = &self.refusal_reason {
            error.insert("refusal_reason".into(), json!(r));
        }
        for (name, value) in &self.details {
            error.insert((*name).into(), value.clone());
        }
        json!({ "error": error })
    }

    /// Prints the error on stderr, as JSON or as an `error: ...` line.
    pub fn report(&self, json_errors: bool) {
        if json_errors {
            anstream::eprintln!("{}", self.to_json());
        } else {
            anstream::eprintln!("error: {}", self.message);
        }
    }
}

/// The failures of one command run: printed as they happen for people, gathered into
/// one object for `--json-errors`.
#[derive(Debug)]
pub struct Failures {
    json: bool,
    errors: Vec<CliError>,
    /// The worst exit code of failures reported without a [`CliError`].
    silent: i32,
}

impl Failures {
    pub fn new(json: bool) -> Self {
        Failures {
            json,
            errors: Vec::new(),
            silent: 0,
        }
    }

    /// Whether failures are reported as JSON (and so human extras stay off stderr).
    pub fn json(&self) -> bool {
        self.json
    }

    /// Records a failure; without `--json-errors` it is printed at once.
    pub fn push(&mut self, error: CliError) {
        if !self.json {
            error.report(false);
        }
        self.errors.push(error);
    }

    /// Records a failure that was already reported to people in its own form (only the
    /// exit code counts; with `--json-errors`, push a [`CliError`] instead).
    pub fn push_silent(&mut self, exit_code: i32) {
        self.silent = self.silent.max(exit_code);
    }

    /// The worst exit code recorded, or 0.
    pub fn exit_code(&self) -> i32 {
        self.errors
            .iter()
            .map(|e| e.exit_code)
            .fold(self.silent, i32::max)
    }

    /// Prints the one JSON object (with `--json-errors` and at least one failure) and
    /// returns the worst exit code, or `otherwise` when nothing failed.
    pub fn finish(self, otherwise: i32) -> i32 {
        let code = self.exit_code();
        if self.json {
            if let Some(error) = combine(self.errors) {
                error.report(true);
            }
        }
        if code == 0 {
            otherwise
        } else {
            code
        }
    }
}

/// Several failures as the one object `--json-errors` prints: a single failure as it
/// is; several as the first with the worst exit code (its kind), a count and every
/// failure in `errors`.
pub fn combine(mut errors: Vec<CliError>) -> Option<CliError> {
    let code = errors.iter().map(|e| e.exit_code).max()?;
    if errors.len() == 1 {
        return errors.pop();
    }
    let kind = errors
        .iter()
        .find(|e| e.exit_code == code)
        .map_or("failed", |e| e.kind);
    let all: Vec<Value> = errors
        .iter()
        .map(|e| e.to_json()["error"].clone())
        .collect();
    Some(
        CliError::new(kind, code, format!("{} failures", all.len()))
            .with("errors", Value::Array(all)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_for_many_failures() {
        let mut f = Failures::new(true);
        f.push(CliError::new("unreadable_input", 3, "a"));
        f.push(CliError::new("invalid_artifact", 4, "b"));
        f.push(CliError::new("invalid_artifact", 4, "c"));
        assert_eq!(f.exit_code(), 4);
        assert_eq!(f.finish(0), 4);
        assert_eq!(Failures::new(true).finish(7), 7);
    }

    #[test]
    fn object_shape() {
        let e = CliError::new("refused", 5, "no").with("refusal_reason", json!("minor"));
        assert_eq!(
            e.to_json(),
            json!({"error": {"kind": "refused", "message": "no", "exit_code": 5, "refusal_reason": "minor"}})
        );
    }
}
