//! Signed packs: minisign signatures over an artifact's canonical bytes, and the trust
//! policy that says whose signatures a scope's packs need.
//!
//! A signature's trusted comment (which the signature covers) is
//! `ctxpack scope/name@version blake3:<hex>`, so a signature cannot be moved onto
//! another name, version or content. Signatures and keys use the format of the
//! `minisign` command-line tool, which can make and check them too.
//!
//! The trust policy (`ctxpack.trust.toml`) lists public keys per scope:
//!
//! ```toml
//! [scopes.acme]
//! keys = ["RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"]
//! ```
//!
//! When it covers a pack's scope, every load of that pack needs a valid signature by
//! one of the scope's keys over exactly its bytes and for exactly its
//! `scope/name@version`. There is no way to skip the check.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use minisign::{KeyPair, PublicKey, SecretKey, SecretKeyBox, SignatureBox};
use serde::Deserialize;

/// The trust policy's file name, looked for beside a pack and in the current
/// directory.
pub const TRUST_FILE: &str = "ctxpack.trust.toml";

/// The environment variable naming a trust policy file.
pub const TRUST_ENV: &str = "CTXPACK_TRUST";

/// The environment variable holding a secret key's password.
pub const PASSWORD_ENV: &str = "CTXPACK_KEY_PASSWORD";

/// The file extension of a signature beside what it signs.
pub const SIGNATURE_SUFFIX: &str = ".minisig";

/// Why a signature was refused (exit 4); `kind` is the `--json-errors` kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SignatureError {
    pub kind: &'static str,
    pub message: String,
}

impl SignatureError {
    fn new(kind: &'static str, message: impl Into<String>) -> Self {
        SignatureError {
            kind,
            message: message.into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    scopes: BTreeMap<String, ScopeKeys>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeKeys {
    keys: Vec<String>,
}

/// Public keys per scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustPolicy {
    /// Where it was read from, for messages.
    pub path: PathBuf,
    scopes: BTreeMap<String, Vec<(String, PublicKey)>>,
}

impl TrustPolicy {
    /// Parses a policy; a malformed one is an error, never an empty policy.
    pub fn parse(path: &Path, text: &str) -> Result<TrustPolicy, String> {
        let file: PolicyFile = toml::from_str(text)
            .map_err(|e| format!("`{}` is not a valid trust policy: {e}", path.display()))?;
        let mut scopes = BTreeMap::new();
        for (scope, keys) in file.scopes {
            let mut parsed = Vec::new();
            for key in keys.keys {
                let pk = PublicKey::from_base64(key.trim()).map_err(|e| {
                    format!(
                        "`{}`: scope `{scope}`: `{key}` is not a minisign public key: {e}",
                        path.display()
                    )
                })?;
                parsed.push((key.trim().to_owned(), pk));
            }
            scopes.insert(scope, parsed);
        }
        Ok(TrustPolicy {
            path: path.to_path_buf(),
            scopes,
        })
    }

    pub fn read(path: &Path) -> Result<TrustPolicy, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read trust policy `{}`: {e}", path.display()))?;
        TrustPolicy::parse(path, &text)
    }

    /// The policy in force: `explicit` (`--trust`), else `$CTXPACK_TRUST`, else
    /// `ctxpack.trust.toml` in `beside` (a pack's folder), else in the current
    /// directory; `None` when there is none.
    pub fn discover(
        explicit: Option<&Path>,
        beside: Option<&Path>,
    ) -> Result<Option<TrustPolicy>, String> {
        if let Some(path) = explicit {
            return TrustPolicy::read(path).map(Some);
        }
        if let Some(env) = std::env::var_os(TRUST_ENV).filter(|v| !v.is_empty()) {
            return TrustPolicy::read(Path::new(&env)).map(Some);
        }
        for dir in beside.into_iter().chain([Path::new(".")]) {
            let path = dir.join(TRUST_FILE);
            if path.is_file() {
                return TrustPolicy::read(&path).map(Some);
            }
        }
        Ok(None)
    }

    /// Does the policy say anything about `scope`?
    pub fn covers(&self, scope: &str) -> bool {
        self.scopes.contains_key(scope)
    }

    /// Checks `signature` (minisign text) over `bytes`, the artifact
    /// `name@version` with `hash`. Packs of scopes the policy does not name pass.
    pub fn check(
        &self,
        name: &str,
        version: &str,
        hash: &str,
        bytes: &[u8],
        signature: Option<&str>,
    ) -> Result<(), SignatureError> {
        let scope = name.split('/').next().unwrap_or(name);
        let Some(keys) = self.scopes.get(scope) else {
            return Ok(());
        };
        let subject = format!("{name}@{version}");
        let Some(signature) = signature else {
            return Err(SignatureError::new(
                "signature_missing",
                format!(
                    "`{subject}` has no signature, and the trust policy `{}` requires one for scope `{scope}`",
                    self.path.display()
                ),
            ));
        };
        let trusted = "one the trust policy lists for its scope";
        verify_with(trusted, keys, &subject, hash, bytes, signature).map_err(|mut e| {
            e.message = format!(
                "`{subject}`: {} (trust policy `{}`)",
                e.message,
                self.path.display()
            );
            e
        })
    }
}

/// The trusted comment of a signature over `name@version` with `hash`.
pub fn trusted_comment(name: &str, version: &str, hash: &str) -> String {
    format!("ctxpack {name}@{version} {hash}")
}

/// Checks a signature against a set of keys.
/// `trusted`: who the keys come from, for the message when none signed it.
fn verify_with(
    trusted: &str,
    keys: &[(String, PublicKey)],
    subject: &str,
    hash: &str,
    bytes: &[u8],
    signature: &str,
) -> Result<(), SignatureError> {
    let sig = SignatureBox::from_string(signature).map_err(|e| {
        SignatureError::new(
            "signature_invalid",
            format!("the signature cannot be read: {e}"),
        )
    })?;
    let Some((_, key)) = keys.iter().find(|(_, k)| k.keynum() == sig.keynum()) else {
        return Err(SignatureError::new(
            "untrusted_key",
            format!(
                "it is signed by key {}, which is not {trusted}",
                hex_id(sig.keynum())
            ),
        ));
    };
    minisign::verify(key, &sig, Cursor::new(bytes), true, false, false).map_err(|e| {
        SignatureError::new(
            "signature_invalid",
            format!("the signature does not match the artifact's bytes: {e}"),
        )
    })?;
    let comment = sig.trusted_comment().unwrap_or_default();
    let wanted = format!("ctxpack {subject} {hash}");
    if comment != wanted {
        return Err(SignatureError::new(
            "signature_wrong_subject",
            format!("the signature is for `{comment}`, not `{wanted}`"),
        ));
    }
    Ok(())
}

fn hex_id(keynum: &[u8]) -> String {
    keynum.iter().rev().map(|b| format!("{b:02X}")).collect()
}

/// Checks one signature against one public key (minisign text or its base64 line),
/// without a trust policy: the subject and hash must still match.
pub fn verify_one(
    public_key: &str,
    name: &str,
    version: &str,
    hash: &str,
    bytes: &[u8],
    signature: &str,
) -> Result<(), SignatureError> {
    let pk = parse_public_key(public_key).map_err(|e| SignatureError::new("untrusted_key", e))?;
    let given = format!("the key given (key {})", hex_id(pk.keynum()));
    let keys = [(String::new(), pk)];
    verify_with(
        &given,
        &keys,
        &format!("{name}@{version}"),
        hash,
        bytes,
        signature,
    )
}

fn parse_public_key(text: &str) -> Result<PublicKey, String> {
    let text = text.trim();
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("untrusted comment:"))
        .unwrap_or(text);
    PublicKey::from_base64(line).map_err(|e| format!("not a minisign public key: {e}"))
}

