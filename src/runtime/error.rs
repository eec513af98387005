//! Why a compile failed, and which exit code each failure maps to.
//!
//! Every variant has a stable [`CompileError::kind`] string (used by `--json-errors`
//! and by `expect: { error: KIND }` in pack tests) and an exit code from the runtime
//! spec: 4 for invalid input or an invalid pack, 5 when the pack itself refuses.

/// A failed load ([`super::PreparedPack::new`]) or compile ([`super::PreparedPack::compile`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// A `library` pack holds shared definitions only and cannot be compiled.
    #[error("pack `{name}` is a library pack; only application packs can be compiled")]
    LibraryPack { name: String },
    /// The artifact is well-formed JSON of the right shape but inconsistent (an unknown
    /// bucket in an intent override, a redactor that is not a valid regex, ...).
    #[error("invalid artifact: {message}")]
    InvalidArtifact { message: String },
    /// An input does not match its schema. `path` names the offending member, such as
    /// `request.context.user.age`.
    #[error("{path}: {message}")]
    InvalidInput { path: String, message: String },
    /// The request names no intent of the pack and the pack has no fallback intent.
    #[error("{message}")]
    UnknownIntent { message: String },
    /// An enforcing policy failed to evaluate (or its condition failed to compile), so
    /// the compile stops closed.
    #[error("policy `{policy}` failed to evaluate: {message}")]
    PolicyEvalError { policy: String, message: String },
    /// The fixed text or the buckets' minimums do not fit the budget.
    #[error("budget exhausted: {message}")]
    BudgetExhausted { message: String },
    /// A block did not fit a bucket whose overflow is `error`.
    #[error("block `{block}` does not fit bucket `{bucket}` ({tokens} tokens, {remaining} left) and the bucket's overflow is `error`")]
    OverflowError {
        bucket: String,
        block: String,
        tokens: usize,
        remaining: usize,
    },
}

impl CompileError {
    /// Every [`CompileError::kind`].
    pub const KINDS: &'static [&'static str] = &[
        "library_pack",
        "invalid_artifact",
        "invalid_input",
        "unknown_intent",
        "policy_eval_error",
        "budget_exhausted",
        "overflow_error",
    ];

    /// The stable, machine-readable name of the failure.
    pub fn kind(&self) -> &'static str {
        match self {
            CompileError::LibraryPack { .. } => "library_pack",
            CompileError::InvalidArtifact { .. } => "invalid_artifact",
            CompileError::InvalidInput { .. } => "invalid_input",
            CompileError::UnknownIntent { .. } => "unknown_intent",
            CompileError::PolicyEvalError { .. } => "policy_eval_error",
            CompileError::BudgetExhausted { .. } => "budget_exhausted",
            CompileError::OverflowError { .. } => "overflow_error",
        }
    }

    /// The process exit code (see the runtime spec's table).
    pub fn exit_code(&self) -> i32 {
        match self {
            CompileError::LibraryPack { .. }
            | CompileError::InvalidArtifact { .. }
            | CompileError::InvalidInput { .. }
            | CompileError::UnknownIntent { .. } => 4,
            CompileError::PolicyEvalError { .. }
            | CompileError::BudgetExhausted { .. }
            | CompileError::OverflowError { .. } => 5,
        }
    }

    /// The policy a `policy_eval_error` names.
    pub fn policy(&self) -> Option<&str> {
        match self {
            CompileError::PolicyEvalError { policy, .. } => Some(policy),
            _ => None,
        }
    }

    pub(crate) fn input(path: impl Into<String>, message: impl Into<String>) -> Self {
        CompileError::InvalidInput {
            path: path.into(),
            message: message.into(),
        }
    }

    pub(crate) fn artifact(message: impl Into<String>) -> Self {
        CompileError::InvalidArtifact {
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_exit_codes() {
        let e = CompileError::input("request.context.user.age", "expected int, found string");
        assert_eq!(
            e.to_string(),
            "request.context.user.age: expected int, found string"
        );
        assert_eq!((e.kind(), e.exit_code()), ("invalid_input", 4));
        let e = CompileError::PolicyEvalError {
            policy: "p".into(),
            message: "boom".into(),
        };
        assert_eq!(
            (e.kind(), e.exit_code(), e.policy()),
            ("policy_eval_error", 5, Some("p"))
        );
    }

    #[test]
    fn kinds_lists_every_variant() {
        let m = || String::from("m");
        let all = [
            CompileError::LibraryPack { name: m() },
            CompileError::InvalidArtifact { message: m() },
            CompileError::input("p", "m"),
            CompileError::UnknownIntent { message: m() },
            CompileError::PolicyEvalError {
                policy: m(),
                message: m(),
            },
            CompileError::BudgetExhausted { message: m() },
            CompileError::OverflowError {
                bucket: m(),
                block: m(),
                tokens: 1,
                remaining: 0,
            },
        ];
        let kinds: Vec<&str> = all.iter().map(CompileError::kind).collect();
        assert_eq!(kinds, CompileError::KINDS);
    }
}
