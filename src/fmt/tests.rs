//! Formatter tests: tricky inputs, snapshots of the spec example and a messy file,
//! and two properties over every sample pack: formatting is idempotent and changes
//! nothing the checker sees.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::check::check_source;
use crate::ir::{EffectIr, Pack, TemplateIr};

fn fmt(src: &str) -> String {
    match format(src) {
        Ok(out) => out,
        Err(e) => panic!("{e}: {e:?}\n--- source ---\n{src}"),
    }
}

// ---------------------------------------------------------------------------------
// The comparable content of a checked file
// ---------------------------------------------------------------------------------

fn template(t: &TemplateIr) -> Value {
    json!({ "text": t.text, "parts": t.parts })
}

fn names(refs: &[crate::ir::NameRef]) -> Vec<&str> {
    refs.iter().map(|r| r.name.as_ref()).collect()
}

/// Everything the IR holds except spans: what formatting must not change.
pub(crate) fn pack_content(pack: &Pack) -> Value {
    json!({
        "name": pack.name,
        "version": pack.version,
        "library": pack.library,
        "description": pack.description,
        "imports": pack.imports.iter().map(|i| json!([i.name, i.version])).collect::<Vec<_>>(),
        "fields": pack.fields.iter().map(|f| json!({
            "path": f.path, "ty": f.ty.describe(), "optional": f.optional, "doc": f.doc,
        })).collect::<Vec<_>>(),
        "system": pack.system.as_ref().map(template),
        "developer": pack.developer.as_ref().map(template),
        "budget": pack.budget.as_ref().map(|b| json!({
            "total": b.total.map(|t| t.0),
            "tokenizer": b.tokenizer,
            "buckets": b.buckets.iter().map(|k| json!({
                "name": k.name, "share": k.share_ppm, "priority": k.priority,
                "min": k.min.map(|m| m.0), "overflow": k.overflow,
            })).collect::<Vec<_>>(),
        })),
        "tools": pack.tools.iter().map(|t| json!({
            "name": t.name, "description": t.description, "kind": t.kind,
            "risk": t.risk.map(|r| r.0), "approval": t.approval.map(|a| a.0),
            "input": t.input, "doc": t.doc,
        })).collect::<Vec<_>>(),
        "prohibitions": names(&pack.prohibitions),
        "intents": pack.intents.iter().map(|i| json!({
            "name": i.name, "fallback": i.fallback, "description": i.description,
            "safety": i.safety, "tools": names(&i.tools), "task": i.task.as_ref().map(template),
            "budget": i.budget.as_ref().map(|b| b.overrides.iter()
                .map(|(n, s)| json!([n.name, s])).collect::<Vec<_>>()),
            "doc": i.doc,
        })).collect::<Vec<_>>(),
        "redactors": pack.redactors.iter().map(|r| json!([r.name, r.pattern, r.doc])).collect::<Vec<_>>(),
        "policies": pack.policies.iter().map(|p| json!({
            "name": p.name, "priority": p.priority, "advisory": p.advisory, "when": p.when,
            "effects": p.effects.iter().map(|e| match e {
                EffectIr::Refuse(s) => json!({ "refuse": s }),
                EffectIr::Escalate(s) => json!({ "escalate": s }),
                EffectIr::RequireApproval(n) => json!({ "require_approval": names(n) }),
                EffectIr::Deny(n) => json!({ "deny": names(n) }),
                EffectIr::Redact(n) => json!({ "redact": names(n) }),
                EffectIr::Instruct(t) => json!({ "instruct": template(t) }),
            }).collect::<Vec<_>>(),
            "doc": p.doc,
        })).collect::<Vec<_>>(),
        "blocks": pack.blocks.iter().map(|b| json!({
            "name": b.name, "bucket": b.bucket.name, "priority": b.priority,
            "text": template(&b.text), "doc": b.doc,
        })).collect::<Vec<_>>(),
        "definitions": pack.definitions.iter().map(|d| json!([d.kind.as_str(), d.name])).collect::<Vec<_>>(),
        "references": pack.references.iter().map(|r| json!([r.kind.as_str(), r.name])).collect::<Vec<_>>(),
    })
}

/// The checker's view of a file: its diagnostics (code and message) and its content.
fn checked_content(src: &str) -> Value {
    let checked = check_source(src);
    let diagnostics: Vec<Value> = checked
        .diagnostics
        .iter()
        .map(|d| json!([d.code, d.message]))
        .collect();
    let artifact = if checked.has_errors() {
        Value::Null
    } else {
        serde_json::to_value(crate::lower::lower(&checked.pack, Vec::new())).unwrap_or_default()
    };
    json!({ "diagnostics": diagnostics, "pack": pack_content(&checked.pack), "artifact": artifact })
}

