//! Incremental parsing is exact: after any edit, reparsing from the old parse gives
//! the same tree and diagnostics as parsing the new text from scratch.

use std::path::Path;

use proptest::prelude::*;

fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = Vec::new();
    for name in ["support", "coding", "triage"] {
        texts.push(
            std::fs::read_to_string(root.join(format!("packs/{name}/{name}.ctxpack"))).unwrap(),
        );
    }
    let mut fixtures: Vec<_> = std::fs::read_dir(root.join("tests/fixtures/err"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "ctxpack"))
        .collect();
    fixtures.sort();
    for f in fixtures.iter().step_by(4) {
        texts.push(std::fs::read_to_string(f).unwrap());
    }
    texts
}

const SNIPPETS: &[&str] = &[
    "x",
    "",
    "\n",
    " ",
    "}",
    "{",
    "\"",
    "///",
    "// c\n",
    "tool t {\n  kind read\n}\n",
    "policy p {\n  when true\n  instruct \"i\"\n}\n",
    "intent",
    "pack \"a/b\" version \"1.0.0\"\n",
    "when ctx.a == 1",
    "\"\"\"",
    "é",
    "😀",
    "(",
    ")",
    "and",
    "= ",
];

fn snap_to_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, .. ProptestConfig::default() })]

    #[test]
    fn reparse_equals_parse(doc in 0usize..64, at in 0usize..100_000, len in 0usize..40, snippet in 0..SNIPPETS.len(), edits in 1usize..4) {
        let corpus = corpus();
        let mut text = corpus[doc % corpus.len()].clone();
        let (mut file, mut diags) = ctxpack::syntax::parse(&text);
        for k in 0..edits {
            let a = snap_to_boundary(&text, (at * (k + 1)) % (text.len() + 1));
            let b = snap_to_boundary(&text, a + len);
            let mut new = text.clone();
            new.replace_range(a..b, SNIPPETS[(snippet + k) % SNIPPETS.len()]);
            let fresh = ctxpack::syntax::parse(&new);
            if let Some((f, d)) = ctxpack::syntax::reparse(&text, &file, &diags, &new) {
                prop_assert_eq!(&f, &fresh.0, "tree differs after replacing {}..{}", a, b);
                prop_assert_eq!(&d, &fresh.1, "diagnostics differ after replacing {}..{}", a, b);
            }
            text = new;
            (file, diags) = fresh;
        }
    }
}

/// A `"""` left open reads as `""` and leaves its third quote to the next item; a
/// later edit that closes it changes the item before the one it is in, which the
/// reparse takes up again (the case a random edit found).
#[test]
fn closing_an_open_triple_quote_reparses_the_item_it_opened_in() {
    let old =
        "pack \"a/b\" version \"1.0.0\"\n\nblock b in x \"\"\"\n  text\n\"\n\nblock c in x \"y\"\n";
    let (file, diags) = ctxpack::syntax::parse(old);
    let at = old.find("text").unwrap() + 4;
    let mut new = old.to_owned();
    new.insert_str(at, " \"\"\"");
    let fresh = ctxpack::syntax::parse(&new);
    assert_ne!(file, fresh.0, "the edit changes the parse");
    if let Some((f, d)) = ctxpack::syntax::reparse(old, &file, &diags, &new) {
        assert_eq!(f, fresh.0);
        assert_eq!(d, fresh.1);
    }
}

/// Whether a `prohibit` list ends at a trailing comma depends on the word that starts
/// the next line: every one-character edit around it reparses as a whole parse does.
#[test]
fn edits_around_a_trailing_comma_in_prohibit_reparse_like_a_whole_parse() {
    for old in [
        "pack \"a/b\" version \"1.0.0\"\n\ntool t { kind read }\n\nprohibit t, u,\n\nintent main {\n  tools t\n}\n\nprohibit v,\ntool w { kind read }\n",
        "pack \"a/b\" version \"1.0.0\"\n\ntool t { kind read }\n\nprohibit t, u\n\nintent main {\n  tools t\n}\n\nprohibit v, w\ntool w { kind read }\n",
    ] {
        one_character_edits_reparse_like_a_whole_parse(old);
    }
}

