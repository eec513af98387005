//! A guard between the editor's stdio and the protocol library.
//!
//! `tower-lsp-server` 0.23 reads its input through a `tokio-util` `FramedRead`, and
//! since tokio-util 0.7 such a stream yields `None` once after its decoder's first
//! error (tokio-rs/tokio#3976). The library's read loop (`Server::serve`) is
//! `while let Some(msg) = framed_stdin.next().await`: it answers the decode error
//! with `-32700`, then takes the `None` for the end of the input and returns, so the
//! process exits with code 0. One malformed frame (a truncated object, a lone
//! surrogate escape like `"\ud83d"` that a buggy client sends, a header its strict
//! parser refuses, an id it cannot represent) ends the session, and the editor loses
//! diagnostics for good.
//!
//! So the library only ever sees input it can decode. This module frames the client's
//! bytes itself ([`framing`]), checks each body against the library's own message
//! types ([`message`]), answers what fails on the output, and passes every message
//! that passes to the server, body unchanged, under a canonical `Content-Length`
//! header; changes to one document that arrive together are passed on as one
//! ([`coalesce`]). The answers go through the same writer as the server's own
//! messages, one whole frame at a time, so the two never interleave inside a frame.

mod coalesce;
mod framing;
mod message;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use coalesce::Coalescer;
use framing::{parse_header, Event, Framer, Header};

/// How many answers may wait for the writer before the reader waits in turn.
const QUEUED_ANSWERS: usize = 64;
const CHUNK: usize = 64 * 1024;

/// Runs `serve` on a guarded copy of `input` and a frame-atomic share of `output`;
/// returns when `serve` does, with everything it wrote written.
pub async fn run<R, W, F, Fut>(input: R, output: W, serve: F)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    F: FnOnce(DuplexStream, DuplexStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (to_server, server_in) = tokio::io::duplex(4 * CHUNK);
    let (server_out, from_server) = tokio::io::duplex(4 * CHUNK);
    let (answers_tx, answers_rx) = mpsc::channel(QUEUED_ANSWERS);
    let reading = tokio::spawn(read_input(input, to_server, answers_tx));
    let writing = tokio::spawn(write_output(from_server, answers_rx, output));
    serve(server_in, server_out).await;
    // After `exit` the client may keep its end open: stop reading it.
    reading.abort();
    let _ = writing.await;
}

/// Frames `input`: messages go to `server`, answers to malformed frames to `answers`.
/// Ends at the end of `input`, closing the server's input, or when the server stops
/// reading.
async fn read_input<R: AsyncRead + Unpin>(
    mut input: R,
    mut server: DuplexStream,
    answers: mpsc::Sender<Vec<u8>>,
) {
    let mut framer = Framer::default();
    let mut changes = Coalescer::default();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        while let Some(event) = framer.next() {
            let passed = match event {
                Event::Change(body, params) => match changes.push(body, params) {
                    Some(before) => pass(&mut server, &before).await,
                    None => true,
                },
                Event::Message(body) => {
                    flush(&mut server, &mut changes).await && pass(&mut server, &body).await
                }
                Event::Reject(rejection) => {
                    eprintln!("ctxpack-lsp: malformed message: {}", rejection.message);
                    flush(&mut server, &mut changes).await
                        && answers.send(rejection.to_frame()).await.is_ok()
                }
            };
            if !passed {
                return;
            }
        }
        if !flush(&mut server, &mut changes).await {
            return;
        }
        match input.read(&mut chunk).await {
            Ok(n) if n > 0 => framer.push(&chunk[..n]),
            // The end of the input, or an error reading it: nothing more will come.
            _ => {
                if let Some(Event::Reject(rejection)) = framer.finish() {
                    let _ = answers.send(rejection.to_frame()).await;
                }
                return;
            }
        }
    }
}

