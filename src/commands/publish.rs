//! `ctxpack publish ARTIFACT [--registry DIR|oci://HOST/NAMESPACE]`: store a verified
//! artifact in the registry under its own `scope/name@version`.

use std::path::PathBuf;

use super::{exit, CliError};
use crate::registry::{PinnedRef, Publication, PublishOutcome, Registry, RegistryError};

#[derive(Debug, Clone, clap::Args)]
pub struct PublishArgs {
    /// What to publish: an artifact (JSON, as `ctxpack build` writes it) or a `.ctxpack`
    /// source, which is built first.
    pub artifact: PathBuf,
    /// The registry: a directory or `oci://HOST[:PORT]/NAMESPACE` [default:
    /// $CTXPACK_REGISTRY, else .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Sign the published version with this minisign secret key (the password, for an
    /// encrypted key, from `CTXPACK_KEY_PASSWORD`); the signature is stored beside it
    /// (in an OCI registry, as a referrer of its manifest).
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

pub fn run(args: &PublishArgs) -> i32 {
    match execute(args) {
        Ok(()) => exit::OK,
        Err(e) => {
            e.report(args.json_errors);
            e.exit_code
        }
    }
}

fn execute(args: &PublishArgs) -> Result<(), CliError> {
    let registry = Registry::for_pack(args.registry.as_deref(), &args.artifact);
    if args.artifact.extension().is_some_and(|e| e == "ctxpack") {
        let options = crate::build::BuildOptions {
            registry: args.registry.clone(),
            locked: false,
            write_lock: true,
        };
        let built = crate::build::build_file(&args.artifact, &options)
            .map_err(super::build::build_error)?;
        return report(
            registry.publish(&built.artifact),
            &registry,
            args.sign.as_deref(),
        );
    }
    let bytes = crate::source::read_bytes(&args.artifact)
        .map_err(|message| CliError::new("unreadable_input", exit::UNREADABLE, message))?;
    report(
        registry.publish_bytes(&bytes),
        &registry,
        args.sign.as_deref(),
    )
}

fn report(
    result: Result<Publication, RegistryError>,
    registry: &Registry,
    key: Option<&std::path::Path>,
) -> Result<(), CliError> {
    let p = result.map_err(|e| registry_error(&e))?;
    let digest = p
        .digest
        .as_ref()
        .map(|d| format!(", {d}"))
        .unwrap_or_default();
    match p.outcome {
        PublishOutcome::Published => {
            outln!(
                "published {} ({}) to {}{digest}",
                p.pack,
                p.hash,
                p.path.display()
            )
        }
        PublishOutcome::AlreadyPublished => {
            outln!(
                "{} is already published with the same hash ({})",
                p.pack,
                p.hash
            )
        }
    }
    if let Some(key) = key {
        let bytes = registry
            .stored_bytes(&p.pack)
            .map_err(|e| registry_error(&e))?;
        let signature = super::sign::signature_of(key, &bytes)?;
        registry
            .store_signature(&p.pack, &signature)
            .map_err(|e| registry_error(&e))?;
        outln!(
            "signed {} -> {}",
            p.pack,
            registry.signature_location(&PinnedRef::Version(p.pack.clone()))
        );
    }
    Ok(())
}

/// A registry failure as a CLI error.
pub fn registry_error(e: &RegistryError) -> CliError {
    CliError::new(e.kind(), e.exit_code(), e.to_string())
}