fn one_character_edits_reparse_like_a_whole_parse(old: &str) {
    let (file, diags) = ctxpack::syntax::parse(old);
    for at in old.find("prohibit").unwrap()..old.len() {
        if !old.is_char_boundary(at) {
            continue;
        }
        for edit in ["x", " ", ",", "\n", ""] {
            let mut new = old.to_owned();
            if edit.is_empty() {
                if at + 1 > old.len() {
                    continue;
                }
                new.replace_range(at..at + 1, "");
            } else {
                new.insert_str(at, edit);
            }
            let fresh = ctxpack::syntax::parse(&new);
            if let Some((f, d)) = ctxpack::syntax::reparse(old, &file, &diags, &new) {
                assert_eq!((f, d), fresh, "edit {edit:?} at {at}");
            }
        }
    }
}

/// Nesting past the limit within the reparsed items is reported on the item that holds
/// it, and the items around it are parsed as a whole parse would (pest never sees it).
#[test]
fn an_edit_that_nests_too_deep_reparses_like_a_whole_parse() {
    let old = "pack \"a/b\" version \"1.0.0\"\n\npolicy p {\n  when true\n  refuse \"x\"\n}\n\npolicy q {\n  when true\n  refuse \"y\"\n}\n";
    let (file, diags) = ctxpack::syntax::parse(old);
    let at = old.find("when true").unwrap() + 5;
    for depth in [65, 5000] {
        let mut new = old.to_owned();
        new.replace_range(
            at..at + 4,
            &format!("{}true{}", "(".repeat(depth), ")".repeat(depth)),
        );
        let fresh = ctxpack::syntax::parse(&new);
        assert_eq!(
            fresh.1.iter().map(|d| d.code).collect::<Vec<_>>(),
            ["E0001"],
            "{:?}",
            fresh.1
        );
        assert!(fresh.0.header.is_some());
        assert_eq!(fresh.0.items.len(), 2, "both policies are still items");
        if let Some((f, d)) = ctxpack::syntax::reparse(old, &file, &diags, &new) {
            assert_eq!(f, fresh.0);
            assert_eq!(d, fresh.1);
        }
    }
}

/// Most edits inside an item are reparsed, not refused.
#[test]
fn edits_inside_items_are_incremental() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packs/support/support.ctxpack"),
    )
    .unwrap();
    let (file, diags) = ctxpack::syntax::parse(&text);
    let (mut incremental, mut edits) = (0, 0);
    for (i, _) in text.match_indices("description") {
        edits += 1;
        let mut new = text.clone();
        new.insert(i + 13, 'x');
        if ctxpack::syntax::reparse(&text, &file, &diags, &new).is_some() {
            incremental += 1;
        }
    }
    assert!(edits > 10);
    assert_eq!(incremental, edits);
}

/// Everything the IR holds that the editor and the checks read, in order.
fn ir_view(a: &ctxpack::ide::Analysis) -> String {
    let p = &a.checked().pack;
    format!(
        "{:#?}",
        (
            (&p.tools, &p.intents, &p.policies, &p.blocks, &p.redactors),
            (
                &p.prohibitions,
                &p.references,
                &p.definitions,
                &p.duplicates
            ),
            (
                &p.broken,
                &p.fields,
                &p.imports,
                &p.system,
                &p.developer,
                &p.budget
            ),
            a.occurrences(),
        )
    )
}

