//! Structural rules of the source tree that review alone would let slip:
//! the runtime's stage modules have no import cycle, and no function in `src/` runs
//! over 150 lines without a reason written above it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The runtime modules each module refers to through `super::NAME`.
fn runtime_graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = src().join("runtime");
    let mut modules = Vec::new();
    rust_files(&dir, &mut modules);
    let names: BTreeSet<String> = modules
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_owned))
        .filter(|n| n != "mod")
        .collect();
    let mut graph = BTreeMap::new();
    let single = regex::Regex::new(r"super::(\w+)").unwrap();
    for path in &modules {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if name == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        // Tests may reach anywhere; only the module's own code counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut deps = BTreeSet::new();
        for c in single.captures_iter(code) {
            deps.insert(c[1].to_owned());
        }
        // `use super::{a::X, b}`: the first name of each item at depth 0.
        for (start, _) in code.match_indices("super::{") {
            let mut depth = 0;
            let mut item = String::new();
            for ch in code[start + "super::{".len()..].chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item.clear(),
                    c if depth == 0 && (c.is_alphanumeric() || c == '_') => {
                        item.push(c);
                        if names.contains(&item) {
                            deps.insert(item.clone());
                        }
                    }
                    ':' if depth == 0 => {
                        if names.contains(&item) {
                            deps.insert(item.clone());
                        }
                        item.push(':');
                    }
                    _ => {}
                }
            }
        }
        deps.retain(|d| names.contains(d) && *d != name);
        graph.insert(name, deps);
    }
    graph
}

fn cycle_from(
    node: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(i) = path.iter().position(|n| n == node) {
        let mut cycle = path[i..].to_vec();
        cycle.push(node.to_owned());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_owned());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(c) = cycle_from(next, graph, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.to_owned());
    None
}

#[test]
fn runtime_modules_have_no_import_cycle() {
    let graph = runtime_graph();
    assert!(graph.contains_key("envelope") && graph.contains_key("shared"));
    // The shared types depend on no stage.
    let stages = [
        "intent", "policy", "tools", "memo", "budget", "assemble", "envelope",
    ];
    for stage in stages {
        assert!(
            !graph["shared"].contains(stage),
            "runtime::shared depends on the stage `{stage}`"
        );
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = cycle_from(node, &graph, &mut Vec::new(), &mut done) {
            panic!("import cycle in runtime/: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn compile_reads_as_the_eight_stages() {
    let text = std::fs::read_to_string(src().join("runtime/mod.rs")).unwrap();
    let start = text.find("fn compile_stages(").unwrap();
    let body = &text[start..];
    let calls = [
        "intent::resolve(",
        "policy::resolve(",
        "tools::surface(",
        "memo::Contents::hash(",
        "budget::plan(",
        "assemble::assemble_buckets(",
        "envelope::build(",
    ];
    let mut at = 0;
    for call in calls {
        let found = body[at..]
            .find(call)
            .unwrap_or_else(|| panic!("`{call}` missing or out of order in compile"));
        at += found;
    }
}

/// Functions longer than 150 lines, unless the comment above them says why
/// (`Long because …`).
#[test]
fn no_function_runs_over_150_lines_without_a_reason() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "]
                .iter()
                .any(|p| trimmed.starts_with(p));
            if !is_fn || trimmed.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            let Some(end) = lines[i + 1..].iter().position(|l| *l == close) else {
                continue;
            };
            let length = end + 2;
            let reason = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    l.trim_start().starts_with("///") || l.trim_start().starts_with("#[")
                })
                .any(|l| l.contains("Long because"));
            if length > 150 && !reason {
                long.push(format!("{}:{} ({length} lines)", path.display(), i + 1));
            }
        }
    }
    assert!(long.is_empty(), "functions over 150 lines: {long:#?}");
}
