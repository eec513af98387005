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

/// The examples of the pages whose code needs a whole pack around them (the fixed
/// text against the total, the analysis limit) report that code once wrapped in one.
#[test]
fn whole_pack_examples_report_their_code() {
    let example = |code: &str| {
        ctxpack::codes::lookup(code)
            .map(|info| info.example)
            .unwrap_or_default()
    };
    let fields: String = (0..20)
        .map(|i| format!("  a{i}: bool\n  b{i}: bool\n"))
        .collect();
    let cases = [
        (
            "E0504",
            format!(
                "pack \"a/b\" version \"1.0.0\"\n{}\nintent main fallback {{ task \"Help.\" }}\n",
                example("E0504")
            ),
        ),
        (
            "W0304",
            format!(
                "pack \"a/b\" version \"1.0.0\"\ncontext {{\n{fields}}}\nprompt system \"x\"\nbudget {{ total 1000 bucket policy {{ share 100% }} }}\nintent main fallback {{ task \"t\" }}\n{}\n",
                example("W0304")
            ),
        ),
    ];
    for (code, pack) in cases {
        let checked = ctxpack::check::check_source(&pack);
        let codes: Vec<&str> = checked.diagnostics.iter().map(|d| d.code).collect();
        assert!(codes.contains(&code), "{code} not in {codes:?}:\n{pack}");
    }
}
