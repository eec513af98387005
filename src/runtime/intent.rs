//! Stage 1: intent classification. The request's intent is confirmed against the
//! pack's intents; a missing or unknown one falls back to the `fallback` intent, and
//! with no fallback the compile fails (exit 4).

use crate::artifact::Intent;

use super::error::CompileError;

/// The resolved intent and whether the fallback was used.
pub(crate) fn resolve<'a>(
    intents: &'a [Intent],
    requested: Option<&str>,
) -> Result<(&'a Intent, bool), CompileError> {
    if let Some(name) = requested {
        if let Some(intent) = intents.iter().find(|i| i.name == name) {
            return Ok((intent, false));
        }
    }
    if let Some(fallback) = intents.iter().find(|i| i.fallback) {
        return Ok((fallback, true));
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
        assert_eq!(resolve(&with, Some("refund")).unwrap().0.name, "refund");
        let (i, fb) = resolve(&with, Some("nope")).unwrap();
        assert_eq!((i.name.as_str(), fb), ("general", true));
        assert!(resolve(&with, None).unwrap().1);
        let without = [intent("refund", false)];
        let e = resolve(&without, Some("nope")).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), ("unknown_intent", 4));
        assert!(resolve(&without, None).is_err());
    }
}
