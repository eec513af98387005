//! The language server's latency, measured over stdio against the real binary, on
//! generated packs of 5,000 and 49,000 lines:
//!
//! - one-character change → its diagnostics, p50 and p99 (50 changes each);
//! - a burst of 20 back-to-back changes: when the last version's diagnostics arrive
//!   after the last change, and whether any superseded version was published after
//!   a newer one;
//! - hover and completion while an analysis of the large pack runs.
//!
//! ```text
//! cargo build --release -p ctxpack-lsp --examples
//! target/release/examples/lsp_bench [path/to/ctxpack-lsp]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const URI: &str = "file:///tmp/ctxpack-bench/big.ctxpack";
const SMALL: &str = "file:///tmp/ctxpack-bench/small.ctxpack";

struct Client {
    child: std::process::Child,
    stdin: ChildStdin,
    rx: Receiver<Value>,
    next_id: i64,
    /// Messages received while waiting for a response.
    backlog: std::collections::VecDeque<Value>,
}

impl Client {
    fn start(bin: &str) -> Client {
        let mut child = Command::new(bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                if let Ok(v) = serde_json::from_slice(&body) {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
            }
        });
        Client {
            child,
            stdin,
            rx,
            next_id: 1,
            backlog: std::collections::VecDeque::new(),
        }
    }

    fn send(&mut self, v: &Value) {
        let body = v.to_string();
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.stdin.write_all(framed.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let m = self.recv();
            if m["id"] == json!(id) && m.get("method").is_none() {
                return m["result"].clone();
            }
            self.backlog.push_back(m);
        }
    }

    fn recv(&self) -> Value {
        self.rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no message from the server within 60 s")
    }

    /// Waits for the first diagnostics published for `uri`.
    fn diagnostics_of(&mut self, uri: &str) {
        loop {
            let m = match self.backlog.pop_front() {
                Some(m) => m,
                None => self.recv(),
            };
            if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri {
                return;
            }
        }
    }

    /// Waits for the diagnostics of `version` of the large document; returns every
    /// version published for it before.
    fn diagnostics(&mut self, version: i64) -> Vec<i64> {
        let mut seen = Vec::new();
        loop {
            let m = match self.backlog.pop_front() {
                Some(m) => m,
                None => self.recv(),
            };
            if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == URI {
                let v = m["params"]["version"].as_i64().unwrap_or(-1);
                seen.push(v);
                if v == version {
                    return seen;
                }
            }
        }
    }

    fn change(&mut self, line: u32, character: u32, insert: bool, version: i64) {
        let at = json!({ "line": line, "character": character });
        let end = json!({ "line": line, "character": character + u32::from(!insert) });
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": URI, "version": version },
                "contentChanges": [{ "range": { "start": at, "end": end }, "text": if insert { "x" } else { "" } }]
            }),
        );
    }
}

fn generated_pack(lines: usize) -> String {
    let mut out = String::from("pack \"acme/big\" version \"1.0.0\"\n\ncontext {\n");
    let fields = lines / 20;
    for i in 0..fields {
        out.push_str(&format!(
            "  /// Field {i}.\n  group{}.field{i}: enum(\"a\", \"b\", \"c\")\n",
            i % 7
        ));
    }
    out.push_str("  order.total: float?\n}\n\nprompt system \"\"\"\n  You are a bot. Reply in {{ request.locale }}.\n\"\"\"\n\n");
    out.push_str("budget {\n  total 64_000\n  bucket policy   { share 10% priority 90 }\n  bucket tools    { share 10% priority 80 }\n  bucket evidence { share 50% priority 50 }\n  bucket memory   { share 15% priority 40 }\n  bucket session  { share 15% priority 30 }\n}\n\n");
    let mut i = 0;
    // The text ends with a newline: its lines are its newlines, counted as they come.
    let mut count = out.matches('\n').count();
    while count < lines {
        let before = out.len();
        out.push_str(&format!(
            "/// Tool {i}.\ntool tool_{i} {{\n  description \"Does thing {i}.\"\n  kind read\n  risk low\n  approval auto\n  input {{\n    id: string\n    count: int?\n  }}\n}}\n\n"
        ));
        out.push_str(&format!(
            "intent intent_{i} {{\n  description \"Intent {i}.\"\n  tools tool_{i}\n  task \"Do {i} for {{{{ ctx.group{}.field{} }}}}.\"\n}}\n\n",
            i % fields.max(1) % 7,
            i % fields.max(1)
        ));
        out.push_str(&format!(
            "policy policy_{i} priority {i} {{\n  when ctx.group{}.field{} == \"a\" and request.channel == \"voice\"\n  instruct \"Rule {i}.\"\n}}\n\n",
            i % fields.max(1) % 7,
            i % fields.max(1)
        ));
        count += out[before..].matches('\n').count();
        i += 1;
    }
    out
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i.min(samples.len() - 1)]
}

