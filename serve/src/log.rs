//! The request log: one JSON line per request on standard error, written in batches.
//!
//! A write to stderr is a system call, and when stderr is a pipe or a socket (a log
//! collector, the systemd journal, a container runtime) it also wakes the reader:
//! written one at a time, the lines cost a loaded service a few percent of its CPU
//! time. So a line is appended to a buffer shared by the runtime's workers, and the
//! buffer is written out in one call:
//!
//! - when a worker is about to go idle or stops (the hooks [`crate::runtime`]
//!   installs): a service with idle moments writes each line right after its request;
//! - when the buffer holds [`FULL`] bytes, or its oldest line is [`OLDEST`] old, as the
//!   next line is appended: under full load the workers never idle;
//! - when [`flush`] is called, as the binary does before its last words at shutdown.
//!
//! Lines keep their order: the buffer is taken and written under stderr's lock. A
//! process killed outright loses the lines not yet written (at most [`OLDEST`] of
//! them, or [`FULL`] bytes).

use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The buffer size at which it is written out.
pub const FULL: usize = 32 * 1024;

/// The age of the oldest line at which the buffer is written out.
pub const OLDEST: Duration = Duration::from_millis(100);

struct Pending {
    bytes: Vec<u8>,
    /// When the oldest line in `bytes` was appended.
    since: Option<Instant>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending {
    bytes: Vec::new(),
    since: None,
});

impl Pending {
    /// Appends `text` as one line at `now`; whether the buffer is due to be written.
    fn append(&mut self, text: &str, now: Instant) -> bool {
        let since = *self.since.get_or_insert(now);
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(b'\n');
        self.bytes.len() >= FULL || now.duration_since(since) >= OLDEST
    }

    /// The lines appended since the last take.
    fn take(&mut self) -> Vec<u8> {
        self.since = None;
        std::mem::take(&mut self.bytes)
    }
}

fn pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One request's line: route, status and duration, and for compiles the pack,
/// version, intent, outcome and ledger hash — never prompt text or evidence. The
/// members are written in this order, which is the order of their names.
#[derive(Debug, serde::Serialize)]
pub struct Line<'a> {
    pub duration_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger_hash: Option<&'a str>,
    pub method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pack: Option<&'a str>,
    pub route: &'a str,
    pub status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a str>,
}

/// Appends `line` as one line, and writes the buffer out if it is due.
pub fn line(line: &Line<'_>) {
    // A struct of strings and numbers always serializes.
    let Ok(text) = serde_json::to_string(line) else {
        return;
    };
    if pending().append(&text, Instant::now()) {
        flush();
    }
}

/// Writes out the lines not yet written, in one call.
pub fn flush() {
    if pending().bytes.is_empty() {
        return;
    }
    // Taken under stderr's lock, so that batches taken one after another are
    // written in that order, and other writers to stderr do not split them.
    let mut stderr = std::io::stderr().lock();
    let batch = pending().take();
    // A closed stderr loses the log, never a response.
    let _ = stderr.write_all(&batch);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Pending {
        Pending {
            bytes: Vec::new(),
            since: None,
        }
    }

    #[test]
    fn a_line_has_its_members_in_name_order_and_leaves_out_the_absent_ones() {
        let probe = Line {
            duration_ms: 0.25,
            intent: None,
            ledger_hash: None,
            method: "GET",
            outcome: None,
            pack: None,
            route: "/healthz",
            status: 200,
            version: None,
        };
        assert_eq!(
            serde_json::to_string(&probe).unwrap(),
            r#"{"duration_ms":0.25,"method":"GET","route":"/healthz","status":200}"#
        );
        let compile = Line {
            duration_ms: 1.5,
            intent: Some("refund"),
            ledger_hash: Some("blake3:00"),
            method: "POST",
            outcome: Some("ok"),
            pack: Some("acme/shop"),
            route: "/v1/compile",
            status: 200,
            version: Some("1.0.0"),
        };
        assert_eq!(
            serde_json::to_string(&compile).unwrap(),
            concat!(
                r#"{"duration_ms":1.5,"intent":"refund","ledger_hash":"blake3:00","#,
                r#""method":"POST","outcome":"ok","pack":"acme/shop","route":"/v1/compile","#,
                r#""status":200,"version":"1.0.0"}"#
            )
        );
    }

    #[test]
    fn a_buffer_is_due_when_full_or_when_its_oldest_line_is_old() {
        let start = Instant::now();
        let mut pending = empty();
        assert!(!pending.append("{\"a\":1}", start));
        assert!(!pending.append("{\"b\":2}", start + OLDEST / 2));
        // The age counts from the oldest line, not the last one.
        assert!(pending.append("{\"c\":3}", start + OLDEST));
        assert_eq!(pending.take(), b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
        // A take starts the clock again.
        assert!(!pending.append("{}", start + OLDEST * 3));
        let line = "x".repeat(FULL / 4);
        assert!(!pending.append(&line, start + OLDEST * 3));
        assert!(!pending.append(&line, start + OLDEST * 3));
        assert!(!pending.append(&line, start + OLDEST * 3));
        assert!(pending.append(&line, start + OLDEST * 3));
        assert_eq!(pending.take().len(), 3 + 4 * (FULL / 4 + 1));
        assert!(pending.take().is_empty());
    }
}
