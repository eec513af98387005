//! The language server's document analysis under arbitrary edits: start from a real
//! pack, apply edits (byte ranges clamped to character boundaries), and after each one
//! run every query the server makes — diagnostics, hover, definition, references,
//! completion, outline, formatting, quick fixes, rename — at positions from the input.
#![no_main]

use ctxpack::ide::Analysis;
use ctxpack::span::Span;
use libfuzzer_sys::fuzz_target;

const SEED: &str = include_str!("../../tests/conformance/packs/shop.ctxpack");

fn boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fuzz_target!(|data: &[u8]| {
    let mut text = SEED.to_owned();
    // Each edit: 2 bytes start, 1 byte length, 1 byte insert length, then the insert.
    let mut rest = data;
    while rest.len() >= 4 {
        let start = usize::from(u16::from_le_bytes([rest[0], rest[1]])) % (text.len() + 1);
        let len = usize::from(rest[2]);
        let insert_len = usize::from(rest[3]).min(rest.len() - 4);
        let insert = String::from_utf8_lossy(&rest[4..4 + insert_len]).into_owned();
        rest = &rest[4 + insert_len..];
        let start = boundary(&text, start);
        let end = boundary(&text, start + len);
        text.replace_range(start..end, &insert);

        let a = Analysis::new(text.clone());
        let _ = a.diagnostics();
        let at = boundary(&text, start);
        let _ = a.hover(at);
        let _ = a.definition(at);
        let _ = a.references(at, true);
        let _ = a.completion(at);
        let _ = a.document_symbols();
        let _ = a.format();
        let _ = a.quick_fixes(Span::new(at, boundary(&text, at + len)));
        let _ = a.prepare_rename(at);
        let _ = a.rename(at, "renamed");
    }
});