/// The 0-based line and column of the `nth` occurrence of `needle`.
fn position(text: &str, needle: &str, nth: usize) -> (u32, u32) {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .map(|(i, _)| i)
        .expect("needle");
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    (
        text[..offset].matches('\n').count() as u32,
        (offset - line_start) as u32,
    )
}

struct Figures {
    p50: Duration,
    p99: Duration,
    burst_last: Duration,
    burst_published: usize,
    ordered: bool,
    hover: Duration,
    completion: Duration,
}

fn measure(bin: &str, lines: usize) -> Figures {
    let text = generated_pack(lines);
    let mut c = Client::start(bin);
    c.request(
        "initialize",
        json!({ "processId": null, "rootUri": null, "capabilities": {} }),
    );
    c.notify("initialized", json!({}));
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": URI, "languageId": "ctxpack", "version": 1, "text": text } }),
    );
    c.diagnostics(1);
    // Edits in the middle of the file, inside a description.
    let middle = (lines / 40).max(1);
    let (line, col) = position(&text, &format!("Does thing {middle}."), 0);
    let mut version = 1;
    let mut samples = Vec::new();
    for k in 0..50 {
        version += 1;
        let sent = Instant::now();
        c.change(line, col + 4, k % 2 == 0, version);
        c.diagnostics(version);
        samples.push(sent.elapsed());
    }
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    // A burst of 20.
    let first = version + 1;
    for k in 0..20 {
        version += 1;
        c.change(line, col + 4, k % 2 == 0, version);
    }
    let last_sent = Instant::now();
    let published = c.diagnostics(version);
    let burst_last = last_sent.elapsed();
    let burst: Vec<i64> = published.into_iter().filter(|v| *v >= first).collect();
    let ordered = burst.windows(2).all(|w| w[0] < w[1]);
    // Hover and completion on another open document while an analysis of this one
    // runs (queries about the document being analysed wait for its current text).
    let small = generated_pack(200);
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": SMALL, "languageId": "ctxpack", "version": 1, "text": small } }),
    );
    c.diagnostics_of(SMALL);
    version += 1;
    c.change(line, col + 4, true, version);
    let (hl, hc) = position(&small, "tools tool_3", 0);
    let sent = Instant::now();
    c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": SMALL }, "position": { "line": hl, "character": hc + 8 } }),
    );
    let hover = sent.elapsed();
    let (cl, cc) = position(&small, "approval auto", 3);
    let sent = Instant::now();
    c.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": SMALL }, "position": { "line": cl, "character": cc + 9 } }),
    );
    let completion = sent.elapsed();
    c.diagnostics(version);
    c.request("shutdown", Value::Null);
    c.notify("exit", Value::Null);
    let _ = c.child.wait();
    Figures {
        p50,
        p99,
        burst_last,
        burst_published: burst.len(),
        ordered,
        hover,
        completion,
    }
}

fn main() {
    let bin = std::env::args().nth(1).unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        let dir = exe
            .parent()
            .and_then(|p| p.parent())
            .map(|p| p.join("ctxpack-lsp"))
            .unwrap_or_default();
        dir.display().to_string()
    });
    let small = measure(&bin, 5_000);
    let large = measure(&bin, 49_000);
    for (name, f) in [("5,000 lines", &small), ("49,000 lines", &large)] {
        println!(
            "{name}: change → diagnostics p50 {:.2?} p99 {:.2?}; burst of 20: last diagnostics {:.2?} after the last change, {} versions published, in order: {}; hover {:.2?}, completion {:.2?} on another document during an analysis",
            f.p50, f.p99, f.burst_last, f.burst_published, f.ordered, f.hover, f.completion
        );
    }
    println!(
        "49,000 / 5,000 p50 ratio: {:.1} (target ≤ 4); burst last / p50 (49,000): {:.1} (target ≤ 2)",
        large.p50.as_secs_f64() / small.p50.as_secs_f64(),
        large.burst_last.as_secs_f64() / large.p50.as_secs_f64()
    );
}
