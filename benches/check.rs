//! The front end on generated packs of 10k, 50k and 100k lines: parse, build the IR
//! and run every check; and the editor's check of a one-character edit in the middle
//! of a 5k and a 50k-line pack, from the analysis before it (what the language
//! server does on each change). `cargo bench --bench check`.

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

fn edit(c: &mut Criterion) {
    let mut group = c.benchmark_group("edit");
    group.sample_size(20);
    for lines in [5_000, 50_000] {
        let text = gen::pack(lines);
        let before = ctxpack::ide::Analysis::new(text.clone());
        let units = text.matches("\nintent ").count();
        let needle = format!("Does thing 1 of group {}.", units / 2);
        let Some(at) = text.find(&needle) else {
            panic!("the generated pack has no `{needle}`");
        };
        let mut edited = text.clone();
        edited.insert(at + needle.len() - 1, 'x');
        let after = before.edited(edited.clone(), &ctxpack::imports::NoSource, None);
        assert_eq!(
            after.diagnostics(),
            ctxpack::ide::Analysis::new(edited.clone()).diagnostics()
        );
        group.bench_with_input(BenchmarkId::from_parameter(lines), &edited, |b, edited| {
            // The server frees the analysis an edit replaces on another thread.
            b.iter_with_large_drop(|| {
                before.edited(edited.clone(), &ctxpack::imports::NoSource, None)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, edit);
criterion_main!(benches);
