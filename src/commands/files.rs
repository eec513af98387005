//! Finding the files a command works on.

use std::path::{Path, PathBuf};

/// Expands `paths` into files: files as given, directories recursively for files whose
/// name ends with `suffix`. Sorted, deduplicated. A path that does not exist is an
/// error naming it; `-` (standard input) is kept as it is.
pub fn collect(paths: &[PathBuf], suffix: &str) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for path in paths {
        if crate::source::is_stdin(path) {
            out.push(path.clone());
            continue;
        }
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        if meta.is_dir() {
            walk(path, suffix, &mut out)
                .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        } else {
            out.push(path.clone());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn walk(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, suffix, out)?;
        } else if name.ends_with(suffix) {
            out.push(path);
        }
    }
    Ok(())
}

/// A path as it should appear in diagnostics: relative paths stay as given, with
/// forward slashes, so output is the same on every machine.
pub fn display(path: &Path) -> String {
    if crate::source::is_stdin(path) {
        return "<stdin>".to_owned();
    }
    path.to_string_lossy().replace('\\', "/")
}
