//! Signed packs end to end: keys, `publish --sign`, `sign`, the trust policy on every
//! load (registry references, artifact files, standard input, imports), each refusal
//! with its kind and exit 4, and interoperability with the `minisign` command-line
//! tool in both directions.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn ctxpack(dir: &Path, args: &[&str]) -> Output {
    Command::cargo_bin("ctxpack")
        .unwrap()
        .current_dir(dir)
        .env_remove("CTXPACK_REGISTRY")
        .env_remove("CTXPACK_TRUST")
        .env_remove("CTXPACK_KEY_PASSWORD")
        .env("NO_COLOR", "1")
        .args(args)
        .output()
        .unwrap()
}

fn minisign(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new("minisign")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the `minisign` tool (Debian package `minisign`; .ci/run installs it)")
}

fn error_kind(o: &Output) -> String {
    let v: Value = serde_json::from_slice(&o.stderr)
        .unwrap_or_else(|_| panic!("{:?}: {}", o.status, String::from_utf8_lossy(&o.stderr)));
    v["error"]["kind"].as_str().unwrap_or_default().to_owned()
}

/// A directory with a key pair `k`, the support pack built to `s.json`, published
/// signed to `reg`, and a trust policy for scope `acme` with the key.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(ctxpack(d, &["keygen", "-o", "k", "--unencrypted"])
        .status
        .success());
    let pack = repo("packs/support/support.ctxpack");
    let o = ctxpack(d, &["build", pack.to_str().unwrap(), "-o", "s.json"]);
    assert!(o.status.success(), "{o:?}");
    let o = ctxpack(
        d,
        &["publish", "--registry", "reg", "--sign", "k", "s.json"],
    );
    assert!(o.status.success(), "{o:?}");
    trust(d, "k.pub");
    dir
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

fn compile(d: &Path, pack: &str) -> Output {
    let run = repo("packs/support/inputs/run.json");
    let request = repo("packs/support/inputs/request.json");
    ctxpack(
        d,
        &[
            "compile",
            "--registry",
            "reg",
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

const PACK: &str = "acme/support-agent@1.4.0";
const SIG: &str = "reg/acme/support-agent/1.4.0.json.minisig";
const STORED: &str = "reg/acme/support-agent/1.4.0.json";

#[test]
fn a_signed_pack_loads_and_every_broken_signature_is_refused() {
    let dir = setup();
    let d = dir.path();
    assert!(compile(d, PACK).status.success());
    let good = std::fs::read_to_string(d.join(SIG)).unwrap();

    // Missing.
    std::fs::remove_file(d.join(SIG)).unwrap();
    let o = compile(d, PACK);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_missing")
    );

    // Altered: one character in the middle of the signature line.
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    let mut chars: Vec<char> = lines[1].chars().collect();
    chars[40] = if chars[40] == 'A' { 'B' } else { 'A' };
    lines[1] = chars.into_iter().collect();
    std::fs::write(d.join(SIG), lines.join("\n") + "\n").unwrap();
    let o = compile(d, PACK);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_invalid")
    );

    // The right bytes, signed for another version (by the minisign tool itself).
    let o = minisign(
        d,
        &[
            "-S",
            "-s",
            "k",
            "-m",
            STORED,
            "-x",
            SIG,
            "-t",
            "ctxpack acme/support-agent@9.9.9 blake3:00",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let o = compile(d, PACK);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_wrong_subject")
    );

    // A key the policy does not list.
    std::fs::write(d.join(SIG), &good).unwrap();
    assert!(ctxpack(d, &["keygen", "-o", "other", "--unencrypted"])
        .status
        .success());
    trust(d, "other.pub");
    let o = compile(d, PACK);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "untrusted_key")
    );

    // Several keys per scope: rotation.
    let a = std::fs::read_to_string(d.join("k.pub")).unwrap();
    let b = std::fs::read_to_string(d.join("other.pub")).unwrap();
    std::fs::write(
        d.join("ctxpack.trust.toml"),
        format!(
            "[scopes.acme]\nkeys = [\"{}\", \"{}\"]\n",
            a.lines().last().unwrap(),
            b.lines().last().unwrap()
        ),
    )
    .unwrap();
    assert!(compile(d, PACK).status.success());

    // A policy that cannot be read stops every load.
    std::fs::write(
        d.join("ctxpack.trust.toml"),
        "[scopes.acme]\nkeys = [\"not a key\"]\n",
    )
    .unwrap();
    let o = compile(d, PACK);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "invalid_trust_policy")
    );

    // Scopes the policy does not name load unsigned.
    std::fs::write(d.join("ctxpack.trust.toml"), "[scopes.other]\nkeys = []\n").unwrap();
    std::fs::remove_file(d.join(SIG)).unwrap();
    assert!(compile(d, PACK).status.success());
}

