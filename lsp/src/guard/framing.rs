//! Splitting the client's byte stream into message bodies, whatever it contains.
//!
//! [`Framer`] is a push parser with no I/O, so every chunking of the input gives the
//! same [`Event`]s (the tests feed it byte by byte). It is lenient in what it takes,
//! since the server is handed each body under a header of its own, and it never gets
//! stuck:
//!
//! - stray whitespace between frames is skipped; header lines may end in `\n` or
//!   `\r\n`, header names are case-insensitive, headers other than
//!   `Content-Length` are ignored (the body must be UTF-8 JSON whatever a
//!   `Content-Type` says);
//! - a header block without exactly one usable `Content-Length`, or over
//!   [`MAX_HEADER`] bytes, is rejected once, and the input is skipped up to the next
//!   `Content-Length`;
//! - a `Content-Length` over [`MAX_BODY`] is rejected as soon as its header is read,
//!   and its bytes are dropped as they arrive, never held;
//! - a body that turns out shorter than its `Content-Length` (the next frame's
//!   `Content-Length` line shows up inside it) is rejected, and framing goes on from
//!   that line.
//!
//! The last rule is safe because a `Content-Length: <digits>` line can never occur
//! in JSON text: outside strings `C` starts no token, and inside a string the raw
//! line break that ends the line is invalid (and a string that closed before it would
//! put a `"` into the line). So a body in which it occurs is malformed anyway, and
//! cutting it there only decides where the next frame starts. This recovers from
//! clients that miscount lengths (say, in characters instead of bytes) at the next
//! message instead of swallowing it, and lets a bogus huge length recover at the next
//! real frame instead of swallowing the rest of the session.

use tower_lsp_server::ls_types::DidChangeTextDocumentParams;

use super::message::{check_in, Checked, Phase, Rejection};

/// The largest header block accepted.
pub const MAX_HEADER: usize = 8 * 1024;
/// The largest message body accepted (a 64 MiB document is far past any pack).
pub const MAX_BODY: usize = 64 * 1024 * 1024;

const CONTENT_LENGTH: &[u8] = b"content-length";

/// What the input holds next.
#[derive(Debug, PartialEq)]
pub enum Event {
    /// The body of a well-formed JSON-RPC message, to pass on.
    Message(Vec<u8>),
    /// A `textDocument/didChange` notification: its body and what it says.
    Change(Vec<u8>, DidChangeTextDocumentParams),
    /// A malformed frame, and what to answer it.
    Reject(Rejection),
}

/// A push parser for `Content-Length`-framed messages: [`push`](Framer::push) input,
/// then take [`next`](Framer::next) events until it returns `None`.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    state: State,
    /// Where the session stands by the messages framed so far.
    phase: Phase,
}

#[derive(Debug, Default)]
enum State {
    /// A header block is expected at the start of `buf`.
    #[default]
    Header,
    /// After a bad header: skipping up to the next `Content-Length`.
    Resync,
    /// Inside a body, whose unread `length` bytes start `buf`.
    Body {
        length: usize,
        /// Whether the body is kept (and checked) or dropped (it is too large).
        keep: bool,
        /// No `Content-Length` line ([`find_length_line`]) starts before this index.
        scanned: usize,
    },
}

impl Framer {
    /// Appends input.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next event, or `None` until more input is pushed.
    pub fn next(&mut self) -> Option<Event> {
        loop {
            match self.state {
                State::Header => {
                    let start = self
                        .buf
                        .iter()
                        .position(|b| !b.is_ascii_whitespace())
                        .unwrap_or(self.buf.len());
                    self.buf.drain(..start);
                    match parse_header(&self.buf) {
                        Header::Incomplete => return None,
                        Header::Bad { reason, resume } => {
                            self.buf.drain(..resume.min(self.buf.len()));
                            self.state = State::Resync;
                            return Some(Event::Reject(Rejection::parse_error(reason)));
                        }
                        Header::Complete { header, length } => {
                            self.buf.drain(..header);
                            let keep = length <= MAX_BODY;
                            self.state = State::Body {
                                length,
                                keep,
                                scanned: 0,
                            };
                            if !keep {
                                return Some(Event::Reject(Rejection::parse_error(format!(
                                    "a message of {length} bytes is over the {} MiB limit",
                                    MAX_BODY >> 20
                                ))));
                            }
                        }
                    }
                }
                State::Resync => match find_ignore_case(&self.buf, CONTENT_LENGTH) {
                    Some(at) => {
                        self.buf.drain(..at);
                        self.state = State::Header;
                    }
                    None => {
                        // Keep a tail that may be the start of `Content-Length`.
                        let drop = self.buf.len().saturating_sub(CONTENT_LENGTH.len() - 1);
                        self.buf.drain(..drop);
                        return None;
                    }
                },
                State::Body {
                    length,
                    keep,
                    scanned,
                } => {
                    let end = self.buf.len().min(length);
                    if let Some(at) = find_length_line(&self.buf[scanned..end]) {
                        // The next frame starts inside this body: cut it there.
                        self.buf.drain(..scanned + at);
                        self.state = State::Header;
                        if keep {
                            return Some(Event::Reject(Rejection::parse_error(
                                "the message is shorter than its Content-Length",
                            )));
                        }
                        continue;
                    }
                    if self.buf.len() >= length {
                        let body: Vec<u8> = self.buf.drain(..length).collect();
                        self.state = State::Header;
                        if !keep {
                            continue;
                        }
                        return Some(match check_in(&body, &mut self.phase) {
                            Ok(Checked::Other) => Event::Message(body),
                            Ok(Checked::Change(params)) => Event::Change(body, params),
                            Err(rejection) => Event::Reject(rejection),
                        });
                    }
                    // Incomplete. A `Content-Length` line may yet end in the tail.
                    let scanned = end.saturating_sub(MAX_LENGTH_LINE - 1);
                    self.state = if keep {
                        State::Body {
                            length,
                            keep,
                            scanned,
                        }
                    } else {
                        // Drop what is scanned.
                        self.buf.drain(..scanned);
                        State::Body {
                            length: length - scanned,
                            keep,
                            scanned: 0,
                        }
                    };
                    return None;
                }
            }
        }
    }

