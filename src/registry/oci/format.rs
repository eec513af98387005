//! The manifests ctxpack writes and the parts of manifests it reads.

use serde_json::{json, Value};

use super::{HASH_ANNOTATION, PACK_MEDIA_TYPE, SIGNATURE_MEDIA_TYPE};

pub(crate) const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The empty JSON object `{}`, the config blob of artifacts without a config.
pub(crate) const EMPTY_BLOB: &[u8] = b"{}";
const TITLE: &str = "org.opencontainers.image.title";
const VERSION: &str = "org.opencontainers.image.version";

/// `sha256:<hex>` of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(bytes);
    let mut hex = String::with_capacity(71);
    hex.push_str("sha256:");
    for b in digest.iter() {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn descriptor(media_type: &str, bytes: &[u8]) -> Value {
    json!({"mediaType": media_type, "digest": sha256(bytes), "size": bytes.len()})
}

fn serialize(value: &Value) -> Vec<u8> {
    // serde_json writes a `Value` it built itself; this cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// The manifest of a pack: the same artifact always gives the same bytes, so
/// publishing it again finds the same digest.
pub(crate) fn pack_manifest(name: &str, version: &str, hash: &str, bytes: &[u8]) -> Vec<u8> {
    let file = format!("{}-{version}.json", name.replace('/', "."));
    let mut layer = descriptor(PACK_MEDIA_TYPE, bytes);
    layer["annotations"] = json!({ TITLE: file });
    serialize(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": PACK_MEDIA_TYPE,
        "config": descriptor(EMPTY_MEDIA_TYPE, EMPTY_BLOB),
        "layers": [layer],
        "annotations": { TITLE: name, VERSION: version, HASH_ANNOTATION: hash },
    }))
}

/// The manifest of a signature of the pack manifest `subject` (`digest`, `size`).
pub(crate) fn signature_manifest(subject: &str, subject_size: usize, signature: &[u8]) -> Vec<u8> {
    let mut layer = descriptor(SIGNATURE_MEDIA_TYPE, signature);
    layer["annotations"] = json!({ TITLE: "pack.json.minisig" });
    serialize(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": SIGNATURE_MEDIA_TYPE,
        "config": descriptor(EMPTY_MEDIA_TYPE, EMPTY_BLOB),
        "layers": [layer],
        "subject": {"mediaType": MANIFEST_MEDIA_TYPE, "digest": subject, "size": subject_size},
    }))
}

/// A layer's descriptor, as read from a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layer {
    pub digest: String,
    pub size: u64,
}

/// What ctxpack reads of a pack manifest: its one layer of `media_type` and the
/// hash annotation, if any. Manifests written by other clients (without an
/// `artifactType`, with another config) are read as long as that layer is there.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub layer: Layer,
    pub hash: Option<String>,
}

impl Manifest {
    pub(crate) fn parse(bytes: &[u8], media_type: &str) -> Result<Manifest, String> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
        let layers: Vec<&Value> = value
            .get("layers")
            .and_then(Value::as_array)
            .map(|l| {
                l.iter()
                    .filter(|d| d.get("mediaType").and_then(Value::as_str) == Some(media_type))
                    .collect()
            })
            .unwrap_or_default();
        let [layer] = layers.as_slice() else {
            return Err(format!(
                "the manifest has {} layers of media type `{media_type}`, not one",
                layers.len()
            ));
        };
        let digest = layer
            .get("digest")
            .and_then(Value::as_str)
            .filter(|d| super::valid_digest(d))
            .ok_or("the layer has no sha256 digest")?;
        let size = layer
            .get("size")
            .and_then(Value::as_u64)
            .ok_or("the layer has no size")?;
        let hash = value
            .get("annotations")
            .and_then(|a| a.get(HASH_ANNOTATION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(Manifest {
            layer: Layer {
                digest: digest.to_owned(),
                size,
            },
            hash,
        })
    }
}

/// The referrers tag schema's index with `entry` (a descriptor) added, or `None`
/// when it is already listed. `existing` is the current index, if there is one.
pub(crate) fn index_with(existing: Option<&[u8]>, entry: Value) -> Result<Option<Vec<u8>>, String> {
    let mut index = match existing {
        Some(bytes) => serde_json::from_slice::<Value>(bytes)
            .map_err(|e| format!("the referrers index is not JSON: {e}"))?,
        None => json!({"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": []}),
    };
    let Some(obj) = index.as_object_mut() else {
        return Err("the referrers index is not an object".into());
    };
    let manifests = obj
        .entry("manifests")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(list) = manifests.as_array_mut() else {
        return Err("the referrers index has no `manifests` list".into());
    };
    if list.iter().any(|d| d.get("digest") == entry.get("digest")) {
        return Ok(None);
    }
    list.push(entry);
    Ok(Some(serialize(&index)))
}

/// The descriptor of a signature manifest, as listed among a pack's referrers.
pub(crate) fn referrer_descriptor(manifest: &[u8]) -> Value {
    let mut d = descriptor(MANIFEST_MEDIA_TYPE, manifest);
    d["artifactType"] = Value::from(SIGNATURE_MEDIA_TYPE);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip() {
        let bytes = b"{\"x\":1}\n";
        let m = pack_manifest("acme/support", "1.0.0", "blake3:ab", bytes);
        assert_eq!(
            m,
            pack_manifest("acme/support", "1.0.0", "blake3:ab", bytes)
        );
        let parsed = Manifest::parse(&m, PACK_MEDIA_TYPE).unwrap();
        assert_eq!(parsed.layer.digest, sha256(bytes));
        assert_eq!(parsed.layer.size, bytes.len() as u64);
        assert_eq!(parsed.hash.as_deref(), Some("blake3:ab"));
        assert!(Manifest::parse(&m, SIGNATURE_MEDIA_TYPE).is_err());
        assert_eq!(
            sha256(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn referrers_index() {
        let entry = referrer_descriptor(b"{}");
        let first = index_with(None, entry.clone()).unwrap().unwrap();
        assert!(index_with(Some(&first), entry).unwrap().is_none());
        let other = referrer_descriptor(b"[]");
        let second = index_with(Some(&first), other).unwrap().unwrap();
        let v: Value = serde_json::from_slice(&second).unwrap();
        assert_eq!(v["manifests"].as_array().unwrap().len(), 2);
    }
}
