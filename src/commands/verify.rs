//! `ctxpack verify ARTIFACT`: recompute an artifact's hash and refuse any mismatch;
//! check its signature when a trust policy covers its scope (`FILE.minisig`, or the
//! file `--signature` names), or against `--public-key`.

use std::path::PathBuf;

use super::{exit, CliError, Failures};
use crate::artifact::verify_bytes;

#[derive(Debug, Clone, clap::Args)]
pub struct VerifyArgs {
    /// Artifact files to verify.
    #[arg(required = true)]
    pub artifacts: Vec<PathBuf>,
    /// The signature to check (default: `ARTIFACT.minisig`, when a trust policy
    /// covers the pack's scope or `--public-key` is given). Only with one artifact.
    #[arg(long, value_name = "SIG")]
    pub signature: Option<PathBuf>,
    /// Check the signature against this public key instead of the trust policy.
    #[arg(long, value_name = "KEY.pub")]
    pub public_key: Option<PathBuf>,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Checks the signature the arguments name, if any; `Ok` when none is asked for and
/// no trust policy covers the pack.
fn check_signature(
    args: &VerifyArgs,
    path: &std::path::Path,
    a: &crate::artifact::Artifact,
    bytes: &[u8],
) -> Result<(), CliError> {
    let hash = a.hash.as_deref().unwrap_or_default();
    let invalid = |(kind, message): (&'static str, String)| {
        let code = if kind == "unreadable_input" {
            exit::UNREADABLE
        } else {
            exit::INVALID
        };
        CliError::new(kind, code, message)
    };
    let sig_path = match (&args.signature, &args.public_key) {
        (Some(given), _) => given.clone(),
        (None, Some(_)) => crate::signing::signature_beside(path),
        (None, None) => {
            return crate::signing::check_artifact_file(path, &a.name, &a.version, hash, bytes)
                .map_err(invalid)
        }
    };
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| {
            invalid((
                "unreadable_input",
                format!("cannot read `{}`: {e}", p.display()),
            ))
        })
    };
    let signature = read(&sig_path)?;
    if let Some(key) = &args.public_key {
        let key = read(key)?;
        return crate::signing::verify_one(&key, &a.name, &a.version, hash, bytes, &signature)
            .map_err(|e| invalid((e.kind, e.message)));
    }
    let beside = path.parent().filter(|p| !p.as_os_str().is_empty());
    let policy = crate::signing::TrustPolicy::discover(None, beside)
        .map_err(|e| invalid(("invalid_trust_policy", e)))?;
    let scope = a.name.split('/').next().unwrap_or_default();
    match policy {
        Some(p) if p.covers(scope) => p
            .check(&a.name, &a.version, hash, bytes, Some(&signature))
            .map_err(|e| invalid((e.kind, e.message))),
        _ => Err(invalid((
            "untrusted_key",
            format!(
                "no trust policy lists keys for scope `{scope}`: pass --public-key, or add the scope to {}",
                crate::signing::TRUST_FILE
            ),
        ))),
    }
}

pub fn run(args: &VerifyArgs) -> i32 {
    let mut failures = Failures::new(args.json_errors);
    if args.signature.is_some() && args.artifacts.len() > 1 {
        failures.push(CliError::new(
            "usage",
            exit::USAGE,
            "--signature checks one artifact; name only one",
        ));
        return failures.finish(exit::OK);
    }
    for path in &args.artifacts {
        let bytes = match crate::source::read_bytes(path) {
            Ok(b) => b,
            Err(message) => {
                failures.push(CliError::new("unreadable_input", exit::UNREADABLE, message));
                continue;
            }
        };
        match verify_bytes(&bytes)
            .map_err(|e| {
                CliError::new(
                    e.kind(),
                    e.exit_code(),
                    format!("`{}`: {e}", path.display()),
                )
            })
            .and_then(|a| check_signature(args, path, &a, &bytes).map(|()| a))
        {
            Ok(a) => outln!(
                "ok {} {}@{} {}",
                path.display(),
                a.name,
                a.version,
                a.hash.as_deref().unwrap_or("")
            ),
            Err(e) => failures.push(e),
        }
    }
    failures.finish(exit::OK)
}
