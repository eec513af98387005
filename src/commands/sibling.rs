//! Starting a companion binary — `ctxpack-lsp`, `ctxpack-serve` — that lives in its own
//! crate (it depends on this library, which cannot depend on it back). The binary is
//! looked for next to the current executable (where `cargo build --workspace`,
//! `cargo install` and release archives put them), else on `PATH`, and run with stdio
//! passed through. On Unix the process is replaced (`exec`), so signals and stdio go
//! to the companion directly.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::exit;

/// The binary's file name on this platform.
fn file_name(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// `name` next to the running executable, if it is there.
fn beside_self(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.join(file_name(name));
    candidate.is_file().then_some(candidate)
}

/// Runs the companion `name` with `args`; returns its exit code (on Unix, only when it
/// could not be started).
pub fn exec(name: &str, args: &[OsString], package: &str) -> i32 {
    let program = beside_self(name).unwrap_or_else(|| PathBuf::from(file_name(name)));
    let mut command = Command::new(&program);
    command.args(args);
    launch(command, &program, package)
}

#[cfg(unix)]
fn launch(mut command: Command, program: &Path, package: &str) -> i32 {
    use std::os::unix::process::CommandExt;
    // `exec` only returns on failure.
    let error = command.exec();
    missing(program, &error, package)
}

#[cfg(not(unix))]
fn launch(mut command: Command, program: &Path, package: &str) -> i32 {
    match command.status() {
        Ok(status) => status.code().unwrap_or(exit::FAILED),
        Err(error) => missing(program, &error, package),
    }
}

fn missing(program: &Path, error: &std::io::Error, package: &str) -> i32 {
    if error.kind() == std::io::ErrorKind::NotFound {
        eprintln!(
            "error: `{}` was not found next to `ctxpack` or on PATH\n\
             help: build it with `cargo build --release --workspace` (or install it with \
             `cargo install --path {package}`) and put it next to `ctxpack` or on PATH",
            program.display()
        );
    } else {
        eprintln!("error: cannot start `{}`: {error}", program.display());
    }
    exit::FAILED
}
