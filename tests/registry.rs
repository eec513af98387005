//! The registry: publish, load and versions through the library API and the CLI,
//! including concurrent publishers (threads and real processes).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Barrier};

use common::{artifact, library, sealed, support_v1, support_v1_1};
use ctxpack::artifact::{verify_bytes, ArtifactError};
use ctxpack::registry::{PackName, PackRef, PublishOutcome, Registry, RegistryError};

fn pack_ref(s: &str) -> PackRef {
    PackRef::parse(s).unwrap()
}

fn name(s: &str) -> PackName {
    PackName::parse(s).unwrap()
}

fn versions(registry: &Registry, pack: &str) -> Vec<String> {
    registry
        .versions(&name(pack))
        .unwrap()
        .into_iter()
        .map(|(v, _)| v.to_string())
        .collect()
}

/// Every file in the tree below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Every stored version file verifies and is the artifact it claims to be, and no
/// temporary file is left behind.
fn assert_registry_sound(registry: &Registry) {
    for file in files(registry.root()) {
        assert!(
            !file.ends_with(".tmp"),
            "temporary file left behind: {file}"
        );
        let Some(stem) = file.strip_suffix(".json").filter(|f| !f.ends_with("index")) else {
            continue;
        };
        let (pack, version) = stem.rsplit_once('/').unwrap();
        let loaded = registry
            .load(&pack_ref(&format!("{pack}@{version}")))
            .unwrap();
        assert_eq!(loaded.name, pack);
    }
}

#[test]
fn publish_stores_canonical_bytes_and_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let a = support_v1();
    let p = registry.publish(&a).unwrap();
    assert_eq!(p.outcome, PublishOutcome::Published);
    assert_eq!(p.pack.to_string(), "acme/support@1.0.0");
    assert_eq!(p.path, dir.path().join("acme/support/1.0.0.json"));
    assert_eq!(std::fs::read(&p.path).unwrap(), a.canonical_bytes());
    assert_eq!(Some(p.hash.clone()), sealed(a.clone()).hash);

    let index = std::fs::read_to_string(dir.path().join("acme/support/index.json")).unwrap();
    assert_eq!(
        index,
        format!("{{\"name\":\"acme/support\",\"versions\":[{{\"hash\":\"{}\",\"version\":\"1.0.0\"}}]}}\n", p.hash)
    );
    assert_eq!(
        files(dir.path()),
        [
            "acme/support/.lock",
            "acme/support/1.0.0.json",
            "acme/support/index.json"
        ]
    );

    let loaded = registry.load(&pack_ref("acme/support@1.0.0")).unwrap();
    assert_eq!(loaded, sealed(a));
}

#[test]
fn publishing_the_same_artifact_again_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let a = support_v1();
    assert_eq!(
        registry.publish(&a).unwrap().outcome,
        PublishOutcome::Published
    );
    let path = dir.path().join("acme/support/1.0.0.json");
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();

    // Sealed or not, as a struct or as bytes, pretty or canonical: the same artifact.
    assert_eq!(
        registry.publish(&a).unwrap().outcome,
        PublishOutcome::AlreadyPublished
    );
    assert_eq!(
        registry.publish(&sealed(a.clone())).unwrap().outcome,
        PublishOutcome::AlreadyPublished
    );
    let bytes = a.canonical_bytes();
    assert_eq!(
        registry.publish_bytes(&bytes).unwrap().outcome,
        PublishOutcome::AlreadyPublished
    );
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<serde_json::Value>(&bytes).unwrap())
            .unwrap();
    assert_eq!(
        registry.publish_bytes(&pretty).unwrap().outcome,
        PublishOutcome::AlreadyPublished
    );

    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(versions(&registry, "acme/support"), ["1.0.0"]);
}

#[test]
fn pretty_printed_artifacts_are_stored_canonically() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let a = support_v1();
    let value = serde_json::from_slice::<serde_json::Value>(&a.canonical_bytes()).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    let p = registry.publish_bytes(&pretty).unwrap();
    assert_eq!(p.outcome, PublishOutcome::Published);
    assert_eq!(std::fs::read(p.path).unwrap(), a.canonical_bytes());
}

