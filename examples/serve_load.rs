//! Load figures for `ctxpack serve` on the reference workload, beside the in-process
//! compile rate measured in the same run.
//!
//! ```sh
//! cargo build --release --workspace --bins --examples
//! target/release/examples/serve_load [REQUESTS_PER_LEVEL] [SECONDS_PER_LEVEL] [--shared]
//!     [--levels=1,8,32] [--rounds=5] [--paired] [--blocking] [--evidence=200]
//!     [--fresh] [--wrapper="valgrind --tool=callgrind --log-file=vg.log"]
//! ```
//!
//! Starts `ctxpack-serve` (next to this example's directory) on `127.0.0.1:0` over a
//! temporary registry holding the workload pack, then drives `POST /v1/compile` at
//! concurrency 1, 8 and 32 — each level bounded by a request count and a time limit,
//! over keep-alive loopback connections only — and reports throughput, p50, p99, the
//! errors seen, the service's CPU time per request (Linux) and how long a `/healthz`
//! probe sent every 20 ms meanwhile waited for its answer.
//!
//! The load generator runs on the same machine, so the cores are split (Linux): the
//! service gets every core but the last, the generator the last one. The goal is
//! `0.8 × cores × in-process rate`, where the in-process rate does what the service
//! does per request (decode the JSON inputs, compile, write the canonical envelope).
//! It is measured as the goal states it: one compiling thread pinned to each of the
//! service's cores, in a process with threads, as a host compiling on all its cores
//! is. Each level runs in `--rounds` rounds, each an in-process phase (one second)
//! followed by its share of the level's requests, so that both sides of each ratio
//! are measured within seconds of each other on a machine whose speed swings; the
//! level's ratio is the median over its rounds. With `--paired`, the in-process
//! threads run instead while each round's clients do, sharing the service's cores, so
//! that both sides see the same machine at every moment: the ratio is then the CPU
//! time per request, in-process over service (throughput and latency are those of a
//! shared core). The single-threaded rates (compile
//! only; the full work in a process without threads, where the system allocator
//! takes no locks) are printed first for reference. `--shared` runs the service and
//! the generator on every core. `--levels` picks the concurrency levels; `--wrapper`
//! runs the server under a tool such as callgrind (its instruction count per request
//! is the difference of two runs with different request counts). The clients spin on
//! non-blocking sockets (see `Socket`); `--blocking` makes them sleep in `read`.
//! `--evidence=N` sends the first N of the workload's 200 evidence items.
//!
//! The compiles are warm and hit the service's caches (token counts, content hashes,
//! decoded documents), since every request sends the same inputs: the cheapest compile
//! there is, where the transport weighs most. `--fresh` measures the workload's other
//! warm compile, "nothing cached": every request (and every in-process iteration)
//! stamps a number no earlier one used into each evidence, memory and history text,
//! so each compile counts, hashes and decodes its texts anew, as with the new evidence
//! a host retrieves for each request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ctxpack::registry::Registry;
use ctxpack::runtime::PreparedPack;

#[path = "../benches/support/workload.rs"]
mod workload;

