//! Source → artifact: the whole front end plus lowering, as `build`, `test`,
//! `publish` and `diff` use it.

use std::path::Path;

use crate::artifact::Artifact;
use crate::check::check_source;
use crate::commands::{exit, files};
use crate::diagnostic::FileReport;

/// Why a source did not build.
#[derive(Debug)]
pub enum BuildError {
    /// The file could not be read (exit 3).
    Unreadable(String),
    /// The pack has errors (exit 1); the report holds every diagnostic.
    Diagnostics(FileReport),
}

impl BuildError {
    pub fn exit_code(&self) -> i32 {
        match self {
            BuildError::Unreadable(_) => exit::UNREADABLE,
            BuildError::Diagnostics(_) => exit::FAILED,
        }
    }

    /// A one-paragraph description, for callers that do not render reports.
    pub fn summary(&self) -> String {
        match self {
            BuildError::Unreadable(m) => m.clone(),
            BuildError::Diagnostics(r) => {
                let errors: Vec<String> = r
                    .located()
                    .iter()
                    .filter(|d| d.severity == "error")
                    .map(|d| format!("{}:{}:{}: error[{}]: {}", d.file, d.line, d.column, d.code, d.message))
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

/// Checks and lowers the pack at `path`.
pub fn build_file(path: &Path) -> Result<Built, BuildError> {
    let bytes = std::fs::read(path).map_err(|e| BuildError::Unreadable(format!("cannot read `{}`: {e}", path.display())))?;
    let source =
        String::from_utf8(bytes).map_err(|_| BuildError::Unreadable(format!("`{}` is not valid UTF-8", path.display())))?;
    build_source(&files::display(path), source)
}

/// Checks and lowers a pack's text; `name` is how diagnostics refer to the file.
pub fn build_source(name: &str, source: String) -> Result<Built, BuildError> {
    let checked = check_source(&source);
    let report = FileReport {
        path: name.to_owned(),
        source,
        diagnostics: checked.diagnostics,
    };
    if report.diagnostics.iter().any(|d| d.is_error()) {
        return Err(BuildError::Diagnostics(report));
    }
    let mut artifact = crate::lower::lower(&checked.pack, &crate::lower::Origins::default(), Vec::new());
    let (_, hash) = artifact.seal();
    artifact.hash = Some(hash);
    Ok(Built { artifact, report })
}
