//! OCI registries end to end, against a real registry on 127.0.0.1 (Debian's
//! `docker-registry`, CNCF distribution): publish, versions, compile, diff and
//! imports through `oci://`; immutable tags; digest references and the lockfile's
//! digests; pulls refused (exit 4, nothing cached) when a blob is altered in the
//! registry's storage or a signature does not satisfy the trust policy.
//!
//! Without `docker-registry` on PATH the tests that need it say so and pass, unless
//! `CTXPACK_REQUIRE_OCI` is set (as CI sets it): then they fail.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A registry process serving a temporary directory; killed when dropped.
struct Registry {
    child: Child,
    port: u16,
    storage: tempfile::TempDir,
}

impl Registry {
    /// Starts one on a free loopback port, or `None` (with a message) when the
    /// binary is absent and `CTXPACK_REQUIRE_OCI` is unset.
    fn start() -> Option<Registry> {
        let Some(binary) = find_binary() else {
            assert!(
                std::env::var_os("CTXPACK_REQUIRE_OCI").is_none(),
                "CTXPACK_REQUIRE_OCI is set and `docker-registry` is not on PATH \
                 (Debian: apt-get install docker-registry)"
            );
            eprintln!(
                "skipped: `docker-registry` is not on PATH (Debian: apt-get install \
                 docker-registry; set CTXPACK_REQUIRE_OCI=1 to make this a failure)"
            );
            return None;
        };
        let storage = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = storage.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                storage.path().join("data").display()
            ),
        )
        .unwrap();
        let child = std::process::Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let registry = Registry {
            child,
            port,
            storage,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    /// `oci://127.0.0.1:PORT/NAMESPACE`.
    fn url(&self, namespace: &str) -> String {
        format!("oci://127.0.0.1:{}/{namespace}", self.port)
    }

    /// The registry's storage of one repository.
    fn repository(&self, path: &str) -> PathBuf {
        self.v2().join("repositories").join(path)
    }

    /// The file holding a blob.
    fn blob(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.v2()
            .join("blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn v2(&self) -> PathBuf {
        self.storage.path().join("data/docker/registry/v2")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("docker-registry"))
        .find(|p| p.is_file())
}

/// `ctxpack` in `dir` with its own cache (`dir/cache`) and no Docker credentials.
fn ctxpack(dir: &Path, args: &[&str]) -> Output {
    Command::cargo_bin("ctxpack")
        .unwrap()
        .current_dir(dir)
        .env_remove("CTXPACK_REGISTRY")
        .env_remove("CTXPACK_TRUST")
        .env_remove("CTXPACK_KEY_PASSWORD")
        .env_remove("CTXPACK_INSECURE_REGISTRIES")
        .env("CTXPACK_CACHE", dir.join("cache"))
        .env("DOCKER_CONFIG", dir.join("no-docker-config"))
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The `--json-errors` kind and the exit code.
fn refusal(o: &Output) -> (String, Option<i32>) {
    let v: Value = serde_json::from_slice(&o.stderr)
        .unwrap_or_else(|_| panic!("{:?}: {}", o.status, String::from_utf8_lossy(&o.stderr)));
    let kind = v["error"]["kind"].as_str().unwrap_or_default().to_owned();
    (kind, o.status.code())
}

/// The files in the cache (none when it was never created).
fn cached(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("cache")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn sha256_of(text: &str) -> String {
    let start = text.find("sha256:").expect("a digest in the output");
    text[start..start + 71].to_owned()
}

/// The support pack built to `dir/s.json`.
fn build_support(d: &Path) -> Vec<u8> {
    let pack = repo("packs/support/support.ctxpack");
    ok(&ctxpack(
        d,
        &["build", pack.to_str().unwrap(), "-o", "s.json"],
    ));
    std::fs::read(d.join("s.json")).unwrap()
}

fn compile(d: &Path, registry: &str, pack: &str) -> Output {
    let run = repo("packs/support/inputs/run.json");
    let request = repo("packs/support/inputs/request.json");
    ctxpack(
        d,
        &[
            "compile",
            "--registry",
            registry,
            "--pack",
            pack,
            "--run",
            run.to_str().unwrap(),
            "--request",
            request.to_str().unwrap(),
            "--json-errors",
        ],
    )
}

const SUPPORT: &str = "acme/support-agent@1.4.0";

#[test]
fn publish_versions_compile_and_diff_through_oci() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = build_support(d);
    let url = reg.url("team/packs");

    let out = ok(&ctxpack(d, &["publish", "--registry", &url, "s.json"]));
    assert!(
        out.starts_with("published acme/support-agent@1.4.0"),
        "{out}"
    );
    let digest = sha256_of(&out);
    // The layer holds exactly the bytes `build` wrote.
    let manifest = std::fs::read(reg.blob(&digest)).unwrap();
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(
        manifest["artifactType"],
        "application/vnd.ctxpack.pack.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    assert_eq!(std::fs::read(reg.blob(layer)).unwrap(), bytes);
    let hash = manifest["annotations"]["vnd.ctxpack.pack.hash"]
        .as_str()
        .unwrap();
    assert!(hash.starts_with("blake3:"));
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.version"],
        "1.4.0"
    );

    // Publishing again is a no-op success.
    let out = ok(&ctxpack(d, &["publish", "--registry", &url, "s.json"]));
    assert!(out.contains("already published"), "{out}");

    let out = ok(&ctxpack(
        d,
        &[
            "versions",
            "--registry",
            &url,
            "acme/support-agent",
            "--format",
            "json",
        ],
    ));
    let index: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        index["versions"],
        serde_json::json!([{"version": "1.4.0", "hash": hash}])
    );

    // compile by version and by digest: the same output as from the file.
    let from_file = ok(&compile(d, &url, "s.json"));
    assert!(cached(d).is_empty());
    assert_eq!(ok(&compile(d, &url, SUPPORT)), from_file);
    assert_eq!(cached(d).len(), 1, "{:?}", cached(d));
    let by_digest = format!("acme/support-agent@{digest}");
    assert_eq!(ok(&compile(d, &url, &by_digest)), from_file);

    // diff between a reference, a digest and a file.
    let out = ok(&ctxpack(
        d,
        &["diff", "--registry", &url, SUPPORT, &by_digest],
    ));
    assert!(out.contains("no differences"), "{out}");
    let out = ok(&ctxpack(
        d,
        &["diff", "--registry", &url, SUPPORT, "s.json"],
    ));
    assert!(out.contains("no differences"), "{out}");

    // What is not there: exit 3.
    let o = ctxpack(
        d,
        &[
            "versions",
            "--registry",
            &url,
            "acme/nothing",
            "--json-errors",
        ],
    );
    assert_eq!(refusal(&o), ("not_found".into(), Some(3)));
    let absent = format!("acme/support-agent@sha256:{}", "0".repeat(64));
    let o = compile(d, &url, &absent);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let o = compile(d, &url, "acme/support-agent@9.9.9");
    assert_eq!(o.status.code(), Some(3), "{o:?}");
}

#[test]
fn a_different_artifact_under_a_published_tag_is_refused() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = reg.url("team");
    library(d, "base.ctxpack", "1.0.0", "a");
    ok(&ctxpack(
        d,
        &["publish", "--registry", &url, "base.ctxpack"],
    ));
    library(d, "base.ctxpack", "1.0.0", "b");
    let o = ctxpack(
        d,
        &[
            "publish",
            "--registry",
            &url,
            "base.ctxpack",
            "--json-errors",
        ],
    );
    assert_eq!(refusal(&o), ("version_conflict".into(), Some(4)));
    // The tag still names the first artifact.
    let o = ctxpack(
        d,
        &[
            "versions",
            "--registry",
            &url,
            "acme/base",
            "--format",
            "json",
        ],
    );
    let first = serde_json::from_str::<Value>(&ok(&o)).unwrap();
    library(d, "base.ctxpack", "1.0.0", "a");
    ok(&ctxpack(d, &["build", "base.ctxpack", "-o", "a.json"]));
    let a: Value = serde_json::from_slice(&std::fs::read(d.join("a.json")).unwrap()).unwrap();
    assert_eq!(first["versions"][0]["hash"], a["hash"]);
}