fn main() {
    let shared = std::env::args().any(|a| a == "--shared");
    let option =
        |name: &str| std::env::args().find_map(|a| a.strip_prefix(name).map(str::to_owned));
    let levels: Vec<usize> = option("--levels=").map_or(vec![1, 8, 32], |l| {
        l.split(',').filter_map(|x| x.trim().parse().ok()).collect()
    });
    // `--wrapper="valgrind --tool=callgrind ..."` runs the server under a tool; the
    // in-process loops, which would not run under it, are skipped, and each level is
    // one round.
    let wrapper: Vec<String> = option("--wrapper=")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let in_process = wrapper.is_empty();
    let paired = in_process && std::env::args().any(|a| a == "--paired");
    // The clients spin on non-blocking sockets unless `--blocking` (see `Socket`).
    let spin = !std::env::args().any(|a| a == "--blocking");
    let rounds: usize = match option("--rounds=").and_then(|r| r.parse().ok()) {
        _ if !in_process => 1,
        Some(r) => r,
        None => 5,
    }
    .max(1);
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let per_level: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(400);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    // `--evidence=N` sends the first N of the workload's 200 evidence items: the
    // request body shrinks with N (about 385 KB at 200, 104 KB at 20), so runs at two
    // sizes show how much of the gap to the in-process rate moving the body costs.
    let evidence = option("--evidence=")
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let Some(w) = workload::load(evidence) else {
        return;
    };
    let fresh = std::env::args().any(|a| a == "--fresh");

    // The machine is split: the service gets every core but the last, the load
    // generator (this process's client threads) the last one, so the two do not
    // compete for the cores the service is measured on. `--shared` runs both on
    // every core, as earlier figures were taken.
    let cores: Vec<usize> = affinity::current();
    let (service_cores, generator_cores) = match (shared, cores.len()) {
        (false, n) if n >= 2 => (cores[..n - 1].to_vec(), cores[n - 1..].to_vec()),
        _ => (cores.clone(), cores.clone()),
    };
    println!(
        "cores: service {service_cores:?}, load generator {generator_cores:?}{}",
        if service_cores == generator_cores {
            " (shared)"
        } else {
            ""
        }
    );

    let Ok(pack) = PreparedPack::new(w.artifact.clone()) else {
        eprintln!("the workload pack does not prepare");
        return;
    };
    let _ = pack.compile(&w.inputs);
    // What the service does for each request, in process: decode the JSON inputs
    // (the same fast path), compile, and write the canonical envelope.
    let inputs = Stamped::new(serde_json::to_value(&w.inputs).unwrap_or_default(), fresh);
    let full_work = || {
        inputs.with_next(|json| {
            ctxpack::runtime::from_json_bytes::<ctxpack::runtime::CompileInputs>(json)
                .and_then(|inputs| pack.compile_canonical(&inputs).ok())
                .is_some_and(|compiled| !compiled.1.is_empty())
        })
    };
    if in_process {
        // For reference, before this process starts a thread: one core, no locks in
        // the allocator.
        affinity::pin(&service_cores[..1]);
        let compile_only = loop_on_this_thread(for_time(Duration::from_secs(2)), || {
            pack.compile(&w.inputs).is_ok()
        });
        let full = loop_on_this_thread(for_time(Duration::from_secs(2)), full_work);
        println!(
            "in-process, one thread, no other thread in the process: compile only (cache hit) {:.0}/s; decode ({} KB of JSON) + compile{} + canonical bytes {:.0}/s, {:.0} µs of CPU each",
            compile_only.rate,
            inputs.len() / 1024,
            if fresh { " (nothing cached)" } else { "" },
            full.rate,
            full.cpu_us,
        );
    }

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
    affinity::pin(&service_cores);
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(&server);
            c
        }
        None => Command::new(&server),
    };
    let Ok(mut child) = command
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
    // The server inherited the service's cores; the client threads spawned from here
    // on inherit the load generator's.
    affinity::pin(&generator_cores);
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
    let body = Stamped::new(body, fresh);
    // Warm the service (prepared pack, block cache) once.
    body.with_next(|bytes| post(&address, bytes));

    let pid = child.id();
    let k = service_cores.len();
    if fresh {
        println!("fresh: every compile's evidence, memory and history texts are new to its caches (nothing cached)");
    }
    let ratio_column = if paired {
        println!(
            "paired: one in-process thread on each of the {k} service core(s) runs beside the service while each round's clients do, sharing its cores; the ratio is CPU time per request, in-process over service (the goal is 0.8)"
        );
        "in-process ÷ service CPU time per request"
    } else {
        if in_process {
            println!(
                "in-process rate: one thread on each of the {k} service core(s), in this process (which has threads), one second before each round; the goal is 0.8 × that rate"
            );
        }
        "throughput ÷ in-process rate"
    };
    println!(
        "| concurrency | requests | throughput | p50 | p99 | errors | service CPU / request | in-process rate, CPU / request | {ratio_column}, median (range) of {rounds} | `/healthz` p50, max (probes) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let load = Load {
        address: &address,
        body: &body,
        spin,
    };
    for &concurrency in &levels {
        let mut latencies: Vec<Duration> = Vec::new();
        let mut probes: Vec<Duration> = Vec::new();
        let (mut errors, mut elapsed, mut cpu_spent) = (0, 0.0, Some(Duration::ZERO));
        let (mut ratios, mut rates, mut cpus) = (Vec::new(), Vec::new(), Vec::new());
        let per_round = per_level.div_ceil(rounds);
        let per_client = per_round.div_ceil(concurrency);
        let mut connections: Vec<Connection> = (0..concurrency).map(|_| None).collect();
        for _ in 0..rounds {
            let before = (in_process && !paired).then(|| {
                loop_on_cores(
                    &service_cores,
                    &for_time(Duration::from_secs(1)),
                    &full_work,
                )
            });
            let round = drive(
                load,
                &mut connections,
                per_client,
                Duration::from_secs(seconds).div_f64(rounds as f64),
                pid,
                paired.then_some((&service_cores[..], &full_work as &(dyn Fn() -> bool + Sync))),
            );
            let requests = (round.ok + round.errors).max(1) as f64;
            match (before, round.beside) {
                (Some(baseline), _) => ratios.push(round.ok as f64 / round.elapsed / baseline.rate),
                (None, Some(beside)) => {
                    if let Some(cpu) = round.cpu.filter(|c| !c.is_zero()) {
                        ratios.push(beside.cpu_us / (cpu.as_secs_f64() * 1e6 / requests));
                    }
                }
                (None, None) => {}
            }
            if let Some(baseline) = before.or(round.beside) {
                rates.push(baseline.rate);
                cpus.push(baseline.cpu_us);
            }
            errors += round.errors;
            elapsed += round.elapsed;
            cpu_spent = cpu_spent.zip(round.cpu).map(|(a, b)| a + b);
            latencies.extend(round.latencies);
            probes.extend(round.probes);
        }
        latencies.sort();
        probes.sort();
        let cpu_per_request = cpu_spent.map_or(String::new(), |t| {
            let requests = (latencies.len() + errors).max(1) as f64;
            format!("{:.0} µs", t.as_secs_f64() * 1e6 / requests)
        });
        let versus = match (rates.is_empty(), paired) {
            (true, _) => String::new(),
            // Sharing the service's cores, the loop's rate says nothing.
            (false, true) => format!("{:.0} µs", median(&mut cpus)),
            (false, false) => format!("{:.0}/s, {:.0} µs", median(&mut rates), median(&mut cpus)),
        };
        let ratio = if ratios.is_empty() {
            String::new()
        } else {
            let (low, high) = ratios
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
            format!("{:.2} ({low:.2}–{high:.2})", median(&mut ratios))
        };
        println!(
            "| {concurrency} | {} | {:.0}/s | {:.2} ms | {:.2} ms | {errors} | {cpu_per_request} | {versus} | {ratio} | {:.2} ms, {:.2} ms ({}) |",
            latencies.len(),
            latencies.len() as f64 / elapsed.max(f64::MIN_POSITIVE),
            millis(&latencies, 0.50),
            millis(&latencies, 0.99),
            millis(&probes, 0.50),
            millis(&probes, 1.0),
            probes.len()
        );
    }
    stop(&mut child);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What an in-process loop did: its rate and the CPU time of each iteration.