#[test]
fn published_versions_are_immutable() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let a = support_v1();
    let first = registry.publish(&a).unwrap();

    let mut b = a.clone();
    b.description = Some("Something else entirely.".into());
    let other = sealed(b.clone()).hash.unwrap();
    let err = registry.publish(&b).unwrap_err();
    assert!(
        matches!(err, RegistryError::VersionConflict { .. }),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 4);
    let message = err.to_string();
    assert!(
        message.contains("`acme/support@1.0.0` is already published"),
        "{message}"
    );
    assert!(
        message.contains(&first.hash) && message.contains(&other),
        "{message}"
    );
    assert!(message.contains("immutable"), "{message}");

    assert_eq!(std::fs::read(&first.path).unwrap(), a.canonical_bytes());
    assert_eq!(
        registry.versions(&name("acme/support")).unwrap(),
        [(semver::Version::new(1, 0, 0), first.hash)]
    );
}

/// Semver ignores build metadata when it orders versions: `1.0.0+build` beside
/// `1.0.0` would be one version with two contents, so it is refused like a second
/// artifact under `1.0.0`, either way round; other build metadata on a version not
/// yet published is a version like any other.
#[test]
fn a_version_that_differs_only_in_build_metadata_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    registry.publish(&artifact("acme/meta", "1.0.0")).unwrap();
    registry
        .publish(&artifact("acme/meta", "1.1.0+ci.7"))
        .unwrap();
    for (version, published) in [
        ("1.0.0+evil", "1.0.0"),
        ("1.1.0", "1.1.0+ci.7"),
        ("1.1.0+ci.8", "1.1.0+ci.7"),
    ] {
        let err = registry
            .publish(&artifact("acme/meta", version))
            .unwrap_err();
        assert!(matches!(err, RegistryError::SameVersion { .. }), "{err:?}");
        assert_eq!((err.exit_code(), err.kind()), (4, "version_conflict"));
        let message = err.to_string();
        assert!(
            message.contains(&format!("`acme/meta@{version}` differs from the published `{published}` only in build metadata")),
            "{message}"
        );
    }
    // The same bytes again are still a no-op, and a pre-release is its own version.
    registry
        .publish(&artifact("acme/meta", "1.1.0+ci.7"))
        .unwrap();
    registry
        .publish(&artifact("acme/meta", "1.1.0-rc.1"))
        .unwrap();
    assert_eq!(
        versions(&registry, "acme/meta"),
        ["1.0.0", "1.1.0-rc.1", "1.1.0+ci.7"]
    );
}

/// Changes one byte of content and keeps the recorded hash.
fn tamper(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let tampered = text.replacen("Refund an order", "Refund an ordes", 1);
    assert_ne!(tampered, text);
    tampered.into_bytes()
}

#[test]
fn tampered_artifacts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let bytes = tamper(&support_v1().canonical_bytes());

    assert!(matches!(
        verify_bytes(&bytes),
        Err(ArtifactError::HashMismatch { .. })
    ));
    let err = registry.publish_bytes(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::Artifact(ArtifactError::HashMismatch { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), 4);
    assert!(
        !dir.path().join("acme").exists(),
        "nothing is written for a refused artifact"
    );

    // A struct whose recorded hash does not match its content is refused too, rather
    // than silently resealed.
    let mut a = sealed(support_v1());
    a.tools[0].description.push('!');
    let err = registry.publish(&a).unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::Artifact(ArtifactError::HashMismatch { .. })
        ),
        "{err:?}"
    );

    // Not JSON at all: exit 3, like every unparseable input.
    let err = registry.publish_bytes(b"{not json").unwrap_err();
    assert_eq!(err.exit_code(), 3);
}

/// An artifact resealed after its template parts were edited (the runtime renders
/// the parts; reviews and `diff` read the text) is refused although its hash holds,
/// and so is one with a key given twice (the hash covers one reading of it).
#[test]
fn inconsistent_or_ambiguous_artifacts_are_refused_with_a_valid_hash() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let mut a = support_v1();
    let prompts = a.prompts.as_mut().unwrap();
    let Some(ctxpack::artifact::TemplatePart::Text(first)) = prompts.system.parts.first_mut()
    else {
        panic!("the system prompt starts with text");
    };
    first.insert_str(0, "Approve every refund. ");
    let bytes = a.canonical_bytes();
    let err = verify_bytes(&bytes).unwrap_err();
    assert!(matches!(err, ArtifactError::Inconsistent(_)), "{err:?}");
    assert!(err.to_string().contains("prompt system"), "{err}");
    let err = registry.publish_bytes(&bytes).unwrap_err();
    assert_eq!(err.exit_code(), 4, "{err}");

    let good = support_v1().canonical_bytes();
    assert!(verify_bytes(&good).is_ok());
    // A byte-order mark before the document is no part of it, as for input files.
    let marked = [b"\xEF\xBB\xBF".as_slice(), &good].concat();
    assert_eq!(verify_bytes(&marked).unwrap(), verify_bytes(&good).unwrap());
    let text = String::from_utf8(good).unwrap();
    // A first `name` before the real one: a reader keeping the last sees the hashed
    // pack, one keeping the first another.
    let twice = text.replacen('{', "{\"name\":\"acme/other\",", 1);
    let err = verify_bytes(twice.as_bytes()).unwrap_err();
    assert!(matches!(err, ArtifactError::Json(_)), "{err:?}");
    assert!(err.to_string().contains("given twice"), "{err}");
    assert_eq!(
        registry
            .publish_bytes(twice.as_bytes())
            .unwrap_err()
            .exit_code(),
        3
    );
    assert!(!dir.path().join("acme").exists());
}

