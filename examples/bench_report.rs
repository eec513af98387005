//! Prints p50/p99 latencies of the runtime compiler over the reference workload, which
//! criterion does not report, plus the cold-compile / tokenization ratio.
//!
//! `cargo run --release --example bench_report [ITERATIONS]`

use std::time::{Duration, Instant};

use ctxpack::runtime::PreparedPack;
use ctxpack::tokens::{self, Tokenizer};

#[path = "../benches/support/workload.rs"]
mod workload;

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    (at(0.50), at(0.99))
}

fn measure(n: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..n.min(5) {
        f();
    }
    let samples = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    percentiles(samples)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let t = Instant::now();
    tokens::warm(Tokenizer::O200k);
    println!("o200k construction (first use): {:?}", t.elapsed());

    for count in [50, 200, 1000] {
        let Some(w) = workload::load(count) else {
            return;
        };
        let pack = match PreparedPack::new(w.artifact.clone()) {
            Ok(p) => p,
            Err(e) => return eprintln!("error: {e}"),
        };
        let cc = match pack.compile(&w.inputs) {
            Ok(cc) => cc,
            Err(e) => return eprintln!("error: {e}"),
        };
        println!("\n== {count} evidence ==");
        if count == 200 {
            let b = &cc.budget_report;
            let kept = |bucket: &str| {
                cc.compiled_prompt
                    .context_blocks
                    .iter()
                    .filter(|x| &*x.bucket == bucket)
                    .count()
            };
            println!(
                "kept: policy {}, tools {}, evidence {}, memory {}, session {}; used {} of {} (fixed {})",
                kept("policy"), kept("tools"), kept("evidence"), kept("memory"), kept("session"),
                cc.context_ledger.budget.used, b.total, b.fixed
            );
        }
        let cold_n = (n / 10).max(10);
        let (tok50, tok99) = measure(cold_n, || {
            std::hint::black_box(
                w.texts
                    .iter()
                    .map(|t| tokens::count(Tokenizer::O200k, t))
                    .sum::<usize>(),
            );
        });
        let (cold50, cold99) = measure(cold_n, || {
            let pack = PreparedPack::new(w.artifact.clone()).ok();
            std::hint::black_box(pack.map(|p| p.compile(&w.inputs).is_ok()));
        });
        let (empty50, empty99) = measure(cold_n, || {
            pack.clear_token_cache();
            std::hint::black_box(pack.compile(&w.inputs).is_ok());
        });
        let (hit50, hit99) = measure(n, || {
            std::hint::black_box(pack.compile(&w.inputs).is_ok());
        });
        println!("tokenize only          p50 {tok50:>10.3?}  p99 {tok99:>10.3?}");
        println!("cold compile           p50 {cold50:>10.3?}  p99 {cold99:>10.3?}");
        println!("warm, empty cache      p50 {empty50:>10.3?}  p99 {empty99:>10.3?}");
        println!("warm, cache hit        p50 {hit50:>10.3?}  p99 {hit99:>10.3?}");
        println!(
            "cold / tokenization ratio (p50): {:.3}",
            cold50.as_secs_f64() / tok50.as_secs_f64()
        );
    }
}
