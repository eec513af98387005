//! The artifacts of the bundled packs, snapshotted: a change to lowering shows up as
//! a reviewed diff of real artifacts. Also pins that every bundled pack builds and
//! that building is deterministic.

use std::path::{Path, PathBuf};

use ctxpack::build::{build_file, BuildOptions};

fn packs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("packs");
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        let dir = entry.path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            if f.path().extension().is_some_and(|x| x == "ctxpack") {
                out.push(f.path());
            }
        }
    }
    out.sort();
    assert!(out.len() >= 2, "expected the bundled packs");
    out
}

#[test]
fn bundled_pack_artifacts() {
    for path in packs() {
        let built = build_file(&path, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.summary()));
        assert!(
            built.report.diagnostics.is_empty(),
            "{} has warnings",
            path.display()
        );
        let again = build_file(&path, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.summary()));
        assert_eq!(
            built.artifact.canonical_bytes(),
            again.artifact.canonical_bytes()
        );
        let bytes = built.artifact.canonical_bytes();
        ctxpack::artifact::verify_bytes(&bytes).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        insta::with_settings!({ snapshot_path => "snapshots/artifacts", prepend_module_to_snapshot => false }, {
            insta::assert_json_snapshot!(name, value);
        });
    }
}