/// An edit inside one item reuses what the earlier build made of the others (their
/// conditions and input schemas are the earlier build's own, not rebuilt copies);
/// an edit to a declaration rebuilds every body.
#[test]
fn an_edit_reuses_the_bodies_of_the_items_it_keeps() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packs/support/support.ctxpack"),
    )
    .unwrap();
    let before = ctxpack::ide::Analysis::new(text.clone());
    let edit = |at: usize, insert: &str| {
        let mut new = text.clone();
        new.insert_str(at, insert);
        let after = before.edited(new.clone(), &ctxpack::imports::NoSource, None);
        assert_eq!(
            after.diagnostics(),
            ctxpack::ide::Analysis::new(new.clone()).diagnostics()
        );
        assert_eq!(ir_view(&after), ir_view(&ctxpack::ide::Analysis::new(new)));
        after
    };
    let shared = |a: &ctxpack::ide::Analysis| {
        let (old, new) = (&before.checked().pack, &a.checked().pack);
        assert_eq!(old.tools.len(), new.tools.len());
        let tools: Vec<bool> = old
            .tools
            .iter()
            .zip(&new.tools)
            .map(|(x, y)| std::sync::Arc::ptr_eq(&x.input, &y.input))
            .collect();
        let policies = old
            .policies
            .iter()
            .zip(&new.policies)
            .filter(|(x, y)| std::sync::Arc::ptr_eq(&x.when, &y.when))
            .count();
        (tools, policies)
    };
    // Inside the second tool's description.
    let at = text.match_indices("description \"").nth(2).unwrap().0 + 13;
    let (tools, policies) = shared(&edit(at, "Quickly "));
    // The edited tool is built again, and so is the next one: the text the edited
    // one owns holds the next one's doc comment, so the reparse parses it again.
    assert_eq!(tools[..3], [true, false, false]);
    assert!(tools[3..].iter().all(|&s| s));
    assert_eq!(policies, before.checked().pack.policies.len());
    assert!(policies > 0);
    // A new context field changes the declarations every body reads.
    let at = text.find("context {").unwrap() + "context {".len();
    let (tools, policies) = shared(&edit(at, "\n  extra.flag: bool?"));
    assert!(tools.iter().all(|&s| !s));
    assert_eq!(policies, 0);
}

/// The bundled packs and every fixture the policy analysis has something to say
/// about (W0301–W0304, W0405).
fn analysed_corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts: Vec<String> = corpus().into_iter().take(3).collect();
    let mut fixtures: Vec<_> = std::fs::read_dir(root.join("tests/fixtures/err"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "ctxpack")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('7'))
        })
        .collect();
    fixtures.sort();
    for f in fixtures {
        texts.push(std::fs::read_to_string(f).unwrap());
    }
    texts
}

