//! Template rendering over the compile's data `{ "ctx", "request", "run" }`.
//!
//! Strings render verbatim, numbers and booleans as their JSON text, lists as their
//! elements joined by `", "`. A missing or `null` value renders the template's default
//! if it has one; otherwise the empty string, with an `R0501` diagnostic saying where.

use std::borrow::Cow;

use serde_json::{json, Value};

use crate::artifact::{Template, TemplatePart};

use super::inputs::CompileInputs;
use super::shared::Diagnostic;

/// The data every condition and template sees: `{ "ctx", "request", "run" }`, with
/// `request.intent` the resolved intent.
pub(crate) fn data(intent: &str, inputs: &CompileInputs) -> Value {
    let (run, request) = (&inputs.run, &inputs.request);
    let ctx = match &request.context {
        Value::Null => json!({}),
        other => other.clone(),
    };
    json!({
        "ctx": ctx,
        "request": {
            "intent": intent,
            "message": request.message,
            "channel": request.channel,
            "locale": request.locale,
        },
        "run": {
            "id": run.run_id,
            "tenant": run.tenant,
            "user": { "id": run.user.id, "roles": run.user.roles },
            "safety_mode": run.safety_mode.as_str(),
        },
    })
}

/// Looks a dotted path up in `data`; `None` when a segment is missing.
pub(crate) fn lookup<'a>(data: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(data, |v, seg| v.get(seg))
}

fn push_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => {}
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(item, out);
            }
        }
        // Objects cannot be reached through a checked path (a field is never a
        // prefix); render their canonical JSON rather than guess.
        Value::Object(_) => {
            let bytes = crate::artifact::canonical_bytes(value);
            out.push_str(String::from_utf8_lossy(&bytes).trim_end());
        }
        Value::Bool(_) | Value::Number(_) => out.push_str(&value.to_string()),
    }
}

/// Redaction of interpolated values: the active redactors of one compile.
pub(crate) type Redact<'a> = &'a dyn Fn(&str) -> Cow<'_, str>;

/// Pins a closure to the higher-ranked signature of [`Redact`].
pub(crate) fn redactor<F: for<'t> Fn(&'t str) -> Cow<'t, str>>(f: F) -> F {
    f
}

/// Renders `template`; `place` names it in diagnostics (`the task of intent `refund``).
pub(crate) fn render(
    template: &Template,
    data: &Value,
    place: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> String {
    render_redacted(template, data, place, diagnostics, None)
}

/// Renders `template`, passing every interpolated value through `redact`: the caller's
/// values are redacted like the rest of the caller's text, the pack's own text is not.
pub(crate) fn render_redacted(
    template: &Template,
    data: &Value,
    place: &str,
    diagnostics: &mut Vec<Diagnostic>,
    redact: Option<Redact<'_>>,
) -> String {
    let mut out = String::with_capacity(template.text.len());
    for part in &template.parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Path { path, default } => match lookup(data, path) {
                Some(value) if !value.is_null() => {
                    let start = out.len();
                    push_value(value, &mut out);
                    if let Some(redact) = redact {
                        if let Cow::Owned(redacted) = redact(&out[start..]) {
                            out.truncate(start);
                            out.push_str(&redacted);
                        }
                    }
                }
                _ => match default {
                    Some(d) => out.push_str(d),
                    None => diagnostics.push(Diagnostic {
                        code: "R0501".into(),
                        message: format!(
                            "optional template field `{path}` in {place} has no value and no default; rendered empty"
                        ),
                        policy: None,
                    }),
                },
            },
        }
    }
    out
}

/// Whether a template renders the same for every input (no interpolation), so that its
/// token count can be computed once per pack.
pub(crate) fn is_static(template: &Template) -> bool {
    template
        .parts
        .iter()
        .all(|p| matches!(p, TemplatePart::Text(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(parts: Vec<TemplatePart>) -> Template {
        Template {
            text: String::new(),
            parts,
        }
    }
    fn path(p: &str, d: Option<&str>) -> TemplatePart {
        TemplatePart::Path {
            path: p.into(),
            default: d.map(Into::into),
        }
    }

    #[test]
    fn renders_values() {
        let data = json!({"ctx": {"a": "x", "n": 3, "f": 1.5, "b": true, "l": ["p", "q"]}});
        let mut d = Vec::new();
        let out = render(
            &t(vec![
                TemplatePart::Text("[".into()),
                path("ctx.a", None),
                path("ctx.n", None),
                path("ctx.f", None),
                path("ctx.b", None),
                path("ctx.l", None),
                TemplatePart::Text("]".into()),
            ]),
            &data,
            "here",
            &mut d,
        );
        assert_eq!(out, "[x31.5truep, q]");
        assert!(d.is_empty());
    }

    #[test]
    fn missing_uses_default_or_warns() {
        let data = json!({"ctx": {"o": null}});
        let mut d = Vec::new();
        let out = render(
            &t(vec![path("ctx.o.id", Some("(none)")), path("ctx.o", None)]),
            &data,
            "the task",
            &mut d,
        );
        assert_eq!(out, "(none)");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, "R0501");
        assert!(d[0].message.contains("`ctx.o` in the task"));
    }
}
