//! End-to-end tests of the real `ctxpack-lsp` binary over stdio: a small JSON-RPC
//! client with Content-Length framing and timeouts (a hung server fails the test
//! instead of hanging CI), a full editing session, position encodings, a randomized
//! edit storm, malformed input that must not stop the server, and an `#[ignore]`d
//! latency measurement:
//!
//! ```text
//! cargo test -p ctxpack-lsp --release --test e2e -- --ignored --nocapture latency
//! ```

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(20);

struct Client {
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    /// Messages received while waiting for something else.
    backlog: VecDeque<Value>,
    next_id: i64,
}

impl Client {
    fn start(args: &[&str]) -> Client {
        Client::start_in(&std::env::temp_dir(), args)
    }

    /// Starts the server with `dir` as its working directory.
    fn start_in(dir: &std::path::Path, args: &[&str]) -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctxpack-lsp"))
            .current_dir(dir)
            .env_remove("CTXPACK_REGISTRY")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ctxpack-lsp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        length = v.trim().parse::<usize>().ok();
                    }
                }
                let Some(length) = length else { return };
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                let Ok(value) = serde_json::from_slice::<Value>(&body) else {
                    return;
                };
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Client {
            child,
            stdin: Some(stdin),
            rx,
            backlog: VecDeque::new(),
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// Writes raw bytes, as a buggy client might.
    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends `body` framed as it is, valid JSON or not.
    fn send_body(&mut self, body: &str) {
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.send_raw(framed.as_bytes());
    }

    /// The next error response with no id (the answer to a malformed frame).
    fn error_without_id(&mut self) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let m = self.recv(deadline);
            if m.get("error").is_some() && m.get("method").is_none() {
                return m;
            }
            self.backlog.push_back(m);
        }
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn recv(&mut self, deadline: Instant) -> Value {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(v) => v,
            Err(e) => panic!("no message from the server within the timeout: {e}"),
        }
    }

    /// Sends a request and returns its result (panics on an error response).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_raw(method, params);
        if let Some(error) = response.get("error") {
            panic!("{method} failed: {error}");
        }
        response.get("result").cloned().unwrap_or(Value::Null)
    }

    /// Waits for the server's request `method` and answers it with `result`;
    /// returns its params.
    fn answer(&mut self, method: &str, result: Value) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        let mut kept = VecDeque::new();
        let found = loop {
            let m = match self.backlog.pop_front() {
                Some(m) => m,
                None => self.recv(deadline),
            };
            if m.get("method") == Some(&json!(method)) && m.get("id").is_some() {
                break m;
            }
            kept.push_back(m);
        };
        kept.extend(self.backlog.drain(..));
        self.backlog = kept;
        self.send(&json!({ "jsonrpc": "2.0", "id": found["id"], "result": result }));
        found["params"].clone()
    }

    /// The next diagnostics published for `uri`.
    fn diagnostics_of(&mut self, uri: &str) -> Value {
        self.wait_for("textDocument/publishDiagnostics", |p| p["uri"] == uri)
    }

    /// The names of the test document's outline, at the top level.
    fn symbol_names(&mut self) -> Vec<String> {
        let symbols = self.request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": URI } }),
        );
        symbols
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The response with id `id`, to a request sent already.
    fn request_raw_reply(&mut self, id: i64) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        if let Some(at) = self
            .backlog
            .iter()
            .position(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none())
        {
            return self.backlog.remove(at).unwrap_or_default();
        }
        loop {
            let message = self.recv(deadline);
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            self.backlog.push_back(message);
        }
    }

    fn request_raw(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.request_raw_reply(id)
    }

    /// The next notification `method` whose params satisfy `accept`; earlier ones are
    /// dropped.
    fn wait_for(&mut self, method: &str, accept: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        while let Some(m) = self.backlog.pop_front() {
            if m.get("method") == Some(&json!(method)) && accept(&m["params"]) {
                return m["params"].clone();
            }
        }
        loop {
            let m = self.recv(deadline);
            if m.get("method") == Some(&json!(method)) && accept(&m["params"]) {
                return m["params"].clone();
            }
        }
    }

    /// The diagnostics published for `version` of the test document.
    fn diagnostics(&mut self, version: i64) -> Vec<Value> {
        let p = self.wait_for("textDocument/publishDiagnostics", |p| {
            p["uri"] == URI && p["version"] == json!(version)
        });
        p["diagnostics"].as_array().cloned().unwrap_or_default()
    }

    fn initialize(&mut self, encodings: Option<&[&str]>) -> Value {
        let mut capabilities = json!({});
        if let Some(e) = encodings {
            capabilities = json!({ "general": { "positionEncodings": e } });
        }
        let result = self.request(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": capabilities }),
        );
        self.notify("initialized", json!({}));
        result
    }

    fn open(&mut self, text: &str, version: i64) {
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": URI, "languageId": "ctxpack", "version": version, "text": text } }),
        );
    }

    fn change_all(&mut self, text: &str, version: i64) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": URI, "version": version }, "contentChanges": [{ "text": text }] }),
        );
    }

    fn change_range(&mut self, range: Value, text: &str, version: i64) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": URI, "version": version }, "contentChanges": [{ "range": range, "text": text }] }),
        );
    }

    fn at(&mut self, method: &str, line: u32, character: u32, extra: Value) -> Value {
        let mut params = json!({ "textDocument": { "uri": URI }, "position": { "line": line, "character": character } });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.request(method, params)
    }

    fn shutdown(mut self) {
        let result = self.request("shutdown", Value::Null);
        assert_eq!(result, Value::Null);
        self.notify("exit", Value::Null);
        let status = self.wait_exit();
        assert!(status.success(), "server exited with {status}");
    }

    /// Closes the server's input.
    fn close_input(&mut self) {
        self.stdin = None;
    }

    /// The server's exit status, once it exits by itself.
    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => panic!("server did not exit"),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const URI: &str = "file:///tmp/ctxpack-e2e/support.ctxpack";

/// A pack that checks clean: no errors, no warnings.
const CLEAN: &str = r#"pack "acme/e2e" version "1.0.0"

context {
  /// The customer's plan.
  user.tier: enum("free", "pro")
  order.id: string?
}

prompt system """
  Reply in {{ request.locale }}.
"""

budget {
  total 16_000
  bucket policy   { share 10% priority 90 }
  bucket tools    { share 10% priority 80 }
  bucket evidence { share 50% priority 50 }
  bucket memory   { share 15% priority 40 }
  bucket session  { share 15% priority 30 }
}

/// Looks an order up.
tool lookup_order {
  description "Fetch an order."
  kind read
  risk low
  approval auto
  input {
    order_id: string
  }
}

intent refund {
  tools lookup_order
  task "😀é {{ ctx.order.id | \"none\" }}"
}

policy vip {
  when ctx.user.tier == "pro"
  instruct "Be nice."
}
"#;

/// The clean pack with two mistakes: an unknown tool and, after an emoji on the same
/// line, an unknown field.
fn broken() -> String {
    CLEAN
        .replace("tools lookup_order", "tools lookup_ordr")
        .replace("ctx.order.id | \\\"none\\\"", "ctx.order.idd")
}

/// 0-based line and UTF-16 / UTF-8 columns of the `nth` occurrence of `needle`.
fn position(text: &str, needle: &str, nth: usize) -> (u32, u32, u32) {
    let offset = text
        .match_indices(needle)
        .nth(nth)
        .map(|(i, _)| i)
        .expect("needle");
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..offset].matches('\n').count() as u32;
    let utf16 = text[line_start..offset].encode_utf16().count() as u32;
    let utf8 = (offset - line_start) as u32;
    (line, utf16, utf8)
}

