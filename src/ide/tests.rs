use super::*;

const PACK: &str = r#"pack "acme/support" version "1.0.0"

context {
  /// The customer's plan.
  user.tier: enum("free", "pro")
  order.total: float?
}

prompt system """
  Reply in {{ request.locale }} to {{ ctx.user.tier }}.
"""

budget {
  total 16_000
  bucket policy   { share 10% priority 90 }
  bucket evidence { share 45% overflow truncate }
}

/// Looks an order up.
tool lookup_order {
  description "Fetch an order."
  kind read
  risk low
  approval auto
  input {
    order_id: string
  }
}

prohibit lookup_order

intent refund fallback {
  tools lookup_order
  task "Refund {{ ctx.order.total | \"?\" }}."
  budget { evidence 50% }
}

redactor email pattern "[a-z]+@x"

policy vip priority 5 {
  when ctx.user.tier == "pro" and request.intent == "refund"
  deny lookup_order
  redact email
}

block rules in evidence """
  Rules.
"""
"#;

fn at(text: &str, needle: &str, nth: usize) -> usize {
    text.match_indices(needle)
        .nth(nth)
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("`{needle}` #{nth} not found"))
}

#[test]
fn references_cover_every_kind() {
    let a = Analysis::new(PACK);
    // Tool: the definition, intent tools, prohibit and deny.
    let refs = a.references(at(PACK, "lookup_order", 0), true);
    assert_eq!(refs.len(), 4, "{refs:?}");
    assert_eq!(a.references(at(PACK, "lookup_order", 2), false).len(), 3);
    // Field: the definition, the template and the condition.
    assert_eq!(a.references(at(PACK, "user.tier", 0), true).len(), 3);
    // Bucket: definition, intent budget override, block.
    assert_eq!(a.references(at(PACK, "evidence", 0), true).len(), 3);
    // Redactor and intent (the intent is referenced by the string literal).
    assert_eq!(a.references(at(PACK, "email", 0), true).len(), 2);
    assert_eq!(a.references(at(PACK, "\"refund\"", 0), true).len(), 2);
}

#[test]
fn definition_jumps_to_the_declaration() {
    let a = Analysis::new(PACK);
    let def = a.definition(at(PACK, "lookup_order", 3));
    assert_eq!(def.len(), 1);
    assert_eq!(&PACK[def[0].start..def[0].end], "lookup_order");
    let def = a.definition(at(PACK, "ctx.user.tier", 1));
    assert_eq!(&PACK[def[0].start..def[0].end], "user.tier");
    assert!(a.definition(0).is_empty());
}

