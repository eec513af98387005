//! The compile service through the real binary on `127.0.0.1:0`: the CLI's exact
//! bytes for every conformance case and target, every error status, metrics that
//! move, one preparation for concurrent first requests, and a graceful shutdown that
//! finishes in-flight requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ctxpack::commands::compile::{execute, CompileArgs, Target};
use ctxpack::registry::Registry;
use serde_json::{json, Value};

mod support;
use support::{basic_body, repo};

/// A registry with the conformance packs published, and their artifacts as files.
struct Packs {
    dir: tempfile::TempDir,
}

impl Packs {
    fn new() -> Packs {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::open(dir.path().join("registry"));
        let mut sources: Vec<PathBuf> = std::fs::read_dir(repo("tests/conformance/packs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "ctxpack"))
            .collect();
        sources.sort();
        assert!(sources.len() >= 4, "the conformance packs are there");
        for source in sources {
            let name = source.file_stem().unwrap().to_string_lossy().into_owned();
            let built = ctxpack::build::build_file(&source, &Default::default()).unwrap();
            std::fs::write(
                dir.path().join(format!("{name}.json")),
                built.artifact.canonical_bytes(),
            )
            .unwrap();
            registry.publish(&built.artifact).unwrap();
        }
        Packs { dir }
    }

    fn registry(&self) -> PathBuf {
        self.dir.path().join("registry")
    }

    /// The registry, the shop pack's pinned reference and its file there.
    fn shop(&self) -> (Registry, ctxpack::registry::PackRef, PathBuf) {
        let registry = Registry::open(self.registry());
        let reference = ctxpack::registry::PackRef::parse("conformance/shop@1.0.0").unwrap();
        let file = registry.path_of(&reference);
        (registry, reference, file)
    }
}

struct Server {
    child: Child,
    address: String,
    /// The request log (stderr after the `listening` line), as it arrives.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    fn start(packs: &Packs, extra: &[&str]) -> Server {
        Server::start_with(packs, extra, None)
    }

    /// [`Server::start`] held to the trust policy in `trust` (`$CTXPACK_TRUST`).
    fn start_with(packs: &Packs, extra: &[&str], trust: Option<&Path>) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ctxpack-serve"));
        command.env_remove("CTXPACK_TRUST");
        if let Some(trust) = trust {
            command.env("CTXPACK_TRUST", trust);
        }
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--registry"])
            .arg(packs.registry())
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let line: Value = serde_json::from_str(&first).unwrap();
        let address = line["listening"].as_str().unwrap().to_owned();
        // Keep draining the request log so the server never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { return };
                lines.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            address,
            log,
        }
    }

    /// A connection with a request's head sent, announcing a body of `length` bytes.
    fn open(&self, method: &str, path: &str, length: usize) -> TcpStream {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n",
            self.address,
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream
    }

    /// A compile whose head and first 10 bytes of `body` are sent, the rest not yet;
    /// waits 200 ms for the server to be reading it.
    fn begin_compile(&self, body: &str) -> TcpStream {
        let mut stream = self.open("POST", "/v1/compile", body.len());
        stream.write_all(&body.as_bytes()[..10]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stream
    }

    /// Sends SIGTERM, as an operator stopping the service would.
    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The log's lines once there are `n` of them (waits up to ten seconds).
    fn log_lines(&self, n: usize) -> Vec<String> {
        for _ in 0..1000 {
            let lines = self.log.lock().unwrap().clone();
            if lines.len() >= n {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.log.lock().unwrap().clone()
    }

    fn request(&self, method: &str, path: &str, body: &[u8]) -> Response {
        let mut stream = self.open(method, path, body.len());
        stream.write_all(body).unwrap();
        read_response(stream)
    }

    fn compile(&self, body: &Value) -> Response {
        self.request("POST", "/v1/compile", body.to_string().as_bytes())
    }

    fn metrics(&self) -> String {
        self.request("GET", "/metrics", b"").text()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {}", self.text()))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_response(stream: TcpStream) -> Response {
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut body = Vec::new();
    reader.read_to_end(&mut body).unwrap();
    let response = Response {
        status,
        headers,
        body,
    };
    // Only fixed-length bodies are expected from this service.
    if let Some(length) = response.header("content-length") {
        assert_eq!(length.parse::<usize>().unwrap(), response.body.len());
    }
    response
}

/// The value of a metric line `name{labels} value` whose labels include every one of
/// `with`.
fn metric(text: &str, name: &str, with: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| with.iter().all(|w| l.contains(w)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn answers_are_the_cli_bytes_for_every_conformance_case_and_target() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(repo("tests/conformance"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    cases.sort();
    let scratch = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for case_dir in &cases {
        let case: Value =
            serde_json::from_slice(&std::fs::read(case_dir.join("case.json")).unwrap()).unwrap();
        let source = case["pack"].as_str().unwrap();
        let name = Path::new(source).file_stem().unwrap().to_str().unwrap();
        let artifact = packs.dir.path().join(format!("{name}.json"));
        let reference = format!("conformance/{name}@1.0.0");
        let write = |key: &str| {
            case.get(key).map(|v| {
                let p = scratch.path().join(format!("{key}.json"));
                std::fs::write(&p, v.to_string()).unwrap();
                p
            })
        };
        let (run, request, evidence, memory) = (
            write("run"),
            write("request"),
            write("evidence"),
            write("memory"),
        );
        for target in [Target::Raw, Target::Openai, Target::Anthropic] {
            let args = CompileArgs {
                pack: artifact.display().to_string(),
                run: run.clone().unwrap(),
                request: request.clone().unwrap(),
                evidence: evidence.clone(),
                memory: memory.clone(),
                target,
                explain: false,
                show_prompt: false,
                pretty: false,
                json_errors: true,
                registry: None,
                model: Some("m".into()),
                max_tokens: 256,
                controls: None,
            };
            let mut body = json!({
                "pack": reference,
                "run": case["run"],
                "request": case["request"],
                "target": format!("{target:?}").to_lowercase(),
                "model": "m",
                "max_tokens": 256,
            });
            for key in ["evidence", "memory"] {
                if let Some(v) = case.get(key) {
                    body[key] = v.clone();
                }
            }
            let response = server.compile(&body);
            match execute(&args) {
                Ok(expected) => {
                    assert_eq!(
                        response.status,
                        200,
                        "{}: {}",
                        case_dir.display(),
                        response.text()
                    );
                    assert_eq!(response.text(), expected, "{}", case_dir.display());
                    assert_eq!(response.header("content-type"), Some("application/json"));
                    assert!(response
                        .header("x-ctxpack-ledger-hash")
                        .is_some_and(|h| h.starts_with("blake3:")));
                }
                Err(error) => {
                    assert_eq!(response.json(), error.to_json(), "{}", case_dir.display());
                    assert_eq!(response.status, 422, "{}", case_dir.display());
                }
            }
            compared += 1;
        }
    }
    assert!(compared >= 90, "{compared}");
}

#[test]
fn every_error_status() {
    let packs = Packs::new();
    let server = Server::start(&packs, &["--body-limit", "100000"]);
    let kind = |r: &Response| r.json()["error"]["kind"].as_str().unwrap_or("").to_owned();
    // 400: not JSON.
    let r = server.request("POST", "/v1/compile", b"{not json");
    assert_eq!((r.status, kind(&r).as_str()), (400, "unparseable_input"));
    // A key given twice in one object, here in the request's context: refused, not the
    // last one silently kept.
    let text =
        basic_body()
            .to_string()
            .replacen("\"context\":{", "\"context\":{\"x\":1,\"x\":2,", 1);
    assert!(text.contains("\"x\":2"), "{text}");
    let r = server.request("POST", "/v1/compile", text.as_bytes());
    assert_eq!((r.status, kind(&r).as_str()), (400, "unparseable_input"));
    assert!(r.text().contains("is given twice"), "{}", r.text());
    // 422: invalid input, an unpinned pack, a refusal with a provider target.
    let mut body = basic_body();
    body["request"]["context"]["user"]["age"] = json!("old");
    let r = server.compile(&body);
    assert_eq!((r.status, kind(&r).as_str()), (422, "invalid_input"));
    // A number no input can take is invalid input too, though the JSON is well formed;
    // so is an array where the run object belongs.
    let text = basic_body()
        .to_string()
        .replacen('{', "{\"max_tokens\": 1e400, ", 1);
    let r = server.request("POST", "/v1/compile", text.as_bytes());
    assert_eq!((r.status, kind(&r).as_str()), (422, "invalid_input"));
    let mut body = basic_body();
    body["run"] = json!(["r-1", "supervised"]);
    let r = server.compile(&body);
    assert_eq!((r.status, kind(&r).as_str()), (422, "invalid_input"));
    let mut body = basic_body();
    body["pack"] = json!("conformance/shop");
    let r = server.compile(&body);
    assert_eq!((r.status, kind(&r).as_str()), (422, "unpinned_pack"));
    // A name part too long to be a directory name is no reference (and no file error).
    let mut body = basic_body();
    body["pack"] = json!(format!("{}/shop@1.0.0", "x".repeat(300)));
    let r = server.compile(&body);
    assert_eq!(
        (r.status, kind(&r).as_str()),
        (422, "invalid_pack_reference")
    );
    let mut body = basic_body();
    body["request"]["channel"] = json!("voice");
    body["request"]["context"]["user"]["age"] = json!(15);
    body["target"] = json!("openai");
    let r = server.compile(&body);
    assert_eq!((r.status, kind(&r).as_str()), (422, "refused"));
    assert_eq!(r.json()["error"]["exit_code"], 5);
    // 404: a pack the registry does not have.
    let mut body = basic_body();
    body["pack"] = json!("conformance/shop@9.9.9");
    let r = server.compile(&body);
    assert_eq!((r.status, kind(&r).as_str()), (404, "not_found"));
    // 413: over the body limit.
    let big = vec![b' '; 200_000];
    let r = server.request("POST", "/v1/compile", &big);
    assert_eq!((r.status, kind(&r).as_str()), (413, "payload_too_large"));
    assert_eq!(r.json()["error"]["exit_code"], 3);
    drop(server);
    // 503 with Retry-After: no compile slot (0 refuses every compile).
    let server = Server::start(&packs, &["--max-concurrency", "0"]);
    let r = server.compile(&basic_body());
    assert_eq!((r.status, kind(&r).as_str()), (503, "overloaded"));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json()["error"]["exit_code"], 5);
}

#[test]
fn one_json_log_line_per_request_without_request_text() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    let ok = server.compile(&basic_body());
    assert_eq!(ok.status, 200);
    let mut invalid = basic_body();
    invalid["request"]["context"]["user"]["age"] = json!("old");
    assert_eq!(server.compile(&invalid).status, 422);
    assert_eq!(server.request("GET", "/healthz", b"").status, 200);
    let lines = server.log_lines(3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let entries: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not one JSON line: {l}")))
        .collect();
    let compiled = &entries[0];
    assert_eq!(compiled["route"], "/v1/compile");
    assert_eq!(compiled["status"], 200);
    assert_eq!(compiled["pack"], "conformance/shop");
    assert_eq!(compiled["version"], "1.0.0");
    assert_eq!(compiled["outcome"], "ok");
    assert!(compiled["intent"].is_string(), "{compiled}");
    assert!(compiled["duration_ms"].is_number(), "{compiled}");
    assert_eq!(
        compiled["ledger_hash"].as_str(),
        ok.header("x-ctxpack-ledger-hash"),
        "{compiled}"
    );
    assert_eq!(entries[1]["status"], 422);
    assert_eq!(entries[1]["outcome"], "invalid_input");
    assert_eq!(entries[2]["route"], "/healthz");
    // What the caller sent never reaches the log: neither its message nor its context.
    let message = basic_body()["request"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!message.is_empty());
    for line in &lines {
        assert!(!line.contains(&message), "{line}");
        assert!(!line.contains("\"old\""), "{line}");
    }
}

#[test]
fn a_compile_past_the_request_timeout_answers_503_and_the_service_goes_on() {
    let packs = Packs::new();
    // A deadline of zero: every compile takes longer, however fast the machine (an
    // answer that beats the timer's first tick is late all the same).
    let server = Server::start(&packs, &["--timeout-ms", "0"]);
    let r = server.compile(&basic_body());
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["kind"], "timeout");
    assert_eq!(r.json()["error"]["exit_code"], 5);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(server.request("GET", "/healthz", b"").status, 200);
    drop(server);
    let server = Server::start(&packs, &["--timeout-ms", "30000"]);
    assert_eq!(server.compile(&basic_body()).status, 200);
}

#[test]
fn a_pack_that_fails_its_hash_is_refused_and_never_cached() {
    let packs = Packs::new();
    let (_, _, file) = packs.shop();
    let original = std::fs::read(&file).unwrap();
    let text = String::from_utf8(original.clone()).unwrap();
    assert!(text.contains("conformance"));
    // Same length, other bytes: only the hash can tell.
    std::fs::write(&file, text.replacen("conformance", "c0nformance", 1)).unwrap();
    let server = Server::start(&packs, &[]);
    let r = server.compile(&basic_body());
    // An artifact hash mismatch is invalid input (exit 4), as `ctxpack compile` says.
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["kind"], "corrupt_registry");
    assert_eq!(r.json()["error"]["exit_code"], 4);
    assert_eq!(
        metric(&server.metrics(), "ctxpack_prepared_packs", &[]),
        Some(0.0)
    );
    // Repaired, the same server serves it: the failure was not cached.
    std::fs::write(&file, &original).unwrap();
    assert_eq!(server.compile(&basic_body()).status, 200);
    assert_eq!(
        metric(&server.metrics(), "ctxpack_prepared_packs", &[]),
        Some(1.0)
    );
}

#[test]
fn a_pack_without_the_signature_its_scope_requires_is_refused_and_never_cached() {
    let packs = Packs::new();
    let (public, secret) = ctxpack::signing::generate(None).unwrap();
    let key = public.lines().last().unwrap();
    let trust = packs.dir.path().join("ctxpack.trust.toml");
    std::fs::write(
        &trust,
        format!("[scopes.conformance]\nkeys = [\"{key}\"]\n"),
    )
    .unwrap();
    let server = Server::start_with(&packs, &[], Some(&trust));
    let r = server.compile(&basic_body());
    assert_eq!(r.status, 422, "{}", r.text());
    assert_eq!(r.json()["error"]["exit_code"], 4, "{}", r.text());
    assert_eq!(r.json()["error"]["kind"], "signature_missing");
    assert_eq!(
        metric(&server.metrics(), "ctxpack_prepared_packs", &[]),
        Some(0.0)
    );
    // Signed with the trusted key, the same server serves it.
    let (registry, reference, file) = packs.shop();
    let bytes = std::fs::read(file).unwrap();
    let artifact = ctxpack::artifact::verify_bytes(&bytes).unwrap();
    let hash = artifact.hash.clone().unwrap();
    let signature = ctxpack::signing::sign(
        &secret,
        None,
        &artifact.name,
        &artifact.version,
        &hash,
        &bytes,
    )
    .unwrap();
    registry.store_signature(&reference, &signature).unwrap();
    let r = server.compile(&basic_body());
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn metrics_move_with_known_requests() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    for _ in 0..3 {
        assert_eq!(server.compile(&basic_body()).status, 200);
    }
    let mut refused = basic_body();
    refused["request"]["channel"] = json!("voice");
    refused["request"]["context"]["user"]["age"] = json!(15);
    assert_eq!(server.compile(&refused).status, 200);
    let text = server.metrics();
    let pack = ["pack=\"conformance/shop\"", "version=\"1.0.0\""];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        pack.iter().copied().chain(extra.iter().copied()).collect()
    };
    assert_eq!(
        metric(
            &text,
            "ctxpack_compiles_total",
            &with(&["intent=\"refund\"", "outcome=\"ok\""])
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "ctxpack_compiles_total",
            &with(&["outcome=\"refused\""])
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(&text, "ctxpack_compile_duration_seconds_count", &pack),
        Some(4.0)
    );
    assert_eq!(
        metric(
            &text,
            "ctxpack_tools_surfaced_count",
            &with(&["intent=\"refund\""])
        ),
        Some(4.0)
    );
    assert_eq!(metric(&text, "ctxpack_prepared_packs", &[]), Some(1.0));
    assert_eq!(
        metric(
            &text,
            "ctxpack_http_requests_total",
            &["route=\"/v1/compile\"", "status=\"200\""]
        ),
        Some(4.0)
    );
    // Request text never becomes a label value.
    let mut odd = basic_body();
    odd["request"]["intent"] = json!("attacker-chosen");
    odd["pack"] = json!("conformance/shop@1.0.0");
    server.compile(&odd);
    server.request("BREW", "/coffee", b"");
    let text = server.metrics();
    assert!(
        !text.contains("attacker-chosen") && !text.contains("coffee") && !text.contains("BREW")
    );
    // Every sample line parses as `name{labels} value`.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn concurrent_first_requests_prepare_the_pack_once() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| server.compile(&basic_body()).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let text = server.metrics();
    assert_eq!(
        metric(
            &text,
            "ctxpack_pack_preparations_total",
            &["outcome=\"ok\""]
        ),
        Some(1.0),
        "{text}"
    );
}

/// Compiles run at most one per core; the requests beyond that wait their turn and
/// get the same bytes as requests sent one at a time.
#[test]
fn more_concurrent_compiles_than_cores_answer_the_same_bytes() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    let alone = server.compile(&basic_body());
    assert_eq!(alone.status, 200, "{}", alone.text());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let answers: Vec<Response> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cores * 8)
            .map(|_| s.spawn(|| server.compile(&basic_body())))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &answers {
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.body, alone.body);
        assert_eq!(
            r.header("x-ctxpack-ledger-hash"),
            alone.header("x-ctxpack-ledger-hash")
        );
    }
    let text = server.metrics();
    assert_eq!(
        metric(
            &text,
            "ctxpack_compile_duration_seconds_count",
            &["pack=\"conformance/shop\""]
        ),
        Some((cores * 8 + 1) as f64),
        "{text}"
    );
}