fn codes(diagnostics: &[Value]) -> Vec<String> {
    diagnostics
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn full_session() {
    let mut c = Client::start(&["--stdio"]);
    let init = c.initialize(None);
    let caps = &init["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16");
    for cap in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "completionProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
        "renameProvider",
        "codeActionProvider",
    ] {
        assert!(!caps[cap].is_null(), "missing {cap}");
    }

    // didOpen with errors: the right codes at the right UTF-16 ranges.
    let text = broken();
    c.open(&text, 1);
    let diags = c.diagnostics(1);
    // The misspelt reference is reported once: not also as W0401 on the tool it was
    // meant for.
    assert_eq!(codes(&diags), ["E0102", "E0201"], "{diags:#?}");
    let diags = &diags[..];
    let (line, col, _) = position(&text, "lookup_ordr", 0);
    assert_eq!(
        diags[0]["range"]["start"],
        json!({ "line": line, "character": col })
    );
    assert_eq!(
        diags[0]["range"]["end"],
        json!({ "line": line, "character": col + 11 })
    );
    let (line, col, utf8) = position(&text, "ctx.order.idd", 0);
    assert!(
        utf8 > col,
        "the emoji line must make UTF-16 and UTF-8 columns differ"
    );
    assert_eq!(
        diags[1]["range"]["start"],
        json!({ "line": line, "character": col })
    );
    assert_eq!(
        diags[1]["range"]["end"],
        json!({ "line": line, "character": col + 13 })
    );
    assert_eq!(diags[0]["severity"], 1);
    assert_eq!(diags[0]["source"], "ctxpack");
    // Lean: the explain page is not in the publish, it is one request away.
    assert!(
        diags[0].get("data").is_none_or(Value::is_null),
        "{:#}",
        diags[0]
    );
    let page = c.request(
        "workspace/executeCommand",
        json!({ "command": "ctxpack.explain", "arguments": ["E0102"] }),
    );
    assert!(
        page.as_str().is_some_and(|p| p.contains("E0102")),
        "{page:#}"
    );
    let unknown = c.request_raw(
        "workspace/executeCommand",
        json!({ "command": "ctxpack.explain", "arguments": ["E9999"] }),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown:#}");

    // A quick fix for the unknown tool.
    let (line, col, _) = position(&text, "lookup_ordr", 0);
    let actions = c.request(
        "textDocument/codeAction",
        json!({
            "textDocument": { "uri": URI },
            "range": { "start": { "line": line, "character": col }, "end": { "line": line, "character": col } },
            "context": { "diagnostics": [] }
        }),
    );
    let edit = &actions[0]["edit"]["changes"][URI][0];
    assert_eq!(edit["newText"], "lookup_order", "{actions:#}");
    assert_eq!(actions[0]["kind"], "quickfix");
    let explain = actions
        .as_array()
        .and_then(|a| a.iter().find(|a| a["kind"] == "quickfix.explain"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(explain["title"], "Explain E0102", "{actions:#}");
    assert_eq!(explain["command"]["command"], "ctxpack.explain");
    assert_eq!(explain["command"]["arguments"], json!(["E0102"]));
    // `context.only` is honoured.
    let ask = |c: &mut Client, only: Value| {
        c.request(
            "textDocument/codeAction",
            json!({
                "textDocument": { "uri": URI },
                "range": { "start": { "line": line, "character": col }, "end": { "line": line, "character": col } },
                "context": { "diagnostics": [], "only": only }
            }),
        )
    };
    assert_eq!(ask(&mut c, json!(["refactor"])), json!([]));
    let kinds: Vec<Value> = ask(&mut c, json!(["quickfix.explain"]))
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|a| a["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("quickfix.explain")]);

    // didChange fixing it: empty diagnostics.
    c.change_all(CLEAN, 2);
    assert!(c.diagnostics(2).is_empty());

    // Hover on a tool reference.
    let (line, col, _) = position(CLEAN, "lookup_order", 1);
    let hover = c.at("textDocument/hover", line, col + 2, json!({}));
    let markdown = hover["contents"]["value"].as_str().unwrap_or("");
    assert!(
        markdown.contains("**tool** `lookup_order`") && markdown.contains("| read | low | auto |"),
        "{hover:#}"
    );

    // Hover on a bucket shows its allocation.
    let (line, col, _) = position(CLEAN, "evidence", 0);
    let hover = c.at("textDocument/hover", line, col, json!({}));
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("8000 tokens"),
        "{hover:#}"
    );

    // Definition of the reference is the declaration.
    let definition = c.at(
        "textDocument/definition",
        line_of(CLEAN, "lookup_order", 1),
        10,
        json!({}),
    );
    let (def_line, def_col, _) = position(CLEAN, "lookup_order", 0);
    assert_eq!(
        definition[0]["range"]["start"],
        json!({ "line": def_line, "character": def_col })
    );

    // References of a field: the declaration and its uses in a template and a condition.
    let (line, col, _) = position(CLEAN, "user.tier", 0);
    let refs = c.at(
        "textDocument/references",
        line,
        col,
        json!({ "context": { "includeDeclaration": true } }),
    );
    assert_eq!(refs.as_array().map(Vec::len), Some(2), "{refs:#}");

    // Completion after `approval ` offers the approval modes.
    let with_blank = CLEAN.replace("approval auto", "approval ");
    c.change_all(&with_blank, 3);
    c.diagnostics(3);
    let (line, col, _) = position(&with_blank, "approval ", 0);
    let items = c.at("textDocument/completion", line, col + 9, json!({}));
    let labels: Vec<&str> = items
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["label"].as_str())
        .collect();
    assert!(
        labels.contains(&"confirm") && labels.contains(&"review"),
        "{labels:?}"
    );

    // Completion of `ctx.` paths in a condition.
    let typing = CLEAN.replace("when ctx.user.tier == \"pro\"", "when ctx.");
    c.change_all(&typing, 4);
    c.diagnostics(4);
    let (line, col, _) = position(&typing, "when ctx.", 0);
    let items = c.at("textDocument/completion", line, col + 9, json!({}));
    let labels: Vec<&str> = items
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["label"].as_str())
        .collect();
    assert!(labels.contains(&"ctx.user.tier"), "{labels:?}");

    // Formatting: one edit with the formatted text.
    let messy = CLEAN
        .replace("  kind read\n", "kind    read\n")
        .replace("bucket tools    {", "bucket tools{");
    c.change_all(&messy, 5);
    c.diagnostics(5);
    let edits = c.request("textDocument/formatting", json!({ "textDocument": { "uri": URI }, "options": { "tabSize": 2, "insertSpaces": true } }));
    assert_eq!(edits.as_array().map(Vec::len), Some(1));
    assert_eq!(edits[0]["newText"], CLEAN);

    // Outline.
    let names = c.symbol_names();
    assert!(
        names.iter().any(|n| n == "lookup_order") && names.iter().any(|n| n == "budget"),
        "{names:?}"
    );

    // Rename a tool, and refuse an invalid name.
    c.change_all(CLEAN, 6);
    c.diagnostics(6);
    let (line, col, _) = position(CLEAN, "lookup_order", 0);
    let prepared = c.at("textDocument/prepareRename", line, col, json!({}));
    assert_eq!(prepared["start"], json!({ "line": line, "character": col }));
    let edit = c.at(
        "textDocument/rename",
        line,
        col,
        json!({ "newName": "find_order" }),
    );
    assert_eq!(edit["changes"][URI].as_array().map(Vec::len), Some(2));
    let bad = c.request_raw(
        "textDocument/rename",
        json!({ "textDocument": { "uri": URI }, "position": { "line": line, "character": col }, "newName": "Find-Order" }),
    );
    assert!(bad.get("error").is_some(), "{bad:#}");

    // didClose clears the diagnostics.
    c.notify(
        "textDocument/didClose",
        json!({ "textDocument": { "uri": URI } }),
    );
    let cleared = c.wait_for("textDocument/publishDiagnostics", |p| {
        p["uri"] == URI && p["version"].is_null()
    });
    assert_eq!(cleared["diagnostics"], json!([]));

    c.shutdown();
}

fn line_of(text: &str, needle: &str, nth: usize) -> u32 {
    position(text, needle, nth).0
}

#[test]
fn utf8_positions_when_the_client_offers_them() {
    let mut c = Client::start(&[]);
    let init = c.initialize(Some(&["utf-8", "utf-16"]));
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-8");
    let text = broken();
    c.open(&text, 1);
    let diags = c.diagnostics(1);
    let (line, _, utf8) = position(&text, "ctx.order.idd", 0);
    assert_eq!(
        diags[1]["range"]["start"],
        json!({ "line": line, "character": utf8 })
    );
    // An incremental edit addressed in bytes: fix the field name.
    c.change_range(
        json!({ "start": { "line": line, "character": utf8 + 12 }, "end": { "line": line, "character": utf8 + 13 } }),
        "",
        2,
    );
    let diags = c.diagnostics(2);
    assert_eq!(codes(&diags), ["E0102", "W0201"], "{diags:#?}");
    c.shutdown();
}

/// A deterministic xorshift generator: the storm is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Changes that reach the server together, in one write, are taken together: to
/// each document its own, in order, the last version published, and its
/// diagnostics those of the text the client made.
#[test]
fn changes_sent_together_are_applied_in_order_to_their_own_documents() {
    const OTHER: &str = "file:///tmp/ctxpack-e2e/other.ctxpack";
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(CLEAN, 1);
    c.diagnostics(1);
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": OTHER, "languageId": "ctxpack", "version": 1, "text": CLEAN } }),
    );
    c.wait_for("textDocument/publishDiagnostics", |p| p["uri"] == OTHER);
    let (line, col, _) = position(CLEAN, "ctx.order.id", 0);
    let at = |line: u32, character: u32| json!({ "line": line, "character": character });
    // Typing in a template (`ctx.order.idd`, an unknown field), a line break, a
    // change to the other document between them, then an unknown tool.
    let mut changes: Vec<(&str, Value, &str)> = (0..4)
        .map(|k| {
            (
                URI,
                json!({ "start": at(line, col + 12 + k), "end": at(line, col + 12 + k) }),
                "d",
            )
        })
        .collect();
    changes.push((
        URI,
        json!({ "start": at(line, col + 13), "end": at(line, col + 16) }),
        "",
    ));
    changes.push((
        OTHER,
        json!({ "start": at(0, 0), "end": at(0, 0) }),
        "// x\n",
    ));
    changes.push((URI, json!({ "start": at(1, 0), "end": at(1, 0) }), "\n\n"));
    let (tl, tc, _) = position(CLEAN, "tools lookup_order", 0);
    changes.push((
        URI,
        json!({ "start": at(tl + 2, tc + 6), "end": at(tl + 2, tc + 18) }),
        "lookup_ordr",
    ));
    let mut text = CLEAN.to_owned();
    let mut frames = Vec::new();
    let mut versions = std::collections::HashMap::from([(URI, 1), (OTHER, 1)]);
    for (uri, range, new_text) in changes {
        let version = versions.entry(uri).or_default();
        *version += 1;
        if uri == URI {
            text = applied(&text, &range, new_text);
        }
        let body = json!({
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {
                "textDocument": { "uri": uri, "version": *version },
                "contentChanges": [{ "range": range, "text": new_text }],
            },
        })
        .to_string();
        frames
            .extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }
    c.send_raw(&frames);
    // Publishes until each document's last version's, in the order they come.
    let mut seen: Vec<(String, i64)> = Vec::new();
    let mut published = Vec::new();
    while !versions
        .iter()
        .all(|(uri, v)| seen.contains(&(uri.to_string(), *v)))
    {
        let p = c.wait_for("textDocument/publishDiagnostics", |_| true);
        let (uri, version) = (
            p["uri"].as_str().unwrap_or_default(),
            p["version"].as_i64().unwrap_or(-1),
        );
        if uri == URI {
            published = p["diagnostics"].as_array().cloned().unwrap_or_default();
        }
        seen.push((uri.to_owned(), version));
    }
    for uri in [URI, OTHER] {
        let order: Vec<i64> = seen
            .iter()
            .filter(|(u, _)| u == uri)
            .map(|(_, v)| *v)
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{uri}: {order:?}");
    }
    c.shutdown();
    let mut fresh = Client::start(&[]);
    fresh.initialize(None);
    fresh.open(&text, 1);
    let expected = fresh.diagnostics(1);
    fresh.shutdown();
    assert_eq!(codes(&published), ["E0102", "E0201"], "{published:?}");
    assert_eq!(published, expected);
}

