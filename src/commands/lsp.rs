//! `ctxpack lsp`: runs the language server on stdio.
//!
//! The server lives in its own crate and binary, `ctxpack-lsp`; `ctxpack lsp` starts
//! it (see [`super::sibling`]), so the editor talks to the server directly.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct LspArgs {
    /// Registry directory for resolving imports (passed on to `ctxpack-lsp`).
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// Accepted for editor compatibility; stdio is the only transport.
    #[arg(long)]
    pub stdio: bool,
}

pub fn run(args: &LspArgs) -> i32 {
    let mut forwarded = Vec::new();
    if let Some(dir) = &args.registry {
        forwarded.push("--registry".into());
        forwarded.push(dir.clone().into_os_string());
    }
    super::sibling::exec("ctxpack-lsp", &forwarded, "lsp")
}
