//! Witnesses: concrete values of `ctx`, `request` and `run` that make a claim true,
//! written for people (`ctx.user.tier = "pro", request.channel = "voice"`) and as the
//! `run`/`request` members of a `*.tests.yaml` case, to paste into a test.

use serde_json::{Map, Value};

/// Values for the variables a claim depends on; every other field may take any valid
/// value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    /// `(path, value)` with paths as conditions name them, `ctx` first, then
    /// `request`, then `run`. `null` means absent.
    pub values: Vec<(String, Value)>,
}

impl Witness {
    pub(crate) fn new(mut values: Vec<(String, Value)>) -> Witness {
        let rank = |p: &str| {
            if p.starts_with("ctx.") {
                0
            } else if p.starts_with("request.") {
                1
            } else {
                2
            }
        };
        // Stable: within a group, the order the pack first mentions them.
        values.sort_by_key(|(p, _)| rank(p));
        Witness { values }
    }

    /// The value the witness gives `path`, if any.
    pub fn get(&self, path: &str) -> Option<&Value> {
        self.values.iter().find(|(p, _)| p == path).map(|(_, v)| v)
    }

    /// `ctx.user.tier = "pro", ctx.order.total = 600.0`; `null` for an absent field.
    /// With no values, "any request".
    pub fn text(&self) -> String {
        if self.values.is_empty() {
            return "any request".to_owned();
        }
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(p, v)| format!("{p} = {v}"))
            .collect();
        parts.join(", ")
    }

    /// The witness as a test case's inputs: `{"request": {"intent": ..., "context":
    /// {...}}, "run": {"safety_mode": ...}}`, to merge over a test file's defaults
    /// (a `null` unsets a default: the field is absent).
    pub fn to_json(&self) -> Value {
        let mut request = Map::new();
        let mut run = Map::new();
        for (path, value) in &self.values {
            let (root, rest): (&mut Map<String, Value>, Vec<&str>) =
                if let Some(rest) = path.strip_prefix("ctx.") {
                    let mut keys = vec!["context"];
                    keys.extend(rest.split('.'));
                    (&mut request, keys)
                } else if let Some(rest) = path.strip_prefix("request.") {
                    (&mut request, rest.split('.').collect())
                } else if let Some(rest) = path.strip_prefix("run.") {
                    // The run document names its id `run_id`.
                    let keys = if rest == "id" {
                        vec!["run_id"]
                    } else {
                        rest.split('.').collect()
                    };
                    (&mut run, keys)
                } else {
                    continue;
                };
            insert(root, &rest, value.clone());
        }
        let mut out = Map::new();
        if !request.is_empty() {
            out.insert("request".to_owned(), Value::Object(request));
        }
        if !run.is_empty() {
            out.insert("run".to_owned(), Value::Object(run));
        }
        Value::Object(out)
    }
}

fn insert(map: &mut Map<String, Value>, keys: &[&str], value: Value) {
    match keys {
        [] => {}
        [last] => {
            map.insert((*last).to_owned(), value);
        }
        [first, rest @ ..] => {
            let child = map
                .entry((*first).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(child) = child {
                insert(child, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn witnesses_read_as_assignments_and_paste_as_test_inputs() {
        let w = Witness::new(vec![
            ("run.safety_mode".into(), json!("supervised")),
            ("request.intent".into(), json!("refund")),
            ("ctx.user.tier".into(), json!("pro")),
            ("ctx.order.total".into(), json!(600.5)),
            ("run.id".into(), json!("r-1")),
            ("ctx.order.id".into(), Value::Null),
        ]);
        assert_eq!(
            w.text(),
            "ctx.user.tier = \"pro\", ctx.order.total = 600.5, ctx.order.id = null, \
             request.intent = \"refund\", run.safety_mode = \"supervised\", run.id = \"r-1\""
        );
        assert_eq!(
            w.to_json(),
            json!({
                "request": {"intent": "refund", "context": {
                    "user": {"tier": "pro"}, "order": {"total": 600.5, "id": null}}},
                "run": {"safety_mode": "supervised", "run_id": "r-1"}
            })
        );
        assert_eq!(Witness::new(vec![]).text(), "any request");
    }
}
