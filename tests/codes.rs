//! Every code the sources emit is registered (with a page), and every registered
//! language code is emitted somewhere: the registry and the checker cannot drift.

use std::collections::BTreeSet;
use std::path::Path;

fn emitted_codes() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

fn walk(dir: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("codes.rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            for (i, m) in text.match_indices("Diagnostic::new(") {
                let rest = text[i + m.len()..].trim_start();
                if let Some(code) = rest.strip_prefix('"').and_then(|r| r.get(..5)) {
                    out.insert(code.to_owned());
                }
            }
        }
    }
}

#[test]
fn every_emitted_code_is_registered() {
    for code in emitted_codes() {
        let info = ctxpack::codes::lookup(&code)
            .unwrap_or_else(|| panic!("{code} is emitted but not registered"));
        assert!(info.page().contains(&code));
    }
}

#[test]
fn every_language_code_is_emitted() {
    let emitted = emitted_codes();
    for info in ctxpack::codes::CODES {
        if info.code.starts_with('R') {
            continue; // runtime codes live in the compiled envelope
        }
        assert!(
            emitted.contains(info.code),
            "{} is registered but never emitted",
            info.code
        );
    }
}
