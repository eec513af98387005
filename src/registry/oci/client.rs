//! Talking to an OCI registry through `oci-client`: each operation runs on a
//! current-thread runtime of its own (on a thread of its own when the caller is
//! already inside a runtime, as the language server and `ctxpack serve` are).

use std::path::PathBuf;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::format::{
    self, sha256, Layer, Manifest, EMPTY_BLOB, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
};
use super::{OciLocation, Pulled, PACK_MEDIA_TYPE, SIGNATURE_MEDIA_TYPE};
use crate::registry::{PackName, PackRef, PublishOutcome, RegistryError};

/// The largest layer ctxpack pulls: far above any pack, far below what hurts.
const MAX_LAYER: u64 = 64 << 20;
/// At most this many signatures of one version are fetched and tried.
const MAX_SIGNATURES: usize = 16;
const TAGS_PAGE: usize = 1000;

/// Pulls the pack `name` at `pin` (a tag or a manifest digest). With `expected`, a
/// manifest with another digest is refused before its layer is pulled.
pub(crate) fn pull(
    loc: &OciLocation,
    name: &PackName,
    pin: &str,
    expected: Option<&str>,
    signatures: bool,
) -> Result<Pulled, RegistryError> {
    run(loc, async move |r: &Remote<'_>| {
        r.pull(name, pin, expected, signatures).await
    })
}

/// Publishes `bytes` (verified, canonical) as `pack`; returns the outcome and the
/// digest of the manifest the tag names.
pub(crate) fn publish(
    loc: &OciLocation,
    pack: &PackRef,
    bytes: &[u8],
    hash: &str,
) -> Result<(PublishOutcome, String), RegistryError> {
    run(loc, async move |r: &Remote<'_>| {
        r.publish(pack, bytes, hash).await
    })
}

/// The tags of `name`'s repository; `None` when the registry does not know it.
pub(crate) fn tags(
    loc: &OciLocation,
    name: &PackName,
) -> Result<Option<Vec<String>>, RegistryError> {
    run(loc, async move |r: &Remote<'_>| r.tags(name).await)
}

/// The hash annotation of the manifest `tag` names (`None` if it has none).
pub(crate) fn hashes(
    loc: &OciLocation,
    name: &PackName,
    tags: &[String],
) -> Result<Vec<Option<String>>, RegistryError> {
    run(loc, async move |r: &Remote<'_>| {
        let mut out = Vec::with_capacity(tags.len());
        for tag in tags {
            let (bytes, _) = r
                .manifest(&r.reference(name, tag), MANIFEST_MEDIA_TYPE)
                .await?
                .ok_or_else(|| r.not_found(name, tag))?;
            out.push(
                Manifest::parse(&bytes, PACK_MEDIA_TYPE)
                    .ok()
                    .and_then(|m| m.hash),
            );
        }
        Ok(out)
    })
}

/// Stores `signature` as a referrer of the manifest `name` at `pin` (a tag or a
/// digest) names; returns the signature manifest's digest.
pub(crate) fn store_signature(
    loc: &OciLocation,
    name: &PackName,
    pin: &str,
    signature: &str,
) -> Result<String, RegistryError> {
    run(loc, async move |r: &Remote<'_>| {
        r.store_signature(name, pin, signature).await
    })
}

/// Runs `op` against the registry at `loc` on a runtime of its own.
fn run<T: Send>(
    loc: &OciLocation,
    op: impl AsyncFnOnce(&Remote<'_>) -> Result<T, RegistryError> + Send,
) -> Result<T, RegistryError> {
    let go = move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| remote(loc, format!("cannot start the network runtime: {e}")))?;
        rt.block_on(async {
            let remote = Remote::new(loc)?;
            // Keyed as the client keys it (Docker Hub's host is resolved).
            let key = Reference::with_tag(loc.host().to_owned(), "x".into(), "x".into());
            remote
                .client
                .store_auth_if_needed(key.resolve_registry(), &remote.auth)
                .await;
            op(&remote).await
        })
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(go)
                .join()
                .unwrap_or_else(|_| Err(remote(loc, "the registry client failed".into())))
        })
    } else {
        go()
    }
}

