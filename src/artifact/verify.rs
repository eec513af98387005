//! Sealing an artifact with its hash, and verifying one on load.
//!
//! Every reader of artifacts — `ctxpack verify`, the runtime, import resolution — goes
//! through [`verify_bytes`], so a tampered or foreign document is refused the same way
//! everywhere.

use serde_json::Value;

use super::canonical::{canonical_bytes, content_hash};
use super::model::{Artifact, ARTIFACT_FORMAT};

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
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| ArtifactError::Json(e.to_string()))?;
    verify_value(value)
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
    artifact.hash = Some(recorded);
    Ok(artifact)
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