/// 300 random changes (within a line, across lines, past the end, whole-text) and
/// queries: the server neither crashes nor loses track of the text, whose
/// diagnostics at each checkpoint are those of the same text sent whole.
#[test]
fn a_random_edit_storm_neither_crashes_the_server_nor_garbles_its_text() {
    const FRAGMENTS: &[&str] = &[
        "tool ",
        "{",
        "}",
        "\"",
        "\"\"\"",
        "\n",
        "😀",
        "é",
        "policy p { when ctx.",
        "intent i {",
        "tools a, ",
        "{{ ctx.",
        "}}",
        "bucket x { share 10",
        "%",
        "json { \"==\": [",
        "//",
        "///",
        "\\",
        "\u{FEFF}",
        "\r\n",
        "    ",
        "block b in ",
        "approval ",
        "== \"",
        "context { a.b: enum(",
    ];
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(CLEAN, 1);
    c.diagnostics(1);
    let mut rng = Rng(0x5EED_C7C9_AC00_0001);
    let lines = CLEAN.lines().count() as u64;
    // The text as the client sees it, each change applied to the whole of it, and
    // a second server sent that text whole at each checkpoint.
    let mut text = CLEAN.to_owned();
    let mut whole = Client::start(&[]);
    whole.initialize(None);
    whole.open(CLEAN, 1);
    for version in 2..302 {
        let line = rng.below(lines + 5) as u32;
        let character = rng.below(60) as u32;
        let range = json!({
            "start": { "line": line, "character": character },
            "end": { "line": line + rng.below(3) as u32, "character": rng.below(80) as u32 },
        });
        let new_text = match rng.below(10) {
            0 => {
                c.change_all(CLEAN, version);
                text = CLEAN.to_owned();
                continue;
            }
            1..=2 => String::new(),
            // Random characters, any plane.
            3 => (0..rng.below(12))
                .filter_map(|_| char::from_u32(rng.below(0x1_0000) as u32))
                .collect(),
            _ => FRAGMENTS[rng.below(FRAGMENTS.len() as u64) as usize].to_owned(),
        };
        c.change_range(range.clone(), &new_text, version);
        text = applied(&text, &range, &new_text);
        if version % 25 == 0 {
            whole.change_all(&text, version);
            assert_eq!(
                c.diagnostics(version),
                whole.diagnostics(version),
                "version {version}: the server's text is the client's"
            );
            let line = rng.below(lines + 3) as u32;
            let character = rng.below(100) as u32;
            for method in [
                "textDocument/hover",
                "textDocument/completion",
                "textDocument/definition",
            ] {
                let _ = c.at(method, line, character, json!({}));
            }
            let _ = c.request(
                "textDocument/documentSymbol",
                json!({ "textDocument": { "uri": URI } }),
            );
            let _ = c.request("textDocument/formatting", json!({ "textDocument": { "uri": URI }, "options": { "tabSize": 2, "insertSpaces": true } }));
        }
    }
    // Still alive and answering.
    c.diagnostics(301);
    let _ = c.at("textDocument/hover", 0, 0, json!({}));
    c.shutdown();
    whole.shutdown();
}

/// `text` with a change of the protocol applied (positions in UTF-16 units, clamped
/// to their line and to the text, an end before the start read as the start).
fn applied(text: &str, range: &Value, new_text: &str) -> String {
    let lines = ctxpack::span::LineIndex::new(text);
    let offset = |p: &Value| {
        let n = |k: &str| p[k].as_u64().unwrap_or(0) as u32;
        lines.offset_of_utf16(text, n("line"), n("character"))
    };
    let start = offset(&range["start"]);
    let end = offset(&range["end"]).max(start);
    let mut out = text.to_owned();
    out.replace_range(start..end, new_text);
    out
}

// ---------------------------------------------------------------------------------
// Latency
// ---------------------------------------------------------------------------------

/// A realistic pack of about `lines` lines.
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
    while out.lines().count() < lines {
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
        i += 1;
    }
    out
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(index).copied().unwrap_or_default()
}

#[test]
#[ignore = "a measurement: run with --release --ignored --nocapture"]
fn latency() {
    let text = generated_pack(5_000);
    let line_count = text.lines().count();
    let mut c = Client::start(&[]);
    c.initialize(None);
    let started = Instant::now();
    c.open(&text, 1);
    let initial = c.diagnostics(1);
    let open_time = started.elapsed();
    assert!(
        initial.iter().all(|d| d["severity"] != 1),
        "{:#?}",
        &initial[..initial.len().min(3)]
    );

    // One-character edits inside a description string: insert, then delete.
    let (line, col, _) = position(&text, "Does thing 7", 0);
    let mut diagnostics = Vec::new();
    for k in 0..50 {
        let version = 2 + k;
        let at = json!({ "line": line, "character": col + 4 });
        let sent = Instant::now();
        if k % 2 == 0 {
            c.change_range(json!({ "start": at, "end": at }), "x", version);
        } else {
            let end = json!({ "line": line, "character": col + 5 });
            c.change_range(json!({ "start": at, "end": end }), "", version);
        }
        c.diagnostics(version);
        diagnostics.push(sent.elapsed());
    }
    let (hline, hcol, _) = position(&text, "tools tool_42", 0);
    let mut hovers = Vec::new();
    for _ in 0..50 {
        let sent = Instant::now();
        let h = c.at("textDocument/hover", hline, hcol + 8, json!({}));
        hovers.push(sent.elapsed());
        assert!(!h.is_null());
    }
    let (cline, ccol, _) = position(&text, "approval auto", 3);
    let mut completions = Vec::new();
    for _ in 0..50 {
        let sent = Instant::now();
        let items = c.at("textDocument/completion", cline, ccol + 9, json!({}));
        completions.push(sent.elapsed());
        assert!(items.as_array().is_some_and(|i| !i.is_empty()));
    }
    println!(
        "pack: {line_count} lines, {} bytes; didOpen → diagnostics {open_time:?}",
        text.len()
    );
    for (name, samples) in [
        ("didChange → publishDiagnostics", &mut diagnostics),
        ("hover", &mut hovers),
        ("completion", &mut completions),
    ] {
        println!(
            "{name}: p50 {:?}  p95 {:?}  max {:?}",
            percentile(samples, 0.5),
            percentile(samples, 0.95),
            samples.iter().max().copied().unwrap_or_default()
        );
    }
    c.shutdown();
}

