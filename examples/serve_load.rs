//! Load figures for `ctxpack serve` on the reference workload, beside the in-process
//! compile rate measured in the same run.
//!
//! ```sh
//! cargo build --release --workspace --bins --examples
//! target/release/examples/serve_load [REQUESTS_PER_LEVEL] [SECONDS_PER_LEVEL]
//! ```
//!
//! Starts `ctxpack-serve` (next to this example's directory) on `127.0.0.1:0` over a
//! temporary registry holding the workload pack, then drives `POST /v1/compile` at
//! concurrency 1, 8 and 32 — each level bounded by a request count and a time limit,
//! over keep-alive loopback connections only — and reports throughput, p50 and p99
//! and the errors seen. The in-process rate is warm compiles per second on one thread;
//! the service's goal is `cores × in-process rate × 0.8`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctxpack::registry::Registry;
use ctxpack::runtime::PreparedPack;

#[path = "../benches/support/workload.rs"]
mod workload;

fn main() {
    let mut args = std::env::args().skip(1);
    let per_level: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(400);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let Some(w) = workload::load(200) else { return };

    // In-process: warm compiles on one thread.
    let Ok(pack) = PreparedPack::new(w.artifact.clone()) else {
        eprintln!("the workload pack does not prepare");
        return;
    };
    let _ = pack.compile(&w.inputs);
    let started = Instant::now();
    let mut n = 0u32;
    while started.elapsed() < Duration::from_secs(3) {
        std::hint::black_box(pack.compile(&w.inputs).is_ok());
        n += 1;
    }
    let in_process = f64::from(n) / started.elapsed().as_secs_f64();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    println!(
        "in-process warm compiles: {in_process:.0}/s on one thread; {cores} cores → goal {:.0}/s",
        in_process * cores as f64 * 0.8
    );
    // What a request costs besides the compile: decoding the JSON inputs and writing
    // the canonical envelope, in process, on one thread.
    let inputs_json = serde_json::to_vec(&w.inputs).unwrap_or_default();
    let started = Instant::now();
    let mut n = 0u32;
    while started.elapsed() < Duration::from_secs(3) {
        let Ok(inputs) = serde_json::from_slice::<ctxpack::runtime::CompileInputs>(&inputs_json)
        else {
            break;
        };
        if let Ok(cc) = pack.compile(&inputs) {
            std::hint::black_box(cc.canonical_bytes());
        }
        n += 1;
    }
    println!(
        "in-process decode ({} KB of JSON) + compile + canonical bytes: {:.0}/s on one thread",
        inputs_json.len() / 1024,
        f64::from(n) / started.elapsed().as_secs_f64()
    );

    // The service, over a registry holding the workload pack.
    let dir = std::env::temp_dir().join(format!("ctxpack-serve-load-{}", std::process::id()));
    let registry = Registry::open(dir.join("registry"));
    let mut artifact = w.artifact.clone();
    artifact.hash = Some(artifact.seal().1);
    if let Err(e) = registry.publish(&artifact) {
        eprintln!("cannot publish the workload pack: {e}");
        return;
    }
    let reference = format!("{}@{}", artifact.name, artifact.version);
    let Some(server) = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("ctxpack-serve")))
        .filter(|p| p.is_file())
    else {
        eprintln!("build the server first: cargo build --release --workspace --bins --examples");
        return;
    };
    let Ok(mut child) = Command::new(server)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--max-concurrency",
            "256",
            "--registry",
        ])
        .arg(dir.join("registry"))
        .args(["--preload", &reference])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
    else {
        eprintln!("cannot start ctxpack-serve");
        return;
    };
    let mut log = BufReader::new(child.stderr.take().expect("piped"));
    let mut first = String::new();
    let _ = log.read_line(&mut first);
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    let address = serde_json::from_str::<serde_json::Value>(&first)
        .ok()
        .and_then(|v| v["listening"].as_str().map(str::to_owned))
        .unwrap_or_default();

    let mut body = serde_json::to_value(&w.inputs).unwrap_or_default();
    body["pack"] = serde_json::Value::from(reference);
    let body = body.to_string();
    // Warm the service (prepared pack, block cache) once.
    let _ = post(&address, &body);

    println!("| concurrency | requests | throughput | p50 | p99 | errors |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for concurrency in [1usize, 8, 32] {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let per_client = per_level.div_ceil(concurrency);
        let started = Instant::now();
        let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..concurrency)
                .map(|_| s.spawn(|| client(&address, &body, per_client, deadline)))
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        let elapsed = started.elapsed().as_secs_f64();
        let mut latencies: Vec<Duration> = results.iter().flat_map(|r| r.0.clone()).collect();
        let errors: usize = results.iter().map(|r| r.1).sum();
        latencies.sort();
        let pct = |q: f64| {
            latencies
                .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        println!(
            "| {concurrency} | {} | {:.0}/s | {:.2} ms | {:.2} ms | {errors} |",
            latencies.len(),
            latencies.len() as f64 / elapsed,
            pct(0.50),
            pct(0.99)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// One keep-alive connection sending up to `count` compiles until `deadline`:
/// latencies of the 200s, and the number of other answers or failures.
fn client(address: &str, body: &str, count: usize, deadline: Instant) -> (Vec<Duration>, usize) {
    let mut latencies = Vec::with_capacity(count);
    let mut errors = 0;
    let Ok(stream) = TcpStream::connect(address) else {
        return (latencies, count);
    };
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream);
    let head = format!(
        "POST /v1/compile HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    for _ in 0..count {
        if Instant::now() > deadline {
            break;
        }
        let started = Instant::now();
        let stream = reader.get_mut();
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(body.as_bytes()).is_err()
        {
            errors += 1;
            break;
        }
        match read_response(&mut reader) {
            Some(200) => latencies.push(started.elapsed()),
            Some(_) => errors += 1,
            None => {
                errors += 1;
                break;
            }
        }
    }
    (latencies, errors)
}

/// Reads one response with a `content-length` body; its status.
fn read_response(reader: &mut BufReader<TcpStream>) -> Option<u16> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(status)
}

fn post(address: &str, body: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(address).ok()?;
    let head = format!(
        "POST /v1/compile HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body.as_bytes()).ok()?;
    read_response(&mut BufReader::new(stream))
}