/// Formatting `src` is idempotent and preserves the checker's view.
fn assert_properties(name: &str, src: &str) {
    let once = fmt(src);
    let twice = fmt(&once);
    assert_eq!(once, twice, "{name}: formatting is not idempotent");
    assert_eq!(
        checked_content(src),
        checked_content(&once),
        "{name}: formatting changed the pack\n--- formatted ---\n{once}"
    );
}

// ---------------------------------------------------------------------------------
// Every sample pack
// ---------------------------------------------------------------------------------

fn sample_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs: Vec<PathBuf> = ["packs", "tests/fixtures/ok", "tests/data"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    crate::commands::files::collect(&dirs, ".ctxpack").unwrap_or_default()
}

#[test]
fn every_sample_pack_formats_idempotently_and_keeps_its_meaning() {
    let files = sample_files();
    assert!(!files.is_empty(), "no sample packs found");
    let mut formatted = 0;
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap_or_default();
        // Files with syntax errors (error fixtures) are not formatted.
        if format(&src).is_err() {
            let (_, d) = crate::syntax::parse(&src);
            assert!(
                d.iter().any(|d| d.code == "E0001"),
                "{}: format failed",
                file.display()
            );
            continue;
        }
        assert_properties(&file.display().to_string(), &src);
        formatted += 1;
    }
    assert!(formatted >= 2);
}

fn spec_example() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spec_example.ctxpack");
    std::fs::read_to_string(path).unwrap_or_default()
}

fn messy() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fmt/messy.ctxpack");
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn snapshot_spec_example() {
    insta::assert_snapshot!(fmt(&spec_example()));
}

#[test]
fn snapshot_messy() {
    insta::assert_snapshot!(fmt(&messy()));
}

// ---------------------------------------------------------------------------------
// Tricky inputs
// ---------------------------------------------------------------------------------

const HEAD: &str = "pack \"a/b\" version \"1.0.0\"\n\n";

#[test]
fn refuses_syntax_errors() {
    let src = format!("{HEAD}tool t {{ kind }}\n");
    assert!(matches!(format(&src), Err(FormatError::Syntax(d)) if d[0].code == "E0001"));
}

#[test]
fn refuses_json_that_is_not_json() {
    // Reported as E0205 by the checker, but there is no JSON to lay out.
    let src = format!("{HEAD}policy p {{\n  when json {{\"==\": [1, 2,]}}\n  refuse \"x\"\n}}\n");
    assert!(matches!(format(&src), Err(FormatError::Syntax(d)) if d[0].code == "E0205"));
    // Well-formed JSON with an unknown operator is E0205 too, and is formatted.
    let src = format!("{HEAD}policy p {{\n  when json {{\"nope\": [1, 2]}}\n  refuse \"x\"\n}}\n");
    assert!(format(&src).is_ok());
}

#[test]
fn empty_file_and_only_comments() {
    assert_eq!(fmt(""), "");
    assert_eq!(
        fmt("// only\n\n\n// comments   \n"),
        "// only\n\n// comments\n"
    );
}

#[test]
fn normalizes_spacing_and_blank_lines() {
    let src = "pack \"a/b\"   version \"1.0.0\"\ncontext{a.b :int\n\n\n c:list< string >? }\n\n\n\nprohibit x ,y\n";
    assert_eq!(
        fmt(src),
        "pack \"a/b\" version \"1.0.0\"\n\ncontext {\n  a.b: int\n\n  c: list<string>?\n}\n\nprohibit x, y\n"
    );
}

#[test]
fn groups_runs_of_one_line_items() {
    let src = format!("{HEAD}redactor a pattern \"a\"\nredactor b pattern \"b\" // b\n\n\nredactor c pattern \"c\"\nprohibit x\nprohibit y\nintent i {{ budget {{ e 50%   f 10% }} task \"t\" }}\n");
    assert_eq!(
        fmt(&src),
        format!("{HEAD}redactor a pattern \"a\"\nredactor b pattern \"b\" // b\n\nredactor c pattern \"c\"\n\nprohibit x\nprohibit y\n\nintent i {{\n  budget {{ e 50% f 10% }}\n  task \"t\"\n}}\n")
    );
}

#[test]
fn aligns_buckets() {
    let src = format!("{HEAD}budget {{ total 10 bucket a {{ share 10% }} bucket longer {{}} bucket b {{ share 5% priority 1 }} bucket c {{ share 12.5% min 1 }} }}\n");
    assert_eq!(
        fmt(&src),
        format!("{HEAD}budget {{\n  total 10\n  bucket a      {{ share 10% }}\n  bucket longer {{}}\n  bucket b      {{ share 5%    priority 1 }}\n  bucket c      {{ share 12.5% min 1 }}\n}}\n")
    );
}

