//! The front end on generated packs of 10k, 50k and 100k lines: parse, build the IR
//! and run every check. `cargo bench --bench check`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

#[path = "gen.rs"]
mod gen;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    for lines in [10_000, 50_000, 100_000] {
        let text = gen::pack(lines);
        let checked = ctxpack::check::check_source(&text);
        assert!(!checked.has_errors(), "generated pack must be valid");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(lines), &text, |b, text| {
            b.iter(|| ctxpack::check::check_source(text))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
