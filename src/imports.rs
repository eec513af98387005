//! Import resolution: pinned `import "scope/name" version "X.Y.Z"` items against a
//! source of published artifacts (the registry), checked against `ctxpack.lock`.
//!
//! Resolution is the only I/O of the front end and happens before the IR is built:
//! the IR merges already-verified artifacts, so it stays a pure function.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::artifact::{canonical_bytes, Artifact, Dependency};
use crate::diagnostic::Diagnostic;
use crate::ir::ImportDecl;
use crate::registry::{PackRef, Registry, RegistryError};
use crate::span::Span;

/// Why an artifact could not be loaded.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// No such name@version; `available` lists the versions that exist.
    NotFound { available: Vec<String> },
    /// It exists but does not verify (unknown format, a signature that fails).
    Invalid(String),
    /// Its bytes are not what its own hash says (edited in place, truncated, bad
    /// JSON): with a `ctxpack.lock` entry, the registry copy no longer matches the
    /// lock (E0703); without one, it cannot be loaded (E0702).
    Corrupt(String),
    /// `ctxpack.lock` pins the OCI manifest `locked`, and the version's tag now names
    /// `found`: refused before anything was pulled.
    Moved { locked: String, found: String },
    /// The registry itself cannot be used: a malformed `oci://` location, an OCI
    /// registry that cannot be reached, a directory that cannot be read.
    Registry(String),
}

/// E0702 for an import that cannot be loaded: the registry itself cannot be read
/// (`registry`), or the artifact it holds does not verify.
fn unloadable(name: &str, version: &str, span: Span, message: &str, registry: bool) -> Diagnostic {
    let (label, help) = if registry {
        (
            "the registry cannot be read",
            "check `--registry` (or `$CTXPACK_REGISTRY`): a directory, or `oci://HOST[:PORT]/NAMESPACE`",
        )
    } else {
        (
            "invalid artifact in the registry",
            "republishing cannot fix a version in place; publish a new version or restore the registry copy",
        )
    };
    Diagnostic::new(
        "E0702",
        span,
        format!("import `{name}@{version}` cannot be loaded: {message}"),
    )
    .with_label(label)
    .with_help(help)
}

/// Where imports come from: the registry, or anything else that holds artifacts.
pub trait PackSource {
    fn load(&self, name: &str, version: &str) -> Result<Artifact, LoadError>;

    /// Where `name@version` is loaded from, for people (a registry file's path).
    fn location(&self, _name: &str, _version: &str) -> Option<String> {
        None
    }

    /// Loads `name@version` where `ctxpack.lock` pins the OCI manifest `digest`: a
    /// source that knows manifests refuses another one ([`LoadError::Moved`]).
    fn load_locked(
        &self,
        name: &str,
        version: &str,
        _digest: Option<&str>,
    ) -> Result<Artifact, LoadError> {
        self.load(name, version)
    }
}

/// A source with nothing in it, for checking a pack without a registry.
pub struct NoSource;

impl PackSource for NoSource {
    fn load(&self, _name: &str, _version: &str) -> Result<Artifact, LoadError> {
        Err(LoadError::NotFound {
            available: Vec::new(),
        })
    }
}

/// An import that resolved: the verified artifact and the span of the import's name,
/// where its items are said to be defined.
#[derive(Debug, Clone)]
pub struct ImportedPack {
    pub span: Span,
    pub artifact: Artifact,
}

/// `ctxpack.lock`: the hash of every resolved import, by `name@version`, and for
/// one resolved from an OCI registry the digest of its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub lockfile: u32,
    pub packages: Vec<LockEntry>,
}

/// One locked pack. `digest` is written only when there is one, so a lockfile of
/// directory-registry imports reads exactly as the artifact's dependencies do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    pub name: String,
    pub version: String,
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

pub const LOCKFILE_NAME: &str = "ctxpack.lock";