/// One malformed message gets its error reply, and the server keeps serving: the
/// document still gets diagnostics, requests still get answers, and `shutdown` and
/// `exit` still end it with code 0.
fn still_serving(mut c: Client, version: i64) {
    c.change_all(&broken(), version);
    assert!(!c.diagnostics(version).is_empty());
    let symbols = c.request(
        "textDocument/documentSymbol",
        json!({ "textDocument": { "uri": URI } }),
    );
    assert!(symbols.is_array(), "{symbols}");
    let (line, col, _) = position(&broken(), "lookup_ordr", 0);
    let hover = c.request_raw(
        "textDocument/hover",
        json!({ "textDocument": { "uri": URI }, "position": { "line": line, "character": col } }),
    );
    assert!(hover.get("result").is_some(), "{hover}");
    c.shutdown();
}

/// A session with a document open and its first diagnostics in.
fn session() -> Client {
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(&broken(), 1);
    c.diagnostics(1);
    c
}

#[test]
fn a_truncated_json_body_is_answered_and_the_server_keeps_serving() {
    let mut c = session();
    c.send_body(r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"#);
    let e = c.error_without_id();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null);
    still_serving(c, 2);
}

#[test]
fn a_lone_surrogate_is_answered_and_the_server_keeps_serving() {
    let mut c = session();
    let body = format!(
        r#"{{"jsonrpc":"2.0","method":"textDocument/didChange","params":{{"textDocument":{{"uri":"{URI}","version":2}},"contentChanges":[{{"text":"pack \ud83d"}}]}}}}"#
    );
    c.send_body(&body);
    let e = c.error_without_id();
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null);
    still_serving(c, 3);
}

/// Framing the protocol library's own decoder refuses, each of which used to end the
/// session: the guard takes them, or answers them, and the server goes on.
#[test]
fn headers_the_library_refuses_do_not_stop_the_server() {
    let mut c = session();
    let change = |version: i64| {
        json!({ "jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": { "uri": URI, "version": version },
            "contentChanges": [{ "text": CLEAN }] } })
        .to_string()
    };
    // Accepted as they are, each a change that gets its diagnostics.
    for (version, header) in [
        (2, "content-length: {}\r\n\r\n"),
        (3, "Content-Length: {}\nContent-Type: application/vscode-jsonrpc; charset=utf-8\nX-Trace: 1\n\n"),
        (4, "\r\nContent-Length: {}\r\n\r\n"),
    ] {
        let body = change(version);
        let header = header.replace("{}", &body.len().to_string());
        c.send_raw(format!("{header}{body}").as_bytes());
        assert!(c.diagnostics(version).is_empty(), "{header:?}");
    }
    // Answered: a header with no Content-Length, then a bad length, with a good frame
    // right after each.
    for garbage in [
        "Content-Type: text/plain\r\n\r\n",
        "Content-Length: x\r\n\r\n{}",
    ] {
        c.send_raw(garbage.as_bytes());
        assert_eq!(c.error_without_id()["error"]["code"], -32700, "{garbage:?}");
    }
    // A length over the limit is answered at once and its bytes are dropped as they
    // come; the next real frame ends them.
    c.send_raw(b"Content-Length: 999999999999\r\n\r\n{\"jsonrpc\":");
    assert_eq!(c.error_without_id()["error"]["code"], -32700);
    // A body shorter than its length is cut where the next frame starts.
    c.send_raw(b"Content-Length: 400\r\n\r\n{\"jsonrpc\":\"2.0\"");
    c.change_all(CLEAN, 5);
    assert_eq!(c.error_without_id()["error"]["code"], -32700);
    assert!(c.diagnostics(5).is_empty());
    still_serving(c, 6);
}

/// A client that lists its hover formats without Markdown gets plain text; one that
/// lists none, or Markdown, gets Markdown.
#[test]
fn hover_follows_the_formats_the_client_lists() {
    for (formats, kind) in [
        (json!(["plaintext"]), "plaintext"),
        (json!(["markdown", "plaintext"]), "markdown"),
        (json!(null), "markdown"),
    ] {
        let mut c = Client::start(&[]);
        c.request(
            "initialize",
            json!({ "processId": null, "rootUri": null,
                    "capabilities": { "textDocument": { "hover": { "contentFormat": formats } } } }),
        );
        c.notify("initialized", json!({}));
        c.open(CLEAN, 1);
        let (line, col, _) = position(CLEAN, "lookup_order", 1);
        let hover = c.at("textDocument/hover", line, col + 2, json!({}));
        assert_eq!(hover["contents"]["kind"], kind, "{formats}: {hover:#}");
        assert!(
            hover["contents"]["value"]
                .as_str()
                .unwrap_or("")
                .contains("lookup_order"),
            "{hover:#}"
        );
        c.shutdown();
    }
}

/// A document closed while its check runs and opened again under the same URI is a
/// new document: the old text's check publishes nothing and installs nothing, and the
/// new one is checked and answers queries (with the old version number again, or a
/// lower one).
#[test]
fn a_document_reopened_while_its_old_text_is_checked_gets_its_own_check() {
    let big = generated_pack(20_000);
    let small = "pack \"acme/small\" version \"1.0.0\"\n\ntool t {\n  description \"T.\"\n  kind read\n  risk low\n  approval auto\n}\n";
    let expected = {
        let mut c = Client::start(&[]);
        c.initialize(None);
        c.open(small, 1);
        c.diagnostics(1)
    };
    for (old, new) in [(1, 1), (5, 1)] {
        for pause in [50, 200] {
            let mut c = Client::start(&[]);
            c.initialize(None);
            c.open(&big, old);
            std::thread::sleep(Duration::from_millis(pause));
            c.notify(
                "textDocument/didClose",
                json!({ "textDocument": { "uri": URI } }),
            );
            c.open(small, new);
            let names = c.symbol_names();
            assert!(
                names.iter().any(|n| n == "t") && names.len() < 5,
                "{old}->{new}: {names:?}"
            );
            // Whatever the old check still publishes, the last word on the URI is the
            // new text's: W0401 (tool in no intent) on its one tool, nothing else.
            let formatted = c.request(
                "textDocument/formatting",
                json!({ "textDocument": { "uri": URI }, "options": { "tabSize": 2, "insertSpaces": true } }),
            );
            assert!(formatted.is_array() || formatted.is_null(), "{formatted}");
            std::thread::sleep(Duration::from_millis(300));
            let mut last = None;
            while let Some(m) = c.backlog.pop_front() {
                if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == URI {
                    last = Some(m["params"].clone());
                }
            }
            while let Ok(m) = c.rx.recv_timeout(Duration::from_millis(500)) {
                if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == URI {
                    last = Some(m["params"].clone());
                }
            }
            let last = last.expect("the new text's diagnostics");
            assert_eq!(last["version"], json!(new), "{old}->{new}: {last}");
            let diagnostics = last["diagnostics"].as_array().unwrap();
            assert_eq!(diagnostics, &expected, "{old}->{new}");
        }
    }
}

/// After `shutdown`, every request is answered "invalid request", whatever its
/// method; `exit` then ends the process with 0.
#[test]
fn requests_after_shutdown_are_invalid_whatever_their_method() {
    let mut c = Client::start(&[]);
    c.initialize(None);
    assert_eq!(c.request("shutdown", Value::Null), Value::Null);
    for method in ["foo/bar", "$/foo", "textDocument/hover"] {
        let e = c.request_raw(method, json!({}));
        assert_eq!(e["error"]["code"], -32600, "{method}: {e}");
    }
    c.notify("exit", Value::Null);
    assert!(c.wait_exit().success());
}

