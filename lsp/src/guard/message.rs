//! Which bodies reach the protocol library, and the answers to the others.
//!
//! A body is passed on only if the library will read it: `tower-lsp-server`
//! deserializes each body as its own [`Response`] or else [`Request`], and any failure
//! there ends its input stream (see [`super`]). So the check deserializes the body
//! into those very types, and on top of that asks for what JSON-RPC 2.0 requires and
//! the library lets slide (a `method` on every call, structured `params`, no call
//! that is also a response), so that nothing is routed as a call to method `""`.

use serde_json::{json, Value};
use tower_lsp_server::jsonrpc::{Request, Response};
use tower_lsp_server::ls_types::DidChangeTextDocumentParams;

/// The JSON-RPC error code for a body that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON-RPC error code for JSON that is not a valid message.
pub const INVALID_REQUEST: i64 = -32600;
/// The JSON-RPC error code for a request no handler takes.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The protocol's error code for a request before `initialize`.
pub const SERVER_NOT_INITIALIZED: i64 = -32002;

/// Where the session stands by the client's messages, in the order they come (the
/// server may not have handled them yet): a request sent right behind `shutdown`, in
/// the same write, comes after it all the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// No `initialize` request yet: every other request is answered -32002.
    #[default]
    Uninitialized,
    Running,
    /// A `shutdown` request came: every request is answered "invalid request".
    ShutDown,
}

/// A malformed message and what to answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub code: i64,
    pub message: String,
    /// The message's own id when it has one the client can match; else `null`.
    pub id: Value,
}

impl Rejection {
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Rejection {
            code: PARSE_ERROR,
            message: format!("Parse error: {detail}"),
            id: Value::Null,
        }
    }

    fn invalid_request(id: Value) -> Self {
        Rejection {
            code: INVALID_REQUEST,
            message: "Invalid Request".to_owned(),
            id,
        }
    }

    /// The error response, framed.
    pub fn to_frame(&self) -> Vec<u8> {
        let body = json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": { "code": self.code, "message": self.message },
        })
        .to_string();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        frame
    }
}

/// A message the server can take.
#[derive(Debug, PartialEq)]
pub enum Checked {
    /// A `textDocument/didChange` notification, with the parameters the server
    /// reads from it (see [`super::coalesce`]).
    Change(DidChangeTextDocumentParams),
    /// Any other message.
    Other,
}

/// Whether `body` is a message the server can take, and which; else what to answer.
#[cfg(test)]
pub fn check(body: &[u8]) -> Result<Checked, Rejection> {
    check_in(body, &mut Phase::Running)
}

/// As [`check`], in the session's `phase`, which an `initialize` or `shutdown`
/// request that passes moves on. Before `initialize`, every other request is answered
/// -32002; after `shutdown`, every request "invalid request", whatever its method
/// (LSP 3.17, *initialize* and *shutdown*: the library does so for the methods it
/// knows, and answers others "not found").
pub fn check_in(body: &[u8], phase: &mut Phase) -> Result<Checked, Rejection> {
    let text = std::str::from_utf8(body)
        .map_err(|e| Rejection::parse_error(format_args!("the body is not UTF-8: {e}")))?;
    // Reading the whole value also checks the parts the typed reads below skip
    // (unknown fields), such as a lone surrogate in one of them.
    let value: Value = serde_json::from_str(text).map_err(Rejection::parse_error)?;
    let method = value.get("method").and_then(Value::as_str);
    let request = method.is_some() && value.get("id").is_some_and(|id| !id.is_null());
    match *phase {
        Phase::ShutDown if request => {
            return Err(Rejection {
                code: INVALID_REQUEST,
                message: "Invalid Request: the server has been shut down".to_owned(),
                id: reply_id(&value),
            })
        }
        Phase::Uninitialized if request && method != Some("initialize") => {
            return Err(Rejection {
                code: SERVER_NOT_INITIALIZED,
                message: "Server not initialized".to_owned(),
                id: reply_id(&value),
            })
        }
        _ => {}
    }
    if let Some(method) = dollar_request(&value) {
        // The library drops every `$/` method it does not know, requests included;
        // a request must be answered, and the protocol's answer is "not found".
        return Err(Rejection {
            code: METHOD_NOT_FOUND,
            message: format!("Method not found: {method}"),
            id: reply_id(&value),
        });
    }
    if is_message(&value, text) {
        match (*phase, method) {
            (Phase::Uninitialized, Some("initialize")) if request => *phase = Phase::Running,
            (Phase::Running, Some("shutdown")) if request => *phase = Phase::ShutDown,
            _ => {}
        }
        Ok(change(value).map_or(Checked::Other, Checked::Change))
    } else {
        Err(Rejection::invalid_request(reply_id(&value)))
    }
}