impl Lockfile {
    /// The lockfile beside `pack`.
    pub fn path_for(pack: &Path) -> PathBuf {
        pack.parent().unwrap_or(Path::new(".")).join(LOCKFILE_NAME)
    }

    /// Reads a lockfile; a missing file is `Ok(None)`.
    pub fn read(path: &Path) -> Result<Option<Lockfile>, String> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("`{}` is not a valid lockfile: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
        }
    }

    fn entry(&self, name: &str, version: &str) -> Option<&LockEntry> {
        self.packages
            .iter()
            .find(|p| p.name == name && p.version == version)
    }

    pub fn hash_of(&self, name: &str, version: &str) -> Option<&str> {
        self.entry(name, version).map(|p| p.hash.as_str())
    }

    /// The OCI manifest digest recorded for `name@version`, if any.
    pub fn digest_of(&self, name: &str, version: &str) -> Option<&str> {
        self.entry(name, version).and_then(|p| p.digest.as_deref())
    }

    /// This lockfile with `deps` recorded (entries of other packs are kept).
    pub fn with(&self, deps: &[Dependency]) -> Lockfile {
        self.with_digests(deps, |_, _| None)
    }

    /// This lockfile with `deps` recorded, each with the manifest digest
    /// `digest_of(name, version)` gives (imports resolved from an OCI registry).
    pub fn with_digests(
        &self,
        deps: &[Dependency],
        digest_of: impl Fn(&str, &str) -> Option<String>,
    ) -> Lockfile {
        let mut by_key: BTreeMap<(String, String), LockEntry> = self
            .packages
            .iter()
            .map(|d| ((d.name.clone(), d.version.clone()), d.clone()))
            .collect();
        for d in deps {
            let entry = LockEntry {
                name: d.name.clone(),
                version: d.version.clone(),
                hash: d.hash.clone(),
                digest: digest_of(&d.name, &d.version),
            };
            by_key.insert((d.name.clone(), d.version.clone()), entry);
        }
        Lockfile {
            lockfile: 1,
            packages: by_key.into_values().collect(),
        }
    }

    /// Canonical bytes, so the lockfile diffs cleanly and reproducibly.
    pub fn to_bytes(&self) -> Vec<u8> {
        canonical_bytes(&serde_json::to_value(self).unwrap_or_default())
    }
}

/// The outcome of resolving a pack's imports.
#[derive(Debug, Default)]
pub struct Resolution {
    pub imported: Vec<ImportedPack>,
    /// Every dependency, transitively, sorted.
    pub dependencies: Vec<Dependency>,
    pub diagnostics: Vec<Diagnostic>,
    /// Some import did not resolve: names it might have brought in are unknown, so
    /// unknown-name errors would be noise.
    pub unresolved: bool,
}

