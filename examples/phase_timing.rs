//! Where a warm compile of the reference workload files spends its time:
//! JSON parse, typed decode, compile (token cache hit), canonical envelope bytes.
//!
//! `cargo run --release --example phase_timing [ITERATIONS]`

use std::path::Path;
use std::time::{Duration, Instant};

use ctxpack::artifact::verify_bytes;
use ctxpack::runtime::{decode_inputs, PreparedPack};

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/workload");
    let source = dir.join("workload.ctxpack");
    let built = match ctxpack::build::build_file(&source, &Default::default()) {
        Ok(b) => b,
        Err(e) => return eprintln!("{}", e.summary()),
    };
    let artifact = verify_bytes(&built.artifact.canonical_bytes()).ok();
    let Some(pack) = artifact.and_then(|a| PreparedPack::new(a).ok()) else {
        return eprintln!("the workload pack does not load");
    };
    let read = |name: &str| std::fs::read(dir.join(format!("{name}.json"))).unwrap_or_default();
    let raw: Vec<Vec<u8>> = ["run", "request", "evidence", "memory"].map(read).into();
    let mut parse = Duration::ZERO;
    let mut decode = Duration::ZERO;
    let mut compile = Duration::ZERO;
    let mut bytes = Duration::ZERO;
    for i in 0..n + 5 {
        let t0 = Instant::now();
        let docs: Vec<serde_json::Value> = raw
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or_default())
            .collect();
        let t1 = Instant::now();
        let mut docs = docs.into_iter();
        let mut next = || docs.next().unwrap_or_default();
        let inputs = match decode_inputs(next(), next(), Some(next()), Some(next())) {
            Ok(i) => i,
            Err(e) => return eprintln!("{e}"),
        };
        let t2 = Instant::now();
        let cc = match pack.compile(&inputs) {
            Ok(c) => c,
            Err(e) => return eprintln!("{e}"),
        };
        let t3 = Instant::now();
        let out = cc.canonical_bytes();
        let t4 = Instant::now();
        std::hint::black_box(out);
        if i >= 5 {
            parse += t1 - t0;
            decode += t2 - t1;
            compile += t3 - t2;
            bytes += t4 - t3;
        }
    }
    let mut fast = Duration::ZERO;
    for _ in 0..n {
        let t = Instant::now();
        let inputs =
            ctxpack::runtime::decode_json_inputs(&raw[0], &raw[1], Some(&raw[2]), Some(&raw[3]));
        fast += t.elapsed();
        std::hint::black_box(inputs);
    }
    let per = |d: Duration| d.as_secs_f64() * 1e3 / f64::from(n);
    println!(
        "mean ms: parse {:.3}  decode {:.3} (both at once from JSON text: {:.3})  compile {:.3}  envelope bytes {:.3}",
        per(parse),
        per(decode),
        per(fast),
        per(compile),
        per(bytes)
    );
}
