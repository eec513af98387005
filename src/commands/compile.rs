//! `ctxpack compile`: a thin CLI over [`PreparedPack::compile`].
//!
//! Files are JSON, or YAML when they end in `.yaml`/`.yml`. A missing, unreadable or
//! unparseable file is exit 3; a well-formed file of the wrong shape is exit 4. `--pack`
//! is an artifact file, or, when no such file exists, a registry reference
//! `scope/name@version` resolved to `<registry>/<scope>/<name>/<version>.json` or, in an
//! OCI registry, to the tag `version` (registry from `--registry`, else
//! `CTXPACK_REGISTRY`, else `.ctxpack/registry`); `scope/name@sha256:…` names an OCI
//! manifest. A reference without a version is refused (exit 4): packs are always
//! pinned.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::Value;

pub use super::error::CliError;
use crate::artifact::{verify_bytes, Artifact};
use crate::registry::{PackRef, PinnedRef, Registry, RegistryError};
use crate::runtime::document::Document;
use crate::runtime::render::{self, Refused};
use crate::runtime::{decode_inputs, CompileError, CompileInputs, CompiledContext, PreparedPack};

/// Output format of `compile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Target {
    /// The `ctxpack.compiled/v1` envelope, canonical JSON.
    #[default]
    Raw,
    /// An OpenAI Chat Completions request body.
    Openai,
    /// An Anthropic Messages request body.
    Anthropic,
}

/// Arguments of `ctxpack compile`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompileArgs {
    /// An artifact file (`-` for standard input), a registry reference
    /// `scope/name@version` (or `@sha256:…`), or a `.ctxpack` source, built in memory
    /// first (a source with errors is exit 4, `invalid_pack`).
    #[arg(long)]
    pub pack: String,
    /// The RunContext (JSON or YAML).
    #[arg(long)]
    pub run: PathBuf,
    /// The InvokeRequest (JSON or YAML).
    #[arg(long)]
    pub request: PathBuf,
    /// A list of evidence items (JSON or YAML).
    #[arg(long)]
    pub evidence: Option<PathBuf>,
    /// A list of promoted memory items (JSON or YAML).
    #[arg(long)]
    pub memory: Option<PathBuf>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Target::Raw)]
    pub target: Target,
    /// Print a human summary (the run's safety mode, the intent, budget, policies,
    /// tools) instead of JSON.
    #[arg(long)]
    pub explain: bool,
    /// With `--explain`: also print the rendered system, developer and task text and
    /// the kept blocks, as the model will read them.
    #[arg(long, requires = "explain")]
    pub show_prompt: bool,
    /// Print the raw envelope indented, for people (what is hashed is the canonical
    /// form, which is the default).
    #[arg(long)]
    pub pretty: bool,
    /// Print failures as one JSON object on stderr.
    #[arg(skip)]
    pub json_errors: bool,
    /// The registry for `scope/name@version` references: a directory or
    /// `oci://HOST[:PORT]/NAMESPACE`.
    #[arg(long, value_name = "DIR|oci://…")]
    pub registry: Option<PathBuf>,
    /// The `model` member of provider bodies; left out when not given.
    #[arg(long)]
    pub model: Option<String>,
    /// `max_tokens` of the Anthropic body (required by that API).
    #[arg(long, default_value_t = 1024)]
    pub max_tokens: u32,
    /// Also write `runtime_controls` (refusal, escalation, approval gates, redactions)
    /// as JSON to FILE, for a pipeline that acts on them; written for every compile
    /// that succeeds, a refused one included.
    #[arg(long, value_name = "FILE")]
    pub controls: Option<PathBuf>,
}

impl From<CompileError> for CliError {
    fn from(e: CompileError) -> Self {
        CliError {
            kind: e.kind(),
            message: e.to_string(),
            exit_code: e.exit_code(),
            policy: e.policy().map(str::to_owned),
            refusal_reason: None,
            details: Vec::new(),
        }
    }
}