/// One connection's worth of state: the client and the credentials for the host.
struct Remote<'a> {
    loc: &'a OciLocation,
    client: Client,
    auth: RegistryAuth,
}

impl<'a> Remote<'a> {
    fn new(loc: &'a OciLocation) -> Result<Remote<'a>, RegistryError> {
        // rustls with `ring`; a provider installed earlier (by this or another call)
        // is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if loc.plain_http() {
            ClientProtocol::HttpsExcept(vec![loc.host().to_owned()])
        } else {
            ClientProtocol::Https
        };
        let config = ClientConfig {
            protocol,
            platform_resolver: None,
            connect_timeout: Some(std::time::Duration::from_secs(30)),
            read_timeout: Some(std::time::Duration::from_secs(120)),
            ..Default::default()
        };
        let client = Client::try_from(config)
            .map_err(|e| remote(loc, format!("cannot set up the client: {}", chain(&e))))?;
        Ok(Remote {
            loc,
            client,
            auth: super::auth::for_host(loc.host()),
        })
    }

    fn reference(&self, name: &PackName, pin: &str) -> Reference {
        let (host, repo) = (self.loc.host().to_owned(), self.loc.repository(name));
        if pin.starts_with("sha256:") {
            Reference::with_digest(host, repo, pin.to_owned())
        } else {
            Reference::with_tag(host, repo, pin.to_owned())
        }
    }

    fn not_found(&self, name: &PackName, pin: &str) -> RegistryError {
        RegistryError::NotFound {
            what: format!("{name}@{pin}"),
            registry: PathBuf::from(self.loc.to_string()),
        }
    }

    fn corrupt(&self, name: &PackName, pin: &str, reason: String) -> RegistryError {
        RegistryError::Corrupt {
            path: PathBuf::from(self.loc.describe(name, pin)),
            reason,
        }
    }