#[derive(Clone, Copy)]
struct Loop {
    rate: f64,
    cpu_us: f64,
}

/// A condition that holds once `time` has passed from now.
fn for_time(time: Duration) -> impl Fn() -> bool + Sync {
    let end = Instant::now() + time;
    move || Instant::now() >= end
}

/// Runs `work` on the calling thread until `done`.
fn loop_on_this_thread(done: impl Fn() -> bool, work: impl Fn() -> bool) -> Loop {
    let started = Instant::now();
    let cpu_started = cpu::thread();
    let mut n = 0u32;
    while !done() {
        std::hint::black_box(work());
        n += 1;
    }
    let n = f64::from(n.max(1));
    Loop {
        rate: n / started.elapsed().as_secs_f64(),
        cpu_us: cpu_started
            .zip(cpu::thread())
            .map_or(0.0, |(a, b)| (b - a).as_secs_f64() * 1e6 / n),
    }
}

/// Runs `work` on one thread pinned to each of `cores` at once, until `done`: the
/// threads' rates summed, and the mean CPU time of an iteration.
fn loop_on_cores(
    cores: &[usize],
    done: &(impl Fn() -> bool + Sync + ?Sized),
    work: &(impl Fn() -> bool + Sync + ?Sized),
) -> Loop {
    let loops: Vec<Loop> = std::thread::scope(|s| {
        let threads: Vec<_> = cores
            .iter()
            .map(|&core| {
                s.spawn(move || {
                    affinity::pin(&[core]);
                    loop_on_this_thread(done, work)
                })
            })
            .collect();
        threads.into_iter().filter_map(|t| t.join().ok()).collect()
    });
    Loop {
        rate: loops.iter().map(|l| l.rate).sum(),
        cpu_us: loops.iter().map(|l| l.cpu_us).sum::<f64>() / loops.len().max(1) as f64,
    }
}