impl From<Refused> for CliError {
    fn from(e: Refused) -> Self {
        CliError {
            kind: Refused::KIND,
            message: e.to_string(),
            exit_code: Refused::EXIT_CODE,
            policy: None,
            refusal_reason: Some(e.reason),
            details: Vec::new(),
        }
    }
}

/// Runs `compile`, printing the result on stdout; returns the exit code.
pub fn run(args: &CompileArgs) -> i32 {
    match outcome(args) {
        Ok((out, refused)) => {
            styled_out!("{out}");
            match refused {
                None => 0,
                Some(e) => {
                    e.report(args.json_errors);
                    e.exit_code
                }
            }
        }
        Err(e) => {
            e.report(args.json_errors);
            e.exit_code
        }
    }
}

/// Does the work of `compile` and returns what to print.
pub fn execute(args: &CompileArgs) -> Result<String, CliError> {
    outcome(args).map(|(out, _)| out)
}

/// What to print, and with `--explain` and a provider target, the refusal that still
/// makes the exit code 5 when the pack refused (the summary says why; there is no
/// body, as without `--explain`).
fn outcome(args: &CompileArgs) -> Result<(String, Option<CliError>), CliError> {
    let stdin_inputs = [
        Some(Path::new(&args.pack)),
        Some(args.run.as_path()),
        Some(args.request.as_path()),
        args.evidence.as_deref(),
        args.memory.as_deref(),
    ]
    .into_iter()
    .flatten()
    .filter(|p| crate::source::is_stdin(p))
    .count();
    if stdin_inputs > 1 {
        return Err(CliError::new(
            "usage",
            super::exit::USAGE,
            "only one input can be read from standard input (`-`)",
        ));
    }
    let registry = Registry::for_pack(args.registry.as_deref(), Path::new(&args.pack));
    let artifact = load_pack(&args.pack, &registry).map_err(|mut e| {
        // A source with errors is an invalid `--pack` here (exit 4), as in `test`:
        // exit 1 is for the commands whose job is to find them.
        if e.kind == "check_failed" {
            e.kind = "invalid_pack";
            e.exit_code = super::exit::INVALID;
        }
        e
    })?;
    let run = read_document(&args.run)?;
    let request = read_document(&args.request)?;
    let evidence = args
        .evidence
        .as_deref()
        .map(read_list("evidence"))
        .transpose()?;
    let memory = args
        .memory
        .as_deref()
        .map(read_list("memory"))
        .transpose()?;
    let inputs = decode_inputs(run, request, evidence, memory)?;
    let pack = PreparedPack::new(artifact)?;
    let compiled = pack.compile(&inputs)?;
    if let Some(path) = &args.controls {
        write_controls(path, &compiled)?;
    }
    if args.explain {
        let mut out = explain(&compiled, &inputs);
        if args.show_prompt {
            out.push_str(&show_prompt(&compiled));
        }
        let controls = &compiled.runtime_controls;
        let refused = (args.target != Target::Raw && controls.must_refuse).then(|| {
            CliError::from(Refused {
                reason: controls.refusal_reason.clone().unwrap_or_default(),
            })
        });
        return Ok((out, refused));
    }
    if args.target == Target::Raw && args.pretty {
        return Ok((pretty(&compiled.to_value()), None));
    }
    render_output(
        &compiled,
        args.target,
        args.model.as_deref(),
        args.max_tokens,
    )
    .map(|out| (out, None))
}

/// What `compile` prints for `target`: the canonical envelope, or a provider body
/// (pretty JSON, final newline); a refused compile has no provider body. Services
/// that answer compiles use this too, so they answer the same bytes.
pub fn render_output(
    compiled: &CompiledContext,
    target: Target,
    model: Option<&str>,
    max_tokens: u32,
) -> Result<String, CliError> {
    Ok(match target {
        Target::Raw => String::from_utf8_lossy(&compiled.canonical_bytes()).into_owned(),
        Target::Openai => pretty(&render::openai(compiled, model)?),
        Target::Anthropic => pretty(&render::anthropic(compiled, model, max_tokens)?),
    })
}

