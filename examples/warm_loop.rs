//! Runs warm, cache-hit compiles of the reference workload in a loop, for profilers:
//! `perf record -g target/release/examples/warm_loop 2000`. With `--canonical`, each
//! compile also writes the canonical envelope and seals its ledger (as the Python
//! package's `compile` does).

use ctxpack::runtime::PreparedPack;

#[path = "../benches/support/workload.rs"]
mod workload;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let Some(w) = workload::load(200) else { return };
    let Ok(pack) = PreparedPack::new(w.artifact.clone()) else {
        return;
    };
    let canonical = std::env::args().any(|a| a == "--canonical");
    for _ in 0..n {
        if canonical {
            std::hint::black_box(pack.compile_canonical(&w.inputs).is_ok());
        } else {
            std::hint::black_box(pack.compile(&w.inputs).is_ok());
        }
    }
}
