//! `ctxpack lsp`: runs the language server on stdio.
//!
//! The server lives in its own crate and binary, `ctxpack-lsp`, which depends on this
//! library; this library cannot depend on it back (that would be a cycle). So
//! `ctxpack lsp` starts the `ctxpack-lsp` binary found next to the current executable
//! (where `cargo install` and release archives put both), else on `PATH`, with stdio
//! passed through. On Unix the process is replaced (`exec`), so the editor talks to
//! the server directly.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::exit;

#[derive(Debug, Clone, clap::Args)]
pub struct LspArgs {
    /// Registry directory for resolving imports (passed on to `ctxpack-lsp`).
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// Accepted for editor compatibility; stdio is the only transport.
    #[arg(long)]
    pub stdio: bool,
}

/// The server binary's file name on this platform.
fn server_name() -> String {
    format!("ctxpack-lsp{}", std::env::consts::EXE_SUFFIX)
}

/// `ctxpack-lsp` next to the running executable, if it is there.
fn sibling() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let candidate = exe.parent()?.join(server_name());
    candidate.is_file().then_some(candidate)
}

pub fn run(args: &LspArgs) -> i32 {
    let program = sibling().unwrap_or_else(|| PathBuf::from(server_name()));
    let mut command = Command::new(&program);
    if let Some(dir) = &args.registry {
        command.arg("--registry").arg(dir);
    }
    launch(command, &program)
}

#[cfg(unix)]
fn launch(mut command: Command, program: &Path) -> i32 {
    use std::os::unix::process::CommandExt;
    // `exec` only returns on failure.
    let error = command.exec();
    missing(program, &error)
}

#[cfg(not(unix))]
fn launch(mut command: Command, program: &Path) -> i32 {
    match command.status() {
        Ok(status) => status.code().unwrap_or(exit::FAILED),
        Err(error) => missing(program, &error),
    }
}

fn missing(program: &Path, error: &std::io::Error) -> i32 {
    if error.kind() == std::io::ErrorKind::NotFound {
        eprintln!(
            "error: the language server `{}` was not found next to `ctxpack` or on PATH\n\
             help: build it with `cargo build -p ctxpack-lsp` (or install it with \
             `cargo install --path lsp`) and put it next to `ctxpack` or on PATH",
            program.display()
        );
    } else {
        eprintln!("error: cannot start `{}`: {error}", program.display());
    }
    exit::FAILED
}
