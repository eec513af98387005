//! Source → artifact: the whole front end plus lowering, as `build`, `test`,
//! `publish` and `diff` use it. Imports resolve from a registry and are checked
//! against (and recorded in) `ctxpack.lock` beside the pack.

use std::path::{Path, PathBuf};

use crate::artifact::Artifact;
use crate::check::check_source_with;
use crate::commands::{exit, files};
use crate::diagnostic::FileReport;
use crate::imports::{Lockfile, PackSource};
use crate::registry::Registry;

/// How to resolve imports and treat the lockfile.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// `--registry DIR|oci://HOST/NAMESPACE`; else `CTXPACK_REGISTRY`, else
    /// `.ctxpack/registry`.
    pub registry: Option<PathBuf>,
    /// Refuse to create or change `ctxpack.lock`.
    pub locked: bool,
    /// Write `ctxpack.lock` when the resolved imports differ from it.
    pub write_lock: bool,
}

/// Why a source did not build.
#[derive(Debug)]
pub enum BuildError {
    /// The file could not be read (exit 3).
    Unreadable(String),
    /// The pack has errors (exit 1); the report holds every diagnostic.
    Diagnostics(FileReport),
    /// `--locked` and the lockfile would have to be created or changed (exit 1).
    LockWouldChange(String),
}

impl BuildError {
    pub fn exit_code(&self) -> i32 {
        match self {
            BuildError::Unreadable(_) => exit::UNREADABLE,
            BuildError::Diagnostics(_) | BuildError::LockWouldChange(_) => exit::FAILED,
        }
    }

    /// A one-paragraph description, for callers that do not render reports.
    pub fn summary(&self) -> String {
        match self {
            BuildError::Unreadable(m) | BuildError::LockWouldChange(m) => m.clone(),
            BuildError::Diagnostics(r) => {
                let errors: Vec<String> = r
                    .located()
                    .iter()
                    .filter(|d| d.severity == "error")
                    .map(|d| {
                        format!(
                            "{}:{}:{}: error[{}]: {}",
                            d.file, d.line, d.column, d.code, d.message
                        )
                    })
                    .collect();
                format!("`{}` has errors:\n{}", r.path, errors.join("\n"))
            }
        }
    }
}

/// A built pack and the warnings its check produced.
#[derive(Debug)]
pub struct Built {
    pub artifact: Artifact,
    pub report: FileReport,
}

fn read_source(path: &Path) -> Result<String, BuildError> {
    crate::source::read(path).map_err(BuildError::Unreadable)
}

/// Checks and lowers the pack at `path`, resolving imports per `options`.
pub fn build_file(path: &Path, options: &BuildOptions) -> Result<Built, BuildError> {
    let source = read_source(path)?;
    // Imports are held to the trust policy beside the pack, else the current one.
    let beside = path.parent().filter(|p| !p.as_os_str().is_empty());
    let registry = Registry::for_pack(options.registry.as_deref(), path)
        .with_trust(crate::signing::TrustPolicy::discover(None, beside));
    let lock_path = Lockfile::path_for(path);
    let lock = Lockfile::read(&lock_path).map_err(BuildError::Unreadable)?;
    let built = build_source_with(&files::display(path), source, &registry, lock.as_ref())?;
    let deps = &built.artifact.dependencies;
    let current = lock.clone().unwrap_or_default();
    let updated = current.with_digests(deps, |name, version| {
        registry.resolved_digest(name, version)
    });
    let changes = if lock.is_none() {
        !deps.is_empty()
    } else {
        updated != current
    };
    if changes {
        if options.locked {
            return Err(BuildError::LockWouldChange(format!(
                "`{}` would be {} and `--locked` forbids it",
                lock_path.display(),
                if lock.is_none() { "created" } else { "changed" }
            )));
        }
        if options.write_lock {
            std::fs::write(&lock_path, updated.to_bytes()).map_err(|e| {
                BuildError::Unreadable(format!("cannot write `{}`: {e}", lock_path.display()))
            })?;
        }
    }
    Ok(built)
}

/// Checks and lowers a pack's text; `name` is how diagnostics refer to the file.
pub fn build_source_with(
    name: &str,
    source: String,
    imports: &dyn PackSource,
    lock: Option<&Lockfile>,
) -> Result<Built, BuildError> {
    let (checked, dependencies) = check_source_with(&source, imports, lock);
    let report = FileReport {
        path: name.to_owned(),
        source,
        diagnostics: checked.diagnostics,
    };
    if report.diagnostics.iter().any(|d| d.is_error()) {
        return Err(BuildError::Diagnostics(report));
    }
    let mut artifact = crate::lower::lower(&checked.pack, dependencies);
    let (_, hash) = artifact.seal();
    artifact.hash = Some(hash);
    Ok(Built { artifact, report })
}

/// Checks and lowers a pack's text with no registry.
pub fn build_source(name: &str, source: String) -> Result<Built, BuildError> {
    build_source_with(name, source, &crate::imports::NoSource, None)
}