/// Edits that keep a pack well-formed more often than [`SNIPPETS`] do: inside a
/// string, a digit for a digit, a comment line.
fn gentle_edit(text: &str, pick: usize, variant: usize) -> Option<(usize, usize, String)> {
    match variant % 3 {
        0 => {
            let quotes: Vec<usize> = text.match_indices('"').map(|(i, _)| i + 1).collect();
            let at = *quotes.get(pick % quotes.len().max(1))?;
            Some((at, at, "z".to_owned()))
        }
        1 => {
            let digits: Vec<usize> = text
                .char_indices()
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(i, _)| i)
                .collect();
            let at = *digits.get(pick % digits.len().max(1))?;
            Some((at, at + 1, ((pick % 9) + 1).to_string()))
        }
        _ => {
            let lines: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
            let at = *lines.get(pick % lines.len().max(1))?;
            Some((at, at, "// note\n".to_owned()))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// The language server checks each edit from the previous analysis, reusing the
    /// policy analysis when the edit leaves its input as it was: its diagnostics are
    /// always those of a check from scratch.
    #[test]
    fn incremental_check_equals_full_check(doc in 0usize..64, picks in proptest::collection::vec((0usize..100_000, 0usize..6, 0usize..SNIPPETS.len()), 1..6)) {
        let corpus = analysed_corpus();
        let mut text = corpus[doc % corpus.len()].clone();
        let mut analysis = ctxpack::ide::Analysis::new(text.clone());
        for (pick, variant, snippet) in picks {
            let (a, b, insert) = if variant < 5 {
                match gentle_edit(&text, pick, variant) {
                    Some(e) => e,
                    None => continue,
                }
            } else {
                let a = snap_to_boundary(&text, pick % (text.len() + 1));
                (a, a, SNIPPETS[snippet].to_owned())
            };
            let mut new = text.clone();
            new.replace_range(a..b, &insert);
            let edited = analysis.edited(new.clone(), &ctxpack::imports::NoSource, None);
            let fresh = ctxpack::ide::Analysis::new(new.clone());
            prop_assert_eq!(edited.diagnostics(), fresh.diagnostics(), "after replacing {}..{} with {:?}", a, b, insert);
            prop_assert_eq!(ir_view(&edited), ir_view(&fresh), "IR differs after replacing {}..{} with {:?}", a, b, insert);
            if let Some(quick) = analysis.quick_diagnostics(&new) {
                prop_assert_eq!(&quick[..], fresh.diagnostics(), "quick diagnostics differ after replacing {}..{} with {:?}", a, b, insert);
            }
            text = new;
            analysis = edited;
        }
    }
}

/// Typing in a description, a doc comment, a block's text or a task is checked from
/// the one item it changes, and gives what a full check gives; an edit that changes
/// what the whole-pack checks read (a risk, a name) is not.
#[test]
fn quick_diagnostics_follow_the_item_and_equal_a_full_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut quick, mut edits) = (0, 0);
    for name in ["support", "coding", "triage"] {
        let text =
            std::fs::read_to_string(root.join(format!("packs/{name}/{name}.ctxpack"))).unwrap();
        let before = ctxpack::ide::Analysis::new(text.clone());
        let places: Vec<usize> = ["description \"", "/// ", "instruct \"", "task \""]
            .iter()
            .flat_map(|p| {
                text.match_indices(p)
                    .map(|(i, _)| i + p.len())
                    .collect::<Vec<_>>()
            })
            .collect();
        for at in places {
            for insert in ["x", "", " {{ ctx.nope }}"] {
                let mut new = text.clone();
                if insert.is_empty() {
                    // A deletion: the character after the opening.
                    let end = at + new[at..].chars().next().map_or(0, char::len_utf8);
                    new.replace_range(at..end, "");
                } else {
                    new.insert_str(at, insert);
                }
                edits += 1;
                let full = ctxpack::ide::Analysis::new(new.clone());
                let q = before.quick_diagnostics(&new);
                if let Some(diagnostics) = q {
                    quick += 1;
                    assert_eq!(
                        &diagnostics[..],
                        full.diagnostics(),
                        "{name} at {at}: {insert:?}"
                    );
                }
            }
        }
    }
    // Not all: a new error, a pack's description, a context field's or an input
    // field's doc comment, or a fallback intent's description take the full check.
    assert!(
        quick * 2 > edits,
        "{quick} of {edits} edits were checked from their item"
    );
    let text = std::fs::read_to_string(root.join("packs/support/support.ctxpack")).unwrap();
    let before = ctxpack::ide::Analysis::new(text.clone());
    // Every tool's description, every task (but the fallback intent's), every
    // instruction.
    let fields = [
        ("\ntool ", "description \""),
        ("\nintent ", "task \""),
        ("\npolicy ", "instruct \""),
    ];
    for (item, field) in fields {
        for (start, _) in text.match_indices(item) {
            let Some(mut at) = text[start..].find(field).map(|i| start + i + field.len()) else {
                continue;
            };
            if text[start..at].contains(" fallback {") {
                continue;
            }
            if text[at..].starts_with("\"\"") {
                at += 2; // inside a triple-quoted string
            }
            let mut new = text.clone();
            new.insert(at, 'x');
            assert!(
                before.quick_diagnostics(&new).is_some(),
                "{}",
                &text[start..at]
            );
        }
    }
    // A comment between items changes none of them.
    let at = text.find("\ntool ").unwrap() + 1;
    let mut new = text.clone();
    new.insert_str(at, "// a note\n\n");
    let quick = before.quick_diagnostics(&new);
    let full = ctxpack::ide::Analysis::new(new);
    assert_eq!(quick.as_deref(), Some(full.diagnostics()));
    for (find, replace) in [("risk low", "risk high"), ("\ntool ", "\ntool x")] {
        let at = text.find(find).unwrap();
        let mut new = text.clone();
        new.replace_range(at..at + find.len(), replace);
        assert!(before.quick_diagnostics(&new).is_none(), "{replace}");
    }
}

/// A syntax error's "expected" list comes from a second, detailed parse, switched on
/// by a flag pest keeps for the whole process: parses on several threads at once
/// (the language server's, parallel checks) must each name every expected token.
#[test]
fn syntax_errors_read_the_same_from_many_threads() {
    let text = "pack \"a/b\" version \"1.0.0\"\n\npolicy p {\n  when ctx.a == 1 z\n}\n\ntool t {\n  kind read risk\n}\n";
    let (_, alone) = ctxpack::syntax::parse(text);
    assert!(
        alone.iter().any(|d| d.message.contains("or `}`")),
        "{alone:?}"
    );
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..3000 {
                    let (_, diags) = ctxpack::syntax::parse(text);
                    assert_eq!(diags, alone);
                }
            });
        }
    });
}
