//! One prepared pack (the conformance shop pack) compiles arbitrary JSON inputs: never
//! a panic; when it compiles, every render works, allocations fit what is available
//! and each bucket's kept blocks fit its allocation.
#![no_main]

use std::sync::OnceLock;

use ctxpack::runtime::{decode_inputs, render, PreparedPack};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn pack() -> &'static PreparedPack {
    static PACK: OnceLock<PreparedPack> = OnceLock::new();
    PACK.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/conformance/packs/shop.ctxpack"
        );
        let source = std::fs::read_to_string(path).expect("the shop pack");
        let built = ctxpack::build::build_source("shop.ctxpack", source).expect("it builds");
        PreparedPack::new(built.artifact).expect("it prepares")
    })
}

fuzz_target!(|data: &[u8]| {
    // The input is four JSON documents separated by NUL bytes: run, request, evidence,
    // memory (the last two optional).
    let mut docs = data
        .split(|&b| b == 0)
        .map(|d| serde_json::from_slice::<Value>(d).ok());
    let (Some(Some(run)), Some(Some(request))) = (docs.next(), docs.next()) else {
        return;
    };
    let evidence = docs.next().flatten();
    let memory = docs.next().flatten();
    let Ok(inputs) = decode_inputs(run, request, evidence, memory) else {
        return;
    };
    let Ok(cc) = pack().compile(&inputs) else {
        return;
    };
    let _ = cc.canonical_bytes();
    let _ = render::openai(&cc, Some("m"));
    let _ = render::anthropic(&cc, None, 64);
    let b = &cc.budget_report;
    assert!(b.allocations.values().sum::<u64>() <= b.available);
    for (bucket, used) in &b.used_at_compile {
        assert!(
            *used <= b.allocations.get(bucket).copied().unwrap_or(0),
            "{bucket}"
        );
    }
    assert!(cc.verify_ledger());
});
