//! Pack names: `scope/name`, each part `[a-z0-9][a-z0-9-]*`.
//!
//! The rule lives with the artifact because every stage that names a pack — the
//! checker, the lowering, the registry (where the parts become directory names) —
//! must agree on it.

/// Whether `name` is a well-formed `scope/name`.
pub fn valid_pack_name(name: &str) -> bool {
    match name.split_once('/') {
        Some((scope, rest)) => valid_name_part(scope) && valid_name_part(rest),
        None => false,
    }
}

/// Whether `part` is one well-formed part of a pack name: `[a-z0-9][a-z0-9-]*`.
/// Such a part is always a safe directory name (no `.`, `/` or `\`).
pub fn valid_name_part(part: &str) -> bool {
    let mut bytes = part.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && bytes.all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_names() {
        for ok in ["acme/support", "a/b", "0x/base-safety-2"] {
            assert!(valid_pack_name(ok), "{ok}");
        }
        for bad in [
            "acme", "acme/", "/x", "a/b/c", "Acme/x", "a/-x", "a/x_y", "a/..", "../x", "a/x y", "",
        ] {
            assert!(!valid_pack_name(bad), "{bad}");
        }
    }
}
