//! Changes to one document read together, passed on as one.
//!
//! When the server falls behind a client's typing, the changes wait in its input,
//! and each would go through the protocol library and the change handler in turn.
//! The `textDocument/didChange` notifications for one document that one read of the
//! input brings, with nothing else between them, are passed on as one notification:
//! their content changes in order, under the last one's version. The protocol has
//! the content changes of a notification applied in order, so the one notification
//! means what the several did. Nothing waits to be merged: what a read brings is
//! passed on before the next read.

use serde_json::json;
use tower_lsp_server::ls_types::DidChangeTextDocumentParams;

/// The changes read that may yet be merged with the next.
#[derive(Debug, Default)]
pub struct Coalescer {
    pending: Option<Pending>,
}

#[derive(Debug)]
enum Pending {
    /// One notification: passed on as it came.
    One(Vec<u8>, DidChangeTextDocumentParams),
    /// Several, merged.
    Merged(DidChangeTextDocumentParams),
}

impl Pending {
    fn params(&self) -> &DidChangeTextDocumentParams {
        match self {
            Pending::One(_, params) | Pending::Merged(params) => params,
        }
    }

    fn into_body(self) -> Vec<u8> {
        match self {
            Pending::One(body, _) => body,
            Pending::Merged(params) => json!({
                "jsonrpc": "2.0",
                "method": "textDocument/didChange",
                "params": params,
            })
            .to_string()
            .into_bytes(),
        }
    }
}

impl Coalescer {
    /// Takes a change. Returns the body of the pending changes when this one is to
    /// another document: pass it on first.
    pub fn push(&mut self, body: Vec<u8>, params: DidChangeTextDocumentParams) -> Option<Vec<u8>> {
        match self.pending.take() {
            Some(pending) if pending.params().text_document.uri == params.text_document.uri => {
                let (Pending::One(_, mut merged) | Pending::Merged(mut merged)) = pending;
                merged.text_document.version = params.text_document.version;
                merged.content_changes.extend(params.content_changes);
                self.pending = Some(Pending::Merged(merged));
                None
            }
            before => {
                self.pending = Some(Pending::One(body, params));
                before.map(Pending::into_body)
            }
        }
    }

    /// The body of the pending changes, if any: pass it on before anything else.
    pub fn flush(&mut self) -> Option<Vec<u8>> {
        self.pending.take().map(Pending::into_body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn change(uri: &str, version: i32, text: &str) -> (Vec<u8>, DidChangeTextDocumentParams) {
        let body = json!({
            "jsonrpc": "2.0",
            "method": "textDocument/didChange",
            "params": {
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [{
                    "range": { "start": { "line": 0, "character": 0 }, "end": { "line": 0, "character": 1 } },
                    "text": text,
                }],
            },
        })
        .to_string()
        .into_bytes();
        let params = serde_json::from_slice::<Value>(&body).unwrap()["params"].take();
        (body, serde_json::from_value(params).unwrap())
    }

    #[test]
    fn changes_to_one_document_are_merged_in_order_under_the_last_version() {
        let mut c = Coalescer::default();
        for (version, text) in [(2, "a"), (3, "b"), (4, "c")] {
            let (body, params) = change("file:///a.ctxpack", version, text);
            assert_eq!(c.push(body, params), None);
        }
        let merged: Value = serde_json::from_slice(&c.flush().unwrap()).unwrap();
        assert_eq!(merged["method"], "textDocument/didChange");
        assert_eq!(merged["params"]["textDocument"]["version"], 4);
        let texts: Vec<&str> = merged["params"]["contentChanges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["a", "b", "c"]);
        // What the library reads of it.
        let params: DidChangeTextDocumentParams =
            serde_json::from_value(merged["params"].clone()).unwrap();
        assert_eq!(params.content_changes.len(), 3);
        assert_eq!(c.flush(), None);
    }

    #[test]
    fn a_lone_change_passes_as_it_came_and_another_document_flushes() {
        let mut c = Coalescer::default();
        let (a, a_params) = change("file:///a.ctxpack", 2, "a");
        let (b, b_params) = change("file:///b.ctxpack", 7, "b");
        assert_eq!(c.push(a.clone(), a_params), None);
        assert_eq!(c.push(b.clone(), b_params), Some(a));
        assert_eq!(c.flush(), Some(b));
    }
}
