//! Runtime compiler benchmarks over the reference workload.
//!
//! `cargo bench --bench runtime`. See also `examples/bench_report.rs` for p50/p99.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ctxpack::runtime::PreparedPack;
use ctxpack::tokens::{self, Tokenizer};

#[path = "support/workload.rs"]
mod workload;

fn benches(c: &mut Criterion) {
    let Some(w) = workload::load(200) else {
        return;
    };

    // Construction happens once per process; `examples/bench_report` times it.
    tokens::warm(Tokenizer::O200k);

    let mut g = c.benchmark_group("workload");
    g.sample_size(20);
    g.bench_function("tokenize_only", |b| {
        b.iter(|| {
            w.texts
                .iter()
                .map(|t| tokens::count(Tokenizer::O200k, t))
                .sum::<usize>()
        })
    });
    g.bench_function("cold_compile", |b| {
        b.iter(|| {
            let pack = PreparedPack::new(w.artifact.clone()).map_err(|e| e.to_string())?;
            pack.compile(&w.inputs)
                .map(|cc| cc.context_ledger.hash)
                .map_err(|e| e.to_string())
        })
    });
    let pack = PreparedPack::new(w.artifact.clone()).expect("the workload pack is valid");
    g.bench_function("warm_compile_empty_cache", |b| {
        b.iter(|| {
            pack.clear_token_cache();
            pack.compile(&w.inputs).map(|cc| cc.context_ledger.hash)
        })
    });
    g.sample_size(100);
    g.bench_function("warm_compile_cache_hit", |b| {
        b.iter(|| pack.compile(&w.inputs).map(|cc| cc.context_ledger.hash))
    });
    g.finish();

    let mut g = c.benchmark_group("scaling");
    g.sample_size(20);
    for n in [50, 200, 1000] {
        let Some(w) = workload::load(n) else { return };
        let pack = PreparedPack::new(w.artifact.clone()).expect("the workload pack is valid");
        g.bench_with_input(BenchmarkId::new("warm_cache_hit", n), &n, |b, _| {
            b.iter(|| pack.compile(&w.inputs).map(|cc| cc.context_ledger.hash))
        });
        g.bench_with_input(BenchmarkId::new("warm_empty_cache", n), &n, |b, _| {
            b.iter(|| {
                pack.clear_token_cache();
                pack.compile(&w.inputs).map(|cc| cc.context_ledger.hash)
            })
        });
    }
    g.finish();
}

criterion_group!(runtime, benches);
criterion_main!(runtime);
