//! The inputs digest that `context_ledger.inputs` records, so that the ledger hash
//! changes with any input value, including the ones the envelope does not otherwise
//! show (the request's message and context, the run's id, tenant, user and safety
//! mode, memory scores, the roles of dropped turns).
//!
//! Evidence is not in it: the envelope records every evidence item whole already
//! (`evidence_manifest`: id, source, score, hops; `context_ledger.evidence`: id and the
//! BLAKE3 of the content), and leaving it out keeps the digest small.
//!
//! The digest is the BLAKE3 of a canonical JSON document (sorted keys, no whitespace,
//! no final newline) in which contents stand by their BLAKE3 (which the ledger computes
//! anyway), so that digesting never re-reads hundreds of kilobytes:
//!
//! ```json
//! { "memory":  [ { "blake3", "id", "promoted", "score" } ],          // in input order
//!   "request": { "channel", "context", "history": [ { "blake3", "role" } ], "intent",
//!                "locale", "message", "request_id" },
//!   "run":     { "budget", "permissions", "prohibitions", "run_id", "safety_mode",
//!                "tenant", "user": { "id", "roles" } } }
//! ```
//!
//! Inputs are digested as decoded, so two files that differ only in layout (key order,
//! whitespace, JSON versus YAML) give the same digest; any change of a value changes it.

use serde::{Serialize, Serializer};

use crate::artifact::json::{self, HashSink};

use super::inputs::{CompileInputs, Role, RunContext};
use super::memo::ContentHash;
use super::shared::{blake3_ref, SortedValue};

/// A content hash, written `blake3:<hex>`.
struct HashRef<'a>(&'a ContentHash);

impl Serialize for HashRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.text)
    }
}

#[derive(Serialize)]
struct MemoryDigest<'a> {
    blake3: HashRef<'a>,
    id: &'a str,
    promoted: Option<bool>,
    score: f64,
}

#[derive(Serialize)]
struct TurnDigest<'a> {
    blake3: HashRef<'a>,
    role: Role,
}

#[derive(Serialize)]
struct RequestDigest<'a> {
    channel: &'a str,
    context: SortedValue<'a>,
    history: Vec<TurnDigest<'a>>,
    intent: Option<&'a str>,
    locale: &'a str,
    message: &'a str,
    request_id: &'a str,
    /// Only when given, so that digests of requests without one are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    session_state: Option<SortedValue<'a>>,
}

#[derive(Serialize)]
struct InputsDigest<'a> {
    memory: Vec<MemoryDigest<'a>>,
    request: RequestDigest<'a>,
    run: &'a RunContext,
}

/// `blake3:<hex>` of the inputs document, given the BLAKE3 of every memory and history
/// content (in input order).
pub(crate) fn inputs_digest(
    inputs: &CompileInputs,
    memory: &[ContentHash],
    history: &[ContentHash],
) -> String {
    let request = &inputs.request;
    let doc = InputsDigest {
        memory: inputs
            .memory
            .iter()
            .zip(memory)
            .map(|(m, h)| MemoryDigest {
                blake3: HashRef(h),
                id: &m.id,
                promoted: m.promoted,
                score: m.score,
            })
            .collect(),
        request: RequestDigest {
            channel: &request.channel,
            context: SortedValue(&request.context),
            history: request
                .history
                .iter()
                .zip(history)
                .map(|(t, h)| TurnDigest {
                    blake3: HashRef(h),
                    role: t.role,
                })
                .collect(),
            intent: request.intent.as_deref(),
            locale: &request.locale,
            message: &request.message,
            request_id: &request.request_id,
            session_state: request.session_state.as_ref().map(SortedValue),
        },
        run: &inputs.run,
    };
    let mut sink = HashSink::default();
    // Plain data with string keys: serialization cannot fail.
    let _ = json::to_sink(&doc, &mut sink);
    blake3_ref(&sink.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::canonical_bytes;
    use serde_json::json;

    /// The run serializes with sorted keys, exactly as canonical JSON would write it.
    #[test]
    fn run_is_canonical() {
        let run: RunContext = serde_json::from_value(json!({
            "run_id": "r", "tenant": "t", "safety_mode": "supervised",
            "user": {"id": "u", "roles": ["a"]}, "permissions": ["x"], "prohibitions": [],
            "budget": {"total_tokens": 10, "bucket_tokens": {"b": 1}, "tokenizer": "o200k"}
        }))
        .expect("a valid run");
        let direct = json::to_vec(&run).expect("serializes");
        let canonical = canonical_bytes(&serde_json::to_value(&run).expect("serializes"));
        assert_eq!(direct, canonical[..canonical.len() - 1]);
    }
}
