//! `ctxpack build PACK`: check and lower a pack to its pinned artifact.

use std::path::PathBuf;

use super::exit;
use crate::build::{build_file, BuildError, BuildOptions};
use crate::diagnostic;

#[derive(Debug, Clone, clap::Args)]
pub struct BuildArgs {
    /// The pack source (`.ctxpack`).
    pub pack: PathBuf,
    /// Where to write the artifact [default: target/ctxpack/<scope>/<name>/<version>.json].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Indent the JSON for people. The hash is always over the canonical bytes.
    #[arg(long)]
    pub pretty: bool,
    /// Registry to resolve imports from [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR")]
    pub registry: Option<PathBuf>,
    /// Refuse to create or change `ctxpack.lock` (for CI).
    #[arg(long)]
    pub locked: bool,
}

pub fn run(args: &BuildArgs) -> i32 {
    let options = BuildOptions {
        registry: args.registry.clone(),
        locked: args.locked,
        write_lock: true,
    };
    let built = match build_file(&args.pack, &options) {
        Ok(b) => b,
        Err(BuildError::LockWouldChange(m)) => {
            eprintln!("error: {m}");
            eprintln!("help: run `ctxpack build` without `--locked` to update the lockfile, and commit it");
            return exit::FAILED;
        }
        Err(BuildError::Unreadable(m)) => {
            eprintln!("error: {m}");
            return exit::UNREADABLE;
        }
        Err(BuildError::Diagnostics(report)) => {
            eprint!("{}", diagnostic::to_human(&report, super::stderr_color()));
            let (errors, _) = diagnostic::tally(std::slice::from_ref(&report));
            eprintln!(
                "error: `{}` has {errors} error(s); no artifact written",
                report.path
            );
            return exit::FAILED;
        }
    };
    if !built.report.diagnostics.is_empty() {
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
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(parent) {
            eprintln!("error: cannot create `{}`: {e}", parent.display());
            return exit::UNREADABLE;
        }
    }
    if let Err(e) = std::fs::write(&output, bytes) {
        eprintln!("error: cannot write `{}`: {e}", output.display());
        return exit::UNREADABLE;
    }
    println!(
        "built {}@{} {} -> {}",
        artifact.name,
        artifact.version,
        artifact.hash.as_deref().unwrap_or(""),
        output.display()
    );
    exit::OK
}

/// A copy of `value` whose objects iterate in sorted key order, for `--pretty`.
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
