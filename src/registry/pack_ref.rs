//! Pack names (`scope/name`) and pinned pack references (`scope/name@1.2.3`).
//!
//! A reference without a version is refused here, at the boundary, and never resolved
//! to "latest": a host that names a pack always gets the exact bytes it reviewed.

use std::fmt;
use std::str::FromStr;

use semver::Version;

use super::RegistryError;
use crate::artifact::{valid_name_part, valid_pack_name};

/// A pack name, `scope/name`, each part `[a-z0-9][a-z0-9-]*`. Both parts are safe
/// directory names, which is what lets the registry map names onto paths.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackName {
    scope: String,
    name: String,
}

impl PackName {
    /// Parses `scope/name`. A reference with a version is refused: callers that take
    /// a version parse a [`PackRef`] instead.
    pub fn parse(input: &str) -> Result<PackName, RegistryError> {
        if input.contains('@') {
            return Err(malformed(input, "expected a pack name without a version"));
        }
        match input.split_once('/') {
            Some((scope, name)) if valid_name_part(scope) && valid_name_part(name) => {
                Ok(PackName {
                    scope: scope.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(malformed(input, NAME_RULE)),
        }
    }

    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The part after the slash.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for PackName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.scope, self.name)
    }
}

impl FromStr for PackName {
    type Err = RegistryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PackName::parse(s)
    }
}

/// A pinned reference: `scope/name@version` with an exact semantic version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PackRef {
    pub name: PackName,
    pub version: Version,
}

impl PackRef {
    /// Parses `scope/name@1.2.3`.
    ///
    /// `scope/name` alone is refused as unpinned ([`RegistryError::Unpinned`]); a
    /// malformed name, a version range such as `^1.2` or anything else that is not an
    /// exact version is [`RegistryError::MalformedRef`]. Both exit 4.
    pub fn parse(input: &str) -> Result<PackRef, RegistryError> {
        let Some((name, version)) = input.split_once('@') else {
            return Err(if valid_pack_name(input) {
                RegistryError::Unpinned(input.to_owned())
            } else {
                malformed(input, NAME_RULE)
            });
        };
        let name = PackName::parse(name).map_err(|_| malformed(input, NAME_RULE))?;
        if version.is_empty() {
            return Err(malformed(input, "missing version after `@`"));
        }
        let version = crate::artifact::parse_version(version).map_err(|e| {
            let reason = if semver::VersionReq::parse(version).is_ok() {
                format!("`{version}` is a version range; name an exact version such as `1.2.3`")
            } else {
                format!("`{version}` is not a semantic version: {e}")
            };
            malformed(input, &reason)
        })?;
        Ok(PackRef { name, version })
    }

    /// Whether `input` looks like a registry reference (`scope/name` with or without a
    /// version) rather than a path. Used by commands that accept either.
    pub fn looks_like_ref(input: &str) -> bool {
        valid_pack_name(input.split_once('@').map_or(input, |(name, _)| name))
    }
}

impl fmt::Display for PackRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.name, self.version)
    }
}

impl FromStr for PackRef {
    type Err = RegistryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PackRef::parse(s)
    }
}

/// A reference pinned by version or, for OCI registries, by manifest digest:
/// `scope/name@1.2.3` or `scope/name@sha256:<64 hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PinnedRef {
    Version(PackRef),
    Digest { name: PackName, digest: String },
}

impl PinnedRef {
    /// Parses either form; everything else is refused as [`PackRef::parse`] refuses it.
    pub fn parse(input: &str) -> Result<PinnedRef, RegistryError> {
        match input.split_once('@') {
            Some((name, digest)) if digest.starts_with("sha256:") => {
                let name = PackName::parse(name).map_err(|_| malformed(input, NAME_RULE))?;
                if !super::oci::valid_digest(digest) {
                    return Err(malformed(
                        input,
                        "a digest is `sha256:` and 64 lowercase hexadecimal digits",
                    ));
                }
                Ok(PinnedRef::Digest {
                    name,
                    digest: digest.to_owned(),
                })
            }
            _ => PackRef::parse(input).map(PinnedRef::Version),
        }
    }

    pub fn name(&self) -> &PackName {
        match self {
            PinnedRef::Version(r) => &r.name,
            PinnedRef::Digest { name, .. } => name,
        }
    }
}

impl fmt::Display for PinnedRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinnedRef::Version(r) => r.fmt(f),
            PinnedRef::Digest { name, digest } => write!(f, "{name}@{digest}"),
        }
    }
}

const NAME_RULE: &str = "a pack name is `scope/name`, each part `[a-z0-9][a-z0-9-]*`";

fn malformed(input: &str, reason: &str) -> RegistryError {
    RegistryError::MalformedRef {
        input: input.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_pinned_reference() {
        let r = PackRef::parse("acme/support@1.2.3-rc.1").unwrap();
        assert_eq!(r.name.scope(), "acme");
        assert_eq!(r.name.name(), "support");
        assert_eq!(r.version, Version::parse("1.2.3-rc.1").unwrap());
        assert_eq!(r.to_string(), "acme/support@1.2.3-rc.1");
    }

    #[test]
    fn refuses_an_unpinned_reference() {
        let err = PackRef::parse("acme/support").unwrap_err();
        assert!(matches!(err, RegistryError::Unpinned(_)), "{err:?}");
        assert_eq!(err.exit_code(), 4);
        assert!(
            err.to_string()
                .contains("unpinned pack reference `acme/support`"),
            "{err}"
        );
    }

    #[test]
    fn refuses_malformed_references() {
        for bad in [
            "",
            "acme",
            "acme/",
            "Acme/support@1.0.0",
            "acme/support/x@1.0.0",
            "../etc@1.0.0",
            "acme/support@",
            "acme/support@1.0",
            "acme/support@^1.2",
            "acme/support@latest",
            "acme/support@1.0.0@2.0.0",
        ] {
            let err = PackRef::parse(bad).unwrap_err();
            assert!(
                matches!(err, RegistryError::MalformedRef { .. }),
                "{bad}: {err:?}"
            );
            assert_eq!(err.exit_code(), 4, "{bad}");
        }
        let err = PackRef::parse("acme/support@^1.2").unwrap_err();
        assert!(err.to_string().contains("version range"), "{err}");
    }

    #[test]
    fn digest_references() {
        let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
        let r = PinnedRef::parse(&format!("acme/support@{digest}")).unwrap();
        assert!(matches!(&r, PinnedRef::Digest { digest: d, .. } if *d == digest));
        assert_eq!(r.to_string(), format!("acme/support@{digest}"));
        assert!(matches!(
            PinnedRef::parse("acme/support@1.0.0").unwrap(),
            PinnedRef::Version(_)
        ));
        for bad in ["acme/support@sha256:abc", "acme/support", "Acme/x@sha256:"] {
            assert_eq!(PinnedRef::parse(bad).unwrap_err().exit_code(), 4, "{bad}");
        }
    }

    #[test]
    fn pack_names() {
        assert_eq!(
            PackName::parse("acme/support").unwrap().to_string(),
            "acme/support"
        );
        assert!(PackName::parse("acme/support@1.0.0").is_err());
        assert!(PackName::parse("acme").is_err());
        assert!(PackRef::looks_like_ref("acme/support@1.0.0"));
        assert!(PackRef::looks_like_ref("acme/support"));
        assert!(!PackRef::looks_like_ref("./v1.json"));
        assert!(!PackRef::looks_like_ref("out/v1.json"));
    }
}
