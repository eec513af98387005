//! A guard between the editor's stdio and the protocol library.
//!
//! `tower-lsp-server` reads frames with a `tokio-util` `FramedRead`, and such a stream
//! ends for good after its decoder's first error: one frame whose body is not JSON (a
//! truncated object, a lone surrogate escape like `"\ud83d"` that a buggy client sends)
//! gets a `-32700` reply and then the server stops reading and exits, and the editor
//! loses diagnostics for the rest of the session. So this module frames the input
//! itself and lets only well-formed JSON-RPC messages through:
//!
//! - a body that is not JSON is answered `-32700 Parse error`;
//! - valid JSON that is not a JSON-RPC 2.0 message is answered `-32600 Invalid
//!   Request` (with the message's `id` when it has a usable one);
//! - a header block without a usable `Content-Length`, or one over
//!   [`MAX_HEADER`] bytes, is answered `-32700` and skipped up to the next
//!   `Content-Length`; a length over [`MAX_BODY`] is answered and its bytes skipped as
//!   they arrive, never held;
//! - everything else reaches the server byte for byte.
//!
//! The replies go out through the same writer as the server's own messages, frame by
//! frame, so the two never interleave inside a frame.

use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

/// The largest header block accepted.
pub const MAX_HEADER: usize = 8 * 1024;
/// The largest message body accepted (a 64 MiB document is far past any pack).
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// Runs `serve` with a guarded input and a frame-atomic output over `input`/`output`.
pub async fn run<R, W, F, Fut>(input: R, output: W, serve: F)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    F: FnOnce(DuplexStream, DuplexStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (to_server, server_in) = tokio::io::duplex(256 * 1024);
    let (server_out, from_server) = tokio::io::duplex(256 * 1024);
    let (replies_tx, replies_rx) = mpsc::unbounded_channel();
    let reading = tokio::spawn(read_input(input, to_server, replies_tx));
    let writing = tokio::spawn(write_output(from_server, replies_rx, output));
    serve(server_in, server_out).await;
    reading.abort();
    let _ = writing.await;
}

