//! The pack registry: a directory of published artifacts.
//!
//! ```text
//! <registry>/<scope>/<name>/<version>.json   the sealed artifact, canonical bytes
//! <registry>/<scope>/<name>/index.json       {"name", "versions": [{"version", "hash"}]}, by semver
//! <registry>/<scope>/<name>/.lock            held by a publisher while it writes
//! ```
//!
//! Writes are atomic (temporary file, fsync, rename, fsync of the directory), so a
//! reader never takes a lock and never sees a torn file. Publishers of one pack
//! serialize on its `.lock` and wait for it rather than fail. Under the lock the index
//! is rebuilt from the version files on disk, so no concurrent publish is lost and an
//! index left behind by a crash heals on the next publish of that pack.
//!
//! Versions are immutable: publishing the same artifact again is a no-op, publishing a
//! different one under an existing version is refused. Every artifact is verified
//! before it is stored and again when it is loaded.
//!
//! A registry location may instead be an OCI registry, `oci://HOST[:PORT]/NAMESPACE`
//! (see [`oci`]); every operation here then goes to it, with the same guarantees
//! where OCI allows them (see `docs/registry.md`).

mod fs;
pub mod oci;
mod pack_ref;
mod remote;

use crate::signing::TrustPolicy;
use std::path::{Path, PathBuf};

use semver::Version;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use oci::{allow_insecure, OciLocation};
pub use pack_ref::{PackName, PackRef, PinnedRef};

use crate::artifact::{canonical_bytes, verify_bytes, verify_value, Artifact, ArtifactError};

/// The environment variable naming the registry directory.
pub const REGISTRY_ENV: &str = "CTXPACK_REGISTRY";

/// The registry directory when neither `--registry` nor [`REGISTRY_ENV`] is given,
/// relative to the current directory.
pub const DEFAULT_REGISTRY: &str = ".ctxpack/registry";

const INDEX_FILE: &str = "index.json";
const LOCK_FILE: &str = ".lock";

/// Why a registry operation failed. [`RegistryError::exit_code`] maps each to the
/// runtime spec's exit codes.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unpinned pack reference `{0}`: name an exact version, such as `{0}@1.0.0`")]
    Unpinned(String),
    #[error("malformed pack reference `{input}`: {reason}")]
    MalformedRef { input: String, reason: String },
    #[error("artifact refused: {0}")]
    Artifact(#[from] ArtifactError),
    #[error("artifact cannot be published: {0}")]
    Unpublishable(String),
    #[error(
        "`{pack}` is already published with hash `{existing}`; refusing to replace it with a \
         different artifact (hash `{new}`): published versions are immutable, bump the version"
    )]
    VersionConflict {
        /// `scope/name@version`.
        pack: String,
        existing: String,
        new: String,
    },
    #[error(
        "`{pack}` differs from the published `{published}` only in build metadata, which \
         semver ignores when it orders versions: the two would be one version with two \
         contents; publish a new version instead"
    )]
    SameVersion {
        /// `scope/name@version`.
        pack: String,
        /// The published version of the same precedence.
        published: String,
    },
    #[error("`{what}` is not in the registry at `{}`{}", registry.display(), registry_hint(registry))]
    NotFound { what: String, registry: PathBuf },
    #[error("registry file `{}` is corrupt: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A trust policy covers the pack's scope and its signature does not satisfy it.
    #[error("{0}")]
    Signature(#[from] crate::signing::SignatureError),
    /// The trust policy in force cannot be read: nothing is loaded without it.
    #[error("{0}")]
    TrustPolicy(String),
    /// An OCI registry could not be reached, or refused or failed a request.
    #[error("OCI registry `{location}`: {message}")]
    Remote { location: String, message: String },
    /// An `oci://` location in a build without the `oci` feature.
    #[error("`{0}` is an OCI registry, and this build of ctxpack has no OCI support (cargo feature `oci`)")]
    OciUnsupported(String),
    /// A registry location that is neither a directory nor a valid `oci://` one.
    #[error("{0}")]
    InvalidLocation(String),
    /// The lockfile pins a manifest digest and the tag now names another manifest.
    #[error(
        "`{pack}` now names manifest `{found}`, but `ctxpack.lock` pins `{locked}`: the tag \
         was moved; investigate before removing the entry from the lockfile"
    )]
    TagMoved {
        pack: String,
        locked: String,
        found: String,
    },
}

