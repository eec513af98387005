//! The two file-system primitives the registry is built on: an atomic write and an
//! exclusive lock.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `dir/file_name` so that a reader sees either the old file or the
/// whole new one, never a torn one, and the new one survives a crash once this
/// returns: a temporary file in the same directory (so the rename cannot cross file
/// systems), written and fsynced, renamed over the target, then the directory fsynced
/// so the rename itself is durable.
pub(super) fn write_atomic(dir: &Path, file_name: &str, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // A leading dot and a `.tmp` suffix keep temporaries out of every listing the
    // registry makes; the pid and counter keep two writers from sharing one.
    let tmp = dir.join(format!(".{file_name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, dir.join(file_name))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        // Best effort: the temporary is garbage either way, and the write error is
        // the one worth reporting.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Makes a rename in `dir` durable. Only Unix can open and fsync a directory.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// An exclusive lock on a file, held until dropped. Waiting for the lock blocks; it
/// never fails because another publisher holds it.
pub(super) struct Lock {
    // Closing the file releases the lock (flock on Unix, LockFileEx on Windows).
    _file: File,
}

impl Lock {
    pub(super) fn acquire(path: &Path) -> io::Result<Lock> {
        // Not truncated and never removed: removing a lock file while another process
        // waits on it would let a third process lock a fresh file beside it.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        // Fully qualified: std has grown inherent `File::lock*` methods, which would
        // shadow the trait's on newer toolchains but need Rust 1.89.
        fs4::fs_std::FileExt::lock_exclusive(&file)?;
        Ok(Lock { _file: file })
    }
}
