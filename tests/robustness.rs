//! Robustness: thousands of random mutations of real packs (byte flips, truncations,
//! deleted and duplicated lines, inserted keywords and punctuation) never panic the
//! front end, and every result is either clean or carries diagnostics whose spans lie
//! inside the text.

use std::path::Path;

use ctxpack::check::check_source;
use proptest::prelude::*;

fn corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = Vec::new();
    for dir in [
        "tests/data",
        "packs",
        "tests/fixtures/ok",
        "tests/fixtures/err",
    ] {
        collect(&root.join(dir), &mut texts);
    }
    texts.sort();
    assert!(!texts.is_empty());
    texts
}

fn collect(dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "ctxpack") {
            if let Ok(t) = std::fs::read_to_string(&p) {
                out.push(t);
            }
        }
    }
}

const INSERTS: &[&str] = &[
    "tool",
    "intent",
    "policy",
    "{",
    "}",
    "\"",
    "\"\"\"",
    "{{",
    "}}",
    "when",
    "and",
    "not",
    "==",
    "in",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    "?",
    "%",
    "budget",
    "bucket",
    "json {",
    "exists(",
    "ctx.",
    "///",
    "//",
    "\\",
    "\u{1F600}",
    "\n",
    "pack \"a/b\" version \"1.0.0\"",
    "0",
    "-",
    "library",
    "fallback",
    "\\u{D800}",
    "99999999999999999999",
];

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    DeleteLine(usize),
    DuplicateLine(usize),
    Insert(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), 0..INSERTS.len()).prop_map(|(i, k)| Mutation::Insert(i, k)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let n = bytes.len().max(1);
    match m {
        Mutation::Flip(i, b) => {
            if !bytes.is_empty() {
                bytes[i % n] = *b;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::DeleteLine(i) | Mutation::DuplicateLine(i) => {
            let mut lines: Vec<&str> = text.split('\n').collect();
            let k = i % lines.len().max(1);
            if matches!(m, Mutation::DeleteLine(_)) {
                lines.remove(k);
            } else {
                let l = lines[k];
                lines.insert(k, l);
            }
            return lines.join("\n");
        }
        Mutation::Insert(i, k) => {
            let at = i % n;
            let ins = INSERTS[*k].as_bytes();
            bytes.splice(at..at, ins.iter().copied());
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_packs_never_panic(pick in any::<usize>(), muts in prop::collection::vec(mutation(), 1..4)) {
        let corpus = corpus();
        let mut text = corpus[pick % corpus.len()].clone();
        for m in &muts {
            text = apply(&text, m);
        }
        let checked = check_source(&text);
        for d in &checked.diagnostics {
            prop_assert!(d.span.start <= d.span.end && d.span.end <= text.len(), "{d:?}");
            prop_assert!(!d.message.is_empty());
        }
        // Rendering never panics either.
        let report = ctxpack::diagnostic::FileReport { path: "m.ctxpack".into(), source: text.clone(), diagnostics: checked.diagnostics };
        let _ = ctxpack::diagnostic::to_human(&report, false);
        let _ = ctxpack::diagnostic::to_json(std::slice::from_ref(&report));
    }
}

#[test]
fn pathological_inputs() {
    for text in [
        "",
        "\u{FEFF}",
        "pack",
        "pack \"",
        "\"\"\"",
        "{{{{{{{{",
        "policy p { when ((((((((((((((((((((((((((((((((((((((((true)))))))))))))))))))))))))))))))))))))))) refuse \"x\" }",
        "pack \"a/b\" version \"1.0.0\"\npolicy p { when not not not not not not not not not not true refuse \"x\" }",
        "pack \"a/b\" version \"1.0.0\"\nblock b in x \"{{ ctx.a | \\\"d\\\" }} \\{{ {{\"",
        "pack \"a/b\" version \"1.0.0\"\nintent i { budget { x 99999999999999999999% } task \"t\" }",
    ] {
        let _ = check_source(text);
    }
    let deep = format!(
        "pack \"a/b\" version \"1.0.0\"\npolicy p {{ when {}true{} refuse \"x\" }}",
        "(".repeat(2000),
        ")".repeat(2000)
    );
    let _ = check_source(&deep);
}

/// The nesting limit is exact: brackets nest [`MAX_NESTING`] deep counting the item's
/// own `{` (so 63 inside a policy's body), `not`s [`MAX_NESTING`] in a row; one more is
/// one E0001. Checked, in the debug build, on a thread with the 8 MiB stack that the
/// command line's main thread and the language server's threads have.
///
/// [`MAX_NESTING`]: ctxpack::syntax::MAX_NESTING
#[test]
fn nesting_up_to_the_limit_is_accepted() {
    fn errors(text: String) -> usize {
        check_source(&text)
            .diagnostics
            .iter()
            .filter(|d| d.code == "E0001")
            .count()
    }
    let run = || {
        let policy = |open: &str, close: &str, n: usize| {
            format!(
                "pack \"a/b\" version \"1.0.0\" library\npolicy p {{ when 1 in {}[1]{} refuse \"x\" }}\n",
                open.repeat(n),
                close.repeat(n)
            )
        };
        let limit = ctxpack::syntax::MAX_NESTING;
        // `[1]` is one level, the item's `{` another.
        for (open, close) in [("(", ")"), ("[", "]")] {
            let n = limit - 2;
            assert_eq!(errors(policy(open, close, n)), 0, "{open:?} x {n}");
            assert_eq!(
                errors(policy(open, close, n + 1)),
                1,
                "{open:?} x {}",
                n + 1
            );
        }
        let nots = |n: usize| {
            format!(
                "pack \"a/b\" version \"1.0.0\" library\npolicy p {{ when {}true refuse \"x\" }}\n",
                "not ".repeat(n)
            )
        };
        assert_eq!(errors(nots(limit)), 0);
        assert_eq!(errors(nots(limit + 1)), 1);
    };
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

/// One mistake is reported once: an item nested too deep, a number out of range or a
/// trailing comment does not bring diagnostics of its own about the rest.
#[test]
fn a_mistake_does_not_cascade() {
    let deep = format!(
        "pack \"a/b\" version \"1.0.0\"\npolicy p {{ when {}true{} refuse \"x\" }}\npolicy q {{ when true }}\n",
        "(".repeat(2000),
        ")".repeat(2000)
    );
    let codes = |text: &str| -> Vec<&'static str> {
        check_source(text)
            .diagnostics
            .iter()
            .map(|d| d.code)
            .collect()
    };
    // The header is there (no E0103 for it) and the next policy is still checked.
    let got = codes(&deep);
    assert!(got.contains(&"E0001") && got.contains(&"E0301"), "{got:?}");
    let checked = check_source(&deep);
    assert!(
        checked
            .diagnostics
            .iter()
            .all(|d| !d.message.contains("pack header")),
        "{:?}",
        checked.diagnostics
    );
    // The whole condition (W0202's span) ends with its last operand, before any
    // trailing whitespace or comment.
    let text = "pack \"a/b\" version \"1.0.0\"\npolicy p {\n  when true or false   // never\n  instruct \"x\"\n}\n";
    let checked = check_source(text);
    let w = checked
        .diagnostics
        .iter()
        .find(|d| d.code == "W0202")
        .expect("W0202");
    assert_eq!(&text[w.span.start..w.span.end], "true or false");
    for condition in [
        "not false",
        "true and false",
        "ctx.a == 1 or true",
        "(true)",
    ] {
        let text = format!("pack \"a/b\" version \"1.0.0\"\npolicy p {{\n  when {condition}\n\n  instruct \"x\"\n}}\n");
        let (file, _) = ctxpack::syntax::parse(&text);
        let when = file
            .items
            .iter()
            .find_map(|it| match &it.kind {
                ctxpack::syntax::ast::ItemKind::Policy(p) => Some(p.when.span),
                _ => None,
            })
            .expect("a policy");
        assert_eq!(&text[when.start..when.end], condition);
    }
}

/// A label far along one line (a generated pack, a whole policy on one line) is shown
/// from a window of that line: miette's layout panics past column 65535. The header
/// still gives the file's line and column, as the machine formats do.
#[test]
fn a_label_far_along_one_line_is_shown_from_a_window() {
    let text = format!(
        "pack \"a/b\" version \"1.0.0\" library\ncontext {{\n  x: string\n}}\npolicy p {{ when {}ctx.y == \"b\" instruct \"z\" }}\n",
        "ctx.x == \"é\" and ".repeat(20_000)
    );
    let checked = check_source(&text);
    let e = checked
        .diagnostics
        .iter()
        .find(|d| d.code == "E0201")
        .expect("E0201");
    let report = ctxpack::diagnostic::FileReport {
        path: "long.ctxpack".into(),
        source: text.clone(),
        diagnostics: checked.diagnostics.clone(),
    };
    let human = ctxpack::diagnostic::to_human(&report, false);
    let column = text[..e.span.start]
        .rsplit('\n')
        .next()
        .map_or(0, |l| l.chars().count())
        + 1;
    assert!(column > 70_000, "{column}");
    assert!(
        human.contains(&format!("[long.ctxpack:5:{column}]")),
        "{human}"
    );
    // The window around the label, cut before it, and no line of the report anywhere
    // near the length of the source line.
    assert!(human.contains(" 5 │ …and ctx.x == \"é\" and "), "{human}");
    assert!(
        human.contains(" and ctx.y == \"b\" instruct \"z\" }\n"),
        "{human}"
    );
    assert!(human.lines().all(|l| l.chars().count() < 300), "{human}");
    assert!(human.contains("no such field"), "{human}");
}