/// A library pack `acme/base` whose redactor pattern differs by `marker`.
fn library(d: &Path, file: &str, version: &str, marker: &str) {
    std::fs::write(
        d.join(file),
        format!(
            "pack \"acme/base\" version \"{version}\" library\n\nredactor base_email pattern \"[a-z]+@{marker}\"\n"
        ),
    )
    .unwrap();
}

/// `app/app.ctxpack`: the triage pack importing `acme/base@1.0.0`.
fn app(d: &Path) {
    let app = std::fs::read_to_string(repo("packs/triage/triage.ctxpack")).unwrap();
    let header_end = app.find("\n\n").unwrap();
    let app = format!(
        "{}\n\nimport \"acme/base\" version \"1.0.0\"{}",
        &app[..header_end],
        &app[header_end..]
    );
    std::fs::create_dir_all(d.join("app")).unwrap();
    std::fs::write(d.join("app/app.ctxpack"), app).unwrap();
}

/// Copies `from` into `to`, replacing files that are in both.
fn merge_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            merge_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn imports_resolve_from_oci_and_the_lock_pins_their_manifests() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = reg.url("team");
    library(d, "base.ctxpack", "1.0.0", "a");
    let published = ok(&ctxpack(
        d,
        &["publish", "--registry", &url, "base.ctxpack"],
    ));
    let digest = sha256_of(&published);
    app(d);
    ok(&ctxpack(
        d,
        &[
            "build",
            "--registry",
            &url,
            "app/app.ctxpack",
            "-o",
            "app.json",
        ],
    ));
    let lock: Value =
        serde_json::from_slice(&std::fs::read(d.join("app/ctxpack.lock")).unwrap()).unwrap();
    assert_eq!(lock["packages"][0]["name"], "acme/base");
    assert_eq!(lock["packages"][0]["digest"], digest.as_str());
    let built: Value = serde_json::from_slice(&std::fs::read(d.join("app.json")).unwrap()).unwrap();
    assert_eq!(
        built["dependencies"][0]["hash"],
        lock["packages"][0]["hash"]
    );
    assert!(built["dependencies"][0].get("digest").is_none());
    ok(&ctxpack(
        d,
        &[
            "build",
            "--locked",
            "--registry",
            &url,
            "app/app.ctxpack",
            "-o",
            "app.json",
        ],
    ));
    ok(&ctxpack(
        d,
        &["check", "--registry", &url, "app/app.ctxpack"],
    ));
    let cached_before = cached(d);

    // Another artifact pushed to another namespace, then the tag moved to it in
    // the registry's storage (what a push by another client would do).
    let other = reg.url("other");
    library(d, "base.ctxpack", "1.0.0", "b");
    ok(&ctxpack(
        d,
        &["publish", "--registry", &other, "base.ctxpack"],
    ));
    merge_dir(
        &reg.repository("other/acme/base"),
        &reg.repository("team/acme/base"),
    );
    for args in [
        &[
            "build",
            "--locked",
            "--registry",
            &url,
            "app/app.ctxpack",
            "-o",
            "x.json",
        ][..],
        &[
            "build",
            "--registry",
            &url,
            "app/app.ctxpack",
            "-o",
            "x.json",
        ][..],
    ] {
        let o = ctxpack(d, args);
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("E0703") && err.contains("moved"), "{err}");
        assert!(err.contains(&digest), "{err}");
    }
    assert!(!d.join("x.json").exists());
    assert_eq!(
        cached(d),
        cached_before,
        "nothing of the moved tag is cached"
    );
    // The lock is unchanged.
    let again: Value =
        serde_json::from_slice(&std::fs::read(d.join("app/ctxpack.lock")).unwrap()).unwrap();
    assert_eq!(again, lock);
}