/// For a registry directory that does not exist: how to name another one.
fn registry_hint(root: &Path) -> &'static str {
    if root.is_dir() || root.to_string_lossy().starts_with(oci::SCHEME) {
        ""
    } else {
        " (there is no registry there: pass `--registry DIR` or set `CTXPACK_REGISTRY`)"
    }
}

impl RegistryError {
    /// The process exit code: 3 for what could not be read or written (a missing pack
    /// or version, an I/O failure), 4 for what is invalid (a malformed or unpinned
    /// reference, a tampered or corrupt artifact, a conflicting version). An artifact
    /// that is not JSON keeps its own code, 3.
    pub fn exit_code(&self) -> i32 {
        match self {
            RegistryError::Artifact(e) => e.exit_code(),
            RegistryError::NotFound { .. }
            | RegistryError::Io { .. }
            | RegistryError::Remote { .. }
            | RegistryError::OciUnsupported(_) => 3,
            RegistryError::Unpinned(_)
            | RegistryError::MalformedRef { .. }
            | RegistryError::Unpublishable(_)
            | RegistryError::VersionConflict { .. }
            | RegistryError::SameVersion { .. }
            | RegistryError::Corrupt { .. }
            | RegistryError::Signature(_)
            | RegistryError::TrustPolicy(_)
            | RegistryError::InvalidLocation(_)
            | RegistryError::TagMoved { .. } => 4,
        }
    }

    /// The stable name of this failure, as `--json-errors` reports it.
    pub fn kind(&self) -> &'static str {
        match self {
            RegistryError::Unpinned(_) => "unpinned_pack",
            RegistryError::MalformedRef { .. } => "invalid_pack_reference",
            RegistryError::Artifact(e) => e.kind(),
            RegistryError::Unpublishable(_) => "unpublishable_artifact",
            RegistryError::VersionConflict { .. } | RegistryError::SameVersion { .. } => {
                "version_conflict"
            }
            RegistryError::NotFound { .. } => "not_found",
            RegistryError::Corrupt { .. } => "corrupt_registry",
            RegistryError::Io { .. } => "io_error",
            RegistryError::Signature(e) => e.kind,
            RegistryError::TrustPolicy(_) => "invalid_trust_policy",
            RegistryError::Remote { .. } => "registry_unavailable",
            RegistryError::OciUnsupported(_) => "oci_unsupported",
            RegistryError::InvalidLocation(_) => "invalid_registry_location",
            RegistryError::TagMoved { .. } => "tag_moved",
        }
    }
}

/// Whether a publish stored a new version or found the identical artifact already
/// there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOutcome {
    Published,
    AlreadyPublished,
}

/// The result of a successful publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub outcome: PublishOutcome,
    pub pack: PackRef,
    pub hash: String,
    /// Where the artifact is stored: a file, or for an OCI registry
    /// `oci://HOST/NAMESPACE/scope/name:version`.
    pub path: PathBuf,
    /// For an OCI registry, the digest of the manifest the tag names.
    pub digest: Option<String>,
}

/// `index.json`: one pack's versions, sorted by semver. Written as canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    pub name: String,
    pub versions: Vec<IndexEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    pub version: String,
    pub hash: String,
}

impl Index {
    /// The index document for `versions` (already in semver order).
    pub fn new(name: String, versions: Vec<(semver::Version, String)>) -> Index {
        Index {
            name,
            versions: versions
                .into_iter()
                .map(|(version, hash)| IndexEntry {
                    version: version.to_string(),
                    hash,
                })
                .collect(),
        }
    }
}