/// Resolves `imports` of pack `own_name` from `source`, checking hashes against
/// `lock` when there is one.
pub fn resolve(
    own_name: &str,
    imports: &[ImportDecl],
    source: &dyn PackSource,
    lock: Option<&Lockfile>,
) -> Resolution {
    let mut out = Resolution::default();
    let mut deps = Dependencies::new();
    for decl in imports {
        // E0701 and E0104 were reported by the IR; nothing to resolve.
        let Some(version) = &decl.version else {
            out.unresolved = true;
            continue;
        };
        if crate::artifact::parse_version(version).is_err()
            || !crate::ir::valid_pack_name(&decl.name)
        {
            out.unresolved = true;
            continue;
        }
        let locked_digest = lock.and_then(|l| l.digest_of(&decl.name, version));
        let artifact = match source.load_locked(&decl.name, version, locked_digest) {
            Ok(a) => a,
            Err(LoadError::Moved { locked, found }) => {
                out.diagnostics.push(
                    Diagnostic::new(
                        "E0703",
                        decl.name_span,
                        format!("the tag of `{}@{version}` was moved since `ctxpack.lock` was written", decl.name),
                    )
                    .with_label("the tag names another manifest")
                    .with_help(format!(
                        "the lock pins manifest `{locked}`, the registry's tag now names `{found}`; a published version must never change — investigate before updating the lock"
                    )),
                );
                out.unresolved = true;
                continue;
            }
            Err(LoadError::NotFound { available }) => {
                let help = if available.is_empty() {
                    format!("no version of `{}` is published; publish it with `ctxpack publish`, or check `--registry`", decl.name)
                } else {
                    format!("available versions: {}", available.join(", "))
                };
                out.diagnostics.push(
                    Diagnostic::new(
                        "E0702",
                        decl.name_span,
                        format!("import `{}@{version}` not found in the registry", decl.name),
                    )
                    .with_label("not found")
                    .with_help(help),
                );
                out.unresolved = true;
                continue;
            }
            Err(LoadError::Corrupt(message))
                if lock.and_then(|l| l.hash_of(&decl.name, version)).is_some() =>
            {
                out.diagnostics.push(
                    Diagnostic::new(
                        "E0703",
                        decl.name_span,
                        format!("`{}@{version}` in the registry no longer matches `ctxpack.lock`: {message}", decl.name),
                    )
                    .with_label("registry copy changed since it was locked")
                    .with_help("the registry copy was changed after `ctxpack.lock` recorded it; a published version must never change — restore it from the publisher (the lock records its hash) and investigate"),
                );
                out.unresolved = true;
                continue;
            }
            Err(LoadError::Registry(message)) => {
                let d = unloadable(&decl.name, version, decl.name_span, &message, true);
                out.diagnostics.push(d);
                out.unresolved = true;
                continue;
            }
            Err(LoadError::Invalid(message) | LoadError::Corrupt(message)) => {
                let d = unloadable(&decl.name, version, decl.name_span, &message, false);
                out.diagnostics.push(d);
                out.unresolved = true;
                continue;
            }
        };
        let hash = artifact.hash.clone().unwrap_or_default();
        if let Some(locked) = lock.and_then(|l| l.hash_of(&decl.name, version)) {
            if locked != hash {
                out.diagnostics.push(
                    Diagnostic::new(
                        "E0703",
                        decl.name_span,
                        format!("`{}@{version}` in the registry does not match `ctxpack.lock`", decl.name),
                    )
                    .with_label("hash differs from the lockfile")
                    .with_help(format!(
                        "the lock records `{locked}`, the registry holds `{hash}`; a published version must never change — investigate before updating the lock"
                    )),
                );
            }
        }
        let chain_hit =
            artifact.name == own_name || artifact.dependencies.iter().any(|d| d.name == own_name);
        if chain_hit {
            let via: Vec<String> = artifact
                .dependencies
                .iter()
                .filter(|d| d.name == own_name)
                .map(|d| format!("{}@{}", d.name, d.version))
                .collect();
            let chain = if artifact.name == own_name {
                format!("{own_name} → {}@{version}", decl.name)
            } else {
                format!("{own_name} → {}@{version} → {}", decl.name, via.join(", "))
            };
            out.diagnostics.push(
                Diagnostic::new("E0705", decl.keyword, format!("import cycle: {chain}"))
                    .with_label("this import leads back to the pack itself")
                    .with_help(
                        "move the shared definitions into a `library` pack that both import",
                    ),
            );
            out.unresolved = true;
            continue;
        }
        let own = Dependency {
            name: artifact.name.clone(),
            version: artifact.version.clone(),
            hash,
        };
        let here = format!("{}@{version}", decl.name);
        let brought = artifact.dependencies.iter().map(|d| (d, false));
        for (d, direct) in brought.chain([(&own, true)]) {
            record(
                &mut deps,
                d,
                direct,
                &here,
                decl.name_span,
                lock,
                &mut out.diagnostics,
            );
        }
        out.imported.push(ImportedPack {
            span: decl.name_span,
            artifact,
        });
    }
    out.dependencies = deps.into_values().map(|(d, _)| d).collect();
    out
}