/// The method of a request (a call with an `id`) whose method starts with `$/`: the
/// protocol reserves those for notifications, which a server may ignore; none is a
/// request this server answers.
fn dollar_request(value: &Value) -> Option<&str> {
    let method = value.get("method")?.as_str()?;
    (method.starts_with("$/") && value.get("id").is_some_and(|id| !id.is_null())).then_some(method)
}

/// Whether `value`, read from `text`, is a call or a response that the library reads
/// as such.
fn is_message(value: &Value, text: &str) -> bool {
    // Not an array: the library would read one as a message by field position.
    let Value::Object(message) = value else {
        return false;
    };
    let is_response = message.contains_key("result") || message.contains_key("error");
    match message.get("method") {
        Some(Value::String(_)) if !is_response => {
            message
                .get("params")
                .is_none_or(|p| p.is_object() || p.is_array() || p.is_null())
                // The library tries `Response` first; without `result` and `error`
                // that fails, so this is what it reads.
                && serde_json::from_str::<Request>(text).is_ok()
        }
        None if is_response => serde_json::from_str::<Response>(text).is_ok(),
        _ => false,
    }
}

/// The parameters of `message` if it is a `textDocument/didChange` notification whose
/// parameters the server can read.
fn change(mut message: Value) -> Option<DidChangeTextDocumentParams> {
    let is_change = message.get("method").and_then(Value::as_str) == Some("textDocument/didChange")
        && message.get("id").is_none();
    match is_change {
        true => serde_json::from_value(message["params"].take()).ok(),
        false => None,
    }
}

