//! OCI registries: `oci://HOST[:PORT]/NAMESPACE` locations and the artifact format
//! ctxpack stores in them (the ORAS convention for artifacts).
//!
//! ```text
//! scope/name@version   →  repository NAMESPACE/scope/name, tag version
//! image manifest       artifactType application/vnd.ctxpack.pack.v1+json,
//!                      config: the empty descriptor (application/vnd.oci.empty.v1+json, `{}`),
//!                      one layer application/vnd.ctxpack.pack.v1+json: the canonical bytes,
//!                      annotations: title, version, vnd.ctxpack.pack.hash (blake3:…)
//! signature            a manifest whose `subject` is the pack's manifest, one layer
//!                      application/vnd.ctxpack.signature.v1+minisign: the .minisig text
//! ```
//!
//! The location and the format are plain data, always compiled; talking to a
//! registry needs the `oci` cargo feature (`client`, `cache`, `auth`). Without it,
//! every operation on an `oci://` location fails with [`unsupported`].

use std::sync::Mutex;

use super::{PackName, RegistryError};

#[cfg(feature = "oci")]
mod auth;
#[cfg(feature = "oci")]
pub(crate) mod cache;
#[cfg(feature = "oci")]
pub(crate) mod client;
#[cfg(feature = "oci")]
mod format;

/// The prefix that makes a registry location an OCI registry.
pub const SCHEME: &str = "oci://";
/// The media type of a pack's layer and the `artifactType` of its manifest.
pub const PACK_MEDIA_TYPE: &str = "application/vnd.ctxpack.pack.v1+json";
/// The media type of a signature's layer and the `artifactType` of its manifest.
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.ctxpack.signature.v1+minisign";
/// The manifest annotation holding the artifact's `blake3:` hash.
pub const HASH_ANNOTATION: &str = "vnd.ctxpack.pack.hash";
/// Hosts (`HOST` or `HOST:PORT`, comma-separated) reached over plain HTTP.
pub const INSECURE_ENV: &str = "CTXPACK_INSECURE_REGISTRIES";
/// The directory of the cache of verified artifacts pulled from OCI registries.
pub const CACHE_ENV: &str = "CTXPACK_CACHE";

/// Hosts named by `--insecure-registry` for this process.
static INSECURE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Lets this process reach `hosts` (`HOST` or `HOST:PORT`) over plain HTTP, as
/// `--insecure-registry` does; added to those of [`INSECURE_ENV`].
pub fn allow_insecure<I: IntoIterator<Item = String>>(hosts: I) {
    if let Ok(mut list) = INSECURE.lock() {
        list.extend(hosts);
    }
}

/// What a pull brought: the layer's bytes (checked against its OCI digest) and
/// what the manifest said; nothing here is checked against the BLAKE3 hash yet.
#[derive(Debug)]
pub(crate) struct Pulled {
    pub bytes: Vec<u8>,
    pub manifest_digest: String,
    pub layer_digest: String,
    /// The manifest's hash annotation, if any.
    pub hash: Option<String>,
    /// The bytes came from the cache (verified when they were stored).
    pub cached: bool,
    /// The signatures among the manifest's referrers, when asked for.
    pub signatures: Vec<String>,
}

/// Without the `oci` feature: the same functions, each refusing. The registry never
/// calls them (it refuses `oci://` locations first); they keep its code free of
/// feature switches.
#[cfg(not(feature = "oci"))]
pub(crate) mod client {
    use super::{unsupported, OciLocation, Pulled};
    use crate::registry::{PackName, PackRef, PublishOutcome, RegistryError};

    pub(crate) fn pull(
        loc: &OciLocation,
        _: &PackName,
        _: &str,
        _: Option<&str>,
        _: bool,
    ) -> Result<Pulled, RegistryError> {
        Err(unsupported(&loc.to_string()))
    }

    pub(crate) fn publish(
        loc: &OciLocation,
        _: &PackRef,
        _: &[u8],
        _: &str,
    ) -> Result<(PublishOutcome, String), RegistryError> {
        Err(unsupported(&loc.to_string()))
    }

    pub(crate) fn tags(
        loc: &OciLocation,
        _: &PackName,
    ) -> Result<Option<Vec<String>>, RegistryError> {
        Err(unsupported(&loc.to_string()))
    }

    pub(crate) fn hashes(
        loc: &OciLocation,
        _: &PackName,
        _: &[String],
    ) -> Result<Vec<Option<String>>, RegistryError> {
        Err(unsupported(&loc.to_string()))
    }

    pub(crate) fn store_signature(
        loc: &OciLocation,
        _: &PackName,
        _: &str,
        _: &str,
    ) -> Result<String, RegistryError> {
        Err(unsupported(&loc.to_string()))
    }
}

#[cfg(not(feature = "oci"))]
pub(crate) mod cache {
    pub(crate) fn write(_: &str, _: &[u8]) {}
}

/// An OCI registry location, `oci://HOST[:PORT]/NAMESPACE` (the namespace may be
/// empty or have several segments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciLocation {
    host: String,
    namespace: String,
}