    /// At the end of the input: the rejection of a message it cut short, if any.
    pub fn finish(&mut self) -> Option<Event> {
        let inside = match self.state {
            State::Header => self.buf.iter().any(|b| !b.is_ascii_whitespace()),
            State::Resync => false,
            State::Body { keep, .. } => keep,
        };
        self.buf.clear();
        self.state = State::Header;
        inside.then(|| Event::Reject(Rejection::parse_error("the input ended inside a message")))
    }
}

/// A header block at the start of a buffer.
#[derive(Debug, PartialEq)]
pub enum Header {
    Incomplete,
    /// Not a usable header; framing resumes by looking for `Content-Length` from
    /// `resume` on: past a well-formed block whose `Content-Length` is missing or
    /// wrong, but just past the start of a line that is no header at all (a real
    /// header may follow it, or hide in it).
    Bad {
        reason: &'static str,
        resume: usize,
    },
    /// `header` bytes of header (with the empty line that ends it), then `length`
    /// bytes of body.
    Complete {
        header: usize,
        length: usize,
    },
}

/// Parses the header block at the start of `buf`: `Name: value` lines ending in
/// `\r\n` or `\n`, up to an empty line.
pub fn parse_header(buf: &[u8]) -> Header {
    let too_long = Header::Bad {
        reason: "message header too long",
        resume: 1,
    };
    let mut length = Ok(None);
    let mut pos = 0;
    loop {
        let Some(newline) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return if buf.len() > MAX_HEADER {
                too_long
            } else {
                Header::Incomplete
            };
        };
        let start = pos;
        let line = &buf[pos..pos + newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        pos += newline + 1;
        if pos > MAX_HEADER {
            return too_long;
        }
        if line.is_empty() {
            break;
        }
        let name_value = line
            .iter()
            .position(|&b| b == b':')
            .map(|colon| (line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
            .filter(|(name, _)| !name.is_empty() && name.iter().all(|&b| is_token(b)));
        let Some((name, value)) = name_value else {
            return Header::Bad {
                reason: "bad message header",
                resume: start + 1,
            };
        };
        if name.eq_ignore_ascii_case(CONTENT_LENGTH) {
            let value = std::str::from_utf8(value).ok();
            length = match (length, value.and_then(|v| v.parse::<u64>().ok())) {
                (Ok(None), Some(n)) => Ok(Some(n)),
                (Ok(Some(l)), Some(n)) if l == n => Ok(Some(n)),
                _ => Err("bad Content-Length"),
            };
        }
    }
    match length {
        // A length past the address space is over the limit all the same.
        Ok(Some(n)) => Header::Complete {
            header: pos,
            length: usize::try_from(n).unwrap_or(usize::MAX),
        },
        Ok(None) => Header::Bad {
            reason: "message header without Content-Length",
            resume: pos,
        },
        Err(reason) => Header::Bad {
            reason,
            resume: pos,
        },
    }
}

/// Whether `b` may be in a header name (an RFC 9110 token).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The longest `Content-Length` line [`find_length_line`] finds.
const MAX_LENGTH_LINE: usize = CONTENT_LENGTH.len() + 1 + MAX_SPACES + MAX_DIGITS + 2;
const MAX_SPACES: usize = 8;
const MAX_DIGITS: usize = 20;

/// Where a whole `Content-Length: <digits>` line, which no JSON text contains,
/// starts in `haystack`.
fn find_length_line(haystack: &[u8]) -> Option<usize> {
    (0..haystack.len()).find(|&at| {
        if !haystack[at].eq_ignore_ascii_case(&b'c') {
            return false;
        }
        let Some(rest) = haystack[at..]
            .split_at_checked(CONTENT_LENGTH.len())
            .filter(|(name, _)| name.eq_ignore_ascii_case(CONTENT_LENGTH))
            .and_then(|(_, rest)| rest.strip_prefix(b":"))
        else {
            return false;
        };
        let spaces = rest
            .iter()
            .take(MAX_SPACES)
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let rest = &rest[spaces..];
        let digits = rest
            .iter()
            .take(MAX_DIGITS)
            .take_while(|b| b.is_ascii_digit())
            .count();
        let rest = &rest[digits..];
        digits > 0 && (rest.starts_with(b"\n") || rest.starts_with(b"\r\n"))
    })
}

fn find_ignore_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A framer past `initialize`, where requests pass.
    fn running() -> Framer {
        Framer {
            phase: Phase::Running,
            ..Framer::default()
        }
    }

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    const OK: &str = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
    const OK2: &str = r#"{"jsonrpc":"2.0","id":2,"method":"textDocument/hover","params":{}}"#;

    /// The events for `input`, pushed in one piece and byte by byte, which must agree.
    fn events(input: &[u8]) -> Vec<Event> {
        let run = |chunks: &mut dyn Iterator<Item = &[u8]>| {
            let mut framer = running();
            let mut out = Vec::new();
            for chunk in chunks {
                framer.push(chunk);
                out.extend(std::iter::from_fn(|| framer.next()));
            }
            out.extend(framer.finish());
            out
        };
        let whole = run(&mut std::iter::once(input));
        let bytewise = run(&mut input.chunks(1));
        assert_eq!(whole, bytewise, "chunking changed the events");
        whole
    }

    /// The events as `Ok(body)` or `Err(code)`.
    fn summary(input: &[u8]) -> Vec<Result<String, i64>> {
        events(input)
            .into_iter()
            .map(|e| match e {
                Event::Message(body) | Event::Change(body, _) => {
                    Ok(String::from_utf8(body).unwrap())
                }
                Event::Reject(r) => Err(r.code),
            })
            .collect()
    }

    #[test]
    fn well_formed_frames_pass_unchanged() {
        let input = format!("{}{}", frame(OK), frame(OK2));
        assert_eq!(summary(input.as_bytes()), [Ok(OK.into()), Ok(OK2.into())]);
    }

    #[test]
    fn lenient_headers() {
        let input = format!(
            "\r\ncontent-length: {}\nContent-Type: application/vscode-jsonrpc; charset=utf-8\nX-Other: 1\n\n{OK}\r\n{}",
            OK.len(),
            frame(OK2)
        );
        assert_eq!(summary(input.as_bytes()), [Ok(OK.into()), Ok(OK2.into())]);
    }

    #[test]
    fn malformed_bodies_are_rejected_and_framing_goes_on() {
        let truncated = r#"{"jsonrpc":"2.0","method":"x","params":{"#;
        let surrogate = r#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud83d"}}"#;
        let input = format!(
            "{}{}{}{}{}",
            frame(truncated),
            frame(surrogate),
            frame(""),
            frame("[]"),
            frame(OK)
        );
        assert_eq!(
            summary(input.as_bytes()),
            [
                Err(-32700),
                Err(-32700),
                Err(-32700),
                Err(-32600),
                Ok(OK.into())
            ]
        );
        // Not UTF-8 (Latin-1), whatever a `Content-Type` would say.
        let latin1 = b"{\"jsonrpc\":\"2.0\",\"method\":\"\xe9\"}";
        let mut input = format!("Content-Length: {}\r\n\r\n", latin1.len()).into_bytes();
        input.extend_from_slice(latin1);
        input.extend_from_slice(frame(OK).as_bytes());
        assert_eq!(summary(&input), [Err(-32700), Ok(OK.into())]);
    }

    #[test]
    fn bad_headers_are_rejected_once_and_skipped() {
        for garbage in [
            "Content-Type: text/plain\r\n\r\n{\"x\":1}",
            "Content-Length: x\r\n\r\n{}",
            "Content-Length: -4\r\n\r\n{}",
            "Content-Length: 99999999999999999999999\r\n\r\n",
            "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            "hello\r\n\r\nworld\r\n\r\n",
            "no header at all, just noise",
        ] {
            let input = format!("{garbage}{}", frame(OK));
            assert_eq!(
                summary(input.as_bytes()),
                [Err(-32700), Ok(OK.into())],
                "{garbage:?}"
            );
        }
        // A garbage line before a header: the header is found again.
        let input = format!("garbage\r\n{}", frame(OK));
        assert_eq!(summary(input.as_bytes()), [Err(-32700), Ok(OK.into())]);
        let long = format!("X-Long: {}\r\n{}", "a".repeat(MAX_HEADER), frame(OK));
        assert_eq!(summary(long.as_bytes()), [Err(-32700), Ok(OK.into())]);
    }

    #[test]
    fn a_length_line_inside_a_json_string_is_no_cut() {
        let body = r#"{"jsonrpc":"2.0","method":"x","params":{"t":"Content-Length: 5\r\n"}}"#;
        let input = format!("{}{}", frame(body), frame(OK));
        assert_eq!(summary(input.as_bytes()), [Ok(body.into()), Ok(OK.into())]);
    }

    #[test]
    fn a_short_body_is_cut_at_the_next_header() {
        let input = format!(
            "Content-Length: 500\r\n\r\n{{\"jsonrpc\":\"2.0\"{}",
            frame(OK)
        );
        assert_eq!(summary(input.as_bytes()), [Err(-32700), Ok(OK.into())]);
        // A body ending in a newline right before the next frame is not cut.
        let body = format!("{OK}\n");
        let input = format!("{}{}", frame(&body), frame(OK2));
        assert_eq!(summary(input.as_bytes()), [Ok(body), Ok(OK2.into())]);
    }

    #[test]
    fn an_oversized_body_is_dropped_as_it_arrives() {
        let mut framer = running();
        framer.push(format!("Content-Length: {}\r\n\r\n", MAX_BODY + 1).as_bytes());
        assert!(matches!(framer.next(), Some(Event::Reject(r)) if r.code == -32700));
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..=(MAX_BODY >> 20) {
            framer.push(&chunk);
            assert_eq!(framer.next(), None);
            assert!(framer.buf.len() < MAX_LENGTH_LINE, "{}", framer.buf.len());
        }
        framer.push(frame(OK).as_bytes());
        assert_eq!(framer.next(), Some(Event::Message(OK.into())));
        // A bogus length recovers at the next frame, in any chunking.
        let input = format!("Content-Length: 999999999999\r\n\r\n{}", frame(OK));
        assert_eq!(summary(input.as_bytes()), [Err(-32700), Ok(OK.into())]);
    }

    #[test]
    fn end_of_input_inside_a_message() {
        assert_eq!(summary(b"Content-Length: 10\r\n\r\n{\"a\""), [Err(-32700)]);
        assert_eq!(summary(b"Content-Len"), [Err(-32700)]);
        assert_eq!(summary(b"\r\n"), []);
        assert_eq!(summary(frame(OK).as_bytes()), [Ok(OK.into())]);
    }

    /// Random mixes of good frames and garbage, pushed in random chunks: the events
    /// never depend on the chunking, and a good frame after a complete one is never
    /// lost.
    #[test]
    fn random_streams_frame_the_same_in_any_chunks() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let pieces: [&dyn Fn() -> String; 8] = [
            &|| frame(OK),
            &|| frame(OK2),
            &|| frame(r#"{"jsonrpc":"2.0","#),
            &|| "Content-Length: 999999999999\r\n\r\n".to_owned(),
            &|| "Content-Length: 300\r\n\r\n{\"a\":".to_owned(),
            &|| "Content-Type: x\r\n\r\n".to_owned(),
            &|| "\r\n".to_owned(),
            &|| "Content-Le: 1\n{\"\\:\r".to_owned(),
        ];
        for _ in 0..300 {
            let mut input = String::new();
            for _ in 0..next(8) {
                input.push_str(&pieces[next(pieces.len())]());
            }
            // Always end on a good frame after a complete one, which must come out.
            input.push_str(&frame(OK2));
            input.push_str(&frame(OK));
            let whole = events(input.as_bytes());
            assert_eq!(whole.last(), Some(&Event::Message(OK.into())), "{input:?}");
            let mut framer = running();
            let mut chunked = Vec::new();
            let mut rest = input.as_bytes();
            while !rest.is_empty() {
                let (chunk, tail) = rest.split_at(1 + next(rest.len().min(64)));
                framer.push(chunk);
                chunked.extend(std::iter::from_fn(|| framer.next()));
                rest = tail;
            }
            chunked.extend(framer.finish());
            assert_eq!(whole, chunked, "{input:?}");
        }
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header(b"Content-Length: 2\r\n\r\n{}"),
            Header::Complete {
                header: 21,
                length: 2
            }
        );
        assert_eq!(parse_header(b"Content-Length: 2\r\n"), Header::Incomplete);
        assert_eq!(
            parse_header(b"Content-Length: 18446744073709551615\r\n\r\n"),
            Header::Complete {
                header: 40,
                length: usize::try_from(u64::MAX).unwrap_or(usize::MAX)
            }
        );
    }
}
