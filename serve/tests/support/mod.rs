//! What the service's test files share: the repository's paths and the basic compile
//! body.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// `path` under the repository's root.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// A compile of the conformance case `basic_supervised_refund` against the shop pack.
pub fn basic_body() -> Value {
    let case: Value = serde_json::from_slice(
        &std::fs::read(repo("tests/conformance/basic_supervised_refund/case.json")).unwrap(),
    )
    .unwrap();
    json!({"pack": "conformance/shop@1.0.0", "run": case["run"], "request": case["request"]})
}