/// Writes `runtime_controls` as canonical JSON to `path` (exit 3 when it cannot).
fn write_controls(path: &Path, compiled: &CompiledContext) -> Result<(), CliError> {
    let controls = serde_json::to_value(&compiled.runtime_controls).unwrap_or(Value::Null);
    std::fs::write(path, crate::artifact::canonical_bytes(&controls)).map_err(|e| {
        CliError::new(
            "unwritable_output",
            3,
            format!("cannot write `{}`: {e}", path.display()),
        )
    })
}

fn pretty(value: &Value) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads a list document (`--evidence`, `--memory`). A file that holds `null` (or an
/// empty YAML file) is the wrong shape, exit 4, as an object is: a file given for a
/// list must hold one (`[]` for none). Only an absent option means none.
fn read_list(what: &'static str) -> impl Fn(&Path) -> Result<Value, CliError> {
    move |path| match read_document(path)? {
        Value::Null => Err(CliError::new(
            "invalid_input",
            4,
            format!("{what}: expected a list, found null (write `[]` for none)"),
        )),
        list => Ok(list),
    }
}

/// Reads a JSON document, or YAML for `.yaml`/`.yml` files; `-` reads standard
/// input (JSON, or else YAML). Exit 3 when the file is missing, unreadable or
/// unparseable.
pub fn read_document(path: &Path) -> Result<Value, CliError> {
    let bytes = crate::source::read_bytes(path)
        .map_err(|message| CliError::new("unreadable_input", 3, message))?;
    parse_document(path, &bytes)
}

/// A YAML (or JSON) text as a value, `None` when it does not parse.
pub fn parse_yaml_text(text: &str) -> Option<Value> {
    crate::yaml::from_str(text).ok()
}

pub(crate) fn parse_document(path: &Path, bytes: &[u8]) -> Result<Value, CliError> {
    // A byte-order mark is not part of a document.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let no_json_form = |e: &dyn std::fmt::Display| {
        CliError::new(
            "invalid_input",
            4,
            format!("`{}` has no JSON form: {e}", path.display()),
        )
    };
    let unparseable = |e: &dyn std::fmt::Display| {
        CliError::new(
            "unparseable_input",
            3,
            format!("cannot parse `{}`: {e}", path.display()),
        )
    };
    // Well-formed YAML that no JSON value holds (a key that is a list or a map, a
    // local tag) is input of the wrong shape, exit 4; broken YAML is exit 3.
    let yaml = || {
        crate::yaml::from_slice::<Document>(bytes)
            .map(|v| v.0)
            .map_err(|e| match e.to_string() {
                m if m.contains("invalid type: ") => no_json_form(&m),
                m => unparseable(&m),
            })
    };
    let extension = path.extension().and_then(|e| e.to_str());
    let (parsed, from_yaml) = match extension {
        Some("yaml" | "yml") => (yaml(), true),
        _ => match serde_json::from_slice::<Document>(bytes) {
            Ok(v) => (Ok(v.0), false),
            Err(e) if out_of_range(&e) => {
                return Err(json_number_out_of_range(&path.display().to_string(), &e))
            }
            // A `.json` file is JSON. Anything else (standard input, a file named
            // `run`, `run.txt`) is JSON, or else YAML; the error is JSON's unless the
            // text is YAML with no JSON form.
            Err(e) if extension != Some("json") => (
                yaml().map_err(|y| if y.exit_code == 4 { y } else { unparseable(&e) }),
                true,
            ),
            Err(e) => (Err(unparseable(&e)), false),
        },
    };
    let value = parsed?;
    let text = || std::str::from_utf8(bytes).unwrap_or_default();
    if let Some((tag, line, column)) = from_yaml
        .then(|| crate::yaml::foreign_tag(text()))
        .flatten()
    {
        return Err(no_json_form(&format_args!(
            "the `{tag}` value at line {line} column {column} is not a JSON value"
        )));
    }
    // YAML spells `.nan` and `.inf`, which JSON values cannot hold: read into one,
    // they would quietly become `null` (absent), so they are refused instead.
    if let Some(at) = from_yaml.then(|| non_finite(bytes)).flatten() {
        return Err(CliError::new(
            "invalid_input",
            4,
            format!(
                "`{}`: `{at}` is not a finite number (`.nan` and `.inf` are not input values)",
                path.display()
            ),
        ));
    }
    Ok(value)
}