    /// A manifest's bytes and digest, `None` when the registry does not have it. The
    /// digest is computed from the bytes, and must be the one asked for.
    async fn manifest(
        &self,
        reference: &Reference,
        media_type: &str,
    ) -> Result<Option<(Vec<u8>, String)>, RegistryError> {
        match self
            .client
            .pull_manifest_raw(reference, &self.auth, &[media_type])
            .await
        {
            Ok((bytes, _)) => {
                let digest = sha256(&bytes);
                if reference.digest().is_some_and(|d| d != digest) {
                    return Err(RegistryError::Corrupt {
                        path: PathBuf::from(reference.whole()),
                        reason: format!(
                            "the registry served a manifest whose digest is `{digest}`"
                        ),
                    });
                }
                Ok(Some((bytes.to_vec(), digest)))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// A blob's bytes, checked against the descriptor's digest and size.
    async fn blob(&self, reference: &Reference, layer: &Layer) -> Result<Vec<u8>, String> {
        if layer.size > MAX_LAYER {
            return Err(format!(
                "its layer is {} bytes, more than a pack can be",
                layer.size
            ));
        }
        let mut out = Vec::new();
        self.client
            .pull_blob(reference, layer.digest.as_str(), &mut out)
            .await
            .map_err(|e| format!("blob `{}`: {}", layer.digest, chain(&e)))?;
        let digest = sha256(&out);
        if digest != layer.digest || out.len() as u64 != layer.size {
            return Err(format!(
                "the registry served {} bytes with digest `{digest}` for blob `{}` ({} bytes)",
                out.len(),
                layer.digest,
                layer.size
            ));
        }
        Ok(out)
    }

    async fn push_blob(&self, reference: &Reference, bytes: &[u8]) -> Result<(), RegistryError> {
        let digest = sha256(bytes);
        if self
            .client
            .blob_exists(reference, &digest)
            .await
            .unwrap_or(false)
        {
            return Ok(());
        }
        self.client
            .push_blob(reference, bytes.to_vec(), &digest)
            .await
            .map(|_| ())
            .map_err(|e| self.failed(&e))
    }

    async fn push_manifest(
        &self,
        reference: &Reference,
        bytes: Vec<u8>,
        media_type: &'static str,
    ) -> Result<(), RegistryError> {
        let content_type = http::HeaderValue::from_static(media_type);
        self.client
            .push_manifest_raw(reference, bytes, content_type)
            .await
            .map(|_| ())
            .map_err(|e| self.failed(&e))
    }

    fn failed(&self, e: &OciDistributionError) -> RegistryError {
        let mut message = chain(e);
        if matches!(
            e,
            OciDistributionError::UnauthorizedError { .. }
                | OciDistributionError::AuthenticationFailure(_)
        ) {
            message.push_str(" (credentials are read from ~/.docker/config.json: `docker login` to the registry)");
        }
        remote(self.loc, message)
    }
}

/// The registry work itself, in the order a load and a publish do it.
impl Remote<'_> {
    async fn pull(
        &self,
        name: &PackName,
        pin: &str,
        expected: Option<&str>,
        with_signatures: bool,
    ) -> Result<Pulled, RegistryError> {
        let reference = self.reference(name, pin);
        let (manifest, digest) = self
            .manifest(&reference, MANIFEST_MEDIA_TYPE)
            .await?
            .ok_or_else(|| self.not_found(name, pin))?;
        if let Some(expected) = expected.filter(|e| *e != digest) {
            return Err(RegistryError::TagMoved {
                pack: format!("{name}@{pin}"),
                locked: expected.to_owned(),
                found: digest,
            });
        }
        let m = Manifest::parse(&manifest, PACK_MEDIA_TYPE)
            .map_err(|reason| self.corrupt(name, pin, reason))?;
        let cached = super::cache::read(&m.layer.digest);
        let is_cached = cached.is_some();
        let bytes = match cached {
            Some(bytes) => bytes,
            None => self
                .blob(&reference, &m.layer)
                .await
                .map_err(|reason| self.corrupt(name, pin, reason))?,
        };
        let signatures = if with_signatures {
            self.signatures(name, &digest).await?
        } else {
            Vec::new()
        };
        Ok(Pulled {
            bytes,
            manifest_digest: digest,
            layer_digest: m.layer.digest,
            hash: m.hash,
            cached: is_cached,
            signatures,
        })
    }

    /// The signatures among the referrers of the manifest `subject`, by the
    /// referrers API or, where the registry has none, the referrers tag schema.
    async fn signatures(
        &self,
        name: &PackName,
        subject: &str,
    ) -> Result<Vec<String>, RegistryError> {
        let index = self
            .client
            .pull_referrers(&self.reference(name, subject), Some(SIGNATURE_MEDIA_TYPE))
            .await
            .map_err(|e| self.failed(&e))?;
        let mut digests: Vec<String> = index.manifests.into_iter().map(|m| m.digest).collect();
        digests.sort();
        digests.dedup();
        let mut out = Vec::new();
        for digest in digests.iter().take(MAX_SIGNATURES) {
            let reference = self.reference(name, digest);
            let Some((bytes, _)) = self.manifest(&reference, MANIFEST_MEDIA_TYPE).await? else {
                continue;
            };
            let Ok(m) = Manifest::parse(&bytes, SIGNATURE_MEDIA_TYPE) else {
                continue;
            };
            // A signature that cannot be fetched or read is one fewer to try; the
            // policy refuses the load if none is left that satisfies it.
            if let Ok(text) = self.blob(&reference, &m.layer).await.map(String::from_utf8) {
                out.extend(text.ok());
            }
        }
        Ok(out)
    }

    async fn publish(
        &self,
        pack: &PackRef,
        bytes: &[u8],
        hash: &str,
    ) -> Result<(PublishOutcome, String), RegistryError> {
        let (name, tag) = (&pack.name, pack.version.to_string());
        let reference = self.reference(name, &tag);
        if let Some(existing) = self.manifest(&reference, MANIFEST_MEDIA_TYPE).await? {
            return compare(pack, existing, bytes, hash);
        }
        let manifest = format::pack_manifest(&name.to_string(), &tag, hash, bytes);
        let digest = sha256(&manifest);
        self.push_blob(&reference, bytes).await?;
        self.push_blob(&reference, EMPTY_BLOB).await?;
        self.push_manifest(&reference, manifest, MANIFEST_MEDIA_TYPE)
            .await?;
        // OCI has no "create the tag if absent": read it back, so that of two
        // publishers of different artifacts the one whose push the tag does not name
        // learns it lost.
        match self.manifest(&reference, MANIFEST_MEDIA_TYPE).await? {
            Some((_, found)) if found == digest => Ok((PublishOutcome::Published, digest)),
            Some(existing) => compare(pack, existing, bytes, hash),
            None => Err(remote(
                self.loc,
                format!("the tag `{tag}` is missing right after it was pushed"),
            )),
        }
    }

    async fn tags(&self, name: &PackName) -> Result<Option<Vec<String>>, RegistryError> {
        let reference = self.reference(name, "latest");
        let mut all: Vec<String> = Vec::new();
        loop {
            let last = all.last().cloned();
            let page = match self
                .client
                .list_tags(&reference, &self.auth, Some(TAGS_PAGE), last.as_deref())
                .await
            {
                Ok(page) => page,
                Err(e) if is_not_found(&e) && all.is_empty() => return Ok(None),
                Err(e) => return Err(self.failed(&e)),
            };
            let n = page.tags.len();
            let progressed = page.tags.last() != last.as_ref();
            all.extend(page.tags);
            if n < TAGS_PAGE || !progressed {
                return Ok(Some(all));
            }
        }
    }

    async fn store_signature(
        &self,
        name: &PackName,
        pin: &str,
        signature: &str,
    ) -> Result<String, RegistryError> {
        let (subject, subject_digest) = self
            .manifest(&self.reference(name, pin), MANIFEST_MEDIA_TYPE)
            .await?
            .ok_or_else(|| self.not_found(name, pin))?;
        let manifest =
            format::signature_manifest(&subject_digest, subject.len(), signature.as_bytes());
        let digest = sha256(&manifest);
        let reference = self.reference(name, &digest);
        self.push_blob(&reference, signature.as_bytes()).await?;
        self.push_blob(&reference, EMPTY_BLOB).await?;
        let entry = format::referrer_descriptor(&manifest);
        self.push_manifest(&reference, manifest, MANIFEST_MEDIA_TYPE)
            .await?;
        // Where the registry has the referrers API it lists the signature now; where
        // it has not, the referrers tag schema's index (tag `sha256-<hex>`) is
        // updated and read back, a few times if another signer raced this one.
        let subject_ref = self.reference(name, &subject_digest);
        let index_ref = self.reference(name, &subject_digest.replace(':', "-"));
        for _ in 0..3 {
            let listed = self
                .client
                .pull_referrers(&subject_ref, Some(SIGNATURE_MEDIA_TYPE))
                .await
                .map_err(|e| self.failed(&e))?;
            if listed.manifests.iter().any(|m| m.digest == digest) {
                return Ok(digest);
            }
            let existing = self.manifest(&index_ref, INDEX_MEDIA_TYPE).await?;
            let updated =
                format::index_with(existing.as_ref().map(|(b, _)| b.as_slice()), entry.clone())
                    .map_err(|reason| self.corrupt(name, &subject_digest, reason))?;
            if let Some(index) = updated {
                self.push_manifest(&index_ref, index, INDEX_MEDIA_TYPE)
                    .await?;
            }
        }
        Err(remote(
            self.loc,
            format!("the signature `{digest}` was pushed, but the registry does not list it among the referrers of `{subject_digest}`"),
        ))
    }
}

/// A publish that found the tag taken: the same bytes are already published, other
/// bytes are a conflict.
fn compare(
    pack: &PackRef,
    (manifest, digest): (Vec<u8>, String),
    bytes: &[u8],
    hash: &str,
) -> Result<(PublishOutcome, String), RegistryError> {
    let existing = Manifest::parse(&manifest, PACK_MEDIA_TYPE).ok();
    if existing
        .as_ref()
        .is_some_and(|m| m.layer.digest == sha256(bytes))
    {
        return Ok((PublishOutcome::AlreadyPublished, digest));
    }
    Err(RegistryError::VersionConflict {
        pack: pack.to_string(),
        existing: existing.and_then(|m| m.hash).unwrap_or(digest),
        new: hash.to_owned(),
    })
}

fn is_not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
            )
        }),
        _ => false,
    }
}

/// An error and its causes, which is where reqwest says what went wrong.
fn chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

fn remote(loc: &OciLocation, message: String) -> RegistryError {
    RegistryError::Remote {
        location: loc.to_string(),
        message,
    }
}