#[test]
fn the_minisign_tool_and_ctxpack_read_each_others_signatures() {
    let dir = setup();
    let d = dir.path();
    // minisign verifies what ctxpack signed.
    let o = minisign(d, &["-V", "-p", "k.pub", "-m", STORED, "-x", SIG]);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ctxpack acme/support-agent@1.4.0 blake3:"),
        "{out}"
    );
    // ctxpack verifies what minisign signed with a key minisign made.
    let o = minisign(d, &["-G", "-W", "-p", "m.pub", "-s", "m.key"]);
    assert!(o.status.success(), "{o:?}");
    let hash = serde_json::from_slice::<Value>(&std::fs::read(d.join("s.json")).unwrap()).unwrap()
        ["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let comment = format!("ctxpack acme/support-agent@1.4.0 {hash}");
    let o = minisign(
        d,
        &[
            "-S",
            "-s",
            "m.key",
            "-m",
            "s.json",
            "-x",
            "s.json.minisig",
            "-t",
            &comment,
        ],
    );
    assert!(o.status.success(), "{o:?}");
    let o = ctxpack(
        d,
        &[
            "verify",
            "s.json",
            "--signature",
            "s.json.minisig",
            "--public-key",
            "m.pub",
        ],
    );
    assert!(o.status.success(), "{o:?}");
    // A signature of the file made by ctxpack verifies with minisign too.
    let o = ctxpack(d, &["sign", "s.json", "--key", "k"]);
    assert!(o.status.success(), "{o:?}");
    let o = minisign(
        d,
        &["-V", "-p", "k.pub", "-m", "s.json", "-x", "s.json.minisig"],
    );
    assert!(o.status.success(), "{o:?}");
    // `--public-key` alone checks `ARTIFACT.minisig`; another key is named as the
    // key given, not as a trust policy's.
    let o = ctxpack(d, &["verify", "s.json", "--public-key", "k.pub"]);
    assert!(o.status.success(), "{o:?}");
    let o = ctxpack(
        d,
        &["--json-errors", "verify", "s.json", "--public-key", "m.pub"],
    );
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "untrusted_key")
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("not the key given") && !stderr.contains("trust policy"),
        "{stderr}"
    );
}

#[test]
fn artifact_files_and_standard_input_are_held_to_the_policy() {
    let dir = setup();
    let d = dir.path();
    // A file needs FILE.minisig beside it.
    let o = compile(d, "s.json");
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_missing")
    );
    assert!(ctxpack(d, &["sign", "s.json", "--key", "k"])
        .status
        .success());
    assert!(compile(d, "s.json").status.success());
    // verify checks the signature under the policy.
    assert!(ctxpack(d, &["verify", "s.json"]).status.success());
    std::fs::copy(d.join("s.json.minisig"), d.join("kept.minisig")).unwrap();
    std::fs::remove_file(d.join("s.json.minisig")).unwrap();
    let o = ctxpack(d, &["verify", "--json-errors", "s.json"]);
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_missing")
    );
    assert!(
        ctxpack(d, &["verify", "s.json", "--signature", "kept.minisig"])
            .status
            .success()
    );
    // Standard input carries no signature: refused for a covered scope.
    let run = repo("packs/support/inputs/run.json");
    let request = repo("packs/support/inputs/request.json");
    let o = Command::cargo_bin("ctxpack")
        .unwrap()
        .current_dir(d)
        .env_remove("CTXPACK_TRUST")
        .args(["compile", "--pack", "-", "--json-errors", "--run"])
        .arg(&run)
        .arg("--request")
        .arg(&request)
        .write_stdin(std::fs::read(d.join("s.json")).unwrap())
        .output()
        .unwrap();
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "signature_missing")
    );
}

