//! Provider request bodies from a compiled envelope.
//!
//! A refused compile (`runtime_controls.must_refuse`) has no body: both renders return
//! [`Refused`] instead, so a host cannot send what the pack refused by accident.
//!
//! Trusted text (system, developer, task, and the `policy`, `tools` and static blocks)
//! goes to the system positions; untrusted evidence and memory go only in the final
//! user turn, before the user's message (redacted like every other text the model
//! receives); history becomes the provider's turns. Sections are joined by a blank
//! line.
//!
//! A surfaced tool whose `tools` block the budget kept is also sent in the provider's
//! `tools` array with its JSON Schema, so the model can call it. The block's text
//! (name, description and schema), in the system text, is what the `tools` bucket
//! counted; the `tools` array is the provider's own framing, which no budget counts.
//!
//! - **OpenAI Chat Completions**: a `system` message with the system prompt, then a
//!   second `system` message with developer + task + trusted blocks. We use a second
//!   `system` message rather than the `developer` role because every Chat Completions
//!   model and compatible server accepts it, and the provider treats both as
//!   instructions from the application.
//! - **Anthropic Messages**: `system` is all trusted text; consecutive turns of the same
//!   role are merged (the API wants alternation), including a last history turn from
//!   the user with the final user turn. `max_tokens` is required by the API and is
//!   taken from the caller.
//!
//! `model` is included only when the caller gives one.

use serde_json::{json, Map, Value};

use super::envelope::{BlockSource, CompiledContext, ContextBlock, Trust};
use super::inputs::Role;

/// The pack refused the request (a fired `refuse`): there is no body to send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the pack refused this request: {reason}")]
pub struct Refused {
    /// `runtime_controls.refusal_reason`.
    pub reason: String,
}

impl Refused {
    /// The stable kind of this failure, as `--json-errors` names it.
    pub const KIND: &'static str = "refused";
    /// The exit code of a refused compile with a provider target.
    pub const EXIT_CODE: i32 = 5;
}

/// `Err` when the compile must be refused.
fn not_refused(cc: &CompiledContext) -> Result<(), Refused> {
    let controls = &cc.runtime_controls;
    if controls.must_refuse {
        return Err(Refused {
            reason: controls.refusal_reason.clone().unwrap_or_default(),
        });
    }
    Ok(())
}

fn trusted_text(cc: &CompiledContext, with_system: bool) -> String {
    let p = &cc.compiled_prompt;
    let mut parts: Vec<&str> = Vec::new();
    if with_system {
        parts.push(&p.system);
    }
    if let Some(d) = &p.developer {
        parts.push(d);
    }
    parts.push(&p.task);
    parts.extend(
        p.context_blocks
            .iter()
            .filter(|b| b.trust == Trust::Trusted)
            .map(|b| &*b.text),
    );
    join(parts)
}

fn join<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    parts
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn history(cc: &CompiledContext) -> Vec<(Role, &str)> {
    cc.compiled_prompt
        .context_blocks
        .iter()
        .filter(|b| b.source == BlockSource::Session)
        .filter_map(ContextBlock::turn_content)
        .collect()
}

/// Untrusted lanes followed by the request's message.
fn final_user_turn(cc: &CompiledContext) -> String {
    let lanes = cc
        .compiled_prompt
        .context_blocks
        .iter()
        .filter(|b| matches!(b.source, BlockSource::Evidence | BlockSource::Memory))
        .map(|b| &*b.text);
    join(lanes.chain(std::iter::once(cc.compiled_prompt.message.as_str())))
}

/// Surfaced tools whose `tools` block the budget kept, in manifest (name) order.
fn sent_tools(cc: &CompiledContext) -> impl Iterator<Item = (&str, &str, &Value)> + '_ {
    let kept = |name: &str| {
        cc.compiled_prompt
            .context_blocks
            .iter()
            .any(|b| b.source == BlockSource::Tool && &*b.id == name)
    };
    cc.manifests
        .tool_manifest
        .iter()
        .filter(move |t| t.surfaced && kept(&t.name))
        .map(|t| (&*t.name, &*t.description, &*t.json_schema))
}

/// An OpenAI Chat Completions request body; [`Refused`] when the pack refused.
pub fn openai(cc: &CompiledContext, model: Option<&str>) -> Result<Value, Refused> {
    not_refused(cc)?;
    let mut messages = vec![json!({"role": "system", "content": cc.compiled_prompt.system})];
    let instructions = trusted_text(cc, false);
    if !instructions.is_empty() {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    for (role, content) in history(cc) {
        messages.push(json!({"role": role.as_str(), "content": content}));
    }
    messages.push(json!({"role": "user", "content": final_user_turn(cc)}));
    let mut body = Map::new();
    if let Some(m) = model {
        body.insert("model".into(), json!(m));
    }
    body.insert("messages".into(), Value::Array(messages));
    let tools: Vec<Value> = sent_tools(cc)
        .map(|(name, description, schema)| {
            json!({"type": "function", "function": {
                "name": name, "description": description, "parameters": schema}})
        })
        .collect();
    // The API rejects an empty `tools` array, so it is left out instead.
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    Ok(Value::Object(body))
}

/// An Anthropic Messages request body; [`Refused`] when the pack refused.
pub fn anthropic(
    cc: &CompiledContext,
    model: Option<&str>,
    max_tokens: u32,
) -> Result<Value, Refused> {
    not_refused(cc)?;
    let mut turns: Vec<(Role, String)> = Vec::new();
    let mut push = |role: Role, content: &str| match turns.last_mut() {
        Some((last, text)) if *last == role => {
            text.push_str("\n\n");
            text.push_str(content);
        }
        _ => turns.push((role, content.to_owned())),
    };
    for (role, content) in history(cc) {
        push(role, content);
    }
    push(Role::User, &final_user_turn(cc));
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role.as_str(), "content": content}))
        .collect();
    let mut body = Map::new();
    if let Some(m) = model {
        body.insert("model".into(), json!(m));
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("system".into(), json!(trusted_text(cc, true)));
    body.insert("messages".into(), Value::Array(messages));
    let tools: Vec<Value> = sent_tools(cc)
        .map(|(name, description, schema)| {
            json!({"name": name, "description": description, "input_schema": schema})
        })
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    Ok(Value::Object(body))
}
