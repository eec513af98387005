//! Stage 1: intent classification. The request's intent is confirmed against the
//! pack's intents; a missing or unknown one falls back to the `fallback` intent, and
//! with no fallback the compile fails (exit 4).

use crate::artifact::Intent;

use super::error::CompileError;

/// Stage 1's result: the intent the compile runs under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved<'a> {
    pub intent: &'a Intent,
    /// The request named no intent of the pack, so the `fallback` intent is used.
    pub fallback_used: bool,
}

/// The resolved intent and whether the fallback was used.
pub(crate) fn resolve<'a>(
    intents: &'a [Intent],
    requested: Option<&str>,
) -> Result<Resolved<'a>, CompileError> {
    let resolved = |intent, fallback_used| Resolved {
        intent,
        fallback_used,
    };
    if let Some(name) = requested {
        if let Some(intent) = intents.iter().find(|i| i.name == name) {
            return Ok(resolved(intent, false));
        }
    }
    if let Some(fallback) = intents.iter().find(|i| i.fallback) {
        return Ok(resolved(fallback, true));
    }
    let names: Vec<&str> = intents.iter().map(|i| i.name.as_str()).collect();
    let message = match requested {
        Some(name) => format!(
            "request.intent: unknown intent `{name}` and the pack has no fallback intent (intents: {})",
            names.join(", ")
        ),
        None => format!(
            "request.intent: no intent given and the pack has no fallback intent (intents: {})",
            names.join(", ")
        ),
    };
    Err(CompileError::UnknownIntent { message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{SafetyMode, Template};

    fn intent(name: &str, fallback: bool) -> Intent {
        Intent {
            name: name.into(),
            description: None,
            safety: SafetyMode::Autonomous,
            tools: vec![],
            task: Template {
                text: String::new(),
                parts: vec![],
            },
            budget: Default::default(),
            fallback,
            doc: None,
        }
    }

    #[test]
    fn resolves_known_unknown_and_missing() {
        let with = [intent("general", true), intent("refund", false)];
        assert_eq!(
            resolve(&with, Some("refund")).unwrap().intent.name,
            "refund"
        );
        let r = resolve(&with, Some("nope")).unwrap();
        assert_eq!((r.intent.name.as_str(), r.fallback_used), ("general", true));
        assert!(resolve(&with, None).unwrap().fallback_used);
        let without = [intent("refund", false)];
        let e = resolve(&without, Some("nope")).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), ("unknown_intent", 4));
        assert!(resolve(&without, None).is_err());
    }
}
