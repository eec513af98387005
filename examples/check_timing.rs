//! Prints how long `check_source` takes on generated packs of 10k/50k/100k lines
//! (median of 7 runs). `cargo run --release --example check_timing`.

#[path = "../benches/gen.rs"]
mod gen;

fn main() {
    for lines in [10_000, 50_000, 100_000] {
        let text = gen::pack(lines);
        let mut times: Vec<f64> = (0..7)
            .map(|_| {
                let start = std::time::Instant::now();
                let checked = ctxpack::check::check_source(&text);
                let t = start.elapsed().as_secs_f64() * 1000.0;
                assert!(!checked.has_errors());
                t
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{lines:>7} lines ({:>5} KiB): median {:>7.1} ms  min {:>7.1} ms",
            text.len() / 1024,
            times[3],
            times[0]
        );
    }
}