#[test]
fn expressions_and_json() {
    let src = format!(
        "{HEAD}policy p {{ when not(a.b==1 or c in [ \"x\" , \"y\", ]) and exists ( d ) and json {{\"in\":[ {{\"var\":\"e\"}},[1,2e3] ],\"x\":{{}}}} deny t }}\n"
    );
    assert_eq!(
        fmt(&src),
        format!("{HEAD}policy p {{\n  when not (a.b == 1 or c in [\"x\", \"y\"]) and exists(d) and json {{\"in\": [{{\"var\": \"e\"}}, [1, 2e3]], \"x\": {{}}}}\n  deny t\n}}\n")
    );
}

#[test]
fn triple_strings_keep_their_value() {
    let src = format!(
        "{HEAD}intent i {{\ntask \"\"\"\n\t\t  a\n\t\t    b  \n\n\t\t  \\\"\"\" c\n      \"\"\"\n}}\n"
    );
    let out = fmt(&src);
    assert_eq!(
        out,
        format!(
            "{HEAD}intent i {{\n  task \"\"\"\n    a\n      b  \n\n    \\\"\"\" c\n  \"\"\"\n}}\n"
        )
    );
    assert_properties("triple", &src);
    // Whitespace-only lines that carry extra indentation keep it; CRLF is normalized.
    let crlf = "pack \"a/b\" version \"1.0.0\"\r\nprompt system \"\"\"\r\n    x\r\n      \r\n    y\r\n\"\"\"\r\n";
    assert_properties("crlf", crlf);
    assert!(!fmt(crlf).contains('\r'));
    // An empty triple string, and one that starts on its own line, stay valid.
    assert_properties(
        "empty",
        &format!("{HEAD}prompt system \"\"\"\n\n   \"\"\"\n"),
    );
    assert_properties(
        "inline",
        &format!("{HEAD}prompt system \"\"\"a\n   b\"\"\"\n"),
    );
}

#[test]
fn comments_stay_in_place() {
    let src = format!(
        "{HEAD}// own line\n\n/// doc\ntool t {{ // after brace\n  // before kind\n  kind read // after kind\n\n  // before close\n}} // after close\n// last\n"
    );
    let out = fmt(&src);
    assert_eq!(
        out,
        format!("{HEAD}// own line\n\n/// doc\ntool t {{ // after brace\n  // before kind\n  kind read // after kind\n\n  // before close\n}} // after close\n// last\n")
    );
    assert_properties("comments", &src);
}

#[test]
fn comments_inside_one_line_constructs_break_the_line() {
    let src = format!(
        "{HEAD}budget {{\n  bucket a {{ share 10% // why\n priority 3 }}\n}}\npolicy p {{ when a == 1 // one\n // own\n and b == 2\n refuse \"x\" }}\ncontext {{ a: enum(\"x\", // first\n \"y\", // last\n) }}\n"
    );
    assert_properties("inline comments", &src);
}

#[test]
fn doc_comments_still_attach() {
    let src = format!(
        "{HEAD}/// The tool.\n/// Two lines.\ntool t {{ kind read }}\ncontext {{\n/// The field.\n  a: int }}\n"
    );
    let out = fmt(&src);
    let checked = check_source(&out);
    assert_eq!(
        checked.pack.tools[0].doc.as_deref(),
        Some("The tool.\nTwo lines.")
    );
    assert_eq!(checked.pack.fields[0].doc.as_deref(), Some("The field."));
}

#[test]
fn reindent_edge_cases() {
    use super::printer::reindent;
    assert_eq!(reindent("\"\"\"x\"\"\"", 4), "\"\"\"x\"\"\"");
    assert_eq!(reindent("\"\"\"\n\"\"\"", 2), "\"\"\"\n  \"\"\"");
    assert_eq!(reindent("\"\"\"\n  a\n\"\"\"", 0), "\"\"\"\n  a\n\"\"\"");
    assert_eq!(reindent("not a triple", 0), "not a triple");
}

#[test]
fn never_panics_on_garbage() {
    for src in [
        "\"",
        "{{{{",
        "pack",
        "\u{FEFF}pack \"a/b\" version \"1.0.0\"",
        "é\"\"\"",
        "}}}",
    ] {
        let _ = format(src);
    }
}

// ---------------------------------------------------------------------------------
// Random layouts of the spec example
// ---------------------------------------------------------------------------------

/// The spec example without comments, as tokens to be laid out at random.
fn spec_tokens() -> Vec<String> {
    let src = spec_example();
    lexer::lex(&src)
        .tokens
        .iter()
        .map(|t| t.text.to_owned())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn any_layout_formats_to_a_fixed_point(seps in prop::collection::vec(
        prop::sample::select(vec![" ", "  ", "\n", " \n   ", "\t", "\n\n", "\r\n"]), 400)) {
        let toks = spec_tokens();
        let mut src = String::new();
        for (i, t) in toks.iter().enumerate() {
            src.push_str(t);
            src.push_str(seps[i % seps.len()]);
        }
        assert_properties("random layout", &src);
    }
}