/// Is this JSON error a number that does not fit a 64-bit float (`1e400`)? Such a
/// document is well-formed JSON with a value no input can take: invalid input (exit 4),
/// not an unparseable document (exit 3).
pub fn out_of_range(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("number out of range")
}

/// The failure for [`out_of_range`] in the document `what`.
pub fn json_number_out_of_range(what: &str, e: &serde_json::Error) -> CliError {
    CliError::new(
        "invalid_input",
        4,
        format!(
            "`{what}`: the number at line {} column {} is out of range (numbers must fit a 64-bit float)",
            e.line(),
            e.column()
        ),
    )
}

/// Where a YAML document holds a NaN or an infinity (`[0].score`, `order.total`), if
/// anywhere.
fn non_finite(bytes: &[u8]) -> Option<String> {
    fn walk(v: &serde_norway::Value, at: &str) -> Option<String> {
        match v {
            serde_norway::Value::Number(n)
                if !n.is_f64() || n.as_f64().is_some_and(f64::is_finite) =>
            {
                None
            }
            serde_norway::Value::Number(_) => Some(if at.is_empty() {
                ".".to_owned()
            } else {
                at.to_owned()
            }),
            serde_norway::Value::Sequence(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| walk(item, &format!("{at}[{i}]"))),
            serde_norway::Value::Mapping(map) => map.iter().find_map(|(k, item)| {
                let key = k.as_str().map_or_else(|| format!("{k:?}"), str::to_owned);
                let at = if at.is_empty() {
                    key
                } else {
                    format!("{at}.{key}")
                };
                walk(k, &at).or_else(|| walk(item, &at))
            }),
            serde_norway::Value::Tagged(t) => walk(&t.value, at),
            _ => None,
        }
    }
    // Called only on a document `parse_document` has read through `crate::yaml`, so its
    // nesting is already bounded: reading it again needs no second walk.
    let doc: serde_norway::Value = serde_norway::from_slice(bytes).ok()?;
    walk(&doc, "")
}

/// Loads and verifies an artifact file (`-` for standard input), builds a `.ctxpack`
/// source in memory (imports from `registry`, checked against its `ctxpack.lock`,
/// which is not written), or, when no such file exists, loads a pinned registry
/// reference (see [`Registry::load`]).
pub fn load_pack(pack: &str, registry: &Registry) -> Result<Artifact, CliError> {
    let path = Path::new(pack);
    if path.extension().is_some_and(|e| e == "ctxpack") && path.is_file() {
        let options = crate::build::BuildOptions {
            registry: Some(registry.root().to_path_buf()),
            locked: false,
            write_lock: false,
        };
        return crate::build::build_file(path, &options)
            .map(|built| built.artifact)
            .map_err(super::build::build_error);
    }
    if !path.is_file() && !crate::source::is_stdin(path) {
        if !PackRef::looks_like_ref(pack) {
            return Err(CliError::new(
                "unreadable_input",
                3,
                format!("pack `{pack}`: no such file"),
            ));
        }
        return PinnedRef::parse(pack)
            .and_then(|reference| registry.load_pinned(&reference))
            .map_err(registry_load_error);
    }
    let bytes = crate::source::read_bytes(path)
        .map_err(|message| CliError::new("unreadable_input", 3, message))?;
    let artifact = verify_bytes(&bytes).map_err(|e| {
        CliError::new(
            e.kind(),
            e.exit_code(),
            format!("`{}`: {e}", path.display()),
        )
    })?;
    // A file is held to the trust policy like a registry load (standard input has no
    // signature beside it, so a covered pack read from it is refused).
    let hash = artifact.hash.as_deref().unwrap_or_default();
    crate::signing::check_artifact_file(path, &artifact.name, &artifact.version, hash, &bytes)
        .map_err(|(kind, message)| {
            let code = if kind == "unreadable_input" { 3 } else { 4 };
            CliError::new(kind, code, message)
        })?;
    Ok(artifact)
}