/// The session's phase follows the order of the client's messages, not how far the
/// server has got with them: requests written in one piece behind `shutdown` are
/// invalid, and any request before `initialize` (a method the server does not know
/// included) is -32002.
#[test]
fn the_order_of_the_messages_decides_their_phase() {
    let frame = |message: Value| {
        let body = message.to_string();
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    };
    let mut c = Client::start(&[]);
    let early = [
        ("foo/bar", 101),
        ("$/foo", 102),
        ("textDocument/hover", 103),
    ];
    let mut burst = String::new();
    for (method, id) in early {
        burst.push_str(&frame(
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": {} }),
        ));
    }
    c.send_raw(burst.as_bytes());
    for (method, id) in early {
        let e = c.request_raw_reply(id);
        assert_eq!(e["error"]["code"], -32002, "{method}: {e}");
    }
    c.initialize(None);
    let mut burst = frame(json!({ "jsonrpc": "2.0", "id": 200, "method": "shutdown" }));
    let late = [
        ("foo/bar", 201),
        ("$/foo", 202),
        ("textDocument/hover", 203),
    ];
    for (method, id) in late {
        burst.push_str(&frame(
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": {} }),
        ));
    }
    c.send_raw(burst.as_bytes());
    assert_eq!(c.request_raw_reply(200)["result"], Value::Null);
    for (method, id) in late {
        let e = c.request_raw_reply(id);
        assert_eq!(e["error"]["code"], -32600, "{method}: {e}");
    }
    c.notify("exit", Value::Null);
    assert!(c.wait_exit().success());
}

/// JSON that is no JSON-RPC message the library can read: answered `-32600`, with the
/// message's id when the client can match it.
#[test]
fn messages_the_library_cannot_read_are_answered_and_the_server_keeps_serving() {
    let mut c = session();
    for (body, id) in [
        ("[]", Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"shutdown"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"shutdown"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":41,"method":"a","method":"b"}"#,
            json!(41),
        ),
        (r#"{"jsonrpc":"2.0","id":42}"#, json!(42)),
    ] {
        c.send_body(body);
        let e = c.error_without_id();
        assert_eq!(e["error"]["code"], -32600, "{body}: {e}");
        assert_eq!(e["id"], id, "{body}: {e}");
    }
    still_serving(c, 2);
}

#[test]
fn the_end_of_input_inside_a_message_ends_the_server_cleanly() {
    let mut c = session();
    c.send_raw(b"Content-Length: 100\r\n\r\n{\"jsonrpc\":\"2.0\",");
    c.close_input();
    assert_eq!(c.error_without_id()["error"]["code"], -32700);
    // No `shutdown` came first: the protocol's exit code for that is 1.
    let status = c.wait_exit();
    assert_eq!(status.code(), Some(1), "{status}");
}

#[test]
fn exit_without_shutdown_is_exit_code_1() {
    let mut c = session();
    c.notify("exit", Value::Null);
    let status = c.wait_exit();
    assert_eq!(status.code(), Some(1), "{status}");
}

#[test]
fn a_dollar_request_is_answered_method_not_found() {
    let mut c = session();
    let e = c.request_raw("$/foo", json!({}));
    assert_eq!(e["error"]["code"], -32601, "{e}");
    still_serving(c, 2);
}

// ── The workspace, reloads, bursts and renames ───────────────────────────────────

fn file_uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

/// A project with a registry holding `acme/base@1.0.0`, and a pack importing
/// `version` of it.
fn project(version: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join("packs")).unwrap();
    publish_base(&project, "1.0.0");
    let pack = project.join("packs/app.ctxpack");
    let text = CLEAN.replacen(
        "\n\ncontext {",
        &format!("\n\nimport \"acme/base\" version \"{version}\"\n\ncontext {{"),
        1,
    );
    std::fs::write(&pack, &text).unwrap();
    (dir, pack, text)
}

fn publish_base(project: &std::path::Path, version: &str) -> std::path::PathBuf {
    let lib = format!(
        "pack \"acme/base\" version \"{version}\" library\n\nredactor email pattern \"[a-z]+@x\"\n"
    );
    let built = ctxpack::build::build_source("base.ctxpack", lib).unwrap();
    let registry = ctxpack::registry::Registry::open(project.join(".ctxpack/registry"));
    registry.publish(&built.artifact).unwrap();
    project.join(format!(".ctxpack/registry/acme/base/{version}.json"))
}

fn init_watching(c: &mut Client, folder: &std::path::Path) {
    c.request(
        "initialize",
        json!({
            "processId": null,
            "workspaceFolders": [{ "uri": file_uri(folder), "name": "project" }],
            "capabilities": { "workspace": { "didChangeWatchedFiles": { "dynamicRegistration": true } } }
        }),
    );
    c.notify("initialized", json!({}));
}

/// Imports resolve from the project's registry whatever the server's working
/// directory; publishing a version or editing the lockfile re-checks the open pack.
#[test]
fn imports_resolve_from_the_project_and_reload_when_it_changes() {
    let elsewhere = tempfile::tempdir().unwrap();
    let (dir, pack, _) = project("1.1.0");
    let mut c = Client::start_in(elsewhere.path(), &[]);
    init_watching(&mut c, dir.path());
    let registration = c.answer("client/registerCapability", Value::Null);
    let watchers = &registration["registrations"][0]["registerOptions"]["watchers"];
    let globs: Vec<&str> = watchers
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["globPattern"].as_str())
        .collect();
    for wanted in ["**/*.ctxpack", "**/ctxpack.lock", "**/*.tests.yaml"] {
        assert!(globs.contains(&wanted), "{globs:?}");
    }
    let uri = file_uri(&pack);
    let text = std::fs::read_to_string(&pack).unwrap();
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": "ctxpack", "version": 1, "text": text } }),
    );
    // 1.1.0 is not published yet.
    let d = c.diagnostics_of(&uri);
    assert_eq!(
        codes(d["diagnostics"].as_array().unwrap()),
        ["E0702"],
        "{d:#}"
    );
    let published = publish_base(pack.parent().unwrap().parent().unwrap(), "1.1.0");
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": file_uri(&published), "type": 1 }] }),
    );
    let d = c.diagnostics_of(&uri);
    assert_eq!(d["diagnostics"], json!([]), "{d:#}");
    // A lockfile that pins another hash: E0703 on the next check.
    let lock = pack.with_file_name("ctxpack.lock");
    std::fs::write(
        &lock,
        r#"{"lockfile": 1, "packages": [{"name": "acme/base", "version": "1.1.0", "hash": "blake3:0000000000000000000000000000000000000000000000000000000000000000"}]}"#,
    )
    .unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": file_uri(&lock), "type": 1 }] }),
    );
    let d = c.diagnostics_of(&uri);
    assert_eq!(
        codes(d["diagnostics"].as_array().unwrap()),
        ["E0703"],
        "{d:#}"
    );
    // Hover on the import shows what it resolved to.
    let line = line_of(&text, "import", 0);
    let hover = c.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": uri }, "position": { "line": line, "character": 10 } }),
    );
    let markdown = hover["contents"]["value"].as_str().unwrap_or("");
    assert!(
        markdown.starts_with("**import** `acme/base@1.1.0`"),
        "{markdown}"
    );
    assert!(markdown.contains("- redactor `email`"), "{markdown}");
    // A lockfile that is not JSON: said on the document (check refuses it), not
    // taken silently for no lockfile.
    std::fs::write(&lock, "{ not json").unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": file_uri(&lock), "type": 2 }] }),
    );
    let d = c.diagnostics_of(&uri);
    let all = d["diagnostics"].as_array().unwrap();
    assert_eq!(all.len(), 1, "{d:#}");
    let message = all[0]["message"].as_str().unwrap_or("");
    assert!(message.contains("is not a valid lockfile"), "{message}");
    assert_eq!(all[0]["severity"], 1, "{d:#}");
    std::fs::remove_file(&lock).unwrap();
    c.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": [{ "uri": file_uri(&lock), "type": 3 }] }),
    );
    let d = c.diagnostics_of(&uri);
    assert_eq!(d["diagnostics"], json!([]), "{d:#}");
    c.shutdown();
}

/// A pack nested as deep as the parser accepts is checked on the server's threads
/// (their stacks are sized for it): diagnostics arrive and the server answers on.
#[test]
fn a_pack_nested_to_the_limit_is_checked() {
    let mut c = Client::start(&[]);
    c.initialize(None);
    let n = ctxpack::syntax::MAX_NESTING - 2;
    let text = format!(
        "pack \"a/b\" version \"1.0.0\" library\npolicy p {{ when 1 in {}[1]{} refuse \"x\" }}\n",
        "[".repeat(n),
        "]".repeat(n)
    );
    c.open(&text, 1);
    let d = c.diagnostics(1);
    assert!(d.iter().all(|d| d["code"] != "E0001"), "{d:?}");
    let hover = c.at("textDocument/hover", 1, 2, json!({}));
    assert!(hover.get("error").is_none(), "{hover}");
    c.shutdown();
}

