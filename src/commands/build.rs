//! `ctxpack build PACK`: check and lower a pack to its pinned artifact.

use std::path::{Path, PathBuf};

use super::{exit, files, CliError, Failures};
use crate::build::{build_file, BuildError, BuildOptions};
use crate::diagnostic::{self, FileReport};

#[derive(Debug, Clone, clap::Args)]
pub struct BuildArgs {
    /// The pack source (`.ctxpack`), `-` for standard input, or a directory: every
    /// pack in it, recursively, each to its default output.
    pub pack: PathBuf,
    /// Where to write the artifact [default: target/ctxpack/<scope>/<name>/<version>.json];
    /// only for a single pack.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Indent the JSON for people. The hash is always over the canonical bytes.
    #[arg(long)]
    pub pretty: bool,
    /// Registry to resolve imports from, a directory or `oci://HOST[:PORT]/NAMESPACE`
    /// [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Refuse to create or change `ctxpack.lock` (for CI).
    #[arg(long)]
    pub locked: bool,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

pub fn run(args: &BuildArgs) -> i32 {
    let mut failures = Failures::new(args.json_errors);
    let packs = if args.pack.is_dir() {
        match files::collect(std::slice::from_ref(&args.pack), ".ctxpack") {
            Ok(packs) if packs.is_empty() => {
                let message = format!("no `.ctxpack` files in `{}`", args.pack.display());
                failures.push(CliError::new("no_packs", exit::FAILED, message));
                return failures.finish(exit::OK);
            }
            Ok(packs) if args.output.is_some() => {
                let message = format!(
                    "`-o` names one artifact, but `{}` holds {} packs; build them to their default paths",
                    args.pack.display(),
                    packs.len()
                );
                failures.push(CliError::new("usage", exit::USAGE, message));
                return failures.finish(exit::OK);
            }
            Ok(packs) => packs,
            Err(message) => {
                failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message));
                return failures.finish(exit::OK);
            }
        }
    } else {
        vec![args.pack.clone()]
    };
    for pack in &packs {
        if let Err(e) = execute(args, pack) {
            let (error, report) = *e;
            if !args.json_errors {
                if let Some(report) = &report {
                    eprint!("{}", diagnostic::to_human(report, super::stderr_color()));
                }
            }
            let lock = error.kind == "lock_would_change";
            failures.push(error);
            if !args.json_errors && lock {
                eprintln!("help: run `ctxpack build` without `--locked` to update the lockfile, and commit it");
            }
        }
    }
    failures.finish(exit::OK)
}

/// A build failure, with the check report to show people when there is one.
type Failure = Box<(CliError, Option<FileReport>)>;

fn execute(args: &BuildArgs, pack: &Path) -> Result<(), Failure> {
    // A malformed `oci://` location is the command's mistake, not the pack's: exit 4
    // before checking, rather than an E0702 on every import.
    let root = crate::registry::root_for_pack(args.registry.as_deref(), pack);
    if let Some(Err(reason)) = crate::registry::OciLocation::parse(&root.to_string_lossy()) {
        let error = crate::registry::RegistryError::InvalidLocation(reason);
        return Err(Box::new((super::publish::registry_error(&error), None)));
    }
    let options = BuildOptions {
        registry: args.registry.clone(),
        locked: args.locked,
        write_lock: true,
    };
    let built = build_file(pack, &options).map_err(|e| match e {
        BuildError::Diagnostics(report) => {
            let (errors, _) = diagnostic::tally(std::slice::from_ref(&report));
            let message = format!(
                "`{}` has {errors} error(s); no artifact written",
                report.path
            );
            Box::new((
                CliError::diagnostics("check_failed", &report, message),
                Some(report),
            ))
        }
        other => Box::new((build_error(other), None)),
    })?;
    if !built.report.diagnostics.is_empty() && !args.json_errors {
        eprint!(
            "{}",
            diagnostic::to_human(&built.report, super::stderr_color())
        );
    }
    let artifact = &built.artifact;
    let output = args.output.clone().unwrap_or_else(|| {
        let mut p = PathBuf::from("target/ctxpack");
        p.extend(artifact.name.split('/'));
        p.push(format!("{}.json", artifact.version));
        p
    });
    let bytes = if args.pretty {
        let (value, _) = artifact.seal();
        let mut s = serde_json::to_string_pretty(&sorted(&value)).unwrap_or_default();
        s.push('\n');
        s.into_bytes()
    } else {
        artifact.canonical_bytes()
    };
    let unwritable = |what: &str, path: &std::path::Path, e: std::io::Error| {
        let message = format!("cannot {what} `{}`: {e}", path.display());
        Box::new((
            CliError::new("unwritable_output", exit::UNREADABLE, message),
            None,
        ))
    };
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| unwritable("create", parent, e))?;
    }
    std::fs::write(&output, bytes).map_err(|e| unwritable("write", &output, e))?;
    outln!(
        "built {}@{} {} -> {}",
        artifact.name,
        artifact.version,
        artifact.hash.as_deref().unwrap_or(""),
        output.display()
    );
    Ok(())
}

/// A build error as a CLI error (a pack with errors carries its diagnostics).
pub fn build_error(e: BuildError) -> CliError {
    let message = e.summary();
    match e {
        BuildError::Unreadable(_) => CliError::new("unreadable_input", exit::UNREADABLE, message),
        BuildError::LockWouldChange(_) => CliError::new("lock_would_change", exit::FAILED, message),
        BuildError::Diagnostics(report) => CliError::diagnostics("check_failed", &report, message),
    }
}

fn sorted(value: &serde_json::Value) -> serde_json::Value {
    // serde_json's default map is ordered by key; rebuilding through it sorts even if
    // another crate enabled `preserve_order`.
    match value {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&m[k]));
            }
            serde_json::Value::Object(out)
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
