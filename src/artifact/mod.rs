//! The pinned pack artifact (`ctxpack.pack/v1`): its data model, canonical bytes,
//! hashing and verification.
//!
//! The artifact is the only thing the runtime sees. Everything it needs is here, typed;
//! the model is shared by the lowering stage (which produces it) and the runtime
//! (which consumes it), so the two can never disagree about a field.

pub mod canonical;
pub mod json;
pub mod model;
pub mod name;
pub mod verify;

pub use canonical::{canonical_bytes, content_hash, is_content_hash};
pub use model::*;
pub use name::{parse_version, valid_name_part, valid_pack_name, MAX_PART_LEN, MAX_VERSION_LEN};
pub use verify::{
    check_identity, check_templates, parse_json, verify_bytes, verify_value, ArtifactError,
};