/// A registry: a directory, or an OCI registry when the location is `oci://…`.
/// Opening one touches nothing; `publish` creates directories as it needs them.
#[derive(Debug, Clone)]
pub struct Registry {
    root: PathBuf,
    location: Location,
    /// The trust policy loads are held to: none, one, or one that could not be read
    /// (then every load fails).
    trust: Option<Result<std::sync::Arc<TrustPolicy>, String>>,
    /// The manifest digests of the versions loaded from an OCI registry, by
    /// `(name, version)`, for `ctxpack.lock`.
    resolved:
        std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<(String, String), String>>>,
}

/// What a registry location names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Dir,
    Oci(OciLocation),
    Invalid(String),
}

impl PartialEq for Registry {
    fn eq(&self, other: &Registry) -> bool {
        self.root == other.root && self.trust == other.trust
    }
}

impl Eq for Registry {}

impl Registry {
    /// A registry without a trust policy: the directory `root`, or the OCI registry
    /// it names when it is `oci://HOST[:PORT]/NAMESPACE`.
    pub fn open(root: impl Into<PathBuf>) -> Registry {
        let root = root.into();
        let location = match OciLocation::parse(&root.to_string_lossy()) {
            None => Location::Dir,
            Some(Ok(loc)) => Location::Oci(loc),
            Some(Err(reason)) => Location::Invalid(reason),
        };
        Registry {
            root,
            location,
            trust: None,
            resolved: Default::default(),
        }
    }

    /// The registry a command should use (a directory or `oci://…`): `--registry` if
    /// given, else `CTXPACK_REGISTRY` if set and not empty, else `.ctxpack/registry`
    /// relative to the current directory; held to the trust policy of `$CTXPACK_TRUST` or
    /// `./ctxpack.trust.toml` when there is one.
    pub fn from_env_or(dir_flag: Option<&Path>) -> Registry {
        Registry::open_trusted(resolve_root(dir_flag, std::env::var_os(REGISTRY_ENV)))
    }

    /// The registry at `root`, held to the trust policy of `$CTXPACK_TRUST` or
    /// `./ctxpack.trust.toml` when there is one.
    pub fn open_trusted(root: impl Into<PathBuf>) -> Registry {
        Registry::open(root).with_trust(TrustPolicy::discover(None, None))
    }

    /// The registry for a command about the pack at `pack`: as [`Registry::from_env_or`],
    /// except that when neither `--registry` nor `CTXPACK_REGISTRY` names one and the
    /// current directory has no `.ctxpack/registry`, the pack's project's is used: the
    /// `.ctxpack/registry` of the nearest directory above the pack that has one. So
    /// `ctxpack check project/app.ctxpack` run from elsewhere resolves the imports of
    /// `project/` as a run inside it does.
    pub fn for_pack(dir_flag: Option<&Path>, pack: &Path) -> Registry {
        Registry::open_trusted(root_for_pack(dir_flag, pack))
    }

    /// Holds loads to a trust policy (or to the error reading one).
    pub fn with_trust(mut self, trust: Result<Option<TrustPolicy>, String>) -> Registry {
        self.trust = match trust {
            Ok(None) => None,
            Ok(Some(policy)) => Some(Ok(std::sync::Arc::new(policy))),
            Err(e) => Some(Err(e)),
        };
        self
    }

    /// Where the signature of `pack` is (or would be) stored in a directory registry.
    pub fn signature_path(&self, pack: &PackRef) -> PathBuf {
        let mut name = self.path_of(pack).into_os_string();
        name.push(crate::signing::SIGNATURE_SUFFIX);
        PathBuf::from(name)
    }

    /// Stores a signature of a published version: in a directory beside it
    /// (replacing an older one, as when a key is rotated), in an OCI registry as a
    /// referrer of its manifest (beside older ones).
    pub fn store_signature(&self, pack: &PackRef, signature: &str) -> Result<(), RegistryError> {
        if let Some(loc) = self.remote()? {
            return remote::store_signature(loc, pack, signature);
        }
        let path = self.signature_path(pack);
        let dir = self.pack_dir(&pack.name);
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        fs::write_atomic(&dir, &file_name, signature.as_bytes()).map_err(io_err("write", &path))
    }

