//! The registry's operations on an OCI location (see [`super::oci`]): the same
//! checks as for a directory, on what the OCI client pulled.

use std::path::{Path, PathBuf};

use semver::Version;

use super::oci::{self, cache, client, OciLocation};
use super::{
    corrupt, Location, PackName, PackRef, PinnedRef, Publication, Registry, RegistryError,
};
use crate::artifact::{verify_bytes, Artifact};

impl Registry {
    /// The OCI location, `None` for a directory. A malformed `oci://` location, or
    /// one in a build without the `oci` feature, is an error for every operation.
    pub(super) fn remote(&self) -> Result<Option<&OciLocation>, RegistryError> {
        match &self.location {
            Location::Dir => Ok(None),
            Location::Invalid(reason) => Err(RegistryError::InvalidLocation(reason.clone())),
            Location::Oci(loc) if cfg!(feature = "oci") => Ok(Some(loc)),
            Location::Oci(loc) => Err(oci::unsupported(&loc.to_string())),
        }
    }

    /// Whether the location is `oci://…` (valid or not).
    pub fn is_oci(&self) -> bool {
        !matches!(self.location, Location::Dir)
    }

    /// Loads a version or, from an OCI registry, a manifest digest. A digest
    /// reference into a directory registry is refused (exit 4).
    pub fn load_pinned(&self, reference: &PinnedRef) -> Result<Artifact, RegistryError> {
        match reference {
            PinnedRef::Version(pack) => self.load(pack),
            PinnedRef::Digest { name, digest } => {
                let loc = self.digest_registry(reference)?;
                self.load_remote(loc, name, digest, None)
            }
        }
    }

    /// [`Registry::load`], refusing (before pulling anything) a version whose tag no
    /// longer names the manifest `digest` (from `ctxpack.lock`). A directory has no
    /// digests; there `digest` is ignored.
    pub fn load_expecting(
        &self,
        pack: &PackRef,
        digest: Option<&str>,
    ) -> Result<Artifact, RegistryError> {
        match self.remote()? {
            Some(loc) => self.load_remote(loc, &pack.name, &pack.version.to_string(), digest),
            None => self.load(pack),
        }
    }

    /// The manifest digest `name@version` was loaded from (OCI registries only).
    pub fn resolved_digest(&self, name: &str, version: &str) -> Option<String> {
        let resolved = self.resolved.lock().ok()?;
        resolved
            .get(&(name.to_owned(), version.to_owned()))
            .cloned()
    }

    /// Pulls, verifies and holds to the trust policy `name` at `pin` (a tag or a
    /// digest); caches it only once all of that passed.
    pub(super) fn load_remote(
        &self,
        loc: &OciLocation,
        name: &PackName,
        pin: &str,
        expected: Option<&str>,
    ) -> Result<Artifact, RegistryError> {
        let covered = self.policy_for(name.scope())?.is_some();
        let pulled = client::pull(loc, name, pin, expected, covered)?;
        let here = PathBuf::from(loc.describe(name, pin));
        let artifact = check_pulled(&here, name, pin, &pulled.bytes, pulled.hash.as_deref())?;
        self.check_signatures(&artifact, &pulled.bytes, &pulled.signatures)?;
        if !pulled.cached {
            cache::write(&pulled.layer_digest, &pulled.bytes);
        }
        if let Ok(mut resolved) = self.resolved.lock() {
            resolved.insert(
                (artifact.name.clone(), artifact.version.clone()),
                pulled.manifest_digest,
            );
        }
        Ok(artifact)
    }

    /// The verified bytes of a published version, without the trust policy (for
    /// signing it).
    pub fn stored_bytes(&self, pack: &PackRef) -> Result<Vec<u8>, RegistryError> {
        let version = pack.version.to_string();
        let (bytes, here, hash) = match self.remote()? {
            Some(loc) => {
                let pulled = client::pull(loc, &pack.name, &version, None, false)?;
                let here = PathBuf::from(loc.describe(&pack.name, &version));
                (pulled.bytes, here, pulled.hash)
            }
            None => {
                let path = self.path_of(pack);
                let bytes = match std::fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(self.not_found(pack.to_string()))
                    }
                    Err(e) => return Err(super::io_err("read", &path)(e)),
                };
                (bytes, path, None)
            }
        };
        check_pulled(&here, &pack.name, &version, &bytes, hash.as_deref())?;
        Ok(bytes)
    }

    /// [`Registry::stored_bytes`] of a version or, in an OCI registry, a manifest
    /// digest.
    pub fn stored_bytes_pinned(&self, reference: &PinnedRef) -> Result<Vec<u8>, RegistryError> {
        match reference {
            PinnedRef::Version(pack) => self.stored_bytes(pack),
            PinnedRef::Digest { name, digest } => {
                let loc = self.digest_registry(reference)?;
                let pulled = client::pull(loc, name, digest, None, false)?;
                let here = PathBuf::from(loc.describe(name, digest));
                check_pulled(&here, name, digest, &pulled.bytes, pulled.hash.as_deref())?;
                Ok(pulled.bytes)
            }
        }
    }

    /// [`Registry::store_signature`] for a version or, in an OCI registry, a manifest
    /// digest.
    pub fn store_signature_pinned(
        &self,
        reference: &PinnedRef,
        signature: &str,
    ) -> Result<(), RegistryError> {
        match reference {
            PinnedRef::Version(pack) => self.store_signature(pack, signature),
            PinnedRef::Digest { name, digest } => {
                let loc = self.digest_registry(reference)?;
                client::store_signature(loc, name, digest, signature).map(|_| ())
            }
        }
    }

    /// The OCI location a digest reference needs; a directory refuses it.
    fn digest_registry(&self, reference: &PinnedRef) -> Result<&OciLocation, RegistryError> {
        self.remote()?.ok_or_else(|| RegistryError::MalformedRef {
            input: reference.to_string(),
            reason: "a digest names an OCI manifest; this registry is a directory \
                     (name a version, or an `oci://` registry)"
                .into(),
        })
    }

    /// Where `pack` is (or would be) stored, for people: a file, or
    /// `oci://HOST/NAMESPACE/scope/name:version`.
    pub fn location_of(&self, pack: &PackRef) -> String {
        match &self.location {
            Location::Oci(loc) => loc.describe(&pack.name, &pack.version.to_string()),
            _ => self.path_of(pack).display().to_string(),
        }
    }

    /// Where the signature of `pack` is stored, for people.
    pub fn signature_location(&self, reference: &PinnedRef) -> String {
        match (&self.location, reference) {
            (Location::Oci(loc), PinnedRef::Version(pack)) => format!(
                "{} (a referrer of its manifest)",
                loc.describe(&pack.name, &pack.version.to_string())
            ),
            (Location::Oci(loc), PinnedRef::Digest { name, digest }) => {
                format!("{} (a referrer of it)", loc.describe(name, digest))
            }
            (_, PinnedRef::Version(pack)) => self.signature_path(pack).display().to_string(),
            (_, PinnedRef::Digest { .. }) => reference.to_string(),
        }
    }
}