#[test]
fn a_blob_altered_in_the_registry_is_refused_and_nothing_is_cached() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = build_support(d);
    let url = reg.url("team");
    ok(&ctxpack(d, &["publish", "--registry", &url, "s.json"]));
    let layer = reg.blob(&sha256_hex(&bytes));
    let mut altered = std::fs::read(&layer).unwrap();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'a' { b'b' } else { b'a' };
    std::fs::write(&layer, altered).unwrap();
    // `compile` reports a corrupt registry copy as an invalid artifact, as it does
    // for a directory registry.
    let o = compile(d, &url, SUPPORT);
    assert_eq!(refusal(&o), ("invalid_artifact".into(), Some(4)), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("is corrupt"));
    let o = ctxpack(
        d,
        &[
            "diff",
            "--registry",
            &url,
            SUPPORT,
            "s.json",
            "--json-errors",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{o:?}");
    assert!(cached(d).is_empty(), "{:?}", cached(d));
}

/// `sha256:<hex>` of `bytes`, by the `sha256sum` tool.
fn sha256_hex(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b");
    std::fs::write(&file, bytes).unwrap();
    let out = std::process::Command::new("sha256sum")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

fn trust(d: &Path, public_key: &str) {
    let text = std::fs::read_to_string(d.join(public_key)).unwrap();
    let key = text.lines().last().unwrap();
    std::fs::write(
        d.join("ctxpack.trust.toml"),
        format!("[scopes.acme]\nkeys = [\"{key}\"]\n"),
    )
    .unwrap();
}

#[test]
fn the_trust_policy_holds_for_oci_loads() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    build_support(d);
    for key in ["k", "other"] {
        ok(&ctxpack(d, &["keygen", "-o", key, "--unencrypted"]));
    }
    trust(d, "k.pub");

    // Unsigned.
    let unsigned = reg.url("unsigned");
    let published = ok(&ctxpack(d, &["publish", "--registry", &unsigned, "s.json"]));
    let unsigned_digest = sha256_of(&published);
    let o = compile(d, &unsigned, SUPPORT);
    assert_eq!(refusal(&o), ("signature_missing".into(), Some(4)));
    assert!(cached(d).is_empty());

    // Signed by a key the policy does not list.
    let unlisted = reg.url("unlisted");
    ok(&ctxpack(
        d,
        &[
            "publish",
            "--registry",
            &unlisted,
            "--sign",
            "other",
            "s.json",
        ],
    ));
    let o = compile(d, &unlisted, SUPPORT);
    assert_eq!(refusal(&o), ("untrusted_key".into(), Some(4)));
    assert!(cached(d).is_empty());

    // A signature of another version: of its bytes, and (replayed) of these bytes
    // but naming the other version.
    let bytes = std::fs::read(d.join("s.json")).unwrap();
    let artifact: Value = serde_json::from_slice(&bytes).unwrap();
    let secret = std::fs::read_to_string(d.join("k")).unwrap();
    let hash = artifact["hash"].as_str().unwrap();
    let replayed =
        ctxpack::signing::sign(&secret, None, "acme/support-agent", "1.5.0", hash, &bytes).unwrap();
    let wrong = reg.url("wrong");
    ok(&ctxpack(d, &["publish", "--registry", &wrong, "s.json"]));
    let registry = ctxpack::registry::Registry::open(&wrong);
    let pack = ctxpack::registry::PackRef::parse(SUPPORT).unwrap();
    registry.store_signature(&pack, &replayed).unwrap();
    let o = compile(d, &wrong, SUPPORT);
    assert_eq!(refusal(&o), ("signature_wrong_subject".into(), Some(4)));
    assert!(cached(d).is_empty());

    // Signed by the listed key: it loads, by version and by digest, and is cached.
    let signed = reg.url("signed");
    let out = ok(&ctxpack(
        d,
        &["publish", "--registry", &signed, "--sign", "k", "s.json"],
    ));
    assert!(out.contains("signed acme/support-agent@1.4.0"), "{out}");
    ok(&compile(d, &signed, SUPPORT));
    let digest = sha256_of(&out);
    ok(&compile(
        d,
        &signed,
        &format!("acme/support-agent@{digest}"),
    ));
    assert_eq!(cached(d).len(), 1);
    // `sign` adds a signature to a published version (named here by its manifest
    // digest): the unsigned one now loads.
    let by_digest = format!("acme/support-agent@{unsigned_digest}");
    ok(&ctxpack(
        d,
        &["sign", "--registry", &unsigned, &by_digest, "--key", "k"],
    ));
    ok(&compile(d, &unsigned, SUPPORT));
}

#[test]
fn malformed_and_unreachable_locations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = ctxpack(
        d,
        &[
            "versions",
            "--registry",
            "oci://bad host/x",
            "acme/x",
            "--json-errors",
        ],
    );
    assert_eq!(refusal(&o), ("invalid_registry_location".into(), Some(4)));
    // A closed loopback port.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("oci://127.0.0.1:{port}/ns");
    let o = ctxpack(
        d,
        &["versions", "--registry", &url, "acme/x", "--json-errors"],
    );
    assert_eq!(refusal(&o), ("registry_unavailable".into(), Some(3)));
    // `--insecure-registry` is a global flag (loopback needs none; it only parses).
    let o = ctxpack(
        d,
        &[
            "--insecure-registry",
            "127.0.0.1",
            "versions",
            "--registry",
            &url,
            "acme/x",
            "--json-errors",
        ],
    );
    assert_eq!(refusal(&o), ("registry_unavailable".into(), Some(3)));
    // A version with build metadata, which no OCI tag can spell, is refused before
    // the registry is asked anything.
    std::fs::write(
        d.join("meta.ctxpack"),
        "pack \"acme/x\" version \"1.0.0+ci.7\" library\n\
         tool t { description \"d\" kind read risk low approval auto }\n",
    )
    .unwrap();
    let o = ctxpack(
        d,
        &[
            "publish",
            "--registry",
            &url,
            "meta.ctxpack",
            "--json-errors",
        ],
    );
    assert_eq!(refusal(&o), ("unpublishable_artifact".into(), Some(4)));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("which an OCI tag cannot spell"),
        "{o:?}"
    );
    // A digest reference into a directory registry.
    let o = compile(d, "reg", &format!("acme/x@sha256:{}", "a".repeat(64)));
    assert_eq!(refusal(&o), ("invalid_pack_reference".into(), Some(4)));
}

#[test]
fn concurrent_pulls_share_one_cache_entry() {
    let Some(reg) = Registry::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bytes = build_support(d);
    let url = reg.url("team");
    ok(&ctxpack(d, &["publish", "--registry", &url, "s.json"]));
    let outputs: Vec<Output> = std::thread::scope(|s| {
        let pulls: Vec<_> = (0..6)
            .map(|_| s.spawn(|| compile(d, &url, SUPPORT)))
            .collect();
        pulls.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let first = ok(&outputs[0]);
    for o in &outputs {
        assert_eq!(ok(o), first);
    }
    // One file, the artifact's bytes; no temporary left behind.
    let files = cached(d);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), bytes);
    assert!(files[0].ends_with(sha256_hex(&bytes).replace(':', "/")));
}
