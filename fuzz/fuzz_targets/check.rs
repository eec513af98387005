//! Parse and check arbitrary text: never a panic, diagnostics always inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let checked = ctxpack::check::check_source(text);
    for d in &checked.diagnostics {
        assert!(
            d.span.start <= d.span.end && d.span.end <= text.len(),
            "{d:?}"
        );
        assert!(text.is_char_boundary(d.span.start) && text.is_char_boundary(d.span.end));
    }
});