/// Checks pulled bytes: a valid artifact, of `name` (and of version `pin`, when it
/// is one), with the hash the manifest records when it records one.
fn check_pulled(
    here: &Path,
    name: &PackName,
    pin: &str,
    bytes: &[u8],
    recorded: Option<&str>,
) -> Result<Artifact, RegistryError> {
    let artifact = verify_bytes(bytes).map_err(|e| corrupt(here, e.to_string()))?;
    let hash = artifact.hash.as_deref().unwrap_or_default();
    let by_digest = pin.starts_with("sha256:");
    if artifact.name != name.to_string() || (!by_digest && artifact.version != pin) {
        return Err(corrupt(
            here,
            format!("it holds `{}@{}`", artifact.name, artifact.version),
        ));
    }
    if let Some(recorded) = recorded.filter(|r| *r != hash) {
        return Err(corrupt(
            here,
            format!("its hash `{hash}` is not the `{recorded}` its manifest records"),
        ));
    }
    Ok(artifact)
}

pub(super) fn publish(
    loc: &OciLocation,
    pack: PackRef,
    bytes: &[u8],
    hash: String,
) -> Result<Publication, RegistryError> {
    let (outcome, digest) = client::publish(loc, &pack, bytes, &hash)?;
    Ok(Publication {
        outcome,
        path: PathBuf::from(loc.describe(&pack.name, &pack.version.to_string())),
        pack,
        hash,
        digest: Some(digest),
    })
}

pub(super) fn store_signature(
    loc: &OciLocation,
    pack: &PackRef,
    signature: &str,
) -> Result<(), RegistryError> {
    client::store_signature(loc, &pack.name, &pack.version.to_string(), signature).map(|_| ())
}

/// The versions among a repository's tags (other tags, such as the referrers tag
/// schema's, are skipped), sorted; `None` when the registry does not know it.
pub(super) fn tag_versions(
    loc: &OciLocation,
    name: &PackName,
) -> Result<Option<Vec<Version>>, RegistryError> {
    let Some(tags) = client::tags(loc, name)? else {
        return Ok(None);
    };
    let mut versions: Vec<Version> = tags
        .iter()
        .filter_map(|t| Version::parse(t).ok().filter(|v| v.to_string() == *t))
        .collect();
    versions.sort();
    Ok(Some(versions))
}

/// The published versions with their hashes: the manifests' hash annotations, or,
/// for a manifest without one (pushed by another client), the hash of its verified
/// artifact.
pub(super) fn versions(
    registry: &Registry,
    loc: &OciLocation,
    name: &PackName,
) -> Result<Vec<(Version, String)>, RegistryError> {
    let versions = tag_versions(loc, name)?.unwrap_or_default();
    if versions.is_empty() {
        return Err(RegistryError::NotFound {
            what: name.to_string(),
            registry: registry.root.clone(),
        });
    }
    let tags: Vec<String> = versions.iter().map(ToString::to_string).collect();
    let hashes = client::hashes(loc, name, &tags)?;
    let mut out = Vec::with_capacity(versions.len());
    for ((version, tag), hash) in versions.into_iter().zip(&tags).zip(hashes) {
        let hash = match hash {
            Some(hash) => hash,
            None => {
                let pulled = client::pull(loc, name, tag, None, false)?;
                let here = PathBuf::from(loc.describe(name, tag));
                let artifact = check_pulled(&here, name, tag, &pulled.bytes, None)?;
                artifact.hash.unwrap_or_default()
            }
        };
        out.push((version, hash));
    }
    Ok(out)
}