/// One problem found in the input, answered on the output.
fn reply(code: i64, message: &str, id: Value) -> Vec<u8> {
    frame(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Reads frames from `input`: well-formed ones go to `server`, replies to the others
/// to `replies`. Ends at the end of `input` (or when the server stops reading).
async fn read_input<R: AsyncRead + Unpin>(
    mut input: R,
    mut server: DuplexStream,
    replies: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    // Bytes of an oversized body still to skip.
    let mut skipping = 0usize;
    loop {
        // Consume every complete frame in `buf`.
        loop {
            if skipping > 0 {
                let n = skipping.min(buf.len());
                buf.drain(..n);
                skipping -= n;
                if skipping > 0 {
                    break;
                }
            }
            match next_frame(&buf) {
                Frame::Incomplete => break,
                Frame::BadHeader { skip } => {
                    buf.drain(..skip);
                    let _ = replies.send(reply(
                        -32700,
                        "Parse error: bad message header",
                        Value::Null,
                    ));
                }
                Frame::TooLarge { header, length } => {
                    buf.drain(..header);
                    skipping = length;
                    let _ = replies.send(reply(
                        -32700,
                        "Parse error: message over the size limit",
                        Value::Null,
                    ));
                }
                Frame::Complete { header, length } => {
                    let body = &buf[header..header + length];
                    match check(body) {
                        Ok(()) => {
                            if server.write_all(&buf[..header + length]).await.is_err() {
                                return;
                            }
                        }
                        Err(answer) => {
                            let _ = replies.send(answer);
                        }
                    }
                    buf.drain(..header + length);
                }
            }
        }
        match input.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Whether `body` is a JSON-RPC 2.0 message the server can take; else the reply.
fn check(body: &[u8]) -> Result<(), Vec<u8>> {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Err(reply(-32700, "Parse error", Value::Null));
    };
    let Value::Object(message) = &value else {
        return Err(reply(-32600, "Invalid Request", Value::Null));
    };
    let id = message.get("id");
    let id_ok = id.is_none_or(|id| matches!(id, Value::Number(_) | Value::String(_) | Value::Null));
    let usable_id = id.filter(|_| id_ok).cloned().unwrap_or(Value::Null);
    let version_ok = message.get("jsonrpc") == Some(&Value::from("2.0"));
    let is_call = match message.get("method") {
        Some(Value::String(_)) => message
            .get("params")
            .is_none_or(|p| p.is_object() || p.is_array() || p.is_null()),
        Some(_) => false,
        None => id.is_some() && (message.contains_key("result") || message.contains_key("error")),
    };
    if version_ok && id_ok && is_call {
        Ok(())
    } else {
        Err(reply(-32600, "Invalid Request", usable_id))
    }
}

enum Frame {
    Incomplete,
    /// A header block without a usable `Content-Length`: skip `skip` bytes.
    BadHeader {
        skip: usize,
    },
    /// A length over [`MAX_BODY`]: skip the header now and `length` bytes as they come.
    TooLarge {
        header: usize,
        length: usize,
    },
    Complete {
        header: usize,
        length: usize,
    },
}

/// The next frame in `buf`.
fn next_frame(buf: &[u8]) -> Frame {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        if buf.len() > MAX_HEADER {
            return Frame::BadHeader {
                skip: resync(buf, 1),
            };
        }
        return Frame::Incomplete;
    };
    let header = end + 4;
    if header > MAX_HEADER {
        return Frame::BadHeader {
            skip: resync(buf, 1),
        };
    }
    let length = std::str::from_utf8(&buf[..end]).ok().and_then(|text| {
        text.split("\r\n").find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
    });
    match length {
        None => Frame::BadHeader {
            skip: resync(buf, header),
        },
        Some(length) if length > MAX_BODY => Frame::TooLarge { header, length },
        Some(length) if buf.len() < header + length => Frame::Incomplete,
        Some(length) => Frame::Complete { header, length },
    }
}

/// Where the next `Content-Length` header starts, at or after `from`; the whole
/// buffer when there is none yet.
fn resync(buf: &[u8], from: usize) -> usize {
    let from = from.min(buf.len());
    find(&buf[from..], b"Content-Length").map_or(buf.len(), |i| from + i)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Copies the server's frames and the guard's replies to `output`, one whole frame
/// at a time.
async fn write_output<W: AsyncWrite + Unpin>(
    mut from_server: DuplexStream,
    mut replies: mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut replies_open = true;
    loop {
        tokio::select! {
            read = from_server.read(&mut chunk) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    // The server's output is well-formed: write each whole frame.
                    while let Frame::Complete { header, length } = next_frame(&buf) {
                        if output.write_all(&buf[..header + length]).await.is_err() {
                            return;
                        }
                        buf.drain(..header + length);
                    }
                    if output.flush().await.is_err() {
                        return;
                    }
                }
            },
            answer = replies.recv(), if replies_open => match answer {
                Some(answer) => {
                    if output.write_all(&answer).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
                None => replies_open = false,
            },
        }
    }
    // What the server wrote last, and any reply still queued.
    let _ = output.write_all(&buf).await;
    while let Ok(answer) = replies.try_recv() {
        let _ = output.write_all(&answer).await;
    }
    let _ = output.flush().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_messages() {
        assert!(check(br#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#).is_ok());
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"result":null}"#).is_ok());
        let parse = String::from_utf8(check(br#"{"jsonrpc":"2.0","#).unwrap_err()).unwrap();
        assert!(parse.contains("-32700"), "{parse}");
        let surrogate = br#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud83d"}}"#;
        assert!(String::from_utf8(check(surrogate).unwrap_err())
            .unwrap()
            .contains("-32700"));
        for invalid in [
            &br"[]"[..],
            br"42",
            br#"{"id":7}"#,
            br#"{"jsonrpc":"1.0","method":"x"}"#,
        ] {
            let r = String::from_utf8(check(invalid).unwrap_err()).unwrap();
            assert!(r.contains("-32600"), "{r}");
        }
        let r = String::from_utf8(check(br#"{"jsonrpc":"2.0","id":7,"method":3}"#).unwrap_err())
            .unwrap();
        assert!(r.contains("\"id\":7"), "{r}");
    }

    #[test]
    fn frames() {
        let msg = b"Content-Length: 2\r\n\r\n{}rest";
        assert!(matches!(
            next_frame(msg),
            Frame::Complete {
                header: 21,
                length: 2
            }
        ));
        assert!(matches!(
            next_frame(b"Content-Length: 5\r\n\r\n{}"),
            Frame::Incomplete
        ));
        assert!(matches!(
            next_frame(b"Content-Length: 2\r\n"),
            Frame::Incomplete
        ));
        let bad = b"Content-Type: x\r\n\r\nContent-Length: 2\r\n\r\n{}";
        assert!(matches!(next_frame(bad), Frame::BadHeader { skip: 19 }));
        let huge = format!("Content-Length: {}\r\n\r\n", MAX_BODY + 1);
        assert!(matches!(
            next_frame(huge.as_bytes()),
            Frame::TooLarge { .. }
        ));
        assert!(matches!(
            next_frame(b"Content-Length: x\r\n\r\n"),
            Frame::BadHeader { .. }
        ));
    }
}