/// Passes a message body on to the server, framed; false when the server stopped
/// reading.
async fn pass(server: &mut DuplexStream, body: &[u8]) -> bool {
    let header = format!("Content-Length: {}\r\n\r\n", body.len());
    server.write_all(header.as_bytes()).await.is_ok() && server.write_all(body).await.is_ok()
}

/// Passes the pending changes on, if any; false when the server stopped reading.
async fn flush(server: &mut DuplexStream, changes: &mut Coalescer) -> bool {
    match changes.flush() {
        Some(body) => pass(server, &body).await,
        None => true,
    }
}

/// Copies the server's frames and the guard's answers to `output`, one whole frame at
/// a time, until the server closes its output.
async fn write_output<W: AsyncWrite + Unpin>(
    mut from_server: DuplexStream,
    mut answers: mpsc::Receiver<Vec<u8>>,
    mut output: W,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut answers_open = true;
    loop {
        tokio::select! {
            // An answer queued before the server's next frame goes out first.
            biased;
            answer = answers.recv(), if answers_open => match answer {
                Some(answer) => {
                    if output.write_all(&answer).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                }
                None => answers_open = false,
            },
            read = from_server.read(&mut chunk) => match read {
                Ok(n) if n > 0 => {
                    buf.extend_from_slice(&chunk[..n]);
                    let whole = whole_frames(&buf);
                    if output.write_all(&buf[..whole]).await.is_err()
                        || output.flush().await.is_err()
                    {
                        return;
                    }
                    buf.drain(..whole);
                }
                _ => break,
            },
        }
    }
    // What the server wrote last, and any answer still queued.
    let _ = output.write_all(&buf).await;
    while let Ok(answer) = answers.try_recv() {
        let _ = output.write_all(&answer).await;
    }
    let _ = output.flush().await;
}

/// How many bytes at the start of the server's output `buf` are whole frames. The
/// library writes well-formed frames; were one not, it is passed on as it is rather
/// than held.
fn whole_frames(buf: &[u8]) -> usize {
    let mut end = 0;
    while end < buf.len() {
        match parse_header(&buf[end..]) {
            Header::Complete { header, length } if buf.len() - end - header >= length => {
                end += header + length;
            }
            Header::Complete { .. } | Header::Incomplete => break,
            Header::Bad { .. } => return buf.len(),
        }
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_frames_of_the_server_output() {
        let one = b"Content-Length: 2\r\n\r\n{}";
        assert_eq!(whole_frames(one), one.len());
        let mut two = one.to_vec();
        two.extend_from_slice(b"Content-Length: 2\r\n\r\n{");
        assert_eq!(whole_frames(&two), one.len());
        assert_eq!(whole_frames(b"Content-Len"), 0);
        assert_eq!(whole_frames(b"garbage\r\n\r\n"), 11);
    }

    /// Drives [`run`] over in-memory pipes with a stand-in server that echoes what it
    /// reads: malformed frames are answered, the rest passes, in order.
    #[tokio::test]
    async fn answers_and_passes_through() {
        let (mut client, input) = tokio::io::duplex(CHUNK);
        let (output, mut editor) = tokio::io::duplex(CHUNK);
        let ok = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let guard = tokio::spawn(run(
            input,
            output,
            |mut server_in, mut server_out| async move {
                let mut seen = Vec::new();
                let _ = server_in.read_to_end(&mut seen).await;
                let _ = server_out.write_all(&seen).await;
            },
        ));
        let mut sent = format!("content-length: {}\n\n{ok}", ok.len()).into_bytes();
        sent.extend_from_slice(b"Content-Length: 3\r\n\r\n{\"a");
        client.write_all(&sent).await.unwrap();
        drop(client);
        guard.await.unwrap();
        let mut received = String::new();
        editor.read_to_string(&mut received).await.unwrap();
        let answer = received.find("-32700").expect("an answer");
        let passed = received
            .find(&format!("Content-Length: {}\r\n\r\n{ok}", ok.len()))
            .expect("the message, reframed");
        assert!(answer < passed, "{received}");
    }
}