#[test]
fn tampering_in_the_registry_is_detected_on_load_and_on_publish() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let p = registry.publish(&support_v1()).unwrap();
    std::fs::write(&p.path, tamper(&std::fs::read(&p.path).unwrap())).unwrap();

    let err = registry.load(&p.pack).unwrap_err();
    assert!(matches!(err, RegistryError::Corrupt { .. }), "{err:?}");
    assert_eq!(err.exit_code(), 4);
    assert!(err.to_string().contains("hash mismatch"), "{err}");
    // Publishing over a corrupt version neither succeeds nor repairs it silently.
    let err = registry.publish(&support_v1()).unwrap_err();
    assert!(matches!(err, RegistryError::Corrupt { .. }), "{err:?}");
}

#[test]
fn a_valid_artifact_swapped_in_under_a_version_is_detected_by_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let p = registry.publish(&support_v1()).unwrap();
    let mut other = support_v1();
    other.description = None;
    std::fs::write(&p.path, other.canonical_bytes()).unwrap();

    let err = registry.load(&p.pack).unwrap_err();
    assert!(matches!(err, RegistryError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("recorded in the index"), "{err}");

    // An artifact filed under another pack's name is refused as well.
    let q = registry.publish(&artifact("acme/other", "1.0.0")).unwrap();
    std::fs::copy(&q.path, dir.path().join("acme/support/2.0.0.json")).unwrap();
    let err = registry.load(&pack_ref("acme/support@2.0.0")).unwrap_err();
    assert!(
        err.to_string().contains("holds `acme/other@1.0.0`"),
        "{err}"
    );
}

#[test]
fn the_index_is_sorted_by_semver() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    for version in ["1.10.0", "1.2.0", "1.9.0", "1.2.0-rc.1"] {
        registry.publish(&artifact("acme/sorted", version)).unwrap();
    }
    assert_eq!(
        versions(&registry, "acme/sorted"),
        ["1.2.0-rc.1", "1.2.0", "1.9.0", "1.10.0"]
    );
    let index = registry.read_index(&name("acme/sorted")).unwrap().unwrap();
    let listed: Vec<&str> = index.versions.iter().map(|e| e.version.as_str()).collect();
    assert_eq!(listed, ["1.2.0-rc.1", "1.2.0", "1.9.0", "1.10.0"]);
}

#[test]
fn library_and_application_packs_are_both_publishable() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let lib = registry
        .publish(&library("acme/base-safety", "2.1.0"))
        .unwrap();
    assert_eq!(lib.outcome, PublishOutcome::Published);
    assert!(registry.load(&lib.pack).unwrap().library);
    assert_eq!(
        registry.publish(&support_v1_1()).unwrap().outcome,
        PublishOutcome::Published
    );
}

#[test]
fn artifacts_that_cannot_be_filed_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    for (name, version) in [
        ("acme", "1.0.0"),
        ("../escape", "1.0.0"),
        ("acme/x", "1.0"),
        ("acme/x", "v1.0.0"),
    ] {
        let err = registry.publish(&artifact(name, version)).unwrap_err();
        // Refused as every reader refuses it, or as no file name can hold it.
        assert!(
            matches!(
                err,
                RegistryError::Artifact(_) | RegistryError::Unpublishable(_)
            ),
            "{name}@{version}: {err:?}"
        );
        assert_eq!(err.exit_code(), 4);
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}

#[test]
fn missing_packs_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let err = registry.versions(&name("acme/none")).unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err:?}");
    assert_eq!(err.exit_code(), 3);
    registry.publish(&artifact("acme/some", "1.0.0")).unwrap();
    let err = registry.load(&pack_ref("acme/some@2.0.0")).unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("`acme/some@2.0.0` is not in the registry"),
        "{err}"
    );
}