/// A burst of changes: the last version's diagnostics arrive, and none of a
/// superseded version after a newer one.
#[test]
fn a_burst_of_changes_publishes_the_last_version_last() {
    let mut c = Client::start(&[]);
    c.initialize(None);
    let text = generated_pack(5_000);
    c.open(&text, 1);
    c.diagnostics(1);
    for v in 2..=21 {
        let edited = if v % 2 == 0 {
            text.replacen("tools ", "tools  ", 1)
        } else {
            text.clone()
        };
        c.change_all(&edited, v);
    }
    // Collect publishes until version 21's.
    let mut versions = Vec::new();
    loop {
        let p = c.wait_for("textDocument/publishDiagnostics", |p| p["uri"] == URI);
        let v = p["version"].as_i64().unwrap_or(-1);
        versions.push(v);
        if v == 21 {
            break;
        }
    }
    let mut sorted = versions.clone();
    sorted.sort();
    assert_eq!(versions, sorted, "published out of order: {versions:?}");
    assert!(
        versions.len() < 20,
        "every stale version was published: {versions:?}"
    );
    // A query sent while an analysis runs answers about the newest text.
    c.change_all(&text.replacen("tools ", "tools   ", 1), 22);
    let start = Instant::now();
    c.at("textDocument/hover", 0, 6, json!({}));
    assert!(start.elapsed() < Duration::from_secs(2));
    c.diagnostics(22);
    c.shutdown();
}

/// Rename over the protocol reaches raw JsonLogic, and a breaking rename is refused.
#[test]
fn rename_reaches_raw_json_and_refuses_what_would_break() {
    let text = CLEAN.replace(
        "when ctx.user.tier == \"pro\"",
        "when json {\"==\": [{\"var\": \"ctx.user.tier\"}, \"pro\"]}",
    );
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(&text, 1);
    assert!(c.diagnostics(1).is_empty());
    let (line, col, _) = position(&text, "user.tier", 0);
    let edit = c.at(
        "textDocument/rename",
        line,
        col,
        json!({ "newName": "plan" }),
    );
    let edits = edit["changes"][URI].as_array().cloned().unwrap_or_default();
    assert_eq!(edits.len(), 2, "{edit:#}");
    let (json_line, _, _) = position(&text, "{\"var\": \"ctx.user.tier\"}", 0);
    assert!(
        edits
            .iter()
            .any(|e| e["range"]["start"]["line"] == json!(json_line)),
        "{edit:#}"
    );
    let (line, col, _) = position(&text, "evidence", 0);
    let refused = c.request_raw(
        "textDocument/rename",
        json!({ "textDocument": { "uri": URI }, "position": { "line": line, "character": col }, "newName": "kb" }),
    );
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("W0502"), "{refused:#}");
    c.shutdown();
}

/// A client that edits and asks at once (without waiting for diagnostics) gets an
/// answer about the text it sent.
#[test]
fn queries_right_after_an_edit_see_the_edit() {
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(CLEAN, 1);
    let (line, col, _) = position(CLEAN, "lookup_order", 1);
    let hover = c.at("textDocument/hover", line, col + 2, json!({}));
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap_or("")
            .contains("**tool** `lookup_order`"),
        "{hover:#}"
    );
    // Ten lines inserted above: the same name is now ten lines lower.
    let edited = CLEAN.replacen(
        "/// Looks an order up.",
        &format!("{}/// Looks an order up.", "// pad\n".repeat(10)),
        1,
    );
    c.change_all(&edited, 2);
    let (line, col, _) = position(&edited, "lookup_order", 1);
    let definition = c.at("textDocument/definition", line, col + 2, json!({}));
    let (def_line, _, _) = position(&edited, "lookup_order", 0);
    assert_eq!(
        definition[0]["range"]["start"]["line"],
        json!(def_line),
        "{definition:#}"
    );
    c.shutdown();
}

/// What the pack costs and how it is built, over the protocol: token hints equal to
/// the runtime's counts, intent lenses with their test cases, folding, semantic
/// tokens (full and range) and workspace symbols.
#[test]
fn economics_structure_and_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let support = repo.join("packs/support");
    for f in ["support.ctxpack", "support.tests.yaml"] {
        std::fs::copy(support.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("evidence")).unwrap();
    for e in std::fs::read_dir(support.join("evidence"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(e.path(), dir.path().join("evidence").join(e.file_name())).unwrap();
    }
    let pack = dir.path().join("support.ctxpack");
    let uri = file_uri(&pack);
    let text = std::fs::read_to_string(&pack).unwrap();
    let mut c = Client::start(&[]);
    let init = c.request(
        "initialize",
        json!({ "processId": null, "workspaceFolders": [{ "uri": file_uri(dir.path()), "name": "w" }], "capabilities": {} }),
    );
    c.notify("initialized", json!({}));
    let caps = &init["capabilities"];
    for cap in [
        "inlayHintProvider",
        "codeLensProvider",
        "foldingRangeProvider",
        "semanticTokensProvider",
        "workspaceSymbolProvider",
    ] {
        assert!(!caps[cap].is_null(), "{cap} missing: {caps:#}");
    }
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": "ctxpack", "version": 1, "text": text } }),
    );
    let lines = text.lines().count() as u32;
    let whole =
        json!({ "start": { "line": 0, "character": 0 }, "end": { "line": lines, "character": 0 } });
    let hints = c.request(
        "textDocument/inlayHint",
        json!({ "textDocument": { "uri": uri }, "range": whole }),
    );
    let hints = hints.as_array().unwrap();
    let (line, col, _) = position(&text, "tool lookup_order", 0);
    let lookup = hints
        .iter()
        .find(|h| h["position"] == json!({ "line": line, "character": col + 17 }))
        .unwrap_or_else(|| panic!("no hint after lookup_order: {hints:#?}"));
    // The runtime counts 61 tokens for this tool's block (its compiled context says so).
    assert_eq!(lookup["label"], "61 tokens", "{lookup:#}");
    let lenses = c.request(
        "textDocument/codeLens",
        json!({ "textDocument": { "uri": uri } }),
    );
    let refund = lenses
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["command"]["arguments"][0]["intent"] == "refund")
        .cloned()
        .unwrap();
    let title = refund["command"]["title"].as_str().unwrap();
    assert!(
        title.contains("in supervised") && title.contains("test cases"),
        "{title}"
    );
    assert_eq!(refund["command"]["command"], "ctxpack.runTests");
    // The fallback intent counts its own cases and those naming an undeclared intent
    // (one of each in the bundled tests).
    let general = lenses
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["command"]["arguments"][0]["intent"] == "general")
        .cloned()
        .unwrap();
    let title = general["command"]["title"].as_str().unwrap();
    assert!(title.ends_with("· 2 test cases"), "{title}");
    let folds = c.request(
        "textDocument/foldingRange",
        json!({ "textDocument": { "uri": uri } }),
    );
    assert!(folds.as_array().unwrap().len() > 20, "{folds:#}");
    let full = c.request(
        "textDocument/semanticTokens/full",
        json!({ "textDocument": { "uri": uri } }),
    );
    let data = full["data"].as_array().unwrap();
    assert!(
        data.len() > 500 && data.len().is_multiple_of(5),
        "{}",
        data.len()
    );
    let range = c.request(
        "textDocument/semanticTokens/range",
        json!({ "textDocument": { "uri": uri }, "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 10, "character": 0 } } }),
    );
    assert!(range["data"].as_array().unwrap().len() < data.len());
    let symbols = c.request("workspace/symbol", json!({ "query": "refund" }));
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        names.contains(&"issue_refund") && names.contains(&"refund"),
        "{names:?}"
    );
    c.shutdown();
}

