//! Sealing an artifact with its hash, and verifying one on load.
//!
//! Every reader of artifacts — `ctxpack verify`, the runtime, import resolution — goes
//! through [`verify_bytes`], so a tampered or foreign document is refused the same way
//! everywhere.

use serde_json::Value;

use super::canonical::{canonical_bytes, content_hash};
use super::model::{Artifact, Effect, Template, ARTIFACT_FORMAT};

/// Why an artifact was refused.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("artifact is not valid JSON: {0}")]
    Json(String),
    #[error("artifact has no `format` member; expected `{ARTIFACT_FORMAT}`")]
    MissingFormat,
    #[error("unknown artifact format `{found}`; this ctxpack reads `{ARTIFACT_FORMAT}`")]
    UnknownFormat { found: String },
    #[error("artifact has no `hash` member")]
    MissingHash,
    #[error("artifact hash mismatch: recorded `{recorded}`, content hashes to `{computed}`")]
    HashMismatch { recorded: String, computed: String },
    #[error("artifact does not match the `{ARTIFACT_FORMAT}` schema: {0}")]
    Shape(String),
    /// A name or version `build` would never write: the pack could not be referred to
    /// (`scope/name@version`) as everything else refers to it.
    #[error("{0}")]
    Identity(String),
    /// Two members that say the same thing disagree (a template's `text` and
    /// `parts`): build never writes such an artifact, and readers would see two
    /// different packs in it.
    #[error("artifact is inconsistent: {0}")]
    Inconsistent(String),
}

impl ArtifactError {
    /// The process exit code for this failure (see the runtime spec's exit codes).
    pub fn exit_code(&self) -> i32 {
        match self {
            ArtifactError::Json(_) => 3,
            _ => 4,
        }
    }

    /// The stable name of this failure, as `--json-errors` reports it:
    /// `unparseable_input` (not JSON, exit 3) or `invalid_artifact` (exit 4).
    pub fn kind(&self) -> &'static str {
        match self {
            ArtifactError::Json(_) => "unparseable_input",
            _ => "invalid_artifact",
        }
    }
}

impl Artifact {
    /// Serializes the artifact with its hash computed over the canonical bytes of
    /// everything but the hash. Returns the sealed value and the hash.
    pub fn seal(&self) -> (Value, String) {
        let mut unsealed = self.clone();
        unsealed.hash = None;
        // An artifact is plain data (strings, numbers, vectors, maps with string keys):
        // serializing it cannot fail.
        let mut value = serde_json::to_value(&unsealed).unwrap_or(Value::Null);
        let hash = content_hash(&value);
        if let Value::Object(map) = &mut value {
            map.insert("hash".to_owned(), Value::String(hash.clone()));
        }
        (value, hash)
    }

    /// The canonical bytes of the sealed artifact: what `build` writes and `publish`
    /// stores.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        canonical_bytes(&self.seal().0)
    }
}

/// Parses, checks the format tag, recomputes the hash and decodes an artifact.
pub fn verify_bytes(bytes: &[u8]) -> Result<Artifact, ArtifactError> {
    verify_value(parse_json(bytes)?)
}

/// As [`verify_bytes`], for an already parsed document.
pub fn verify_value(mut value: Value) -> Result<Artifact, ArtifactError> {
    let Value::Object(map) = &mut value else {
        return Err(ArtifactError::Shape("expected a JSON object".into()));
    };
    match map.get("format") {
        None => return Err(ArtifactError::MissingFormat),
        Some(Value::String(f)) if f == ARTIFACT_FORMAT => {}
        Some(Value::String(f)) => return Err(ArtifactError::UnknownFormat { found: f.clone() }),
        Some(other) => {
            return Err(ArtifactError::UnknownFormat {
                found: other.to_string(),
            })
        }
    }
    let recorded = match map.remove("hash") {
        Some(Value::String(h)) => h,
        Some(_) | None => return Err(ArtifactError::MissingHash),
    };
    let computed = content_hash(&value);
    if computed != recorded {
        return Err(ArtifactError::HashMismatch { recorded, computed });
    }
    let mut artifact: Artifact =
        serde_json::from_value(value).map_err(|e| ArtifactError::Shape(e.to_string()))?;
    check_identity(&artifact).map_err(ArtifactError::Identity)?;
    check_templates(&artifact).map_err(ArtifactError::Inconsistent)?;
    artifact.hash = Some(recorded);
    Ok(artifact)
}

/// Every template's `text` is the one its `parts` write ([`Template::text_of`]): the
/// runtime renders the parts, `diff` and reviewers read the text, so a hand-edited
/// artifact where they differ would show a reviewer one prompt and send the model
/// another. Every reader holds an artifact to it: loading ([`verify_value`]) and
/// preparing one made by other means.
pub fn check_templates(artifact: &Artifact) -> Result<(), String> {
    let mut templates: Vec<(String, &Template)> = Vec::new();
    if let Some(prompts) = &artifact.prompts {
        templates.push(("prompt system".into(), &prompts.system));
        if let Some(developer) = &prompts.developer {
            templates.push(("prompt developer".into(), developer));
        }
    }
    for intent in &artifact.intents {
        templates.push((format!("intent `{}`'s task", intent.name), &intent.task));
    }
    for policy in &artifact.policies {
        for effect in &policy.effects {
            if let Effect::Instruct(text) = effect {
                templates.push((format!("policy `{}`'s instruct", policy.name), text));
            }
        }
    }
    for block in &artifact.blocks {
        templates.push((format!("block `{}`", block.name), &block.text));
    }
    match templates
        .into_iter()
        .find(|(_, t)| t.text != Template::text_of(&t.parts))
    {
        Some((place, _)) => Err(format!(
            "the text of {place} is not the one its parts write (the runtime renders the parts)"
        )),
        None => Ok(()),
    }
}

/// An artifact's JSON text, read as every input document is
/// ([`crate::runtime::document::Document`]): a key given twice in one object is
/// refused. `build` never writes one, and a reader that keeps the first copy (this
/// one keeps the last) would see another pack under the same hash.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ArtifactError> {
    // A byte-order mark is not part of the document (RFC 8259 lets a reader ignore
    // it), as for every input file: an artifact saved by an editor that adds one
    // still reads.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice::<crate::runtime::document::Document>(bytes)
        .map(|d| d.0)
        .map_err(|e| ArtifactError::Json(e.to_string()))
}

/// The name is `scope/name` and the version an exact semantic version, as `build`
/// writes them (E0104 in a source); else why not. Every reader of artifacts holds
/// them to it: loading ([`verify_value`]) and preparing one made by other means.
pub fn check_identity(artifact: &Artifact) -> Result<(), String> {
    if !super::valid_pack_name(&artifact.name) {
        return Err(format!(
            "malformed pack name `{}`: expected `scope/name`, each part `[a-z0-9][a-z0-9-]*` of at most 64 characters",
            artifact.name
        ));
    }
    super::parse_version(&artifact.version)
        .map(drop)
        .map_err(|e| {
            format!(
                "version `{}` is not a semantic version: {e}",
                artifact.version
            )
        })
}