impl OciLocation {
    /// `None` when `text` is not an `oci://` location (it names a directory);
    /// otherwise the location or why it is malformed.
    pub fn parse(text: &str) -> Option<Result<OciLocation, String>> {
        let rest = text.strip_prefix(SCHEME)?;
        Some(Self::parse_rest(rest).map_err(|reason| {
            format!("malformed OCI registry location `{text}`: {reason} (expected `oci://HOST[:PORT]/NAMESPACE`)")
        }))
    }

    fn parse_rest(rest: &str) -> Result<OciLocation, String> {
        let rest = rest.trim_end_matches('/');
        let (host, namespace) = rest.split_once('/').unwrap_or((rest, ""));
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        };
        let host_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if !host_ok {
            return Err(format!("`{host}` is not a host name"));
        }
        if let Some(port) = port {
            if port.parse::<u16>().is_err() {
                return Err(format!("`{port}` is not a port"));
            }
        }
        if !namespace.is_empty() && !namespace.split('/').all(valid_path_component) {
            return Err(format!(
                "`{namespace}` is not a repository namespace (lowercase letters, digits and `._-` separators)"
            ));
        }
        Ok(OciLocation {
            host: host.to_owned(),
            namespace: namespace.to_owned(),
        })
    }

    /// `HOST[:PORT]`.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The repository holding a pack's versions: `NAMESPACE/scope/name`.
    pub fn repository(&self, name: &PackName) -> String {
        if self.namespace.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.namespace)
        }
    }

    /// A reference for people: `oci://HOST/NAMESPACE/scope/name:tag` or `…@sha256:…`.
    pub fn describe(&self, name: &PackName, pin: &str) -> String {
        let sep = if pin.starts_with("sha256:") { '@' } else { ':' };
        format!("{SCHEME}{}/{}{sep}{pin}", self.host, self.repository(name))
    }

    /// Whether the registry is reached over plain HTTP: a loopback host, or one named
    /// by `--insecure-registry` or [`INSECURE_ENV`].
    pub fn plain_http(&self) -> bool {
        let bare = self
            .host
            .rsplit_once(':')
            .map_or(self.host.as_str(), |(h, _)| h);
        if matches!(bare, "localhost" | "127.0.0.1") {
            return true;
        }
        let env = std::env::var(INSECURE_ENV).unwrap_or_default();
        let flagged = INSECURE.lock().map(|l| l.clone()).unwrap_or_default();
        env.split(',')
            .map(str::trim)
            .map(str::to_owned)
            .chain(flagged)
            .any(|h| !h.is_empty() && (h == self.host || h == bare))
    }
}

impl std::fmt::Display for OciLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{SCHEME}{}", self.host)
        } else {
            write!(f, "{SCHEME}{}/{}", self.host, self.namespace)
        }
    }
}

/// `[a-z0-9]+([._-][a-z0-9]+)*`, a repository path component of the distribution spec.
fn valid_path_component(s: &str) -> bool {
    let mut prev_sep = true;
    for c in s.chars() {
        let sep = matches!(c, '.' | '_' | '-');
        if sep && prev_sep {
            return false;
        }
        if !(sep || c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return false;
        }
        prev_sep = sep;
    }
    !prev_sep
}

/// Whether `digest` is `sha256:` and 64 lowercase hex digits.
pub fn valid_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The error for an `oci://` location in a build without the `oci` feature.
pub fn unsupported(location: &str) -> RegistryError {
    RegistryError::OciUnsupported(location.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert!(OciLocation::parse("/some/dir").is_none());
        let loc = OciLocation::parse("oci://127.0.0.1:5000/team/packs/")
            .unwrap()
            .unwrap();
        assert_eq!(loc.host(), "127.0.0.1:5000");
        let name = PackName::parse("acme/support").unwrap();
        assert_eq!(loc.repository(&name), "team/packs/acme/support");
        assert_eq!(
            loc.describe(&name, "1.0.0"),
            "oci://127.0.0.1:5000/team/packs/acme/support:1.0.0"
        );
        assert_eq!(loc.to_string(), "oci://127.0.0.1:5000/team/packs");
        assert!(loc.plain_http());
        let remote = OciLocation::parse("oci://ghcr.io/acme").unwrap().unwrap();
        assert_eq!(remote.repository(&name), "acme/acme/support");
        for bad in [
            "oci://",
            "oci:///ns",
            "oci://host:port/ns",
            "oci://host/Upper",
            "oci://host/a//b",
            "oci://ho st/ns",
        ] {
            assert!(OciLocation::parse(bad).unwrap().is_err(), "{bad}");
        }
    }

    #[test]
    fn insecure_hosts() {
        let loc = |s: &str| OciLocation::parse(s).unwrap().unwrap();
        assert!(loc("oci://localhost:5000/x").plain_http());
        assert!(!loc("oci://registry.test/x").plain_http());
        allow_insecure(["registry.test".to_owned(), "other.test:5000".to_owned()]);
        assert!(loc("oci://registry.test:443/x").plain_http());
        assert!(loc("oci://other.test:5000/x").plain_http());
        assert!(!loc("oci://other.test/x").plain_http());
    }

    #[test]
    fn digests() {
        assert!(valid_digest(&format!("sha256:{}", "a".repeat(64))));
        assert!(!valid_digest(&format!("sha256:{}", "A".repeat(64))));
        assert!(!valid_digest("sha256:abc"));
        assert!(!valid_digest(&format!("sha512:{}", "a".repeat(64))));
    }
}