/// A `*.tests.yaml` document gets diagnostics as it is typed, on the offending lines:
/// unknown keys, and intents, tools and context values the pack it names does not
/// declare.
#[test]
fn test_files_are_checked_against_their_pack() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.ctxpack"), CLEAN).unwrap();
    let tests = dir.path().join("p.tests.yaml");
    let uri = file_uri(&tests);
    let text = "pack: p.ctxpack\ncases:\n  - name: a\n    request: { intent: refnd, context: { user: { tier: gold } } }\n    expect: { tools: [lookup_order, nope], tols: [] }\n";
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": uri, "languageId": "yaml", "version": 1, "text": text } }),
    );
    let d = c.diagnostics_of(&uri);
    let found: Vec<(u64, String)> = d["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["range"]["start"]["line"].as_u64().unwrap(),
                x["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let has = |line: u64, part: &str| found.iter().any(|(l, m)| *l == line && m.contains(part));
    assert!(
        has(3, "no intent `refnd`") && has(3, "did you mean `refund`"),
        "{found:?}"
    );
    assert!(has(3, "ctx.user.tier"), "{found:?}");
    assert!(has(4, "no tool `nope`"), "{found:?}");
    assert!(has(4, "unknown expectation `tols`"), "{found:?}");
    // On the value itself, not the whole line.
    let intent = d["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["message"].as_str().unwrap_or("").contains("refnd"))
        .cloned()
        .unwrap();
    let col = text.lines().nth(3).unwrap().find("refnd").unwrap() as u64;
    assert_eq!(intent["range"]["start"]["character"], col, "{intent:#}");
    assert_eq!(intent["code"], "unknown_intent");
    // Fixed: no diagnostics.
    let fixed = "pack: p.ctxpack\ncases:\n  - name: a\n    request: { intent: refund, context: { user: { tier: pro } } }\n    expect: { tools: [lookup_order] }\n";
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": uri, "version": 2 }, "contentChanges": [{ "text": fixed }] }),
    );
    let d = c.wait_for("textDocument/publishDiagnostics", |p| {
        p["uri"] == uri && p["version"] == 2
    });
    assert_eq!(d["diagnostics"], json!([]), "{d:#}");
    c.shutdown();
}

/// Only packs and test files are checked: a Markdown file opened by a client with a
/// broad selector gets no diagnostics. A test file is no pack to query (no semantic
/// tokens, no hover), and one whose `pack` names no file says so on that line.
#[test]
fn other_documents_are_left_alone_and_test_files_are_not_packs() {
    let dir = tempfile::tempdir().unwrap();
    let readme = file_uri(&dir.path().join("README.md"));
    let tests_uri = file_uri(&dir.path().join("m.tests.yaml"));
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": readme, "languageId": "markdown", "version": 1, "text": "# Title\n" } }),
    );
    let text = "# tests\npack: missing.ctxpack\ncases: []\n";
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": tests_uri, "languageId": "yaml", "version": 1, "text": text } }),
    );
    let d = c.diagnostics_of(&tests_uri);
    let found = d["diagnostics"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{d:#}");
    assert_eq!(found[0]["code"], "pack_not_found");
    assert_eq!(found[0]["range"]["start"]["line"], 1);
    assert!(found[0]["message"]
        .as_str()
        .unwrap()
        .contains("missing.ctxpack"));
    let doc = json!({ "textDocument": { "uri": tests_uri } });
    assert_eq!(
        c.request("textDocument/semanticTokens/full", doc.clone()),
        json!(null)
    );
    let at =
        json!({ "textDocument": { "uri": tests_uri }, "position": { "line": 1, "character": 1 } });
    assert_eq!(c.request("textDocument/hover", at), json!(null));
    // The README is not tracked: a query answers at once, with nothing (a checked
    // document would answer its outline, an empty list).
    let readme_doc = json!({ "textDocument": { "uri": readme } });
    assert_eq!(
        c.request("textDocument/documentSymbol", readme_doc),
        json!(null)
    );
    assert!(
        !c.backlog.iter().any(|m| m["params"]["uri"] == readme),
        "{:?}",
        c.backlog
    );
    c.shutdown();
}

/// An open test file follows edits of the open pack beside it: renaming an intent in
/// the pack (not saved) brings the test file's `unknown_intent` at once.
#[test]
fn test_files_follow_edits_of_their_open_pack() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("p.ctxpack");
    std::fs::write(&pack, CLEAN).unwrap();
    let tests = dir.path().join("p.tests.yaml");
    let tests_uri = file_uri(&tests);
    let pack_uri = file_uri(&pack);
    let text = "pack: p.ctxpack\ncases:\n  - name: a\n    request: { intent: refund }\n    expect: { must_refuse: false }\n";
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": tests_uri, "languageId": "yaml", "version": 1, "text": text } }),
    );
    let d = c.diagnostics_of(&tests_uri);
    assert_eq!(d["diagnostics"], json!([]), "{d:#}");
    c.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": pack_uri, "languageId": "ctxpack", "version": 1, "text": CLEAN } }),
    );
    let renamed = CLEAN.replace("intent refund", "intent refunds");
    assert_ne!(renamed, CLEAN);
    c.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": pack_uri, "version": 2 }, "contentChanges": [{ "text": renamed }] }),
    );
    let d = c.wait_for("textDocument/publishDiagnostics", |p| {
        p["uri"] == tests_uri
            && p["diagnostics"]
                .as_array()
                .is_some_and(|d| d.iter().any(|x| x["code"] == "unknown_intent"))
    });
    let message = d["diagnostics"][0]["message"].as_str().unwrap_or("");
    assert!(message.contains("refund"), "{d:#}");
    c.shutdown();
}

/// The policy analysis's warnings follow edits over stdio: an edit above a warning
/// that leaves the policies as they were moves it (the analysis is reused), and an
/// edit of a policy's priority takes it away (the analysis runs again).
/// The fixture with a policy shadowed by a refusal (W0302).
fn shadowed_by_refusal() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join("tests/fixtures/err/7021_w0302_shadowed_by_refusal.ctxpack"))
        .unwrap_or_default()
}

#[test]
fn policy_analysis_warnings_follow_edits() {
    let text = shadowed_by_refusal();
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(&text, 1);
    let w0302 = |diags: &[Value]| -> Vec<Value> {
        diags
            .iter()
            .filter(|d| d["code"] == "W0302")
            .map(|d| d["range"].clone())
            .collect()
    };
    let before = w0302(&c.diagnostics(1));
    let line = line_of(&text, "policy young_voice", 0);
    assert_eq!(before.len(), 1, "{before:#?}");
    assert_eq!(before[0]["start"]["line"], line);
    // Words in a description above it: the warning keeps its line and column
    // (its bytes moved).
    let (desc, col, _) = position(&text, "Fetch an order by its id.", 0);
    c.change_range(
        json!({ "start": { "line": desc, "character": col }, "end": { "line": desc, "character": col } }),
        "Quickly ",
        2,
    );
    let moved = w0302(&c.diagnostics(2));
    assert_eq!(moved.len(), 1, "{moved:#?}");
    assert_eq!(moved[0]["start"]["line"], json!(line));
    assert_eq!(
        moved[0]["start"]["character"],
        before[0]["start"]["character"]
    );
    // Two comment lines at the top: two lines down.
    c.change_range(
        json!({ "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 0 } }),
        "// one\n// two\n",
        3,
    );
    let moved = w0302(&c.diagnostics(3));
    assert_eq!(moved.len(), 1, "{moved:#?}");
    assert_eq!(moved[0]["start"]["line"], json!(line + 2));
    // `young_voice` above the refusal: no longer shadowed.
    let (prio, col, _) = position(&text, "priority 50", 0);
    c.change_range(
        json!({ "start": { "line": prio + 2, "character": col + 9 }, "end": { "line": prio + 2, "character": col + 11 } }),
        "500",
        4,
    );
    let diags = c.diagnostics(4);
    assert!(w0302(&diags).is_empty(), "{diags:#?}");
    c.shutdown();
}

/// The publishes for `URI` in the backlog or arriving before `until` (a version),
/// in order.
fn publishes_until(c: &mut Client, until: i64) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let p = c.wait_for("textDocument/publishDiagnostics", |p| p["uri"] == URI);
        let done = p["version"] == json!(until);
        seen.push(p);
        if done {
            return seen;
        }
    }
}

/// An edit inside one item (a tool's description) is published from that item
/// alone, ahead of the full analysis, which does not publish the same diagnostics
/// again; an edit that changes what the whole-pack checks read (a new error in a
/// template) is published by the full analysis. Either way the diagnostics are those
/// of the edited text checked from scratch.
#[test]
fn an_edit_inside_one_item_is_published_once_and_as_a_full_check_would() {
    let text = shadowed_by_refusal();
    let fresh = |text: &str| -> Value {
        let mut f = Client::start(&[]);
        f.initialize(None);
        f.open(text, 1);
        let d = json!(f.diagnostics(1));
        f.shutdown();
        d
    };
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(&text, 1);
    c.diagnostics(1);
    let mut edited = text.clone();
    for (version, needle, insert) in [
        (2, "Fetch an order by its id.", "Quickly "),
        (3, "Help the customer get a refund.", "{{ ctx.nope }} "),
    ] {
        let (line, col, _) = position(&edited, needle, 0);
        let at = edited.find(needle).unwrap_or_default();
        c.change_range(
            json!({ "start": { "line": line, "character": col }, "end": { "line": line, "character": col } }),
            insert,
            version,
        );
        edited.insert_str(at, insert);
        let published = publishes_until(&mut c, version);
        // A query needs the full analysis: once it answers, that analysis is done
        // and anything it published was sent before the answer.
        c.at("textDocument/hover", 0, 1, json!({}));
        let again: Vec<&Value> = c
            .backlog
            .iter()
            .filter(|m| m["params"]["uri"] == URI && m["params"]["version"] == json!(version))
            .collect();
        assert!(
            again.is_empty(),
            "version {version} published twice: {again:#?}"
        );
        let last = published
            .last()
            .map(|p| p["diagnostics"].clone())
            .unwrap_or_default();
        assert_eq!(last, fresh(&edited), "version {version}");
        let found = codes(last.as_array().map_or(&[][..], |a| a.as_slice()));
        assert_eq!(
            found.contains(&"E0201".to_owned()),
            version == 3,
            "{found:?}"
        );
    }
    c.shutdown();
}

