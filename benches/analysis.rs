//! The policy analysis (`ctxpack::analysis`) on its own, over IR that is already
//! built: the bundled packs, a generated pack of 500 policies over 50 fields, and the
//! `explain --tools` table of that pack. `cargo bench --bench analysis`.
//!
//! Targets: under 5 ms per bundled pack, under 200 ms for the generated pack.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

#[path = "analysis_gen.rs"]
mod analysis_gen;

fn checked(text: &str) -> ctxpack::check::Checked {
    let checked = ctxpack::check::check_source(text);
    assert!(!checked.has_errors(), "the pack must be valid");
    checked
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("analysis");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in ["support", "coding", "triage"] {
        let path = root.join(format!("packs/{name}/{name}.ctxpack"));
        let text = std::fs::read_to_string(&path).expect("bundled pack");
        let pack = checked(&text).pack;
        group.bench_with_input(BenchmarkId::new("bundled", name), &pack, |b, pack| {
            b.iter(|| {
                let mut diagnostics = Vec::new();
                ctxpack::analysis::check(pack, &mut diagnostics);
                diagnostics
            })
        });
    }
    let text = analysis_gen::pack(500, 50);
    let pack = checked(&text).pack;
    let mut diagnostics = Vec::new();
    ctxpack::analysis::check(&pack, &mut diagnostics);
    assert!(
        diagnostics.iter().all(|d| d.code != "W0304"),
        "the generated pack must be analysed completely"
    );
    group.sample_size(20);
    group.bench_with_input(
        BenchmarkId::new("generated", "500_policies_50_fields"),
        &pack,
        |b, pack| {
            b.iter(|| {
                let mut diagnostics = Vec::new();
                ctxpack::analysis::check(pack, &mut diagnostics);
                diagnostics
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new("explain_tools", "500_policies_50_fields"),
        &pack,
        |b, pack| b.iter(|| ctxpack::analysis::tool_table(pack)),
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