/// The failure `compile --pack scope/name@version` reports for a registry load that
/// failed; hosts that load by reference (the Python package) report the same.
pub fn registry_load_error(e: RegistryError) -> CliError {
    let kind = match &e {
        RegistryError::Unpinned(_) => "unpinned_pack",
        RegistryError::MalformedRef { .. } => "invalid_pack_reference",
        RegistryError::Signature(_)
        | RegistryError::TrustPolicy(_)
        | RegistryError::Remote { .. }
        | RegistryError::OciUnsupported(_)
        | RegistryError::InvalidLocation(_)
        | RegistryError::TagMoved { .. } => e.kind(),
        e if e.exit_code() == 3 => "unreadable_input",
        _ => "invalid_artifact",
    };
    CliError::new(kind, e.exit_code(), e.to_string())
}

/// The human summary printed by `--explain`: who asked for what first (the run's
/// safety mode, the intent and whether the fallback was used), then the budget,
/// policies and tools.
pub fn explain(cc: &CompiledContext, inputs: &CompileInputs) -> String {
    let mut out = String::new();
    let b = &cc.budget_report;
    let _ = writeln!(
        out,
        "run      {} (safety mode {})",
        inputs.run.run_id,
        inputs.run.safety_mode.as_str()
    );
    let intent = if !cc.intent.fallback_used {
        "as requested".to_owned()
    } else {
        match inputs.request.intent.as_deref() {
            Some(asked) => format!("fallback: the pack has no intent `{asked}`"),
            None => "fallback: the request names no intent".to_owned(),
        }
    };
    let _ = writeln!(out, "intent   {} ({intent})", cc.intent.name);
    let _ = writeln!(
        out,
        "pack     {}@{} ({})",
        cc.pack.name, cc.pack.version, cc.pack.hash
    );
    let _ = writeln!(
        out,
        "budget   total {}, fixed {}, available {}, tokenizer {}",
        b.total, b.fixed, b.available, b.tokenizer
    );
    let rc = &cc.runtime_controls;
    if let Some(r) = &rc.refusal_reason {
        let _ = writeln!(out, "REFUSE   {r}");
    }
    if let Some(t) = &rc.escalation_target {
        let _ = writeln!(out, "ESCALATE {t}");
    }
    if !rc.approval_gates_active.is_empty() {
        let _ = writeln!(out, "gates    {}", rc.approval_gates_active.join(", "));
    }
    if !rc.redaction_rules_active.is_empty() {
        let names: Vec<&str> = rc
            .redaction_rules_active
            .iter()
            .map(|r| r.name.as_str())
            .collect();
        let _ = writeln!(out, "redact   {}", names.join(", "));
    }

    let mut buckets = Table::new();
    buckets.load_preset(UTF8_FULL_CONDENSED);
    buckets.set_header([
        "bucket",
        "allocated",
        "used",
        "kept",
        "truncated",
        "dropped",
    ]);
    let names: std::collections::BTreeSet<&String> = b
        .allocations
        .keys()
        .chain(b.dropped_block_ids.keys())
        .collect();
    for name in names {
        let kept = cc
            .compiled_prompt
            .context_blocks
            .iter()
            .filter(|x| *x.bucket == **name);
        let truncated: Vec<&str> = kept
            .clone()
            .filter(|x| x.truncated)
            .map(|x| &*x.id)
            .collect();
        let dropped: &[Arc<str>] = b.dropped_block_ids.get(name).map_or(&[], Vec::as_slice);
        buckets.add_row([
            name.clone(),
            b.allocations.get(name).map_or("-".into(), u64::to_string),
            b.used_at_compile
                .get(name)
                .copied()
                .unwrap_or(0)
                .to_string(),
            kept.count().to_string(),
            truncated.join(", "),
            summarize(dropped),
        ]);
    }
    let _ = writeln!(out, "\n{buckets}");

    let mut policies = Table::new();
    policies.load_preset(UTF8_FULL_CONDENSED);
    policies.set_header(["policy", "priority", "mode", "fired", "effects", "error"]);
    for p in &cc.manifests.policy_manifest {
        let effects: Vec<String> = p
            .effects
            .iter()
            .filter_map(|e| e.as_object().and_then(|m| m.keys().next().cloned()))
            .collect();
        policies.add_row([
            p.policy.to_string(),
            p.priority.to_string(),
            if p.enforcing { "enforcing" } else { "advisory" }.to_owned(),
            if p.fired { "yes" } else { "no" }.to_owned(),
            effects.join(", "),
            p.error.clone().unwrap_or_default(),
        ]);
    }
    let _ = writeln!(out, "\n{policies}");

    let mut tools = Table::new();
    tools.load_preset(UTF8_FULL_CONDENSED);
    tools.set_header([
        "tool",
        "surfaced",
        "approval",
        "derivation",
        "withheld because",
    ]);
    for t in &cc.manifests.tool_manifest {
        tools.add_row([
            t.name.to_string(),
            if t.surfaced { "yes" } else { "no" }.to_owned(),
            t.capability_metadata.approval_mode.to_owned(),
            t.capability_metadata.derivation.to_string(),
            t.withheld_reason.as_deref().unwrap_or_default().to_owned(),
        ]);
    }
    let _ = writeln!(out, "\n{tools}");
    for d in &cc.diagnostics {
        let _ = writeln!(out, "{}: {}", d.code, d.message);
    }
    for w in &b.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The prompt as the model reads it, for `--explain --show-prompt`: the fixed text,
/// then every kept block in prompt order with its bucket, id and count, then the
/// (redacted) message.
pub fn show_prompt(cc: &CompiledContext) -> String {
    let mut out = String::new();
    let p = &cc.compiled_prompt;
    let mut section = |title: &str, text: &str| {
        let _ = writeln!(out, "\n── {title} ──\n{text}");
    };
    section("system", &p.system);
    if let Some(d) = &p.developer {
        section("developer", d);
    }
    section("task", &p.task);
    for block in &p.context_blocks {
        let title = format!(
            "{} · {} · {} tokens{}",
            block.bucket,
            block.id,
            block.tokens,
            if block.truncated { " · truncated" } else { "" }
        );
        section(&title, &block.text);
    }
    section("message", &p.message);
    out
}

/// At most five ids, then a count, so a table row stays readable.
fn summarize(ids: &[Arc<str>]) -> String {
    if ids.len() <= 5 {
        ids.join(", ")
    } else {
        format!("{} … (+{} more)", ids[..5].join(", "), ids.len() - 5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unpinned_and_missing_packs() {
        let dir = &Registry::open("/nonexistent-registry");
        assert_eq!(load_pack("acme/support", dir).unwrap_err().exit_code, 4);
        assert_eq!(
            load_pack("acme/support@1.0.0", dir).unwrap_err().exit_code,
            3
        );
        assert_eq!(
            load_pack("acme/support@../../x", dir)
                .unwrap_err()
                .exit_code,
            4
        );
        assert_eq!(load_pack("missing.json", dir).unwrap_err().exit_code, 3);
    }

    #[test]
    fn yaml_and_json_documents() {
        let v = parse_document(Path::new("a.yaml"), b"a: [1, x]\n").unwrap();
        assert_eq!(v, json!({"a": [1, "x"]}));
        let e = parse_document(Path::new("a.json"), b"{").unwrap_err();
        assert_eq!(e.exit_code, 3);
    }
}
