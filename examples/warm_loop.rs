//! Runs warm, cache-hit compiles of the reference workload in a loop, for profilers:
//! `perf record -g target/release/examples/warm_loop 2000`. With `--canonical`, each
//! compile also writes the canonical envelope and seals its ledger (as the Python
//! package's `compile` does). With `--decode` as well, each compile first decodes the
//! inputs from their JSON, as `ctxpack serve` does for each request: run it under
//! `valgrind --tool=callgrind` with two counts to get the instructions per request that
//! `serve_load --wrapper` compares the service with (and `--evidence=N` to match
//! `serve_load --evidence=N`).

use ctxpack::runtime::PreparedPack;

#[path = "../benches/support/workload.rs"]
mod workload;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    // `--evidence=N`: the first N of the workload's 200 evidence items, as
    // `serve_load --evidence=N` sends them.
    let evidence = std::env::args()
        .find_map(|a| a.strip_prefix("--evidence=").and_then(|n| n.parse().ok()))
        .unwrap_or(200);
    let Some(w) = workload::load(evidence) else {
        return;
    };
    let Ok(pack) = PreparedPack::new(w.artifact.clone()) else {
        return;
    };
    let canonical = std::env::args().any(|a| a == "--canonical");
    let decode = std::env::args().any(|a| a == "--decode");
    // The request body `serve_load` sends, without its `pack` member.
    let json = if decode {
        serde_json::to_vec(&w.inputs).unwrap_or_default()
    } else {
        Vec::new()
    };
    for _ in 0..n {
        let decoded;
        let inputs = if decode {
            let Some(d) =
                ctxpack::runtime::from_json_bytes::<ctxpack::runtime::CompileInputs>(&json)
            else {
                return;
            };
            decoded = d;
            &decoded
        } else {
            &w.inputs
        };
        if canonical {
            std::hint::black_box(pack.compile_canonical(inputs).is_ok());
        } else {
            std::hint::black_box(pack.compile(inputs).is_ok());
        }
    }
}