/// Version files without an index (a registry assembled by hand) are listed from the
/// files, as they can be loaded; one that does not verify is reported, not skipped.
#[test]
fn versions_without_an_index_are_read_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    std::fs::create_dir_all(dir.path().join("acme/hand")).unwrap();
    for version in ["1.10.0", "1.2.0"] {
        std::fs::write(
            dir.path().join(format!("acme/hand/{version}.json")),
            artifact("acme/hand", version).canonical_bytes(),
        )
        .unwrap();
    }
    assert_eq!(versions(&registry, "acme/hand"), ["1.2.0", "1.10.0"]);
    let listed = registry.versions(&name("acme/hand")).unwrap();
    assert_eq!(
        listed[0].1,
        artifact("acme/hand", "1.2.0").seal().1,
        "{listed:?}"
    );
    let o = ctxpack()
        .args(["versions", "acme/hand", "--registry"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("1.10.0"), "{}", text(&o.stdout));
    // A file edited in place: refused, as a load refuses it.
    let edited = String::from_utf8(artifact("acme/hand", "1.2.0").canonical_bytes())
        .unwrap()
        .replace("Fetch an order.", "Fetch any order.");
    std::fs::write(dir.path().join("acme/hand/1.2.0.json"), edited).unwrap();
    assert!(registry.versions(&name("acme/hand")).is_err());
    // No files at all: not found.
    assert!(matches!(
        registry.versions(&name("acme/none")),
        Err(RegistryError::NotFound { .. })
    ));
}

/// An index edited by hand is listed in semver order whatever its own order, and one
/// that lists a version twice, a malformed hash or a version without its file is a
/// corrupt registry (exit 4), not a list of what `compile` cannot load.
#[test]
fn versions_hold_the_index_to_what_publish_writes() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    for version in ["0.0.1", "1.10.0", "1.2.0"] {
        registry.publish(&artifact("acme/idx", version)).unwrap();
    }
    let index_path = dir.path().join("acme/idx/index.json");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index_path).unwrap()).unwrap();
    let with = |edit: &dyn Fn(&mut Vec<serde_json::Value>)| {
        let mut index = index.clone();
        let list = index["versions"].as_array_mut().unwrap();
        edit(list);
        std::fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
        registry.versions(&name("acme/idx"))
    };
    let reversed = with(&|l| l.reverse()).unwrap();
    let order: Vec<String> = reversed.iter().map(|(v, _)| v.to_string()).collect();
    assert_eq!(order, ["0.0.1", "1.2.0", "1.10.0"]);
    for (edit, says) in [
        (
            &(|l: &mut Vec<serde_json::Value>| l.push(l[0].clone()))
                as &dyn Fn(&mut Vec<serde_json::Value>),
            "twice",
        ),
        (
            &|l: &mut Vec<serde_json::Value>| l[0]["hash"] = "blake3:00".into(),
            "malformed hash",
        ),
        (
            &|l: &mut Vec<serde_json::Value>| {
                let mut extra = l[0].clone();
                extra["version"] = "9.9.9".into();
                l.push(extra);
            },
            "is missing",
        ),
    ] {
        let err = with(edit).unwrap_err();
        assert_eq!(err.exit_code(), 4, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[test]
fn the_index_heals_on_the_next_publish() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    registry.publish(&artifact("acme/heal", "1.0.0")).unwrap();
    // As if a publisher crashed between writing its version and the index.
    std::fs::write(
        dir.path().join("acme/heal/1.1.0.json"),
        artifact("acme/heal", "1.1.0").canonical_bytes(),
    )
    .unwrap();
    assert_eq!(versions(&registry, "acme/heal"), ["1.0.0"]);
    let p = registry.publish(&artifact("acme/heal", "1.1.0")).unwrap();
    assert_eq!(p.outcome, PublishOutcome::AlreadyPublished);
    assert_eq!(versions(&registry, "acme/heal"), ["1.0.0", "1.1.0"]);
}

#[test]
fn concurrent_threads_lose_no_version() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::open(dir.path());
    let barrier = Arc::new(Barrier::new(12));
    let handles: Vec<_> = (0..12)
        .map(|i| {
            let (registry, barrier) = (registry.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                // Eight distinct versions, and four more publishers of 1.0.0 racing
                // the first.
                let version = if i < 8 {
                    format!("1.{i}.0")
                } else {
                    "1.0.0".to_owned()
                };
                let a = artifact("acme/threads", &version);
                barrier.wait();
                registry.publish(&a).map(|p| p.outcome)
            })
        })
        .collect();
    let outcomes: Vec<PublishOutcome> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    let published = outcomes
        .iter()
        .filter(|o| **o == PublishOutcome::Published)
        .count();
    assert_eq!(published, 8, "{outcomes:?}");
    assert_eq!(
        versions(&registry, "acme/threads"),
        (0..8).map(|i| format!("1.{i}.0")).collect::<Vec<_>>()
    );
    assert_registry_sound(&registry);
}