/// One round of a level: its answers' latencies, the other answers or failures, how
/// long it took, the service's CPU time meanwhile and the probes' latencies.
struct Round {
    latencies: Vec<Duration>,
    ok: usize,
    errors: usize,
    elapsed: f64,
    cpu: Option<Duration>,
    probes: Vec<Duration>,
    /// The in-process loop that ran beside the clients, if one did.
    beside: Option<Loop>,
}

/// What each client sends, where, and how it waits for the answer.
#[derive(Clone, Copy)]
struct Load<'a> {
    address: &'a str,
    body: &'a Stamped,
    spin: bool,
}

/// Drives one client per connection in `connections`, each sending up to
/// `per_client` compiles within `time`, with a `/healthz` probe beside them, and
/// `beside`'s work on each of its cores while they run.
fn drive(
    load: Load<'_>,
    connections: &mut [Connection],
    per_client: usize,
    time: Duration,
    pid: u32,
    beside: Option<(&[usize], &(dyn Fn() -> bool + Sync))>,
) -> Round {
    let deadline = Instant::now() + time;
    let started = Instant::now();
    let cpu_before = cpu::process(pid);
    let loaded = std::sync::atomic::AtomicBool::new(true);
    let unloaded = || !loaded.load(std::sync::atomic::Ordering::Relaxed);
    let (results, probes, beside) = std::thread::scope(|s| {
        let prober = s.spawn(|| probe(load.address, &loaded));
        let beside = beside.map(|(cores, work)| s.spawn(|| loop_on_cores(cores, &unloaded, work)));
        let handles: Vec<_> = connections
            .iter_mut()
            .map(|c| s.spawn(move || client(load, per_client, deadline, c)))
            .collect();
        let results: Vec<(Vec<Duration>, usize)> =
            handles.into_iter().filter_map(|h| h.join().ok()).collect();
        loaded.store(false, std::sync::atomic::Ordering::Relaxed);
        let beside = beside.and_then(|b| b.join().ok());
        (results, prober.join().unwrap_or_default(), beside)
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_before.zip(cpu::process(pid)).map(|(a, b)| b - a);
    let latencies: Vec<Duration> = results.iter().flat_map(|r| r.0.clone()).collect();
    Round {
        ok: latencies.len(),
        latencies,
        errors: results.iter().map(|r| r.1).sum(),
        elapsed,
        cpu,
        probes,
        beside,
    }
}

/// The median of `values` (0 when there are none).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Stops the server as an operator would (SIGTERM: it drains and exits, and a tool
/// it runs under writes its report), and kills it if it has not ended within a minute.
fn stop(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: signals a child process this program started and has not reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// CPU time (Linux): this machine's speed swings with its neighbours' load, so
/// throughput alone compares runs poorly; the CPU time each request costs the service
/// and the in-process loop is steadier, and their ratio is what the throughput ratio
/// tends to when the service's cores are saturated.
mod cpu {
    use std::time::Duration;

    /// The calling thread's CPU time.
    #[cfg(target_os = "linux")]
    pub fn thread() -> Option<Duration> {
        // SAFETY: `t` is a plain struct the call fills in.
        unsafe {
            let mut t: libc::timespec = std::mem::zeroed();
            (libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) == 0).then(|| {
                Duration::new(
                    u64::try_from(t.tv_sec).unwrap_or(0),
                    u32::try_from(t.tv_nsec).unwrap_or(0),
                )
            })
        }
    }

    /// The user and system CPU time of process `pid`, all its threads, from
    /// `/proc/PID/stat` (in clock ticks).
    #[cfg(target_os = "linux")]
    pub fn process(pid: u32) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name, which is in parentheses and may hold
        // spaces: state is field 3, utime 14 and stime 15.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
        Some(Duration::from_micros(ticks * 1_000_000 / hz))
    }

    #[cfg(not(target_os = "linux"))]
    pub fn thread() -> Option<Duration> {
        None
    }

    #[cfg(not(target_os = "linux"))]
    pub fn process(_: u32) -> Option<Duration> {
        None
    }
}

/// The calling thread's CPU affinity (Linux); elsewhere one core and no pinning.
mod affinity {
    /// The cores the calling thread may run on.
    #[cfg(target_os = "linux")]
    pub fn current() -> Vec<usize> {
        // SAFETY: `set` is a plain bitmask the call fills in; its size is passed.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return vec![0];
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// Restricts the calling thread (and the threads and processes it starts from
    /// now on) to `cores`.
    #[cfg(target_os = "linux")]
    pub fn pin(cores: &[usize]) {
        // SAFETY: as above; the set is built from core numbers below CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cores {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                eprintln!(
                    "cannot pin to cores {cores:?}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn current() -> Vec<usize> {
        vec![0]
    }

    #[cfg(not(target_os = "linux"))]
    pub fn pin(_: &[usize]) {}
}

/// A client's keep-alive connection, kept from one round to the next so that each
/// round measures warm connections, not their setup.
type Connection = Option<BufReader<Socket>>;

/// A client's socket. Spinning, it is non-blocking and a read or write that would
/// block yields the thread and tries again, so the client never sleeps on the
/// socket: over loopback, the sender of data runs the receiver's side of TCP in its
/// own system call, and waking a receiver that sleeps there — a kick of another CPU,
/// a VM exit under a hypervisor — is charged to the sender, the service, although a
/// client on another host would pay it on its own CPU. Blocking (`--blocking`), the
/// client sleeps in `read` and the service pays that wake-up for each answer.
struct Socket {
    stream: TcpStream,
    spin: bool,
}

impl Socket {
    fn retry<T>(
        &mut self,
        mut op: impl FnMut(&mut TcpStream) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        loop {
            match op(&mut self.stream) {
                Err(e) if self.spin && e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::yield_now()
                }
                result => return result,
            }
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.retry(|s| s.read(buf))
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.retry(|s| s.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.retry(|s| s.flush())
    }
}

/// A keep-alive connection to `address`, without Nagle's delay; spinning or not.
fn connect(address: &str, spin: bool) -> Option<BufReader<Socket>> {
    let stream = TcpStream::connect(address).ok()?;
    let _ = stream.set_nodelay(true);
    if spin {
        stream.set_nonblocking(true).ok()?;
    }
    Some(BufReader::new(Socket { stream, spin }))
}

/// One client sending up to `count` compiles until `deadline` over `connection`
/// (opened if there is none; dropped after a failure): latencies of the 200s, and the
/// number of other answers or failures.
fn client(
    load: Load<'_>,
    count: usize,
    deadline: Instant,
    connection: &mut Connection,
) -> (Vec<Duration>, usize) {
    let Load {
        address,
        body,
        spin,
    } = load;
    let mut latencies = Vec::with_capacity(count);
    let mut errors = 0;
    let reader = match connection {
        Some(reader) => reader,
        None => match connect(address, spin) {
            Some(reader) => connection.insert(reader),
            None => return (latencies, count),
        },
    };
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
        let sent = body.with_next(|bytes| {
            stream.write_all(head.as_bytes()).is_ok() && stream.write_all(bytes).is_ok()
        });
        if !sent {
            errors += 1;
            *connection = None;
            break;
        }
        match read_response(reader) {
            Some(200) => latencies.push(started.elapsed()),
            Some(_) => errors += 1,
            None => {
                errors += 1;
                *connection = None;
                break;
            }
        }
    }
    (latencies, errors)
}

/// The `q` quantile of sorted durations, in milliseconds (0 when there are none).
fn millis(sorted: &[Duration], q: f64) -> f64 {
    let at = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(at).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Asks `/healthz` every 20 ms over one keep-alive connection while `loaded` holds, as
/// a liveness probe would under load; the time each answer took.
fn probe(address: &str, loaded: &std::sync::atomic::AtomicBool) -> Vec<Duration> {
    let mut latencies = Vec::new();
    let Some(mut reader) = connect(address, false) else {
        return latencies;
    };
    let request = format!("GET /healthz HTTP/1.1\r\nhost: {address}\r\n\r\n");
    while loaded.load(std::sync::atomic::Ordering::Relaxed) {
        let started = Instant::now();
        if reader.get_mut().write_all(request.as_bytes()).is_err() {
            break;
        }
        match read_response(&mut reader) {
            Some(200) => latencies.push(started.elapsed()),
            _ => break,
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    latencies
}

/// Reads one response with a `content-length` body; its status.
fn read_response(reader: &mut BufReader<impl Read>) -> Option<u16> {
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

fn post(address: &str, body: &[u8]) -> Option<u16> {
    let mut stream = TcpStream::connect(address).ok()?;
    let head = format!(
        "POST /v1/compile HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).ok()?;
    stream.write_all(body).ok()?;
    read_response(&mut BufReader::new(stream))
}

/// A JSON document sent (or decoded) again and again. Fresh (`--fresh`), each use
/// stamps a number no earlier use had into every evidence, memory and history text,
/// in place (the digits have a fixed width, so the length stays), so that no compile
/// finds any of its texts in a cache.
struct Stamped {
    template: Vec<u8>,
    /// Where each text's digits are, when fresh.
    stamps: Vec<usize>,
}

/// What a fresh text starts with; its zeros are the digits each use writes.
const STAMP: &str = "[r000000000] ";
const STAMP_DIGITS: std::ops::Range<usize> = 2..11;

/// The next stamp, unique across every thread of this process.
static NEXT_STAMP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

thread_local! {
    /// This thread's stamped copy, and the template it copies (by address).
    static STAMPED: std::cell::RefCell<(usize, Vec<u8>)> =
        const { std::cell::RefCell::new((0, Vec::new())) };
}

impl Stamped {
    fn new(mut document: serde_json::Value, fresh: bool) -> Stamped {
        if !fresh {
            let template = document.to_string().into_bytes();
            return Stamped {
                template,
                stamps: Vec::new(),
            };
        }
        for path in ["/evidence", "/memory", "/request/history"] {
            let items = document.pointer_mut(path).and_then(|v| v.as_array_mut());
            for text in items.into_iter().flatten().map(|item| &mut item["content"]) {
                if let Some(s) = text.as_str() {
                    *text = serde_json::Value::from(format!("{STAMP}{s}"));
                }
            }
        }
        let template = document.to_string().into_bytes();
        let stamps = template
            .windows(STAMP.len())
            .enumerate()
            .filter(|(_, w)| *w == STAMP.as_bytes())
            .map(|(at, _)| at + STAMP_DIGITS.start)
            .collect();
        Stamped { template, stamps }
    }

    fn len(&self) -> usize {
        self.template.len()
    }

    /// Calls `use_it` with the document, stamped anew when fresh.
    fn with_next<T>(&self, use_it: impl FnOnce(&[u8]) -> T) -> T {
        if self.stamps.is_empty() {
            return use_it(&self.template);
        }
        let n = NEXT_STAMP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let digits = format!("{n:0width$}", width = STAMP_DIGITS.len());
        STAMPED.with_borrow_mut(|(of, copy)| {
            let id = self.template.as_ptr() as usize;
            if *of != id {
                *of = id;
                copy.clear();
                copy.extend_from_slice(&self.template);
            }
            for &at in &self.stamps {
                copy[at..at + STAMP_DIGITS.len()].copy_from_slice(digits.as_bytes());
            }
            use_it(copy)
        })
    }
}