/// A new key pair: the public key file's text and the secret key file's, the secret
/// encrypted with `password` unless it is `None`.
pub fn generate(password: Option<String>) -> Result<(String, String), String> {
    let pair = match password {
        Some(p) => KeyPair::generate_encrypted_keypair(Some(p)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| format!("cannot generate a key pair: {e}"))?;
    let pk = pair.pk.to_box().map_err(|e| e.to_string())?.into_string();
    let sk = pair
        .sk
        .to_box(Some("ctxpack secret key"))
        .map_err(|e| e.to_string())?
        .into_string();
    Ok((pk, sk))
}

/// Signs `bytes`, the artifact `name@version` with `hash`, with the secret key in
/// `secret_key` (minisign text; `password` for an encrypted one). Returns the
/// signature file's text.
pub fn sign(
    secret_key: &str,
    password: Option<String>,
    name: &str,
    version: &str,
    hash: &str,
    bytes: &[u8],
) -> Result<String, String> {
    let parse = || {
        SecretKeyBox::from_string(secret_key).map_err(|e| format!("not a minisign secret key: {e}"))
    };
    // An unencrypted key opens as it is; an encrypted one needs the password (without
    // one, minisign asks on the terminal).
    let sk = match SecretKey::from_unencrypted_box(parse()?) {
        Ok(sk) => sk,
        Err(_) => SecretKey::from_box(parse()?, password).map_err(|e| {
            format!(
                "cannot open the secret key (encrypted keys take their password from {PASSWORD_ENV}): {e}"
            )
        })?,
    };
    let comment = trusted_comment(name, version, hash);
    let sig = minisign::sign(
        None,
        &sk,
        Cursor::new(bytes),
        Some(&comment),
        Some(&format!("signature of {name}@{version}")),
    )
    .map_err(|e| format!("cannot sign: {e}"))?;
    Ok(sig.into_string())
}

/// The password for a secret key: `$CTXPACK_KEY_PASSWORD`, or `None` (unencrypted
/// keys; for an encrypted one minisign then asks on the terminal).
pub fn password_from_env() -> Option<String> {
    std::env::var(PASSWORD_ENV).ok()
}

/// Where the signature of an artifact file is: beside it, `FILE.minisig`.
pub fn signature_beside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    PathBuf::from(name)
}

/// Holds an artifact file to the trust policy in force (`$CTXPACK_TRUST`, else
/// `ctxpack.trust.toml` beside the file or in the current directory): when it covers
/// the pack's scope, `FILE.minisig` must sign it. `Err((kind, message))`.
pub fn check_artifact_file(
    path: &Path,
    name: &str,
    version: &str,
    hash: &str,
    bytes: &[u8],
) -> Result<(), (&'static str, String)> {
    let beside = path.parent().filter(|p| !p.as_os_str().is_empty());
    let policy = TrustPolicy::discover(None, beside).map_err(|e| ("invalid_trust_policy", e))?;
    let Some(policy) = policy else {
        return Ok(());
    };
    let sig_path = signature_beside(path);
    let signature = match std::fs::read_to_string(&sig_path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err((
                "unreadable_input",
                format!("cannot read `{}`: {e}", sig_path.display()),
            ))
        }
    };
    policy
        .check(name, version, hash, bytes, signature.as_deref())
        .map_err(|e| (e.kind, e.message))
}
