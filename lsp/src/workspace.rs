//! Where a document's imports resolve from: the same places `ctxpack check` uses when
//! run from the project's root, whatever the server's working directory.
//!
//! The root of a document is the nearest folder above it that holds `.ctxpack/`;
//! else the nearest that holds `ctxpack.lock`; else the workspace folder that
//! contains it; else its own folder.
//! The registry is `--registry` (or the `ctxpack.registry` setting), else
//! `$CTXPACK_REGISTRY`, else `.ctxpack/registry`; a relative one is relative to the
//! root. The lockfile is the `ctxpack.lock` beside the pack, as for `check`.

use std::path::{Path, PathBuf};

use ctxpack::imports::Lockfile;
use ctxpack::registry::{resolve_root, Registry, REGISTRY_ENV};

/// The folders the client opened, and the registry the user configured.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub folders: Vec<PathBuf>,
    /// `--registry` or the `ctxpack.registry` setting.
    pub registry: Option<PathBuf>,
    /// The client registers file watchers on request.
    pub watch: bool,
    /// Token-count inlay hints and intent code lenses (settings
    /// `ctxpack.inlayHints.enabled`, `ctxpack.codeLens.enabled`).
    pub inlay_hints: bool,
    pub code_lens: bool,
    /// The client reads a document's outline as a tree (`DocumentSymbol[]`); one that
    /// does not say so gets the flat `SymbolInformation[]` the protocol falls back to.
    pub hierarchical_symbols: bool,
    /// The client asks for inlay hints and code lenses again when told to
    /// (`workspace/inlayHint/refresh`, `workspace/codeLens/refresh`).
    pub refresh_hints: bool,
    pub refresh_lenses: bool,
}

impl Default for Workspace {
    fn default() -> Self {
        Workspace {
            folders: Vec::new(),
            registry: None,
            watch: false,
            inlay_hints: true,
            code_lens: true,
            hierarchical_symbols: false,
            refresh_hints: false,
            refresh_lenses: false,
        }
    }
}

/// How one document resolves its imports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub root: PathBuf,
    pub registry: PathBuf,
    pub lockfile: PathBuf,
}

impl Workspace {
    /// The root of the document at `path`.
    pub fn root_of(&self, path: &Path) -> PathBuf {
        let dir = path.parent().unwrap_or(Path::new("/"));
        // The registry's folder first: a lockfile beside a pack in a subfolder does
        // not move the project's registry.
        let marked = |marker: &dyn Fn(&Path) -> bool| {
            dir.ancestors().find(|a| marker(a)).map(Path::to_path_buf)
        };
        if let Some(root) = marked(&|a| a.join(".ctxpack").is_dir())
            .or_else(|| marked(&|a| a.join(ctxpack::imports::LOCKFILE_NAME).is_file()))
        {
            return root;
        }
        self.folders
            .iter()
            .filter(|f| path.starts_with(f))
            .max_by_key(|f| f.components().count())
            .cloned()
            .unwrap_or_else(|| dir.to_path_buf())
    }

    pub fn resolve(&self, path: &Path) -> Resolution {
        let root = self.root_of(path);
        let configured = resolve_root(self.registry.as_deref(), std::env::var_os(REGISTRY_ENV));
        let registry = if configured.is_absolute() {
            configured
        } else {
            root.join(configured)
        };
        Resolution {
            lockfile: Lockfile::path_for(path),
            registry,
            root,
        }
    }
}

impl Resolution {
    pub fn registry(&self) -> Registry {
        // Held to the trust policy at the root (or `$CTXPACK_TRUST`), as `check` is.
        Registry::open(&self.registry).with_trust(ctxpack::signing::TrustPolicy::discover(
            None,
            Some(&self.root),
        ))
    }

    /// The lockfile, if there is a readable one.
    pub fn lock(&self) -> Option<Lockfile> {
        Lockfile::read(&self.lockfile).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_folder_with_the_lockfile_or_registry() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(project.join("packs/support")).unwrap();
        std::fs::create_dir_all(project.join(".ctxpack/registry")).unwrap();
        let pack = project.join("packs/support/support.ctxpack");
        let ws = Workspace {
            folders: vec![dir.path().to_path_buf()],
            ..Workspace::default()
        };
        let r = ws.resolve(&pack);
        assert_eq!(r.root, project);
        assert_eq!(r.registry, project.join(".ctxpack/registry"));
        assert_eq!(r.lockfile, project.join("packs/support/ctxpack.lock"));
        // A lockfile beside the pack does not move the registry.
        std::fs::write(project.join("packs/support/ctxpack.lock"), "{}").unwrap();
        assert_eq!(
            ws.resolve(&pack).registry,
            project.join(".ctxpack/registry")
        );
        // Without markers, the workspace folder; outside it, the file's folder.
        let other = dir.path().join("loose/x.ctxpack");
        assert_eq!(ws.root_of(&other), dir.path());
        let elsewhere = Path::new("/nowhere/at/all/x.ctxpack");
        assert_eq!(ws.root_of(elsewhere), Path::new("/nowhere/at/all"));
    }
}