/// Every dependency, with how it was first brought in (`imported directly`,
/// `through \`scope/name@version\``), by `(name, version)`.
type Dependencies = BTreeMap<(String, String), (Dependency, String)>;

/// Records `d`, brought in by the import of `here` (`direct`ly: `d` is that pack;
/// otherwise a pack it was built against): E0703 at `at` when the copy it carries is
/// not the one the lock records, or not the one another import brought in.
fn record(
    deps: &mut Dependencies,
    d: &Dependency,
    direct: bool,
    here: &str,
    at: Span,
    lock: Option<&Lockfile>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let what = format!("{}@{}", d.name, d.version);
    // A pack this import was built against: the copy flattened into it must be the
    // locked one. (The import's own copy was checked against the lock on load.)
    if let Some(locked) = lock.and_then(|l| l.hash_of(&d.name, &d.version)) {
        if !direct && locked != d.hash {
            diagnostics.push(
                Diagnostic::new(
                    "E0703",
                    at,
                    format!("`{here}` was built against `{what}` with a hash that `ctxpack.lock` does not record"),
                )
                .with_label("brings in a copy that differs from the lock")
                .with_help(format!(
                    "the lock records `{locked}` for `{what}`, `{here}` was built against `{}`; a published version must never change — investigate before updating the lock",
                    d.hash
                )),
            );
        }
    }
    let via = if direct {
        "imported directly".to_owned()
    } else {
        format!("through `{here}`")
    };
    let key = (d.name.clone(), d.version.clone());
    match deps.get(&key) {
        // Two imports bring in two different contents under one version: one of them
        // was built against a copy that was changed after publishing.
        Some((seen, first_via)) if seen.hash != d.hash => {
            let this_via = if direct {
                "imported here"
            } else {
                via.as_str()
            };
            diagnostics.push(
                Diagnostic::new(
                    "E0703",
                    at,
                    format!("`{what}` is brought in twice with different contents"),
                )
                .with_label(format!("{this_via} with hash `{}`", d.hash))
                .with_help(format!(
                    "{first_via}, `{what}` has hash `{}`; a published version must never change — one of the two copies was changed after publishing: investigate, then rebuild the pack that was built against the wrong one",
                    seen.hash
                )),
            );
        }
        Some(_) => {}
        None => {
            deps.insert(key, (d.clone(), via));
        }
    }
}

/// The registry is the usual source of imports. Every artifact is verified on load
/// (see [`Registry::load`]); a missing version reports the versions on disk.
impl PackSource for Registry {
    fn location(&self, name: &str, version: &str) -> Option<String> {
        let reference = PackRef::parse(&format!("{name}@{version}")).ok()?;
        Some(self.location_of(&reference))
    }

    fn load(&self, name: &str, version: &str) -> Result<Artifact, LoadError> {
        self.load_locked(name, version, None)
    }

    fn load_locked(
        &self,
        name: &str,
        version: &str,
        digest: Option<&str>,
    ) -> Result<Artifact, LoadError> {
        let reference = PackRef::parse(&format!("{name}@{version}"))
            .map_err(|e| LoadError::Invalid(e.to_string()))?;
        match self.load_expecting(&reference, digest) {
            Ok(artifact) => Ok(artifact),
            Err(RegistryError::TagMoved { locked, found, .. }) => {
                Err(LoadError::Moved { locked, found })
            }
            Err(RegistryError::NotFound { .. }) => Err(LoadError::NotFound {
                available: self
                    .stored_versions(&reference.name)
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            }),
            Err(e @ RegistryError::Corrupt { .. }) => Err(LoadError::Corrupt(e.to_string())),
            Err(
                e @ (RegistryError::InvalidLocation(_)
                | RegistryError::Remote { .. }
                | RegistryError::OciUnsupported(_)),
            ) => Err(LoadError::Registry(e.to_string())),
            Err(e) => Err(LoadError::Invalid(e.to_string())),
        }
    }
}
