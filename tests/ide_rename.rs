//! Renames never break a pack: every renameable symbol of every bundled and fixture
//! pack is renamed, the edits applied, and the diagnostics (codes and lines) stay
//! exactly as they were; a rename the server refuses says why. On the bundled packs,
//! which are clean, every rename of a name the pack owns succeeds.

use std::path::{Path, PathBuf};

use ctxpack::ide::{Analysis, TextEdit};
use ctxpack::ir::SymbolKind;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "ctxpack") {
            out.push(p);
        }
    }
}

fn keys(a: &Analysis) -> Vec<(&'static str, usize)> {
    let mut k: Vec<_> = a
        .diagnostics()
        .iter()
        .map(|d| (d.code, a.line_index().line_of(d.span.start)))
        .collect();
    k.sort();
    k
}

fn apply(text: &str, edits: &[TextEdit]) -> String {
    let mut out = text.to_owned();
    for e in edits.iter().rev() {
        out.replace_range(e.span.start..e.span.end, &e.text);
    }
    out
}

/// Renames each declared symbol of `path`; returns (renamed, refused).
fn rename_all(path: &Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    let a = Analysis::new(text.as_str());
    let before = keys(&a);
    let mut seen = Vec::new();
    let (mut renamed, mut refused) = (0, Vec::new());
    for o in a
        .occurrences()
        .iter()
        .filter(|o| o.is_definition && !o.imported)
    {
        if seen.contains(&(o.kind, o.name.clone())) {
            continue;
        }
        seen.push((o.kind, o.name.clone()));
        let Some(span) = a.prepare_rename(o.span.start) else {
            assert_eq!(
                o.kind,
                SymbolKind::Policy,
                "{}: `{}` not renameable",
                path.display(),
                o.name
            );
            continue;
        };
        assert!(!span.is_empty());
        let new_name = format!("{}_x", o.name);
        match a.rename(o.span.start, &new_name) {
            Ok(edits) => {
                let out = apply(&text, &edits);
                let after = Analysis::new(out.as_str());
                // The one diagnostic a rename may remove: a field that clashed with
                // another's prefix (E0206) no longer does under its new name.
                let mut expected = before.clone();
                if o.kind == SymbolKind::Field {
                    expected.retain(|(code, _)| *code != "E0206");
                }
                let mut got = keys(&after);
                if o.kind == SymbolKind::Field {
                    got.retain(|(code, _)| *code != "E0206");
                }
                assert_eq!(
                    got,
                    expected,
                    "{}: renaming {} `{}` changed the diagnostics",
                    path.display(),
                    o.kind.as_str(),
                    o.name
                );
                // Nothing of the old name is left where it was used.
                let again = after.references(edits[0].span.start, true).len();
                assert_eq!(again, edits.len(), "{}: `{}`", path.display(), o.name);
                renamed += 1;
            }
            Err(why) => {
                assert!(!why.is_empty());
                refused.push(format!("{} `{}`: {why}", o.kind.as_str(), o.name));
            }
        }
    }
    (renamed, refused)
}

#[test]
fn renaming_anything_in_the_bundled_packs_keeps_them_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut packs = Vec::new();
    files(&root.join("packs"), &mut packs);
    let mut total = 0;
    for p in &packs {
        let (renamed, refused) = rename_all(p);
        // Only the runtime's own buckets may be refused (W0502 would appear).
        for r in &refused {
            assert!(
                r.starts_with("bucket") && r.contains("W0502"),
                "{}: {r}",
                p.display()
            );
        }
        total += renamed;
    }
    assert!(total > 80, "only {total} renames");
}

#[test]
fn renaming_anything_in_the_fixtures_keeps_their_diagnostics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut packs = Vec::new();
    files(&root.join("tests/fixtures"), &mut packs);
    packs.sort();
    let mut total = 0;
    for p in &packs {
        total += rename_all(p).0;
    }
    assert!(total > 200, "only {total} renames");
}
