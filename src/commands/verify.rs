//! `ctxpack verify ARTIFACT`: recompute an artifact's hash and refuse any mismatch.

use std::path::PathBuf;

use super::{exit, CliError, Failures};
use crate::artifact::verify_bytes;

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Artifact files to verify.
    #[arg(required = true)]
    pub artifacts: Vec<PathBuf>,
    /// Print failures as one JSON object on stderr.
    #[arg(long)]
    pub json_errors: bool,
}

pub fn run(args: &VerifyArgs) -> i32 {
    let mut failures = Failures::new(args.json_errors);
    for path in &args.artifacts {
        let bytes = match crate::source::read_bytes(path) {
            Ok(b) => b,
            Err(message) => {
                failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message));
                continue;
            }
        };
        match verify_bytes(&bytes) {
            Ok(a) => println!(
                "ok {} {}@{} {}",
                path.display(),
                a.name,
                a.version,
                a.hash.as_deref().unwrap_or("")
            ),
            Err(e) => failures.push(CliError::new(
                e.kind(),
                e.exit_code(),
                format!("`{}`: {e}", path.display()),
            )),
        }
    }
    failures.finish(exit::OK)
}
