//! `fmt` is idempotent, and what it writes checks to the same diagnostics (codes,
//! severities and messages, in order) and builds to the same artifact bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn signature(text: &str) -> Vec<(String, String)> {
    ctxpack::check::check_source(text)
        .diagnostics
        .iter()
        .map(|d| (d.code.to_owned(), d.message.clone()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(once) = ctxpack::fmt::format(text) else {
        return;
    };
    let twice = ctxpack::fmt::format(&once).expect("formatted text formats");
    assert_eq!(once, twice, "fmt is not idempotent");
    assert_eq!(
        signature(text),
        signature(&once),
        "fmt changed the diagnostics"
    );
    let built = |t: &str| {
        ctxpack::build::build_source("x.ctxpack", t.to_owned())
            .ok()
            .map(|b| b.artifact.canonical_bytes())
    };
    assert_eq!(built(text), built(&once), "fmt changed the artifact");
});