/// The id to answer a bad message with: its own, if the client could match it.
fn reply_id(value: &Value) -> Value {
    match value.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() => Value::Number(n.clone()),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_told_apart() {
        let change = r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///a.ctxpack","version":3},"contentChanges":[{"text":"x"}]}}"#;
        let Ok(Checked::Change(params)) = check(change.as_bytes()) else {
            panic!("a change");
        };
        assert_eq!(params.text_document.version, 3);
        assert_eq!(params.content_changes[0].text, "x");
        // A change the server cannot read passes as any message, for the library
        // to answer as it does; so does a request by that name.
        for other in [
            r#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///a.ctxpack"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"textDocument/didChange","params":{"textDocument":{"uri":"file:///a.ctxpack","version":3},"contentChanges":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
        ] {
            assert_eq!(check(other.as_bytes()), Ok(Checked::Other), "{other}");
        }
    }

    fn code(body: &str) -> Option<i64> {
        check(body.as_bytes()).err().map(|r| r.code)
    }

    #[test]
    fn messages_pass() {
        for ok in [
            r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"exit"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"shutdown","params":null}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud83d\ude00"},"extra":1}"#,
        ] {
            assert_eq!(code(ok), None, "{ok}");
        }
    }

    #[test]
    fn dollar_requests_are_not_found_and_dollar_notifications_pass() {
        let r = check(br#"{"jsonrpc":"2.0","id":2,"method":"$/foo","params":{}}"#).unwrap_err();
        assert_eq!((r.code, r.id), (METHOD_NOT_FOUND, json!(2)));
        assert_eq!(r.message, "Method not found: $/foo");
        let r = check(br#"{"jsonrpc":"2.0","id":"x","method":"$/bar"}"#).unwrap_err();
        assert_eq!((r.code, r.id), (METHOD_NOT_FOUND, json!("x")));
        for ok in [
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#,
            r#"{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}"#,
            r#"{"jsonrpc":"2.0","method":"$/foo"}"#,
        ] {
            assert_eq!(code(ok), None, "{ok}");
        }
    }

    #[test]
    fn after_shutdown_every_request_is_invalid() {
        for body in [
            r#"{"jsonrpc":"2.0","id":3,"method":"foo/bar","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"$/foo"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"textDocument/hover","params":{}}"#,
        ] {
            let r = check_in(body.as_bytes(), &mut Phase::ShutDown).unwrap_err();
            assert_eq!(r.code, INVALID_REQUEST, "{body}");
            assert_ne!(r.id, Value::Null, "{body}");
        }
        // Notifications (`exit`) and responses still pass.
        for body in [
            r#"{"jsonrpc":"2.0","method":"exit"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        ] {
            assert_eq!(
                check_in(body.as_bytes(), &mut Phase::ShutDown),
                Ok(Checked::Other),
                "{body}"
            );
        }
    }

    /// The phase moves with the requests that pass, in their order: before
    /// `initialize` every other request is -32002 (notifications pass, for the
    /// library to drop), and a `shutdown` makes every later request invalid.
    #[test]
    fn the_phase_follows_initialize_and_shutdown() {
        use Phase::*;
        let mut phase = Phase::default();
        for (body, code, after) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"foo/bar","params":{}}"#,
                Some(SERVER_NOT_INITIALIZED),
                Uninitialized,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"$/foo"}"#,
                Some(SERVER_NOT_INITIALIZED),
                Uninitialized,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#,
                Some(SERVER_NOT_INITIALIZED),
                Uninitialized,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#,
                None,
                Uninitialized,
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"capabilities":{}}}"#,
                None,
                Running,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"foo/bar","params":{}}"#,
                None,
                Running,
            ),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"shutdown"}"#,
                None,
                ShutDown,
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"foo/bar","params":{}}"#,
                Some(INVALID_REQUEST),
                ShutDown,
            ),
        ] {
            let got = check_in(body.as_bytes(), &mut phase).err().map(|r| r.code);
            assert_eq!((got, phase), (code, after), "{body}");
        }
    }

    #[test]
    fn non_json_is_a_parse_error() {
        for bad in [
            "",
            r#"{"jsonrpc":"2.0","#,
            r#"{"jsonrpc":"2.0","method":"x","params":{"t":"\ud83d"}}"#,
            r#"{"jsonrpc":"2.0","method":"x","extra":"\udc00"}"#,
            r#"{"jsonrpc":"2.0","method":"x"} trailing"#,
        ] {
            let r = check(bad.as_bytes()).unwrap_err();
            assert_eq!((r.code, &r.id), (PARSE_ERROR, &Value::Null), "{bad}");
        }
        assert_eq!(check(b"{\"a\":\"\xff\"}").unwrap_err().code, PARSE_ERROR);
    }

    #[test]
    fn what_the_library_cannot_read_is_an_invalid_request() {
        for bad in [
            "[]",
            "42",
            r#"["2.0"]"#,
            r#"{"id":7}"#,
            r#"{"jsonrpc":"2.0","id":7}"#,
            r#"{"jsonrpc":"1.0","method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":3}"#,
            r#"{"jsonrpc":"2.0","method":"x","params":5}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            r#"{"jsonrpc":"2.0","method":"x","method":"y"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":1}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","id":5,"error":5}"#,
        ] {
            assert_eq!(code(bad), Some(INVALID_REQUEST), "{bad}");
        }
        let id = |body: &str| check(body.as_bytes()).unwrap_err().id;
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"method":3}"#), json!(7));
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":"x","params":1}"#), json!("x"));
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            Value::Null
        );
    }

    #[test]
    fn replies_are_framed_json_rpc_errors() {
        let frame = Rejection::parse_error("bad").to_frame();
        let frame = String::from_utf8(frame).unwrap();
        let (header, body) = frame.split_once("\r\n\r\n").unwrap();
        assert_eq!(header, format!("Content-Length: {}", body.len()));
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            body,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: bad"}})
        );
    }
}