// ---------------------------------------------------------------------------------
// The CLI
// ---------------------------------------------------------------------------------

fn ctxpack() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ctxpack"));
    cmd.env_remove("CTXPACK_REGISTRY").env("NO_COLOR", "1");
    cmd
}

fn write_artifact(dir: &Path, file: &str, a: &ctxpack::artifact::Artifact) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, a.canonical_bytes()).unwrap();
    path
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Starts every command at once, then waits for them all.
fn run_all(commands: Vec<Command>) -> Vec<Output> {
    let children: Vec<_> = commands
        .into_iter()
        .map(|mut c| {
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

/// `verify` holds an artifact to what every other reader does (they all load through
/// the same check): a sealed artifact whose name or version `build` would never write
/// is refused, exit 4.
#[test]
fn verify_refuses_names_and_versions_build_never_writes() {
    let dir = tempfile::tempdir().unwrap();
    let good = write_artifact(dir.path(), "good.json", &artifact("acme/x", "1.0.0"));
    let o = ctxpack().arg("verify").arg(&good).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for (name, version, says) in [
        ("acme/x", "1.4", "version `1.4` is not a semantic version"),
        ("acme/../x", "1.0.0", "malformed pack name `acme/../x`"),
        ("acme", "1.0.0", "malformed pack name `acme`"),
    ] {
        let path = write_artifact(dir.path(), "bad.json", &artifact(name, version));
        let o = ctxpack()
            .args(["verify", "--json-errors"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{name}@{version}");
        let error: serde_json::Value = serde_json::from_slice(&o.stderr).unwrap();
        assert_eq!(error["error"]["kind"], "invalid_artifact");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
}

#[test]
fn concurrent_processes_lose_no_version() {
    let work = tempfile::tempdir().unwrap();
    let reg = work.path().join("registry");
    let mut commands = Vec::new();
    // Six versions, and three more processes publishing identical bytes for 1.0.0.
    for i in 0..9 {
        let version = if i < 6 {
            format!("1.{i}.0")
        } else {
            "1.0.0".to_owned()
        };
        let file = write_artifact(
            work.path(),
            &format!("a{i}.json"),
            &artifact("acme/procs", &version),
        );
        let mut cmd = ctxpack();
        cmd.arg("publish").arg(&file).arg("--registry").arg(&reg);
        commands.push(cmd);
    }
    let outputs = run_all(commands);
    for o in &outputs {
        assert_eq!(
            o.status.code(),
            Some(0),
            "stdout: {}\nstderr: {}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    let stdout: String = outputs.iter().map(|o| text(&o.stdout)).collect();
    assert_eq!(
        stdout.matches("published acme/procs@").count(),
        6,
        "{stdout}"
    );
    assert_eq!(
        stdout
            .matches("is already published with the same hash")
            .count(),
        3,
        "{stdout}"
    );

    let registry = Registry::open(&reg);
    assert_eq!(
        versions(&registry, "acme/procs"),
        (0..6).map(|i| format!("1.{i}.0")).collect::<Vec<_>>()
    );
    assert_registry_sound(&registry);
}

#[test]
fn concurrent_processes_with_different_bytes_for_one_version_one_wins() {
    let work = tempfile::tempdir().unwrap();
    let reg = work.path().join("registry");
    let a = artifact("acme/race", "1.0.0");
    let mut b = a.clone();
    b.description = Some("The other one.".into());
    let files = [
        write_artifact(work.path(), "a.json", &a),
        write_artifact(work.path(), "b.json", &b),
    ];
    let commands = files
        .iter()
        .map(|file| {
            let mut cmd = ctxpack();
            cmd.arg("publish").arg(file).arg("--registry").arg(&reg);
            cmd
        })
        .collect();
    let outputs = run_all(commands);
    let codes: Vec<Option<i32>> = outputs.iter().map(|o| o.status.code()).collect();
    let winner = match codes.as_slice() {
        [Some(0), Some(4)] => 0,
        [Some(4), Some(0)] => 1,
        _ => panic!("expected one success and one refusal, got {codes:?}"),
    };
    let loser = &outputs[1 - winner];
    assert!(
        text(&loser.stderr).contains("published versions are immutable"),
        "{}",
        text(&loser.stderr)
    );
    let stored = std::fs::read(reg.join("acme/race/1.0.0.json")).unwrap();
    assert_eq!(stored, std::fs::read(&files[winner]).unwrap());
    assert_registry_sound(&Registry::open(&reg));
}

#[test]
fn publish_cli_exit_codes() {
    let work = tempfile::tempdir().unwrap();
    let reg = work.path().join("registry");
    let publish = |file: &Path| {
        let out = ctxpack()
            .arg("publish")
            .arg(file)
            .arg("--registry")
            .arg(&reg)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let tampered = work.path().join("tampered.json");
    std::fs::write(&tampered, tamper(&support_v1().canonical_bytes())).unwrap();
    let (code, _, stderr) = publish(&tampered);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("hash mismatch"), "{stderr}");

    let (code, _, stderr) = publish(&work.path().join("missing.json"));
    assert_eq!(code, Some(3), "{stderr}");

    let garbage = work.path().join("garbage.json");
    std::fs::write(&garbage, "{").unwrap();
    assert_eq!(publish(&garbage).0, Some(3));

    let good = write_artifact(work.path(), "v1.json", &support_v1());
    let (code, stdout, _) = publish(&good);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("published acme/support@1.0.0 (blake3:"),
        "{stdout}"
    );
    let (code, stdout, _) = publish(&good);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("acme/support@1.0.0 is already published with the same hash"),
        "{stdout}"
    );
}

#[test]
fn the_registry_comes_from_the_flag_the_environment_or_the_project() {
    let work = tempfile::tempdir().unwrap();
    let file = write_artifact(work.path(), "v1.json", &artifact("acme/where", "1.0.0"));

    let status = ctxpack()
        .arg("publish")
        .arg(&file)
        .current_dir(work.path())
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(0));
    assert!(work
        .path()
        .join(".ctxpack/registry/acme/where/1.0.0.json")
        .is_file());

    let status = ctxpack()
        .arg("publish")
        .arg(&file)
        .env("CTXPACK_REGISTRY", work.path().join("env"))
        .current_dir(work.path())
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(0));
    assert!(work.path().join("env/acme/where/1.0.0.json").is_file());

    let status = ctxpack()
        .arg("publish")
        .arg(&file)
        .arg("--registry")
        .arg(work.path().join("flag"))
        .env("CTXPACK_REGISTRY", work.path().join("env2"))
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(0));
    assert!(work.path().join("flag/acme/where/1.0.0.json").is_file());
    assert!(!work.path().join("env2").exists());
}

#[test]
fn versions_cli() {
    let work = tempfile::tempdir().unwrap();
    let registry = Registry::open(work.path());
    let mut hashes = Vec::new();
    for version in ["1.10.0", "1.2.0", "1.9.0"] {
        hashes.push((
            version,
            registry
                .publish(&artifact("acme/listed", version))
                .unwrap()
                .hash,
        ));
    }
    let run = |args: &[&str]| {
        let out = ctxpack()
            .arg("versions")
            .args(args)
            .arg("--registry")
            .arg(work.path())
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };

    let (code, stdout, stderr) = run(&["acme/listed"]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["version", "hash"]
    );
    for (line, version) in lines[1..].iter().zip(["1.2.0", "1.9.0", "1.10.0"]) {
        let hash = &hashes.iter().find(|(v, _)| *v == version).unwrap().1;
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            [version, hash.as_str()]
        );
    }

    let (code, stdout, _) = run(&["acme/listed", "--format", "json"]);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["name"], "acme/listed");
    let listed: Vec<&str> = json["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["1.2.0", "1.9.0", "1.10.0"]);
    assert_eq!(json["versions"][2]["hash"], hashes[0].1.as_str());

    let (code, _, stderr) = run(&["acme/unknown"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("`acme/unknown` is not in the registry"),
        "{stderr}"
    );
    let (code, _, stderr) = run(&["acme/listed@1.2.0"]);
    assert_eq!(code, Some(4), "{stderr}");
    let (code, _, _) = run(&["Not A Name"]);
    assert_eq!(code, Some(4));
}
