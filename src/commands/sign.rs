//! `ctxpack keygen` and `ctxpack sign`: minisign key pairs and signatures of
//! published packs (see [`crate::signing`]).

use std::path::{Path, PathBuf};

use super::{exit, CliError};
use crate::artifact::verify_bytes;
use crate::registry::{PinnedRef, Registry};
use crate::signing;

/// Arguments of `ctxpack keygen`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeygenArgs {
    /// Where to write the secret key; the public key goes to `KEY.pub`.
    #[arg(short = 'o', long = "output", value_name = "KEY")]
    pub output: PathBuf,
    /// Do not encrypt the secret key (for a CI secret store). Otherwise the password
    /// is read from `CTXPACK_KEY_PASSWORD`, or asked for on the terminal.
    #[arg(long)]
    pub unencrypted: bool,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

/// Arguments of `ctxpack sign`.
#[derive(Debug, Clone, clap::Args)]
pub struct SignArgs {
    /// A published version (`scope/name@version`, or `scope/name@sha256:…` in an OCI
    /// registry) or an artifact file (the signature
    /// is written beside it as `FILE.minisig`; in an OCI registry it is stored as a
    /// referrer of the version's manifest).
    pub artifact: String,
    /// The secret key (`ctxpack keygen` or `minisign -G` writes one).
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// The registry: a directory or `oci://HOST[:PORT]/NAMESPACE` [default:
    /// $CTXPACK_REGISTRY, else .ctxpack/registry].
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
}

fn finish(result: Result<(), CliError>, json_errors: bool) -> i32 {
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            e.report(json_errors);
            e.exit_code
        }
    }
}

pub fn keygen(args: &KeygenArgs) -> i32 {
    finish(keygen_inner(args), args.json_errors)
}

fn public_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn keygen_inner(args: &KeygenArgs) -> Result<(), CliError> {
    let public = public_path(&args.output);
    for path in [&args.output, &public] {
        if path.exists() {
            return Err(CliError::new(
                "would_overwrite",
                exit::FAILED,
                format!("`{}` exists; keygen never overwrites a key", path.display()),
            ));
        }
    }
    let password = if args.unencrypted {
        None
    } else {
        Some(signing::password_from_env().ok_or_else(|| {
            CliError::new(
                "usage",
                exit::USAGE,
                format!(
                    "set {} to the secret key's password, or pass --unencrypted",
                    signing::PASSWORD_ENV
                ),
            )
        })?)
    };
    let (pk, sk) =
        signing::generate(password).map_err(|e| CliError::new("io_error", exit::UNREADABLE, e))?;
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| {
            CliError::new(
                "unwritable_output",
                exit::UNREADABLE,
                format!("cannot write `{}`: {e}", path.display()),
            )
        })
    };
    write(&args.output, &sk)?;
    write(&public, &pk)?;
    let key_line = pk.lines().last().unwrap_or_default();
    outln!(
        "wrote {} and {}\npublic key: {key_line}\nadd it to ctxpack.trust.toml:\n  [scopes.<scope>]\n  keys = [\"{key_line}\"]",
        args.output.display(),
        public.display()
    );
    Ok(())
}

pub fn sign(args: &SignArgs) -> i32 {
    finish(sign_inner(args), args.json_errors)
}

/// Reads a secret key file.
pub fn read_key(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            "unreadable_input",
            exit::UNREADABLE,
            format!("cannot read the key `{}`: {e}", path.display()),
        )
    })
}

/// Signs verified artifact bytes with the key at `key`.
pub fn signature_of(key: &Path, bytes: &[u8]) -> Result<String, CliError> {
    let artifact =
        verify_bytes(bytes).map_err(|e| CliError::new(e.kind(), e.exit_code(), e.to_string()))?;
    let secret = read_key(key)?;
    let hash = artifact.hash.as_deref().unwrap_or_default();
    signing::sign(
        &secret,
        signing::password_from_env(),
        &artifact.name,
        &artifact.version,
        hash,
        bytes,
    )
    .map_err(|e| CliError::new("invalid_key", exit::INVALID, e))
}

fn sign_inner(args: &SignArgs) -> Result<(), CliError> {
    let path = Path::new(&args.artifact);
    if path.is_file() {
        let bytes = crate::source::read_bytes(path)
            .map_err(|m| CliError::new("unreadable_input", exit::UNREADABLE, m))?;
        let signature = signature_of(&args.key, &bytes)?;
        let out = signing::signature_beside(path);
        std::fs::write(&out, signature).map_err(|e| {
            CliError::new(
                "unwritable_output",
                exit::UNREADABLE,
                format!("cannot write `{}`: {e}", out.display()),
            )
        })?;
        outln!("signed {} -> {}", path.display(), out.display());
        return Ok(());
    }
    // Not a file: a pinned reference, or else a file that is not there (what ends
    // in `.json`, names a directory, or is neither `scope/name` nor has an `@`).
    let reference = PinnedRef::parse(&args.artifact).map_err(|e| {
        let looks_like_a_path = args.artifact.ends_with(".json")
            || path.exists()
            || !(args.artifact.contains('@') || crate::artifact::valid_pack_name(&args.artifact));
        match looks_like_a_path {
            true => CliError::new(
                "unreadable_input",
                exit::UNREADABLE,
                match path.exists() {
                    true => format!("`{}` is not a file", args.artifact),
                    false => format!("`{}`: no such file", args.artifact),
                },
            ),
            false => super::publish::registry_error(&e),
        }
    })?;
    let registry = Registry::open(crate::registry::resolve_root(
        args.registry.as_deref(),
        std::env::var_os(crate::registry::REGISTRY_ENV),
    ));
    let bytes = registry
        .stored_bytes_pinned(&reference)
        .map_err(|e| super::publish::registry_error(&e))?;
    let signature = signature_of(&args.key, &bytes)?;
    registry
        .store_signature_pinned(&reference, &signature)
        .map_err(|e| super::publish::registry_error(&e))?;
    outln!(
        "signed {reference} -> {}",
        registry.signature_location(&reference)
    );
    Ok(())
}
