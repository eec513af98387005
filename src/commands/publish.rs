//! `ctxpack publish ARTIFACT [--registry DIR]`: store a verified artifact in the
//! registry under its own `scope/name@version`.

use std::path::PathBuf;

use super::exit;
use crate::artifact::Artifact;
use crate::registry::{Publication, PublishOutcome, Registry, RegistryError};

#[derive(Debug, Clone, clap::Args)]
pub struct PublishArgs {
    /// What to publish: an artifact (JSON, as `ctxpack build` writes it) or a `.ctxpack`
    /// source, which is built first.
    pub artifact: PathBuf,
    /// The registry directory [default: $CTXPACK_REGISTRY, else .ctxpack/registry].
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
}

pub fn run(args: &PublishArgs) -> i32 {
    let registry = Registry::from_env_or(args.registry.as_deref());
    if args.artifact.extension().is_some_and(|e| e == "ctxpack") {
        // A source is built first (its imports resolving from the same registry).
        let options = crate::build::BuildOptions {
            registry: args.registry.clone(),
            locked: false,
            write_lock: true,
        };
        return match crate::build::build_file(&args.artifact, &options) {
            Ok(built) => publish_artifact(&registry, &built.artifact),
            Err(e) => {
                eprintln!("error: {}", e.summary());
                e.exit_code()
            }
        };
    }
    let bytes = match std::fs::read(&args.artifact) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", args.artifact.display());
            return exit::UNREADABLE;
        }
    };
    report(registry.publish_bytes(&bytes))
}

/// Publishes an artifact built in memory and reports it as `run` does: the seam for
/// publishing a `.ctxpack` source, which is built first and handed over here.
pub fn publish_artifact(registry: &Registry, artifact: &Artifact) -> i32 {
    report(registry.publish(artifact))
}

fn report(result: Result<Publication, RegistryError>) -> i32 {
    match result {
        Ok(p) => {
            match p.outcome {
                PublishOutcome::Published => {
                    println!("published {} ({}) to {}", p.pack, p.hash, p.path.display())
                }
                PublishOutcome::AlreadyPublished => {
                    println!(
                        "{} is already published with the same hash ({})",
                        p.pack, p.hash
                    )
                }
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}
