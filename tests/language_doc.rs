//! The language reference, `docs/language.md`, against the grammar and the code
//! registry: every keyword of the grammar is documented as code, every diagnostic code
//! is in the reference's table, and the complete packs it shows check without errors.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ctxpack::artifact::Artifact;
use ctxpack::imports::{LoadError, PackSource};

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn reference() -> String {
    read("docs/language.md")
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every double-quoted literal of the grammar that is a word (`"pack"`,
/// `"require_approval"`, `"o200k"`, `"_"`): letters, digits and underscores, not
/// starting with a digit. Comments are skipped, escapes inside literals honored.
fn grammar_keywords(grammar: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut chars = grammar.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut literal = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            literal.push(c);
                            if let Some(escaped) = chars.next() {
                                literal.push(escaped);
                            }
                        }
                        '"' => break,
                        c => literal.push(c),
                    }
                }
                let word = !literal.is_empty()
                    && literal.chars().all(is_word_char)
                    && !literal.starts_with(|c: char| c.is_ascii_digit());
                if word {
                    out.insert(literal);
                }
            }
            _ => {}
        }
    }
    out
}

/// The inline code spans of a Markdown text (`` `like this` ``, any number of
/// backticks), outside fenced code blocks.
fn code_spans(markdown: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            prose.push('\n');
            continue;
        }
        if !fenced {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    let mut spans = Vec::new();
    let bytes = prose.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let fence = &prose[i..i + run];
        let start = i + run;
        // The span closes at the next run of exactly as many backticks.
        let mut j = start;
        let mut end = None;
        while let Some(found) = prose[j..].find(fence) {
            let at = j + found;
            let after = prose[at..].bytes().take_while(|b| *b == b'`').count();
            if after == run {
                end = Some(at);
                break;
            }
            j = at + after;
        }
        match end {
            Some(end) => {
                spans.push(prose[start..end].to_owned());
                i = end + run;
            }
            None => i = start,
        }
    }
    spans
}

/// Whether `word` occurs in `text` as a whole word (not inside a longer identifier or
/// number).
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

#[test]
fn grammar_keywords_are_extracted() {
    let keywords = grammar_keywords(&read("grammar/ctxpack.pest"));
    for expected in [
        "pack",
        "library",
        "require_approval",
        "o200k",
        "cl100k",
        "timestamp",
        "exists",
        "advisory",
    ] {
        assert!(keywords.contains(expected), "`{expected}` not extracted");
    }
    assert!(
        keywords.len() > 60,
        "only {} keywords extracted",
        keywords.len()
    );
}

#[test]
fn every_grammar_keyword_is_documented_as_code() {
    let keywords = grammar_keywords(&read("grammar/ctxpack.pest"));
    let spans = code_spans(&reference());
    let missing: Vec<&String> = keywords
        .iter()
        .filter(|k| !spans.iter().any(|span| contains_word(span, k)))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md does not mention these grammar keywords as code (`...`): {missing:?}"
    );
}

#[test]
fn a_removed_keyword_is_noticed() {
    // The check above must fail when the reference stops mentioning a keyword.
    let doc = reference();
    let spans = code_spans(&doc);
    assert!(spans.iter().any(|s| contains_word(s, "require_approval")));
    let without = doc.replace("require_approval", "require-approval");
    let spans = code_spans(&without);
    assert!(!spans.iter().any(|s| contains_word(s, "require_approval")));
    // Whole words only: `approval` inside `require_approval` does not count.
    assert!(!contains_word("require_approval", "approval"));
    assert!(contains_word("approval auto", "approval"));
    assert!(contains_word("\\n", "n"));
    assert!(!contains_word("16_000", "_"));
}

/// The codes in the first column of the table under `## Diagnostic codes`.
fn table_codes(doc: &str) -> Vec<String> {
    let section = doc
        .split("\n## Diagnostic codes")
        .nth(1)
        .expect("docs/language.md has a `## Diagnostic codes` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_code_is_in_the_reference_table() {
    let doc = reference();
    let table = table_codes(&doc);
    let registered: Vec<&str> = ctxpack::codes::CODES.iter().map(|c| c.code).collect();
    let missing: Vec<&&str> = registered
        .iter()
        .filter(|c| !table.iter().any(|t| t == *c))
        .collect();
    assert!(
        missing.is_empty(),
        "codes missing from the table in docs/language.md: {missing:?}"
    );
    let unknown: Vec<&String> = table
        .iter()
        .filter(|t| !registered.contains(&t.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/language.md lists codes that `ctxpack::codes::CODES` does not have: {unknown:?}"
    );
    let unique: BTreeSet<&String> = table.iter().collect();
    assert_eq!(unique.len(), table.len(), "a code is listed twice");
}

/// Artifacts built from the reference's own library examples, for its other examples
/// to import.
struct DocLibraries(BTreeMap<(String, String), Artifact>);

impl PackSource for DocLibraries {
    fn load(&self, name: &str, version: &str) -> Result<Artifact, LoadError> {
        self.0
            .get(&(name.to_owned(), version.to_owned()))
            .cloned()
            .ok_or(LoadError::NotFound {
                available: Vec::new(),
            })
    }
}

/// The ` ```ctxpack ` blocks that are whole files (they declare the `pack` header).
fn complete_packs(doc: &str) -> Vec<String> {
    let mut packs = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match &mut current {
            None if line.trim() == "```ctxpack" => current = Some(String::new()),
            None => {}
            Some(block) if line.trim() == "```" => {
                let header = block
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty() && !l.starts_with("//"));
                if header.is_some_and(|h| h.starts_with("pack ")) {
                    packs.push(std::mem::take(block));
                }
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    packs
}

#[test]
fn complete_example_packs_check_without_errors() {
    let doc = reference();
    let packs = complete_packs(&doc);
    assert!(packs.len() >= 3, "expected several complete example packs");
    // Examples of the header alone illustrate the header, not a whole pack.
    let packs: Vec<&String> = packs
        .iter()
        .filter(|p| {
            p.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//"))
                .count()
                > 1
        })
        .collect();
    let mut libraries = BTreeMap::new();
    for pack in packs.iter().filter(|p| p.contains(" library\n")) {
        let built = ctxpack::build::build_source("docs/language.md", (*pack).clone())
            .unwrap_or_else(|e| panic!("library example does not build: {e:?}\n{pack}"));
        libraries.insert(
            (built.artifact.name.clone(), built.artifact.version.clone()),
            built.artifact,
        );
    }
    let source = DocLibraries(libraries);
    for pack in packs {
        let (checked, _) = ctxpack::check::check_source_with(pack, &source, None);
        let errors: Vec<String> = checked
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}: {}", d.code, d.message))
            .collect();
        assert!(
            errors.is_empty(),
            "an example in docs/language.md has errors: {errors:?}\n{pack}"
        );
    }
}