/// The outline is a tree for a client that says it reads one, and the protocol's flat
/// `SymbolInformation[]` (each child naming its container) for one that does not.
#[test]
fn the_outline_is_a_tree_only_for_clients_that_read_trees() {
    let outline = |hierarchical: Option<bool>| {
        let mut c = Client::start(&[]);
        let capabilities = match hierarchical {
            Some(h) => {
                json!({ "textDocument": { "documentSymbol": { "hierarchicalDocumentSymbolSupport": h } } })
            }
            None => json!({}),
        };
        c.request(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": capabilities }),
        );
        c.notify("initialized", json!({}));
        c.open(CLEAN, 1);
        c.diagnostics(1);
        let symbols = c.request(
            "textDocument/documentSymbol",
            json!({ "textDocument": { "uri": URI } }),
        );
        c.shutdown();
        symbols.as_array().cloned().unwrap_or_default()
    };
    let tree = outline(Some(true));
    let budget = tree.iter().find(|s| s["name"] == "budget").unwrap();
    assert!(budget["children"].as_array().is_some_and(|c| !c.is_empty()));
    assert!(budget.get("location").is_none(), "{budget}");
    for flat in [outline(None), outline(Some(false))] {
        assert!(flat.iter().all(|s| s.get("children").is_none()));
        assert!(flat.iter().all(|s| s["location"]["uri"] == URI));
        let bucket = flat
            .iter()
            .find(|s| s["name"] == "tools" && s["containerName"] == "budget");
        assert!(bucket.is_some(), "{flat:#?}");
        // Every symbol of the tree is there, parents first.
        let count = |s: &[Value]| -> usize {
            fn walk(s: &[Value]) -> usize {
                s.iter()
                    .map(|x| 1 + x["children"].as_array().map_or(0, |c| walk(c)))
                    .sum()
            }
            walk(s)
        };
        assert_eq!(flat.len(), count(&tree));
        let at = |name: &str| flat.iter().position(|s| s["name"] == name);
        assert!(at("budget") < flat.iter().position(|s| s["containerName"] == "budget"));
    }
}

/// Turning inlay hints and code lenses off (and on) in the settings takes effect at
/// once: the next requests answer accordingly, and a client that lets the server ask
/// is told to ask again.
#[test]
fn settings_turn_hints_and_lenses_off_and_on() {
    let mut c = Client::start(&[]);
    c.request(
        "initialize",
        json!({
            "processId": null,
            "rootUri": null,
            "capabilities": { "workspace": {
                "inlayHint": { "refreshSupport": true },
                "codeLens": { "refreshSupport": true }
            } }
        }),
    );
    c.notify("initialized", json!({}));
    c.open(CLEAN, 1);
    c.diagnostics(1);
    let whole =
        json!({ "start": { "line": 0, "character": 0 }, "end": { "line": 400, "character": 0 } });
    let counts = |c: &mut Client| {
        let hints = c.request(
            "textDocument/inlayHint",
            json!({ "textDocument": { "uri": URI }, "range": whole }),
        );
        let lenses = c.request(
            "textDocument/codeLens",
            json!({ "textDocument": { "uri": URI } }),
        );
        (
            hints.as_array().map_or(0, Vec::len),
            lenses.as_array().map_or(0, Vec::len),
        )
    };
    let on = counts(&mut c);
    assert!(on.0 > 0 && on.1 > 0, "{on:?}");
    for (enabled, expected) in [(false, (0, 0)), (true, on)] {
        c.notify(
            "workspace/didChangeConfiguration",
            json!({ "settings": { "ctxpack": {
                "inlayHints": { "enabled": enabled },
                "codeLens": { "enabled": enabled }
            } } }),
        );
        c.answer("workspace/inlayHint/refresh", Value::Null);
        c.answer("workspace/codeLens/refresh", Value::Null);
        assert_eq!(counts(&mut c), expected, "enabled: {enabled}");
    }
    c.shutdown();
}

/// In a `\r\n` document a position past the end of a line is that line's end as the
/// client shows it, before the `\r`: text inserted there stays on the line, and the
/// server's text stays the client's. A completion at a line past the end of the
/// document offers nothing.
#[test]
fn past_the_end_of_a_crlf_line_is_before_its_carriage_return() {
    let crlf = CLEAN.replace('\n', "\r\n");
    let mut c = Client::start(&[]);
    c.initialize(None);
    c.open(&crlf, 1);
    assert!(c.diagnostics(1).is_empty());
    let first = crlf
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('\r');
    let end = first.chars().count() as u32;
    // Hover past the end of a line answers as at its end (no error).
    let hover = c.request_raw(
        "textDocument/hover",
        json!({ "textDocument": { "uri": URI }, "position": { "line": 0, "character": 10_000 } }),
    );
    assert!(hover.get("result").is_some(), "{hover}");
    // Completion at a line the document does not have offers nothing (an edit range
    // must contain the position); at the end of the last line it offers the items.
    let lines = crlf.split("\r\n").count() as u32;
    let past = c.at("textDocument/completion", lines + 3, 0, json!({}));
    assert_eq!(past, json!([]));
    let at_end = c.at("textDocument/completion", lines - 1, 0, json!({}));
    assert!(
        at_end.as_array().is_some_and(|items| !items.is_empty()),
        "{at_end}"
    );
    c.change_range(
        json!({ "start": { "line": 0, "character": 10_000 }, "end": { "line": 0, "character": 10_000 } }),
        " Z",
        2,
    );
    let diags = c.diagnostics(2);
    let d = diags
        .iter()
        .find(|d| d["code"] == "E0001")
        .cloned()
        .unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(
        d["range"]["start"],
        json!({ "line": 0, "character": end + 1 }),
        "{d:#}"
    );
    // Deleting it again leaves the document clean: the `\r\n` was never split.
    c.change_range(
        json!({ "start": { "line": 0, "character": end }, "end": { "line": 0, "character": 10_000 } }),
        "",
        3,
    );
    assert!(c.diagnostics(3).is_empty());
    c.shutdown();
}

/// A test file whose pack cannot be read still gets the runner's problems, each with
/// its code and a range inside the document (an empty file, a list, broken YAML).
#[test]
fn test_files_without_a_pack_get_coded_diagnostics_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::start(&[]);
    c.initialize(None);
    for (i, (text, codes)) in [
        ("", &["invalid_test_file"][..]),
        ("# only a comment\n", &["invalid_test_file"]),
        ("- 1\n- 2\n", &["invalid_test_file"]),
        ("pack: nowhere.ctxpack\ncases: [\n", &["yaml_syntax"]),
        (
            "pack: nowhere.ctxpack\ncases:\n  - name: a\n    expect: { tols: [] }\n",
            &["pack_not_found", "invalid_case"],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let uri = file_uri(&dir.path().join(format!("t{i}.tests.yaml")));
        c.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": "yaml", "version": 1, "text": text } }),
        );
        let d = c.diagnostics_of(&uri);
        let all = d["diagnostics"].as_array().cloned().unwrap_or_default();
        assert!(!all.is_empty(), "{text:?}");
        let lines: Vec<&str> = text.split('\n').collect();
        let found: Vec<&str> = all.iter().filter_map(|x| x["code"].as_str()).collect();
        assert!(
            codes.iter().all(|c| found.contains(c)),
            "{text:?}: {found:?}"
        );
        for x in &all {
            assert!(
                codes.contains(&x["code"].as_str().unwrap_or("")),
                "{text:?}: {x:#}"
            );
            for end in ["start", "end"] {
                let line = x["range"][end]["line"].as_u64().unwrap_or(u64::MAX) as usize;
                let character = x["range"][end]["character"].as_u64().unwrap_or(0) as usize;
                assert!(line < lines.len(), "{text:?}: {x:#}");
                assert!(character <= lines[line].len(), "{text:?}: {x:#}");
            }
        }
    }
    c.shutdown();
}