#[test]
fn hovers() {
    let a = Analysis::new(PACK);
    let h = a
        .hover(at(PACK, "lookup_order", 1))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.contains("Looks an order up.") && h.contains("| read | low | auto |"),
        "{h}"
    );
    assert!(h.contains("`order_id: string`"), "{h}");
    let h = a
        .hover(at(PACK, "evidence", 1))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(h.contains("share 45% of 16000 → **7200 tokens**"), "{h}");
    let h = a
        .hover(at(PACK, "user.tier", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.contains("enum(\"free\", \"pro\")") && h.contains("The customer's plan."),
        "{h}"
    );
    let h = a
        .hover(at(PACK, "vip", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.contains("\"===\"") && h.contains("\"var\": \"ctx.user.tier\""),
        "{h}"
    );
    let h = a
        .hover(at(PACK, "request.locale", 0) + 3)
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(h.contains("**built-in** `request.locale`: `string`"), "{h}");
}

#[test]
fn hover_on_an_input_field_and_a_prompt_shows_their_docs() {
    let text = r#"pack "acme/a" version "1.0.0"
/// Who the assistant is.
prompt system "Be brief."
tool lookup {
  description "Look up."
  kind read
  risk low
  approval auto
  input {
    /// The order's id, as printed on the receipt.
    order_id: string
    limit: int?
  }
}
"#;
    let a = Analysis::new(text);
    let hover = |needle: &str, k: usize| {
        a.hover(at(text, needle, 0) + k)
            .map(|h| (h.markdown, h.span))
            .unwrap_or_default()
    };
    let (h, span) = hover("order_id", 3);
    assert_eq!(
        h,
        "**input field** `order_id` of tool `lookup`: `string`\n\nThe order's id, as printed on the receipt."
    );
    assert_eq!(&text[span.start..span.end], "order_id");
    assert_eq!(
        hover("limit", 4).0,
        "**input field** `limit` of tool `lookup`: `int?`"
    );
    assert_eq!(
        hover("system", 2).0,
        "**prompt** `system`\n\nWho the assistant is."
    );
    // Elsewhere in the tool's body, nothing new.
    assert!(a.hover(at(text, "approval", 0)).is_none());
}

#[test]
fn hover_shows_the_page_of_a_diagnostic() {
    let src = PACK.replace("tools lookup_order", "tools lookup_ordr");
    let a = Analysis::new(src.clone());
    let h = a
        .hover(at(&src, "lookup_ordr", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(h.contains("E0102"), "{h}");
    let fixes = a.quick_fixes(Span::new(0, src.len()));
    assert!(
        fixes.iter().any(|f| f.edit.text == "lookup_order"),
        "{fixes:?}"
    );
    // Three E0103 on the header (no system prompt, budget or intent): one page.
    let src = "pack \"a/b\" version \"1.0.0\"\n";
    let h = Analysis::new(src)
        .hover(at(src, "pack", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert_eq!(h.matches("**E0103**").count(), 1, "{h}");
}

/// The fix for a misspelt path inside raw JSON replaces the path in its `"var"`
/// string, not the whole condition, and the fixed text checks clean.
#[test]
fn a_quick_fix_in_raw_json_replaces_only_the_path() {
    let src = PACK.replace(
        "when ctx.user.tier == \"pro\" and request.intent == \"refund\"",
        "when json {\"and\": [{\"==\": [{\"var\": \"ctx.user.tierr\"}, \"pro\"]}, {\"==\": [{\"var\": \"request.intent\"}, \"refund\"]}]}",
    );
    assert_ne!(src, PACK);
    let a = Analysis::new(src.clone());
    assert!(codes(&src).contains(&"E0201"));
    let fixes = a.quick_fixes(Span::new(0, src.len()));
    let fix = fixes
        .iter()
        .find(|f| f.edit.text == "ctx.user.tier")
        .unwrap_or_else(|| panic!("{fixes:?}"));
    assert_eq!(
        &src[fix.edit.span.start..fix.edit.span.end],
        "ctx.user.tierr"
    );
    let mut fixed = src.clone();
    fixed.replace_range(fix.edit.span.start..fix.edit.span.end, &fix.edit.text);
    let mut expected = codes(&src);
    expected.retain(|c| *c != "E0201");
    assert_eq!(codes(&fixed), expected);
    // A path written with escapes is reported on the whole `json { ... }` (its text is
    // not its value), with no fix, since no edit of it could be exact.
    let escaped = src.replace("ctx.user.tierr", "ctx.user.tier\\u0072");
    let a = Analysis::new(escaped.clone());
    let d = a
        .diagnostics()
        .iter()
        .find(|d| d.code == "E0201")
        .cloned()
        .unwrap_or_else(|| panic!("{:?}", a.diagnostics()));
    assert!(escaped[d.span.start..d.span.end].starts_with("json {"));
    assert!(a.quick_fixes(Span::new(0, escaped.len())).is_empty());
}

fn codes(text: &str) -> Vec<&'static str> {
    Analysis::new(text)
        .diagnostics()
        .iter()
        .map(|d| d.code)
        .collect()
}

#[test]
fn renames_tools_and_fields() {
    let a = Analysis::new(PACK);
    let edits = a
        .rename(at(PACK, "lookup_order", 2), "find_order")
        .unwrap_or_default();
    assert_eq!(edits.len(), 4);
    let mut out = PACK.to_owned();
    for e in edits.iter().rev() {
        out.replace_range(e.span.start..e.span.end, &e.text);
    }
    assert!(!out.contains("lookup_order"));
    assert_eq!(codes(&out), codes(PACK));

    let edits = a
        .rename(at(PACK, "ctx.user.tier", 0), "ctx.account.plan")
        .unwrap_or_default();
    assert_eq!(edits.len(), 3);
    let mut out = PACK.to_owned();
    for e in edits.iter().rev() {
        out.replace_range(e.span.start..e.span.end, &e.text);
    }
    assert!(out.contains("{{ ctx.account.plan }}") && out.contains("account.plan: enum"));
    assert_eq!(codes(&out), codes(PACK));

    assert!(a.rename(at(PACK, "lookup_order", 0), "Bad-Name").is_err());
    assert!(a.rename(at(PACK, "user.tier", 0), "order.total").is_err());
    assert!(a.rename(at(PACK, "user.tier", 0), "user.tier.x").is_ok());
    assert!(a.rename(at(PACK, "user.tier", 0), "order.total.x").is_err());
    // A rename that would make a diagnostic appear is refused, with it: `evidence` is
    // a bucket the runtime fills (W0502 without it).
    assert!(a.prepare_rename(at(PACK, "evidence", 0)).is_some());
    let refused = a.rename(at(PACK, "evidence", 0), "kb").unwrap_err();
    assert!(refused.contains("W0502"), "{refused}");
}

#[test]
fn renames_reach_into_raw_json_and_intent_strings() {
    let text = PACK.replace(
        "when ctx.user.tier == \"pro\" and request.intent == \"refund\"",
        "when json {\"and\": [{\"==\": [{\"var\": \"ctx.user.tier\"}, \"pro\"]}, {\"==\": [{\"var\": \"request.intent\"}, \"refund\"]}]}",
    );
    let a = Analysis::new(text.as_str());
    assert_eq!(codes(&text), codes(PACK));
    // The field: declaration, template and the raw `var`.
    assert_eq!(a.references(at(&text, "user.tier", 0), true).len(), 3);
    let apply = |edits: Vec<TextEdit>| {
        let mut out = text.clone();
        for e in edits.iter().rev() {
            out.replace_range(e.span.start..e.span.end, &e.text);
        }
        out
    };
    let out = apply(a.rename(at(&text, "user.tier", 0), "plan").unwrap());
    assert!(out.contains("{\"var\": \"ctx.plan\"}"), "{out}");
    assert_eq!(codes(&out), codes(PACK));
    let out = apply(
        a.rename(at(&text, "refund fallback", 0), "refunds")
            .unwrap(),
    );
    assert!(out.contains("\"request.intent\"}, \"refunds\"]"), "{out}");
    assert!(out.contains("intent refunds fallback"), "{out}");
    assert_eq!(codes(&out), codes(PACK));
}

fn labels(text: &str, offset: usize) -> Vec<String> {
    Analysis::new(text)
        .completion(offset)
        .into_iter()
        .map(|c| c.label)
        .collect()
}

fn complete_at(marker_text: &str) -> Vec<String> {
    let offset = marker_text.find('|').unwrap_or(0);
    let text = marker_text.replacen('|', "", 1);
    labels(&text, offset)
}

#[test]
fn completions() {
    let head = "pack \"a/b\" version \"1.0.0\"\ncontext { user.tier: enum(\"free\", \"pro\") }\ntool t { kind read }\nredactor r pattern \"x\"\nbudget { bucket evidence { share 10% } }\n";
    let c = |s: &str| complete_at(&format!("{head}{s}"));
    assert!(c("|").contains(&"tool".to_owned()));
    // Nothing inside a comment: above the header, after a condition, between items.
    assert!(complete_at("// a pack for |\npack \"a/b\" version \"1.0.0\"\n").is_empty());
    assert!(c("policy p { when ctx.user.tier == \"pro\" // or |\n}").is_empty());
    assert!(c("// the tools: t|").is_empty());
    // A `//` inside a string is no comment.
    assert!(c("block b in evidence \"see https://x\"\n|").contains(&"tool".to_owned()));
    assert!(c("tool x {\n  |\n}").contains(&"approval".to_owned()));
    assert!(c("\n|").contains(&"session".to_owned()));
    assert!(c("session |").contains(&"directives".to_owned()));
    assert!(c("session directives\npolicy p { when |").contains(&"session.prohibit".to_owned()));
    assert!(!c("policy p { when |").contains(&"session.prohibit".to_owned()));
    assert!(c("tool x {\n  approval |\n}").contains(&"confirm".to_owned()));
    assert!(c("tool x {\n  risk |").contains(&"critical".to_owned()));
    assert!(c("intent i { safety |").contains(&"supervised".to_owned()));
    // A tool list offers the tools it does not name yet, and never a prohibited one.
    assert!(c("tool u { kind read }\nintent i { tools t, |").contains(&"u".to_owned()));
    assert!(!c("tool u { kind read }\nintent i { tools t, |").contains(&"t".to_owned()));
    let listed = c("tool u { kind read }\ntool v { kind read }\nprohibit v\nintent i { tools |");
    assert!(
        listed.contains(&"u".to_owned()) && !listed.contains(&"v".to_owned()),
        "{listed:?}"
    );
    assert!(c("tool u { kind read }\nprohibit t, |").contains(&"u".to_owned()));
    assert!(!c("tool u { kind read }\nprohibit t, |").contains(&"t".to_owned()));
    assert!(c("intent i { budget { | } }").contains(&"evidence".to_owned()));
    assert!(c("budget { tokenizer |").contains(&"cl100k".to_owned()));
    assert!(c("budget { bucket x { share 10% overflow |").contains(&"truncate".to_owned()));
    assert!(c("policy p { when ctx.|").contains(&"ctx.user.tier".to_owned()));
    assert!(c("policy p { when req|").contains(&"request.channel".to_owned()));
    assert!(c("policy p { when ctx.user.tier == |").contains(&"\"pro\"".to_owned()));
    assert!(c("policy p { when ctx.user.tier == \"f|").contains(&"free".to_owned()));
    // In a string the line does not close, the closing quote comes with the value;
    // in one it closes, it does not.
    let inserts = |s: &str| -> Vec<String> {
        let marked = format!("{head}{s}");
        let offset = marked.find('|').unwrap_or(0);
        let text = marked.replacen('|', "", 1);
        Analysis::new(text)
            .completion(offset)
            .into_iter()
            .map(|c| c.insert)
            .collect()
    };
    let open = inserts("policy p { when ctx.user.tier == \"f|\n}");
    assert!(open.contains(&"free\"".to_owned()), "{open:?}");
    let closed = inserts("policy p { when ctx.user.tier == \"f|\" }");
    assert!(closed.contains(&"free".to_owned()), "{closed:?}");
    let escaped = inserts("policy p { when ctx.user.tier == \"f| \\\"\n}");
    assert!(escaped.contains(&"free\"".to_owned()), "{escaped:?}");
    assert!(c("policy p { when true\n  redact |").contains(&"r".to_owned()));
    assert!(c("policy p { when true\n  |").contains(&"require_approval".to_owned()));
    assert!(c("prompt system \"Hi {{ run.|").contains(&"run.user.id".to_owned()));
    assert!(c("block b in |").contains(&"evidence".to_owned()));
    assert!(c("context { a: |").contains(&"timestamp".to_owned()));
    // A block's fields are offered until they are declared, before or after the
    // cursor; a value that looks like a keyword does not count.
    let tool = c("tool x {\n  kind input\n  |\n  risk low\n}");
    assert!(tool.contains(&"input".to_owned()) && tool.contains(&"approval".to_owned()));
    assert!(
        !tool.contains(&"kind".to_owned()) && !tool.contains(&"risk".to_owned()),
        "{tool:?}"
    );
    let intent = c("intent i {\n  task \"t\"\n  |\n}");
    assert!(!intent.contains(&"task".to_owned()) && intent.contains(&"tools".to_owned()));
    let budget = c("budget {\n  total 10\n  bucket a { share 10% }\n  |\n}");
    assert_eq!(budget, vec!["tokenizer", "bucket"], "{budget:?}");
    let bucket = c("budget { bucket a { share 10% | } }");
    assert_eq!(bucket, vec!["priority", "min", "overflow"], "{bucket:?}");
    // Once a dot is typed, only the paths below it.
    let below = c("context { order.id: string }\npolicy p { when ctx.user.|");
    assert_eq!(below, vec!["ctx.user.tier".to_owned()], "{below:?}");
    let below = c("policy p { when run.user.|");
    assert_eq!(below, vec!["run.user.id", "run.user.roles"], "{below:?}");
    // Up to the last dot: the editor filters by what follows it.
    let below = c("prompt system \"{{ request.l|");
    assert_eq!(
        below,
        vec![
            "request.intent",
            "request.message",
            "request.channel",
            "request.locale"
        ],
        "{below:?}"
    );
}

#[test]
fn outline() {
    let a = Analysis::new(PACK);
    let symbols = a.document_symbols();
    let names: Vec<&str> = symbols.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"lookup_order") && names.contains(&"vip"));
    let tool = symbols
        .iter()
        .find(|s| s.name == "lookup_order")
        .map(|s| s.children.len());
    assert_eq!(tool, Some(1));
    let budget = symbols
        .iter()
        .find(|s| s.kind == OutlineKind::Budget)
        .map(|s| s.children.len());
    assert_eq!(budget, Some(2));
    for s in &symbols {
        assert!(
            s.span.start <= s.selection.start && s.selection.end <= s.span.end,
            "{s:?}"
        );
    }
}

#[test]
fn hover_on_a_bucket_shows_its_doc_comment() {
    let src = PACK.replace(
        "  bucket evidence {",
        "  /// Retrieved passages, best first.\n  bucket evidence {",
    );
    let a = Analysis::new(src.clone());
    let h = a
        .hover(at(&src, "evidence {", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.starts_with("**bucket** `evidence`\n\nRetrieved passages, best first.\n\nshare 45%"),
        "{h}"
    );
}

/// A context block with a bad line still outlines, hovers and completes the fields
/// that parsed, and its entry covers them.
#[test]
fn a_broken_context_keeps_the_fields_that_parsed() {
    let src = PACK.replace(
        "order.total: float?",
        "order.total float?\n  order.id: string",
    );
    let a = Analysis::new(src.clone());
    let symbols = a.document_symbols();
    let context = symbols.iter().find(|s| s.kind == OutlineKind::Context);
    let children: Vec<&str> = context
        .map(|c| c.children.iter().map(|f| f.name.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(children, ["user.tier", "order.id"]);
    for c in context.iter().flat_map(|c| &c.children) {
        let parent = context.map(|p| p.span).unwrap_or_default();
        assert!(
            parent.start <= c.span.start && c.span.end <= parent.end,
            "{c:?}"
        );
    }
    let h = a
        .hover(at(&src, "user.tier }}", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.contains("enum(\"free\", \"pro\")") && h.contains("The customer's plan."),
        "{h}"
    );
    let labels: Vec<String> = a
        .completion(at(&src, "user.tier }}", 0))
        .into_iter()
        .map(|c| c.label)
        .collect();
    assert!(labels.iter().any(|l| l == "ctx.order.id"), "{labels:?}");
}

#[test]
fn no_query_panics_at_any_offset() {
    let inputs = [
        PACK,
        "pack \"a/b\" version \"1.0.0\"\n// 😀 emoji é\ntool 😀 { kind }\npolicy p { when ctx.",
        "\"\"\"",
        "{{{{ }}}} ][ \u{FEFF}",
        "",
    ]
    .map(String::from);
    for text in inputs {
        let a = Analysis::new(text.clone());
        for offset in 0..=text.len() + 2 {
            let _ = a.hover(offset);
            let _ = a.completion(offset);
            let _ = a.definition(offset);
            let _ = a.references(offset, true);
            let _ = a.prepare_rename(offset);
            let _ = a.rename(offset, "x");
        }
        let _ = a.document_symbols();
        let _ = a.format();
        let _ = a.quick_fixes(Span::new(0, usize::MAX));
    }
}

#[test]
fn hover_on_an_undeclared_name_says_so_and_suggests() {
    let src = PACK.replace("tools lookup_order", "tools lookup_ordr");
    let a = Analysis::new(src.clone());
    let h = a
        .hover(at(&src, "lookup_ordr", 0))
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(
        h.starts_with("**tool** `lookup_ordr` is not declared\n\ndid you mean `lookup_order`?"),
        "{h}"
    );
    assert!(!h.contains("body has errors"), "{h}");
}

#[test]
fn hover_on_an_import_shows_what_it_resolved_to() {
    let dir = tempfile::tempdir().unwrap();
    let registry = crate::registry::Registry::open(dir.path());
    let lib = "pack \"acme/base\" version \"2.1.0\" library\n\ncontext {\n  user.age: int\n}\n\nredactor email pattern \"[a-z]+@x\"\n";
    let built = crate::build::build_source("base.ctxpack", lib.to_owned()).unwrap();
    registry.publish(&built.artifact).unwrap();
    let app = PACK.replacen(
        "\n\ncontext {",
        "\n\nimport \"acme/base\" version \"2.1.0\"\n\ncontext {",
        1,
    );
    let app = app.replace("redactor email pattern \"[a-z]+@x\"\n", "");
    let a = Analysis::with_imports(app.clone(), &registry, None);
    let h = a
        .hover(at(&app, "\"acme/base\"", 0) + 2)
        .map(|h| h.markdown)
        .unwrap_or_default();
    assert!(h.starts_with("**import** `acme/base@2.1.0`"), "{h}");
    let hash = built.artifact.hash.clone().unwrap_or_default();
    assert!(
        hash.starts_with("blake3:") && h.contains(&format!("`{hash}`")),
        "{h}"
    );
    assert!(h.contains("from `") && h.contains("2.1.0.json`"), "{h}");
    assert!(h.contains("not in `ctxpack.lock`"), "{h}");
    assert!(
        h.contains("- context field `ctx.user.age`") && h.contains("- redactor `email`"),
        "{h}"
    );
}

/// Find references on an import's name: the uses of everything it brings in.
#[test]
fn references_on_an_import_follow_everything_it_brings() {
    let dir = tempfile::tempdir().unwrap();
    let registry = crate::registry::Registry::open(dir.path());
    let lib = "pack \"acme/base\" version \"2.1.0\" library\n\ncontext {\n  user.age: int\n}\n\nredactor email pattern \"[a-z]+@x\"\n\ntool search_kb { description \"Search.\" kind read risk low approval auto }\n";
    let built = crate::build::build_source("base.ctxpack", lib.to_owned()).unwrap();
    registry.publish(&built.artifact).unwrap();
    let app = "pack \"acme/app\" version \"1.0.0\"\n\nimport \"acme/base\" version \"2.1.0\"\n\nprompt system \"Hi.\"\n\nbudget {\n  total 1000\n  bucket policy { share 100% }\n}\n\nintent main fallback {\n  tools search_kb\n  task \"Help.\"\n}\n\npolicy p {\n  when ctx.user.age < 18\n  redact email\n}\n";
    let a = Analysis::with_imports(app, &registry, None);
    let refs = a.references(at(app, "\"acme/base\"", 0) + 2, false);
    let used: Vec<&str> = refs.iter().map(|s| &app[s.start..s.end]).collect();
    assert_eq!(used, ["search_kb", "ctx.user.age", "email"], "{refs:?}");
}

/// No outline symbol of the bundled packs runs on into what follows it: its range
/// and detail end at its own text, not in whitespace or the next item's `///`.
#[test]
fn outline_ranges_end_at_their_own_text() {
    fn walk(text: &str, symbols: &[OutlineSymbol], checked: &mut usize) {
        for s in symbols {
            let slice = &text[s.span.start..s.span.end];
            assert_eq!(slice, slice.trim_end(), "{} ends in whitespace", s.name);
            let last = slice.lines().last().unwrap_or("").trim_start();
            assert!(
                !last.starts_with("//"),
                "{} ends in a comment: {slice:?}",
                s.name
            );
            if let Some(d) = &s.detail {
                assert!(!d.contains("//"), "{}: detail {d:?}", s.name);
            }
            *checked += 1;
            walk(text, &s.children, checked);
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packs");
    let mut checked = 0;
    for name in ["support", "coding", "triage"] {
        let text = std::fs::read_to_string(root.join(format!("{name}/{name}.ctxpack"))).unwrap();
        let a = Analysis::new(text.as_str());
        walk(&text, &a.document_symbols(), &mut checked);
    }
    assert!(checked > 150, "{checked}");
}

#[test]
fn a_stale_analysis_is_given_up_and_a_fresh_one_finishes() {
    let a = Analysis::new(PACK);
    let text = PACK.replace("Fetch an order.", "Fetch one order.");
    let stale = std::sync::atomic::AtomicBool::new(true);
    let given_up = a.edited_unless(text.clone(), &crate::imports::NoSource, None, &stale);
    let Err((back, crate::check::Cancelled)) = given_up else {
        panic!("a raised flag must stop the analysis");
    };
    assert_eq!(back, text);
    let fresh = std::sync::atomic::AtomicBool::new(false);
    let done = a
        .edited_unless(text.clone(), &crate::imports::NoSource, None, &fresh)
        .unwrap_or_else(|_| panic!("nothing asked it to stop"));
    assert_eq!(done.diagnostics(), Analysis::new(text).diagnostics());
}
