//! Canonical JSON: keys sorted by their UTF-8 bytes, no insignificant whitespace,
//! numbers and strings as serde_json writes them (through [`super::json`]), a final
//! newline.
//!
//! We write the bytes ourselves rather than rely on serde_json's map ordering, so that
//! turning on a feature such as `preserve_order` anywhere in the dependency graph can
//! never change a hash.

use serde_json::Value;

use super::json;

/// The canonical bytes of `value`, final newline included.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    write_value(value, &mut out);
    out.push(b'\n');
    out
}

/// `blake3:<hex>` of the canonical bytes of `value`.
pub fn content_hash(value: &Value) -> String {
    format!("blake3:{}", blake3::hash(&canonical_bytes(value)).to_hex())
}

/// Whether `text` has the form [`content_hash`] writes: `blake3:` and 64 lowercase
/// hex digits.
pub fn is_content_hash(text: &str) -> bool {
    text.strip_prefix("blake3:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_str(out, key);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // A scalar has no map key that could be rejected: serializing it cannot fail.
    if json::to_sink(value, out).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_is_gone() {
        let v = json!({"b": 1, "a": {"z": [1, 2.5, "x"], "c": null}, "é": true});
        assert_eq!(
            String::from_utf8(canonical_bytes(&v)).unwrap(),
            "{\"a\":{\"c\":null,\"z\":[1,2.5,\"x\"]},\"b\":1,\"é\":true}\n"
        );
    }

    #[test]
    fn hash_is_stable_and_sensitive() {
        let a = content_hash(&json!({"x": "1"}));
        assert_eq!(a, content_hash(&json!({"x": "1"})));
        assert_ne!(a, content_hash(&json!({"x": "2"})));
        assert!(a.starts_with("blake3:") && a.len() == 7 + 64);
        assert!(is_content_hash(&a));
        assert!(!is_content_hash("blake3:00") && !is_content_hash(&a.to_uppercase()));
    }
}