    /// The trust policy that covers `scope`, if any (an unreadable policy is an
    /// error: nothing loads without it).
    fn policy_for(&self, scope: &str) -> Result<Option<&TrustPolicy>, RegistryError> {
        let Some(trust) = &self.trust else {
            return Ok(None);
        };
        let policy = trust
            .as_ref()
            .map_err(|e| RegistryError::TrustPolicy(e.clone()))?;
        Ok(policy.covers(scope).then_some(&**policy))
    }

    /// Checks a loaded artifact against the trust policy.
    fn check_trust(
        &self,
        pack: &PackRef,
        artifact: &Artifact,
        bytes: &[u8],
    ) -> Result<(), RegistryError> {
        if self.policy_for(pack.name.scope())?.is_none() {
            return Ok(());
        }
        let path = self.signature_path(pack);
        let signature = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        self.check_signatures(artifact, bytes, signature.as_slice())
    }

    /// Holds an artifact to the trust policy of its scope: one of `signatures` must
    /// satisfy it (none is `signature_missing`; when all fail, the first failure is
    /// reported).
    fn check_signatures(
        &self,
        artifact: &Artifact,
        bytes: &[u8],
        signatures: &[String],
    ) -> Result<(), RegistryError> {
        let scope = artifact.name.split('/').next().unwrap_or_default();
        let Some(policy) = self.policy_for(scope)? else {
            return Ok(());
        };
        let hash = artifact.hash.as_deref().unwrap_or_default();
        let check =
            |sig: Option<&str>| policy.check(&artifact.name, &artifact.version, hash, bytes, sig);
        let mut first = None;
        for signature in signatures {
            match check(Some(signature)) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    first.get_or_insert(e);
                }
            }
        }
        match first {
            Some(e) => Err(e.into()),
            None => Ok(check(None)?),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory holding one pack's versions.
    pub fn pack_dir(&self, name: &PackName) -> PathBuf {
        self.root.join(name.scope()).join(name.name())
    }

    /// Where `pack` is (or would be) stored.
    pub fn path_of(&self, pack: &PackRef) -> PathBuf {
        self.pack_dir(&pack.name).join(version_file(&pack.version))
    }

    /// Publishes an artifact built in memory (by `build`, or a test). An unsealed
    /// artifact (`hash: None`) is sealed here; a sealed one must carry the hash of its
    /// content, or it is refused as tampered.
    pub fn publish(&self, artifact: &Artifact) -> Result<Publication, RegistryError> {
        let (value, hash) = artifact.seal();
        if let Some(recorded) = &artifact.hash {
            if *recorded != hash {
                return Err(ArtifactError::HashMismatch {
                    recorded: recorded.clone(),
                    computed: hash,
                }
                .into());
            }
        }
        self.publish_value(value)
    }

    /// Publishes an artifact file's bytes (canonical or pretty-printed). They are
    /// verified first; what is stored is their canonical form, whose hash is the one
    /// recorded.
    pub fn publish_bytes(&self, bytes: &[u8]) -> Result<Publication, RegistryError> {
        self.publish_value(crate::artifact::parse_json(bytes)?)
    }

    fn publish_value(&self, value: Value) -> Result<Publication, RegistryError> {
        let bytes = canonical_bytes(&value);
        let artifact = verify_value(value)?;
        // `verify_value` only succeeds with the hash filled in.
        let hash = artifact.hash.clone().unwrap_or_default();
        let pack = pack_ref_of(&artifact)?;
        if let Some(loc) = self.remote()? {
            // An OCI tag is `[A-Za-z0-9_][A-Za-z0-9._-]*`: no `+`.
            if !pack.version.build.is_empty() {
                return Err(RegistryError::Unpublishable(format!(
                    "version `{}` has build metadata (`+{}`), which an OCI tag cannot \
                     spell; publish it to an OCI registry without it",
                    pack.version, pack.version.build
                )));
            }
            return remote::publish(loc, pack, &bytes, hash);
        }
        let dir = self.pack_dir(&pack.name);
        std::fs::create_dir_all(&dir).map_err(io_err("create", &dir))?;

        let lock_path = dir.join(LOCK_FILE);
        let _lock = fs::Lock::acquire(&lock_path).map_err(io_err("lock", &lock_path))?;

        let file_name = version_file(&pack.version);
        let path = dir.join(&file_name);
        let outcome = match read_optional(&path)? {
            Some(existing) => {
                let existing = verify_stored(&path, &existing)?;
                if existing != hash {
                    return Err(RegistryError::VersionConflict {
                        pack: pack.to_string(),
                        existing,
                        new: hash,
                    });
                }
                PublishOutcome::AlreadyPublished
            }
            None => {
                // `1.0.0+build` beside `1.0.0`: equal in semver's order, so no reference
                // or index could tell them apart by rank.
                let version = &pack.version;
                if let Some(published) = version_files(&dir)?
                    .into_iter()
                    .find(|v| v.cmp_precedence(version).is_eq() && v != version)
                {
                    return Err(RegistryError::SameVersion {
                        pack: pack.to_string(),
                        published: published.to_string(),
                    });
                }
                fs::write_atomic(&dir, &file_name, &bytes).map_err(io_err("write", &path))?;
                PublishOutcome::Published
            }
        };
        // Rewritten even when the version was already there, so that an index a crash
        // left behind is repaired by publishing again.
        self.write_index(&pack.name, &dir)?;
        Ok(Publication {
            outcome,
            pack,
            hash,
            path,
            digest: None,
        })
    }

    /// Rebuilds `index.json` from the version files in `dir`. Called with the pack's
    /// lock held.
    fn write_index(&self, name: &PackName, dir: &Path) -> Result<(), RegistryError> {
        let mut versions = Vec::new();
        for version in version_files(dir)? {
            let path = dir.join(version_file(&version));
            let bytes = std::fs::read(&path).map_err(io_err("read", &path))?;
            versions.push((version, verify_stored(&path, &bytes)?));
        }
        let index = Index::new(name.to_string(), versions);
        let value = serde_json::to_value(&index)
            .map_err(|e| RegistryError::Unpublishable(e.to_string()))?;
        let bytes = canonical_bytes(&value);
        let index_path = dir.join(INDEX_FILE);
        if read_optional(&index_path)?.as_deref() == Some(bytes.as_slice()) {
            return Ok(());
        }
        fs::write_atomic(dir, INDEX_FILE, &bytes).map_err(io_err("write", &index_path))
    }

    /// Loads and verifies a published artifact. A file whose content does not match its
    /// hash, or whose hash is not the one the index records, or which names another
    /// pack, is refused as corrupt.
    pub fn load(&self, pack: &PackRef) -> Result<Artifact, RegistryError> {
        if let Some(loc) = self.remote()? {
            let version = pack.version.to_string();
            return self.load_remote(loc, &pack.name, &version, None);
        }
        let path = self.path_of(pack);
        let Some(bytes) = read_optional(&path)? else {
            return Err(self.not_found(pack.to_string()));
        };
        let artifact = verify_bytes(&bytes).map_err(|e| corrupt(&path, e.to_string()))?;
        let hash = artifact.hash.as_deref().unwrap_or_default();
        if artifact.name != pack.name.to_string() || artifact.version != pack.version.to_string() {
            return Err(corrupt(
                &path,
                format!(
                    "it holds `{}@{}`, not `{pack}`",
                    artifact.name, artifact.version
                ),
            ));
        }
        // A version file replaced by another valid artifact verifies on its own; the
        // index, written at publish time, is the second witness.
        if let Some(index) = self.read_index(&pack.name)? {
            let version = pack.version.to_string();
            if let Some(entry) = index.versions.iter().find(|e| e.version == version) {
                if entry.hash != hash {
                    return Err(corrupt(
                        &path,
                        format!(
                            "its hash `{hash}` is not the `{}` recorded in the index",
                            entry.hash
                        ),
                    ));
                }
            }
        }
        self.check_trust(pack, &artifact, &bytes)?;
        Ok(artifact)
    }

    /// The published versions of a pack with their hashes, sorted by semver.
    pub fn versions(&self, name: &PackName) -> Result<Vec<(Version, String)>, RegistryError> {
        if let Some(loc) = self.remote()? {
            return remote::versions(self, loc, name);
        }
        let Some(index) = self.read_index(name)? else {
            // Version files without an index (a registry assembled by hand, a first
            // publish that stopped before its index): they are what can be loaded,
            // so they are what is listed, each verified for its hash.
            let stored = self.stored_versions(name)?;
            if stored.is_empty() {
                return Err(self.not_found(name.to_string()));
            }
            return stored
                .into_iter()
                .map(|version| {
                    let pack = PackRef {
                        name: name.clone(),
                        version: version.clone(),
                    };
                    let hash = self.load(&pack)?.hash.unwrap_or_default();
                    Ok((version, hash))
                })
                .collect();
        };
        // The index is what publish wrote, but it is a file anyone can edit: what it
        // lists is held to what publish writes (each version once, a well-formed
        // hash, its file present) and listed in semver order whatever its own order.
        let dir = self.pack_dir(name);
        let path = dir.join(INDEX_FILE);
        let mut versions = Vec::with_capacity(index.versions.len());
        for entry in index.versions {
            let version = Version::parse(&entry.version)
                .map_err(|e| corrupt(&path, format!("bad version `{}`: {e}", entry.version)))?;
            if !crate::artifact::is_content_hash(&entry.hash) {
                return Err(corrupt(
                    &path,
                    format!("`{version}` has a malformed hash `{}`", entry.hash),
                ));
            }
            if !dir.join(version_file(&version)).is_file() {
                return Err(corrupt(
                    &path,
                    format!(
                        "it lists `{version}`, whose file `{}` is missing",
                        version_file(&version)
                    ),
                ));
            }
            versions.push((version, entry.hash));
        }
        versions.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(twice) = versions.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(corrupt(&path, format!("it lists `{}` twice", twice[0].0)));
        }
        Ok(versions)
    }

    /// The versions whose files are in the pack's directory, sorted by semver, read
    /// from the directory rather than the index and not verified: for telling a user
    /// which versions exist, including in registries assembled by hand.
    pub fn stored_versions(&self, name: &PackName) -> Result<Vec<Version>, RegistryError> {
        if let Some(loc) = self.remote()? {
            return remote::tag_versions(loc, name).map(Option::unwrap_or_default);
        }
        let dir = self.pack_dir(name);
        match version_files(&dir) {
            Err(RegistryError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(Vec::new())
            }
            other => other,
        }
    }

    /// A pack's index, or `None` when the pack has never been published.
    pub fn read_index(&self, name: &PackName) -> Result<Option<Index>, RegistryError> {
        if self.remote()?.is_some() {
            return match self.versions(name) {
                Ok(versions) => Ok(Some(Index::new(name.to_string(), versions))),
                Err(RegistryError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let path = self.pack_dir(name).join(INDEX_FILE);
        let Some(bytes) = read_optional(&path)? else {
            return Ok(None);
        };
        let index: Index =
            serde_json::from_slice(&bytes).map_err(|e| corrupt(&path, e.to_string()))?;
        if index.name != name.to_string() {
            return Err(corrupt(
                &path,
                format!("it indexes `{}`, not `{name}`", index.name),
            ));
        }
        Ok(Some(index))
    }

    fn not_found(&self, what: String) -> RegistryError {
        RegistryError::NotFound {
            what,
            registry: self.root.clone(),
        }
    }
}

/// Where [`Registry::for_pack`] opens the registry: `--registry`, else
/// `CTXPACK_REGISTRY`, else [`default_root_for`] the pack.
pub fn root_for_pack(dir_flag: Option<&Path>, pack: &Path) -> PathBuf {
    let env = std::env::var_os(REGISTRY_ENV);
    if dir_flag.is_some() || env.as_ref().is_some_and(|e| !e.is_empty()) {
        resolve_root(dir_flag, env)
    } else {
        default_root_for(pack)
    }
}

/// The default registry for the pack at `pack`: `.ctxpack/registry` when the current
/// directory has it, else that of the nearest directory above the pack that has one,
/// else `.ctxpack/registry` (which does not exist, and errors name).
pub fn default_root_for(pack: &Path) -> PathBuf {
    let default = PathBuf::from(DEFAULT_REGISTRY);
    if default.is_dir() || crate::source::is_stdin(pack) {
        return default;
    }
    let dir = pack
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(dir) = std::path::absolute(dir) else {
        return default;
    };
    dir.ancestors()
        .map(|a| a.join(DEFAULT_REGISTRY))
        .find(|candidate| candidate.is_dir())
        .unwrap_or(default)
}

/// The registry root from the `--registry` flag and the value of `CTXPACK_REGISTRY`;
/// separate from [`Registry::from_env_or`] so that it can be tested without touching
/// the process environment.
pub fn resolve_root(dir_flag: Option<&Path>, env: Option<std::ffi::OsString>) -> PathBuf {
    match (dir_flag, env) {
        (Some(dir), _) => dir.to_path_buf(),
        (None, Some(env)) if !env.is_empty() => PathBuf::from(env),
        _ => PathBuf::from(DEFAULT_REGISTRY),
    }
}

/// The pinned reference an artifact is published under, from its own name and version.
fn pack_ref_of(artifact: &Artifact) -> Result<PackRef, RegistryError> {
    let name = PackName::parse(&artifact.name).map_err(|_| {
        RegistryError::Unpublishable(format!("malformed pack name `{}`", artifact.name))
    })?;
    let version = crate::artifact::parse_version(&artifact.version).map_err(|e| {
        RegistryError::Unpublishable(format!("malformed version `{}`: {e}", artifact.version))
    })?;
    // The file name is the version's canonical spelling; an artifact spelling it
    // differently could never be found again under the name it claims.
    if version.to_string() != artifact.version {
        return Err(RegistryError::Unpublishable(format!(
            "version `{}` is not in canonical form `{version}`",
            artifact.version
        )));
    }
    Ok(PackRef { name, version })
}

fn version_file(version: &Version) -> String {
    format!("{version}.json")
}

/// The versions filed in `dir`, sorted. `index.json`, the lock, temporaries and
/// anything else whose name is not `<semver>.json` are skipped.
fn version_files(dir: &Path) -> Result<Vec<Version>, RegistryError> {
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err("list", dir))? {
        let file_name = entry.map_err(io_err("list", dir))?.file_name();
        let version = file_name.to_str().and_then(|f| f.strip_suffix(".json"));
        if let Some(Ok(version)) = version.map(Version::parse) {
            versions.push(version);
        }
    }
    versions.sort();
    Ok(versions)
}

/// Verifies a stored artifact and returns its hash.
fn verify_stored(path: &Path, bytes: &[u8]) -> Result<String, RegistryError> {
    let artifact = verify_bytes(bytes).map_err(|e| corrupt(path, e.to_string()))?;
    Ok(artifact.hash.unwrap_or_default())
}

/// The file's bytes, or `None` if it does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, RegistryError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("read", path)(e)),
    }
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RegistryError {
    let path = path.to_path_buf();
    move |source| RegistryError::Io {
        action,
        path,
        source,
    }
}

fn corrupt(path: &Path, reason: String) -> RegistryError {
    RegistryError::Corrupt {
        path: path.to_path_buf(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_root_resolution() {
        let flag = Path::new("flag/dir");
        assert_eq!(
            resolve_root(Some(flag), Some("env/dir".into())),
            PathBuf::from("flag/dir")
        );
        assert_eq!(
            resolve_root(None, Some("env/dir".into())),
            PathBuf::from("env/dir")
        );
        assert_eq!(
            resolve_root(None, Some("".into())),
            PathBuf::from(DEFAULT_REGISTRY)
        );
        assert_eq!(resolve_root(None, None), PathBuf::from(DEFAULT_REGISTRY));
    }

    #[test]
    fn layout() {
        let registry = Registry::open("/r");
        let pack = PackRef::parse("acme/support@1.2.0").unwrap();
        assert_eq!(
            registry.path_of(&pack),
            PathBuf::from("/r/acme/support/1.2.0.json")
        );
    }
}