#[test]
fn an_encrypted_key_needs_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Without a password and without --unencrypted: a usage error, nothing written.
    let o = ctxpack(d, &["keygen", "-o", "k"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(!d.join("k").exists());
    let with_password = |args: &[&str], password: &str| {
        Command::cargo_bin("ctxpack")
            .unwrap()
            .current_dir(d)
            .env("CTXPACK_KEY_PASSWORD", password)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(with_password(&["keygen", "-o", "k"], "s3cret")
        .status
        .success());
    // keygen never overwrites.
    assert_eq!(
        with_password(&["keygen", "-o", "k"], "s3cret")
            .status
            .code(),
        Some(1)
    );
    let pack = repo("packs/triage/triage.ctxpack");
    assert!(
        ctxpack(d, &["build", pack.to_str().unwrap(), "-o", "t.json"])
            .status
            .success()
    );
    let o = with_password(&["sign", "t.json", "--key", "k", "--json-errors"], "wrong");
    assert_eq!(
        (o.status.code(), error_kind(&o).as_str()),
        (Some(4), "invalid_key")
    );
    assert!(with_password(&["sign", "t.json", "--key", "k"], "s3cret")
        .status
        .success());
    let o = ctxpack(
        d,
        &[
            "verify",
            "t.json",
            "--signature",
            "t.json.minisig",
            "--public-key",
            "k.pub",
        ],
    );
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn imports_from_the_registry_are_held_to_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(ctxpack(d, &["keygen", "-o", "k", "--unencrypted"])
        .status
        .success());
    std::fs::write(
        d.join("base.ctxpack"),
        "pack \"acme/base\" version \"1.0.0\" library\n\nredactor base_email pattern \"[a-z]+@x\"\n",
    )
    .unwrap();
    let o = ctxpack(d, &["publish", "--registry", "reg", "base.ctxpack"]);
    assert!(o.status.success(), "{o:?}");
    let app = std::fs::read_to_string(repo("packs/triage/triage.ctxpack")).unwrap();
    let header_end = app.find("\n\n").unwrap();
    let app = format!(
        "{}\n\nimport \"acme/base\" version \"1.0.0\"{}",
        &app[..header_end],
        &app[header_end..]
    );
    std::fs::create_dir(d.join("app")).unwrap();
    std::fs::write(d.join("app/app.ctxpack"), app).unwrap();
    trust(d, "k.pub");
    // The unsigned import does not load.
    let o = ctxpack(
        d,
        &[
            "check",
            "--registry",
            "reg",
            "app/app.ctxpack",
            "--format",
            "json",
        ],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("E0702") && out.contains("has no signature"),
        "{out}"
    );
    // Signed, it does.
    assert!(ctxpack(
        d,
        &["sign", "--registry", "reg", "acme/base@1.0.0", "--key", "k"]
    )
    .status
    .success());
    let o = ctxpack(d, &["check", "--registry", "reg", "app/app.ctxpack"]);
    assert!(o.status.success(), "{o:?}");
}

/// `sign` of a file that is not there is an unreadable input (exit 3), not a malformed
/// reference; what reads as a reference is still judged as one (exit 4).
#[test]
fn signing_a_missing_file_is_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (target, code, kind) in [
        ("missing.json", 3, "unreadable_input"),
        ("nothing", 3, "unreadable_input"),
        ("acme/x", 4, "unpinned_pack"),
        ("acme/x@1.0", 4, "invalid_pack_reference"),
    ] {
        let o = ctxpack(d, &["--json-errors", "sign", target, "--key", "k"]);
        assert_eq!(
            (o.status.code(), error_kind(&o).as_str()),
            (Some(code), kind),
            "{target}"
        );
    }
}
