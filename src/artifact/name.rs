//! Pack names: `scope/name`, each part `[a-z0-9][a-z0-9-]*` of at most
//! [`MAX_PART_LEN`] bytes; versions: semantic versions of at most [`MAX_VERSION_LEN`].
//!
//! The rule lives with the artifact because every stage that names a pack — the
//! checker, the lowering, the registry (where the parts become directory names) —
//! must agree on it.

/// The longest part of a pack name, in bytes: the parts are directory names in a
/// registry, and file systems refuse names over 255 bytes.
pub const MAX_PART_LEN: usize = 64;

/// The longest version, in bytes (`<version>.json` is a file name in a registry).
pub const MAX_VERSION_LEN: usize = 64;

/// A version as every stage reads one: a semantic version of at most
/// [`MAX_VERSION_LEN`] bytes; the error says why not.
pub fn parse_version(version: &str) -> Result<semver::Version, String> {
    if version.len() > MAX_VERSION_LEN {
        return Err(format!("longer than {MAX_VERSION_LEN} characters"));
    }
    semver::Version::parse(version).map_err(|e| e.to_string())
}

/// Whether `name` is a well-formed `scope/name`.
pub fn valid_pack_name(name: &str) -> bool {
    match name.split_once('/') {
        Some((scope, rest)) => valid_name_part(scope) && valid_name_part(rest),
        None => false,
    }
}

/// Whether `part` is one well-formed part of a pack name: `[a-z0-9][a-z0-9-]*`, at
/// most [`MAX_PART_LEN`] bytes. Such a part is always a safe directory name (no `.`,
/// `/` or `\`).
pub fn valid_name_part(part: &str) -> bool {
    let mut bytes = part.bytes();
    part.len() <= MAX_PART_LEN
        && matches!(bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
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
        let longest = "a".repeat(MAX_PART_LEN);
        assert!(valid_pack_name(&format!("{longest}/{longest}")));
        assert!(!valid_pack_name(&format!("{longest}a/x")));
        assert!(!valid_pack_name(&format!("x/{longest}a")));
    }

    #[test]
    fn versions() {
        assert!(parse_version("1.2.3-rc.1").is_ok());
        let long = format!("1.0.0-{}", "a".repeat(MAX_VERSION_LEN - 6));
        assert!(parse_version(&long).is_ok());
        let over = format!("{long}a");
        assert_eq!(
            parse_version(&over).err().as_deref(),
            Some("longer than 64 characters")
        );
        assert!(parse_version("1.2").is_err());
    }
}
