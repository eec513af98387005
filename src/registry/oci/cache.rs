//! The cache of verified artifacts pulled from OCI registries, content-addressed by
//! the layer's OCI digest: `<cache>/blobs/sha256/<hex>`.
//!
//! Only bytes that passed every check of a load (the OCI digest, the BLAKE3 hash,
//! the trust policy) are written, by a temporary file renamed into place, so
//! concurrent pulls of one artifact each rename a whole, identical file. A cached
//! file is checked against its digest again when it is read; one that does not match
//! is ignored (and pulled again).

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::format::sha256;
use super::CACHE_ENV;

/// The cache directory: `$CTXPACK_CACHE`, else the user's cache directory
/// (`$XDG_CACHE_HOME/ctxpack`, `~/.cache/ctxpack`; `~/Library/Caches/ctxpack` on
/// macOS, `%LOCALAPPDATA%\ctxpack` on Windows). `None` when there is none: nothing is
/// cached.
pub(crate) fn dir() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = env(CACHE_ENV) {
        return Some(PathBuf::from(dir));
    }
    if cfg!(windows) {
        return env("LOCALAPPDATA").map(|d| PathBuf::from(d).join("ctxpack"));
    }
    if cfg!(target_os = "macos") {
        return env("HOME").map(|h| PathBuf::from(h).join("Library/Caches/ctxpack"));
    }
    env("XDG_CACHE_HOME")
        .map(|d| PathBuf::from(d).join("ctxpack"))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/ctxpack")))
}

fn path_of(digest: &str) -> Option<PathBuf> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(dir()?.join("blobs").join("sha256").join(hex))
}

/// The cached bytes of the blob `digest`, if they are there and match it.
pub(crate) fn read(digest: &str) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path_of(digest)?).ok()?;
    (sha256(&bytes) == digest).then_some(bytes)
}

/// Stores verified bytes under their digest. Best effort: a cache that cannot be
/// written costs a pull next time, never a load.
pub(crate) fn write(digest: &str, bytes: &[u8]) {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let Some(path) = path_of(digest) else {
        return;
    };
    let Some(parent) = path.parent() else {
        return;
    };
    if sha256(bytes) != digest || std::fs::create_dir_all(parent).is_err() {
        return;
    }
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned());
    let tmp = parent.join(format!(
        ".{}.{}.{n}.tmp",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
