//! `ctxpack diff A B`: what changes between two artifacts, safety-relevant changes
//! first.
//!
//! A and B are artifact files or pinned registry references (`scope/name@version`,
//! when no such file exists). Exits 0 whether or not they differ, like `diff` in
//! review tools; with `--exit-code`, 1 when they differ, like `git diff --exit-code`.

use std::path::{Path, PathBuf};

use super::compile::load_pack;
use super::{exit, CliError};
use crate::artifact::Artifact;
use crate::diff::{diff, render};
use crate::registry::Registry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Sections with `+`/`-`/`~` markers and `⚠` on safety-relevant changes.
    #[default]
    Human,
    /// One JSON document on stdout.
    Json,
}

/// What makes `diff` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A change that weakens safety: an approval or risk lowered, a policy removed or
    /// made advisory, a prohibition or redactor removed, a tool granted to an intent, an
    /// intent's safety mode lowered, a tool newly surfaced or surfaced with less approval.
    Weakened,
    /// Any difference (like `--exit-code`).
    Changed,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The old version: an artifact or `.ctxpack` source file, or `scope/name@version`
    /// (`scope/name@sha256:…` in an OCI registry).
    pub a: PathBuf,
    /// The new version: an artifact or `.ctxpack` source file, or `scope/name@version`
    /// (`scope/name@sha256:…` in an OCI registry).
    pub b: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Exit 1 when the artifacts differ.
    #[arg(long)]
    pub exit_code: bool,
    /// The registry for references, a directory or `oci://HOST[:PORT]/NAMESPACE`
    /// [default: $CTXPACK_REGISTRY, else .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Exit 1 when the change is of this kind: `weakened` gates a release on safety
    /// (a version bump that only tightens or rewords passes), `changed` on any change.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// How an input is turned into an artifact: an exit code and a message on failure.
pub type Loader<'a> = &'a dyn Fn(&Path) -> Result<Artifact, CliError>;

pub fn run(args: &DiffArgs) -> i32 {
    let registry = Registry::from_env_or(args.registry.as_deref());
    run_with(args, &|path| {
        if path.extension().is_some_and(|e| e == "ctxpack") {
            let options = crate::build::BuildOptions {
                registry: args.registry.clone(),
                ..Default::default()
            };
            crate::build::build_file(path, &options)
                .map(|built| built.artifact)
                .map_err(super::build::build_error)
        } else {
            load_artifact(path, &registry)
        }
    })
}

/// `run` with the inputs loaded by `load`: the seam for accepting `.ctxpack` sources,
/// whose loader builds them and defers to [`load_artifact`] for everything else.
pub fn run_with(args: &DiffArgs, load: Loader<'_>) -> i32 {
    let (a, b) = match (load(&args.a), load(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            e.report(args.json_errors);
            return e.exit_code;
        }
    };
    let d = diff(&a, &b);
    match args.format {
        Format::Human => out!("{}", render::to_human(&d)),
        Format::Json => out!("{}", render::to_json(&d)),
    }
    let fail = match args.fail_on {
        Some(FailOn::Weakened) => d.weakens(),
        Some(FailOn::Changed) => d.differs,
        None => args.exit_code && d.differs,
    };
    if !fail {
        return exit::OK;
    }
    // Exit 1 says why on stderr, as every other failure does (one object under
    // `--json-errors`).
    let (from, to) = (
        format!("{}@{}", d.from.name, d.from.version),
        format!("{}@{}", d.to.name, d.to.version),
    );
    let error = if args.fail_on == Some(FailOn::Weakened) {
        let weakening: Vec<serde_json::Value> = d
            .safety
            .iter()
            .filter(|n| n.effect == crate::diff::SafetyEffect::Weakens)
            .filter_map(|n| serde_json::to_value(n).ok())
            .chain(d.impact.iter().flat_map(|i| {
                i.changes
                    .iter()
                    .filter(|c| c.weakens)
                    .map(|c| serde_json::json!({"intent": i.intent, "change": c.change}))
            }))
            .collect();
        let message = format!(
            "{from} → {to} weakens safety ({} change{})",
            weakening.len(),
            if weakening.len() == 1 { "" } else { "s" }
        );
        CliError::new("safety_weakened", exit::FAILED, message)
            .with("weakening", serde_json::Value::Array(weakening))
    } else {
        CliError::new(
            "artifacts_differ",
            exit::FAILED,
            format!("{from} and {to} differ"),
        )
    };
    error.report(args.json_errors);
    exit::FAILED
}

/// Loads a verified artifact from a file or, when no file `input` exists and it
/// reads as `scope/name[@version]`, from the registry (where an unpinned reference is
/// refused), as `compile --pack` does.
pub fn load_artifact(input: &Path, registry: &Registry) -> Result<Artifact, CliError> {
    load_pack(&input.to_string_lossy(), registry)
}