/// Probes are answered between two compiles: while clients keep every core
/// compiling, `/healthz` and `/metrics` still answer, each well within the timeout a
/// liveness probe or a scrape has.
#[test]
fn probes_answer_while_every_core_compiles() {
    let packs = Packs::new();
    let server = Server::start(&packs, &[]);
    assert_eq!(server.compile(&basic_body()).status, 200);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let body = basic_body();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (slowest, compiled) = std::thread::scope(|s| {
        let clients: Vec<_> = (0..cores * 4)
            .map(|_| {
                s.spawn(|| {
                    let mut n = 0usize;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = server.compile(&body);
                        assert_eq!(r.status, 200, "{}", r.text());
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            for path in ["/healthz", "/metrics"] {
                let started = std::time::Instant::now();
                let r = server.request("GET", path, b"");
                slowest = slowest.max(started.elapsed());
                assert_eq!(r.status, 200, "{path}: {}", r.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let compiled: usize = clients.into_iter().map(|h| h.join().unwrap()).sum();
        (slowest, compiled)
    });
    assert!(compiled > 0, "{compiled}");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
}

#[test]
fn probes_and_preload() {
    let packs = Packs::new();
    let server = Server::start(&packs, &["--preload", "conformance/shop@1.0.0"]);
    assert_eq!(server.request("GET", "/healthz", b"").status, 200);
    let mut ready = 0;
    for _ in 0..100 {
        ready = server.request("GET", "/readyz", b"").status;
        if ready == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ready, 200);
    let text = server.metrics();
    assert_eq!(metric(&text, "ctxpack_prepared_packs", &[]), Some(1.0));
    // A preload that cannot be prepared keeps the service unready and says why; the
    // packs after it are still prepared.
    let server = Server::start(
        &packs,
        &[
            "--preload",
            "conformance/none@1.0.0",
            "--preload",
            "conformance/shop@1.0.0",
        ],
    );
    let mut answer = server.request("GET", "/readyz", b"");
    for _ in 0..100 {
        if answer.text() != "preloading\n" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        answer = server.request("GET", "/readyz", b"");
    }
    assert_eq!(answer.status, 503);
    assert!(
        answer
            .text()
            .starts_with("preload failed: conformance/none@1.0.0: "),
        "{}",
        answer.text()
    );
    assert_eq!(answer.text().lines().count(), 1, "{}", answer.text());
    let text = server.metrics();
    assert_eq!(metric(&text, "ctxpack_prepared_packs", &[]), Some(1.0));
}

#[test]
fn sigterm_finishes_in_flight_requests() {
    let packs = Packs::new();
    let mut server = Server::start(&packs, &[]);
    let body = basic_body().to_string();
    // A request whose body is still arriving when the signal comes.
    let mut stream = server.begin_compile(&body);
    server.terminate();
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(&body.as_bytes()[10..]).unwrap();
    let response = read_response(stream);
    assert_eq!(response.status, 200, "{}", response.text());
    let exit = server.child.wait().unwrap();
    assert_eq!(exit.code(), Some(0));
    // The server is gone: new connections are refused.
    assert!(TcpStream::connect(&server.address).is_err());
    // The request's log line was written, between the two shutdown lines.
    let lines = server.log_lines(3);
    let at = |pattern: &str| lines.iter().position(|l| l.contains(pattern));
    let (draining, compiled, done) = (at("\"draining\""), at("\"/v1/compile\""), at("\"done\""));
    assert!(
        draining.is_some() && draining < compiled && compiled < done,
        "{lines:?}"
    );
}

#[test]
fn a_request_still_running_at_the_shutdown_deadline_is_cut_and_the_exit_code_is_1() {
    let packs = Packs::new();
    let mut server = Server::start(&packs, &["--shutdown-deadline-ms", "300"]);
    // Answered before the signal: its log line must not be lost by the early exit.
    assert_eq!(server.compile(&basic_body()).status, 200);
    // A request whose body stops arriving: it is in flight when the signal comes, and
    // still is at the deadline.
    let _stream = server.begin_compile(&basic_body().to_string());
    let signalled = std::time::Instant::now();
    server.terminate();
    let exit = server.child.wait().unwrap();
    assert_eq!(exit.code(), Some(1));
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "{:?}",
        signalled.elapsed()
    );
    let lines = server.log_lines(3);
    let at = |pattern: &str| lines.iter().position(|l| l.contains(pattern));
    let (compiled, draining, cut) = (
        at("\"/v1/compile\""),
        at("\"draining\""),
        at("\"deadline reached\""),
    );
    assert!(
        compiled.is_some() && compiled < draining && draining < cut,
        "{lines:?}"
    );
    assert_eq!(at("\"done\""), None, "{lines:?}");
}

/// A connection is held to the read timeout and to HTTP's framing: a request sent
/// whole and then half-closed is answered; a declared length over the limit is 413
/// before any body is sent; a body that stops arriving is 408; a head that never ends
/// is disconnected; a broken chunked encoding is 400, not 413.
#[test]
fn connections_are_answered_or_closed_in_bounded_time() {
    let packs = Packs::new();
    let server = Server::start(
        &packs,
        &["--body-limit", "100000", "--read-timeout-ms", "300"],
    );
    let connect = || {
        let s = TcpStream::connect(&server.address).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let kind = |r: &Response| r.json()["error"]["kind"].as_str().unwrap_or("").to_owned();
    // Sent whole, then the write side closed: still answered.
    let body = basic_body().to_string();
    let mut s = connect();
    let head = format!(
        "POST /v1/compile HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_response(s).status, 200);
    // Over the limit by its declared length: refused without waiting for the body.
    let mut s = connect();
    s.write_all(b"POST /v1/compile HTTP/1.1\r\nhost: x\r\ncontent-length: 100001\r\n\r\n")
        .unwrap();
    let r = read_response(s);
    assert_eq!((r.status, kind(&r).as_str()), (413, "payload_too_large"));
    // A body that stops arriving.
    let started = std::time::Instant::now();
    let mut s = connect();
    s.write_all(b"POST /v1/compile HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"pack\"")
        .unwrap();
    let r = read_response(s);
    assert_eq!((r.status, kind(&r).as_str()), (408, "request_timeout"));
    assert_eq!(r.json()["error"]["exit_code"], 3);
    assert!(started.elapsed() < Duration::from_secs(5));
    // A head that never ends: the connection is closed without an answer.
    let started = std::time::Instant::now();
    let mut s = connect();
    s.write_all(b"POST /v1/compile HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(5));
    // A chunk size that is not hexadecimal.
    let mut s = connect();
    s.write_all(
        b"POST /v1/compile HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    )
    .unwrap();
    let r = read_response(s);
    assert_eq!((r.status, kind(&r).as_str()), (400, "unparseable_input"));
    // And the service goes on.
    assert_eq!(server.compile(&basic_body()).status, 200);
}
