//! `ctxpack verify ARTIFACT`: recompute an artifact's hash and refuse any mismatch.

use std::path::PathBuf;

use super::exit;
use crate::artifact::verify_bytes;

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Artifact files to verify.
    #[arg(required = true)]
    pub artifacts: Vec<PathBuf>,
}

pub fn run(args: &VerifyArgs) -> i32 {
    let mut worst = exit::OK;
    for path in &args.artifacts {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: cannot read `{}`: {e}", path.display());
                worst = worst.max(exit::UNREADABLE);
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
            Err(e) => {
                eprintln!("error: `{}`: {e}", path.display());
                worst = worst.max(e.exit_code());
            }
        }
    }
    worst
}
