//! The native half of the `ctxpack` Python package: the runtime compiler, the checker
//! and the builder of the `ctxpack` crate, converted at the boundary and nothing more.
//!
//! Everything a caller controls (paths, bytes, Python objects) is validated by the
//! library and turned into an exception of the `ctxpack.Error` hierarchy; nothing here
//! panics on input. Compiling releases the interpreter lock, so one [`Pack`] serves
//! many threads at once.

mod convert;

/// A compile allocates and frees thousands of small strings (evidence, ids, blocks);
/// mimalloc does that faster than the system allocator. Only Rust's own allocations
/// go through it; Python objects keep Python's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyString};
use serde_json::Value;

use ctxpack::artifact::{verify_bytes, Artifact};
use ctxpack::build::{BuildError, BuildOptions};
use ctxpack::commands::build::build_error;
use ctxpack::commands::compile::{load_pack, registry_load_error, CliError};
use ctxpack::diagnostic::{FileReport, Located};
use ctxpack::imports::Lockfile;
use ctxpack::registry::{PinnedRef, Registry};
use ctxpack::runtime::render::{self, Refused as RefusedBody};
use ctxpack::runtime::{
    decode_inputs, decode_json_with_lists, json_request, CompileError, CompiledContext, Evidence,
    InvokeRequest, MemoryItem, PreparedPack,
};
use ctxpack::signing::TrustPolicy;

pyo3::create_exception!(
    ctxpack,
    Error,
    PyException,
    "Every failure of ctxpack. `kind` is the stable name of the failure, `exit_code` \
     the exit code the command line would have used, and `details` the JSON object \
     `--json-errors` prints (`{\"error\": {...}}`) as Python objects."
);
pyo3::create_exception!(
    ctxpack,
    CheckFailed,
    Error,
    "The pack has errors (exit code 1); `details[\"error\"][\"diagnostics\"]` lists them."
);
pyo3::create_exception!(
    ctxpack,
    Unreadable,
    Error,
    "A file is missing or unreadable, or a document does not parse (exit code 3)."
);
pyo3::create_exception!(
    ctxpack,
    InvalidInput,
    Error,
    "An input, an artifact or a reference is well-formed but invalid (exit code 4); \
     `path` names the offending member of an input (`request.context.user.age`), \
     or is None."
);
pyo3::create_exception!(
    ctxpack,
    Refused,
    Error,
    "The pack refused or the compile failed closed (exit code 5); `reason` says why."
);

/// The exception for `error`, carrying its JSON object; `path` for invalid inputs.
fn raise(py: Python<'_>, error: &CliError, path: Option<&str>) -> PyErr {
    let err = match error.exit_code {
        1 => CheckFailed::new_err(error.message.clone()),
        3 => Unreadable::new_err(error.message.clone()),
        4 => InvalidInput::new_err(error.message.clone()),
        5 => Refused::new_err(error.message.clone()),
        _ => Error::new_err(error.message.clone()),
    };
    let value = err.value(py);
    let details = convert::to_py(py, &error.to_json()).ok();
    let reason = error.refusal_reason.as_deref().unwrap_or(&error.message);
    // Setting attributes on a fresh exception instance only fails on memory exhaustion,
    // and then the exception still says what failed.
    let _ = value.setattr("kind", error.kind);
    let _ = value.setattr("exit_code", error.exit_code);
    let _ = value.setattr("message", &error.message);
    let _ = value.setattr("details", details);
    let _ = value.setattr("path", path);
    let _ = value.setattr("reason", (error.exit_code == 5).then_some(reason));
    err
}

fn compile_error(py: Python<'_>, e: CompileError) -> PyErr {
    let path = match &e {
        CompileError::InvalidInput { path, .. } => Some(path.clone()),
        _ => None,
    };
    raise(py, &CliError::from(e), path.as_deref())
}

/// A document given as JSON text: `bytes` (borrowed), `bytearray` (copied: it is
/// mutable) or `str`.
enum Text<'a> {
    Bytes(&'a [u8]),
    Owned(Vec<u8>),
    Str(Cow<'a, str>),
}

impl Text<'_> {
    /// The JSON text, without a byte-order mark (which is not part of a document).
    fn bytes(&self) -> &[u8] {
        let b = match self {
            Text::Bytes(b) => b,
            Text::Owned(b) => b.as_slice(),
            Text::Str(s) => s.as_bytes(),
        };
        b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b)
    }
}

/// `value` as JSON text, or `None` when it is Python objects.
fn text<'a>(value: &'a Bound<'_, PyAny>) -> PyResult<Option<Text<'a>>> {
    Ok(if let Ok(b) = value.cast::<PyBytes>() {
        Some(Text::Bytes(b.as_bytes()))
    } else if let Ok(b) = value.cast::<PyByteArray>() {
        Some(Text::Owned(b.to_vec()))
    } else if let Ok(s) = value.cast::<PyString>() {
        Some(Text::Str(s.to_cow()?))
    } else {
        None
    })
}

/// An optional document as JSON text: `Some(None)` when absent, `None` when it is
/// Python objects.
fn optional_text<'a>(value: Option<&'a Bound<'_, PyAny>>) -> PyResult<Option<Option<Text<'a>>>> {
    match value {
        None => Ok(Some(None)),
        Some(v) if v.is_none() => Ok(Some(None)),
        Some(v) => Ok(text(v)?.map(Some)),
    }
}

/// A JSON document from a Python value: JSON text is parsed; anything else is
/// converted from Python objects.
fn document(py: Python<'_>, value: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let Some(text) = text(value)? else {
        return convert::from_py(value, what).map_err(|(path, message)| {
            let error = CliError::new("invalid_input", 4, format!("{path}: {message}"));
            raise(py, &error, Some(&path))
        });
    };
    // Read as an input document: a key given twice in one object is refused.
    let parsed = serde_json::from_slice::<ctxpack::runtime::document::Document>(text.bytes());
    parsed.map(|d| d.0).map_err(|e| {
        let error = CliError::new(
            "unparseable_input",
            3,
            format!("cannot parse `{what}`: {e}"),
        );
        raise(py, &error, None)
    })
}

fn optional_document(
    py: Python<'_>,
    value: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Option<Value>> {
    match value {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => document(py, v, what).map(Some),
    }
}

/// A path argument: `str` or `os.PathLike`.
fn path_arg(value: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    value.extract::<PathBuf>()
}

fn registry_for(registry: Option<&Bound<'_, PyAny>>) -> PyResult<Registry> {
    let dir = registry.map(path_arg).transpose()?;
    Ok(Registry::from_env_or(dir.as_deref()))
}

/// A pinned, verified pack, prepared to compile many requests.
///
/// Load it once (`Pack.load`, `Pack.from_bytes`, `Pack.from_registry`) and call
/// `compile` per request, from as many threads as you like: compiling releases the
/// interpreter lock, and the pack's token cache is shared by every call.
#[pyclass(module = "ctxpack", frozen)]
struct Pack {
    inner: Arc<PreparedPack>,
    last: Mutex<Last>,
}

/// The request and the evidence and memory lists last decoded from `bytes` or `str`
/// objects, with those objects. Both types are immutable, so while an object is held
/// here the same object passed again holds the same text, which decodes to the same
/// value: it is recognised by identity, without reading its bytes (an agent's steps
/// within one turn pass the same retrieval result again and again). Evidence and
/// memory in other objects go through the pack's document memo, which compares bytes.
#[derive(Default)]
struct Last {
    request: Option<(Py<PyAny>, Arc<InvokeRequest>)>,
    evidence: Option<(Py<PyAny>, Arc<[Evidence]>)>,
    memory: Option<(Py<PyAny>, Arc<[MemoryItem]>)>,
}

/// Whether `value` is a `bytes` or `str` (not a subclass): text that cannot change.
fn immutable_text(value: &Bound<'_, PyAny>) -> bool {
    value.is_exact_instance_of::<PyBytes>() || value.is_exact_instance_of::<PyString>()
}

/// The value `held` remembers for `value`, if `value` is the very object it holds.
fn held_value<T: ?Sized>(
    held: &Option<(Py<PyAny>, Arc<T>)>,
    value: Option<&Bound<'_, PyAny>>,
) -> Option<Arc<T>> {
    let (object, decoded) = held.as_ref()?;
    let value = value?;
    (value.is(object) && immutable_text(value)).then(|| Arc::clone(decoded))
}

/// Holds `value` and what it decoded to, when `value` is immutable text.
fn hold<T: ?Sized>(
    held: &mut Option<(Py<PyAny>, Arc<T>)>,
    value: Option<&Bound<'_, PyAny>>,
    decoded: &Arc<T>,
) {
    if let Some(value) = value.filter(|v| immutable_text(v)) {
        *held = Some((value.clone().unbind(), Arc::clone(decoded)));
    }
}

impl Pack {
    fn prepare(py: Python<'_>, artifact: Artifact) -> PyResult<Pack> {
        let prepared = py.detach(|| {
            let tokenizer = artifact.budget.as_ref().map(|b| b.tokenizer);
            let pack = PreparedPack::new(artifact);
            // The first compile should not pay for building the tokenizer.
            if let (Ok(_), Some(t)) = (&pack, tokenizer) {
                ctxpack::tokens::warm(t);
            }
            pack
        });
        prepared
            .map(|p| Pack {
                inner: Arc::new(p),
                last: Mutex::default(),
            })
            .map_err(|e| compile_error(py, e))
    }
}

#[pymethods]
impl Pack {
    /// Loads an artifact file (what `ctxpack build` writes), verifying its hash and,
    /// when a trust policy covers its scope, the signature beside it (`FILE.minisig`).
    /// A `.ctxpack` source is built in memory instead.
    #[staticmethod]
    fn load(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Pack> {
        let path = path_arg(path)?;
        let text = path.to_string_lossy().into_owned();
        let artifact = if path.is_file() {
            let registry = Registry::from_env_or(None);
            py.detach(|| load_pack(&text, &registry))
        } else {
            Err(CliError::new(
                "unreadable_input",
                3,
                format!("pack `{text}`: no such file"),
            ))
        };
        let artifact = artifact.map_err(|e| raise(py, &e, None))?;
        Pack::prepare(py, artifact)
    }

    /// Loads an artifact from its bytes, verifying its hash. When a trust policy
    /// (`$CTXPACK_TRUST`, else `ctxpack.trust.toml` in the current directory) covers
    /// its scope, `signature` (minisign text) must sign exactly these bytes.
    #[staticmethod]
    #[pyo3(signature = (data, *, signature = None))]
    fn from_bytes(py: Python<'_>, data: &[u8], signature: Option<&str>) -> PyResult<Pack> {
        let artifact = verify_bytes(data).map_err(|e| {
            raise(
                py,
                &CliError::new(e.kind(), e.exit_code(), e.to_string()),
                None,
            )
        })?;
        let policy = TrustPolicy::discover(None, None)
            .map_err(|e| raise(py, &CliError::new("invalid_trust_policy", 4, e), None))?;
        if let Some(policy) = policy {
            let hash = artifact.hash.as_deref().unwrap_or_default();
            policy
                .check(&artifact.name, &artifact.version, hash, data, signature)
                .map_err(|e| raise(py, &CliError::new(e.kind, 4, e.message), None))?;
        }
        Pack::prepare(py, artifact)
    }

    /// Loads `scope/name@version` from a registry: `registry`, else
    /// `$CTXPACK_REGISTRY`, else `.ctxpack/registry`. Held to the trust policy in force.
    #[staticmethod]
    #[pyo3(signature = (reference, *, registry = None))]
    fn from_registry(
        py: Python<'_>,
        reference: &str,
        registry: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Pack> {
        let registry = registry_for(registry)?;
        let artifact = py
            .detach(|| PinnedRef::parse(reference).and_then(|r| registry.load_pinned(&r)))
            .map_err(|e| raise(py, &registry_load_error(e), None))?;
        Pack::prepare(py, artifact)
    }

    /// The pack's name, `scope/name`.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.artifact().name
    }

    /// The pack's version.
    #[getter]
    fn version(&self) -> &str {
        &self.inner.artifact().version
    }

    /// The artifact's `blake3:` hash.
    #[getter]
    fn hash(&self) -> Option<&str> {
        self.inner.artifact().hash.as_deref()
    }

    /// Compiles one request. Each input is Python objects (dict/list/str/int/float/
    /// bool/None) or its JSON text as `str` or `bytes`; both give the same envelope,
    /// and JSON `bytes` is the fastest (no conversion of Python objects). `evidence`
    /// and `memory` are lists, or None for none.
    ///
    /// Inputs sent again as JSON text are not decoded again: the same `bytes` or `str`
    /// object as the last compile's request, evidence or memory is recognised by
    /// identity, and equal evidence or memory in another object by its bytes (the
    /// pack's document memo).
    ///
    /// Raises `InvalidInput` (with `.path`) for an input of the wrong shape and
    /// `Refused` when the compile fails closed. A pack that refuses the request still
    /// compiles: see `must_refuse`.
    #[pyo3(signature = (*, run, request, evidence = None, memory = None))]
    fn compile(
        &self,
        py: Python<'_>,
        run: &Bound<'_, PyAny>,
        request: &Bound<'_, PyAny>,
        evidence: Option<&Bound<'_, PyAny>>,
        memory: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Compiled> {
        let pack = &self.inner;
        if let Some(result) = self.fast_path(py, run, request, evidence, memory)? {
            return result.map(Compiled::new).map_err(|e| compile_error(py, e));
        }
        let run = document(py, run, "run")?;
        let request = document(py, request, "request")?;
        let evidence = optional_document(py, evidence, "evidence")?;
        let memory = optional_document(py, memory, "memory")?;
        let compiled = py.detach(|| {
            decode_inputs(run, request, evidence, memory)
                .and_then(|inputs| pack.compile_canonical(&inputs))
        });
        compiled
            .map(Compiled::new)
            .map_err(|e| compile_error(py, e))
    }

    /// Forgets every cached token count, content hash and decoded document, as for a
    /// pack loaded anew.
    /// The cache is bounded; this is for measurements and memory-conscious hosts.
    fn clear_cache(&self) {
        self.inner.clear_token_cache();
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Last::default();
    }

    /// `(hits, misses)` of the token-count cache since the pack was loaded.
    #[getter]
    fn cache_stats(&self) -> (u64, u64) {
        self.inner.token_cache_stats()
    }

    fn __repr__(&self) -> String {
        let a = self.inner.artifact();
        format!("<ctxpack.Pack {}@{}>", a.name, a.version)
    }
}

/// A compile and its canonical bytes, or why it failed.
type Compile = Result<(CompiledContext, Vec<u8>), CompileError>;

impl Pack {
    /// Compiles straight from JSON text when every document is JSON text and decodes
    /// cleanly; `None` sends the caller down the general path, which parses each
    /// document and names what is wrong with it. A request, evidence or memory
    /// document that is the very object of the last such compile is not read again
    /// (see [`Last`]).
    fn fast_path(
        &self,
        py: Python<'_>,
        run: &Bound<'_, PyAny>,
        request: &Bound<'_, PyAny>,
        evidence: Option<&Bound<'_, PyAny>>,
        memory: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Compile>> {
        let (Some(run_text), Some(request_text), Some(evidence_text), Some(memory_text)) = (
            text(run)?,
            text(request)?,
            optional_text(evidence)?,
            optional_text(memory)?,
        ) else {
            return Ok(None);
        };
        let (known_request, known_evidence, known_memory) = {
            let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            (
                held_value(&last.request, Some(request)),
                held_value(&last.evidence, evidence),
                held_value(&last.memory, memory),
            )
        };
        let pack = &self.inner;
        // Decoded and compiled with the GIL released once.
        let done = py.detach(|| {
            let inputs = decode_json_with_lists(
                run_text.bytes(),
                known_request.or_else(|| json_request(request_text.bytes())),
                known_evidence
                    .or_else(|| pack.decode_json_evidence(evidence_text.as_ref().map(Text::bytes))),
                known_memory
                    .or_else(|| pack.decode_json_memory(memory_text.as_ref().map(Text::bytes))),
            )?;
            let compiled = pack.compile_canonical(&inputs);
            Some((inputs, compiled))
        });
        let Some((inputs, compiled)) = done else {
            return Ok(None);
        };
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        hold(&mut last.request, Some(request), &inputs.request);
        hold(&mut last.evidence, evidence, &inputs.evidence);
        hold(&mut last.memory, memory, &inputs.memory);
        Ok(Some(compiled))
    }
}

/// One compiled request: the `ctxpack.compiled/v1` envelope and what a host acts on.
#[pyclass(module = "ctxpack", frozen, name = "CompiledContext")]
struct Compiled {
    cc: CompiledContext,
    /// The canonical envelope.
    bytes: Vec<u8>,
    envelope: PyOnceLock<Py<PyAny>>,
}

impl Compiled {
    /// A compile and its canonical bytes (serialized once, with the ledger hash).
    fn new((cc, canonical): (CompiledContext, Vec<u8>)) -> Compiled {
        Compiled {
            cc,
            bytes: canonical,
            envelope: PyOnceLock::new(),
        }
    }
}

fn refused_body(py: Python<'_>, e: RefusedBody) -> PyErr {
    raise(py, &CliError::from(e), None)
}

#[pymethods]
impl Compiled {
    /// The canonical envelope: byte for byte what `ctxpack compile` prints.
    fn to_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    /// The envelope as Python objects (built on first access, then shared).
    #[getter]
    fn envelope(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.envelope
            .get_or_try_init(py, || {
                convert::to_py(py, &self.cc.to_value()).map(Bound::unbind)
            })
            .map(|v| v.clone_ref(py))
    }

    /// Whether the host must refuse the request (`refusal_reason` says why).
    #[getter]
    fn must_refuse(&self) -> bool {
        self.cc.runtime_controls.must_refuse
    }

    /// Why the pack refused, or None.
    #[getter]
    fn refusal_reason(&self) -> Option<&str> {
        self.cc.runtime_controls.refusal_reason.as_deref()
    }

    /// Whether the host must escalate (to `controls["escalation_target"]`).
    #[getter]
    fn must_escalate(&self) -> bool {
        self.cc.runtime_controls.must_escalate
    }

    /// `runtime_controls`: refusal, escalation, approval gates, redactions.
    #[getter]
    fn controls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        convert::serialize_to_py(py, &self.cc.runtime_controls)
    }

    /// The audit ledger's replay hash (`context_ledger.hash`).
    #[getter]
    fn ledger_hash(&self) -> &str {
        &self.cc.context_ledger.hash
    }

    /// The OpenAI Chat Completions request body; raises `Refused` when the pack
    /// refused (a refused compile has no provider body).
    #[pyo3(signature = (*, model = None))]
    fn openai<'py>(&self, py: Python<'py>, model: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let body = render::openai(&self.cc, model).map_err(|e| refused_body(py, e))?;
        convert::to_py(py, &body)
    }

    /// The Anthropic Messages request body; raises `Refused` when the pack refused.
    #[pyo3(signature = (*, model = None, max_tokens = 1024))]
    fn anthropic<'py>(
        &self,
        py: Python<'py>,
        model: Option<&str>,
        max_tokens: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let body =
            render::anthropic(&self.cc, model, max_tokens).map_err(|e| refused_body(py, e))?;
        convert::to_py(py, &body)
    }

    fn __repr__(&self) -> String {
        format!(
            "<ctxpack.CompiledContext {}@{} intent={} ledger={}>",
            self.cc.pack.name,
            self.cc.pack.version,
            self.cc.intent.name,
            self.cc.context_ledger.hash
        )
    }
}

/// One diagnostic of `check`, located in the source (lines and columns from 1).
#[pyclass(module = "ctxpack", frozen, get_all)]
struct Diagnostic {
    /// The stable code, e.g. `E0201`.
    code: String,
    /// `error` or `warning`.
    severity: String,
    message: String,
    /// The `path` given to `check`.
    file: String,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    help: Option<String>,
    /// The primary span first, then the secondary ones: dicts with `message`,
    /// `line`, `column`, `end_line`, `end_column`.
    spans: Py<PyAny>,
}

impl Diagnostic {
    fn new(py: Python<'_>, d: Located) -> PyResult<Diagnostic> {
        Ok(Diagnostic {
            spans: convert::serialize_to_py(py, &d.labels)?.unbind(),
            code: d.code.to_owned(),
            severity: d.severity.to_owned(),
            message: d.message,
            file: d.file,
            line: d.line,
            column: d.column,
            end_line: d.end_line,
            end_column: d.end_column,
            help: d.help,
        })
    }
}

#[pymethods]
impl Diagnostic {
    fn __repr__(&self) -> String {
        format!(
            "<ctxpack.Diagnostic {}:{}:{}: {}[{}]: {}>",
            self.file, self.line, self.column, self.severity, self.code, self.message
        )
    }
}

/// Checks a pack's text and returns its diagnostics in source order (an empty list
/// when it is clean). Imports resolve from `registry` (else `$CTXPACK_REGISTRY`, else
/// `.ctxpack/registry`) and are held to the `ctxpack.lock` beside `path`, if any.
#[pyfunction]
#[pyo3(signature = (source, *, path = "<string>", registry = None))]
fn check(
    py: Python<'_>,
    source: &str,
    path: &str,
    registry: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Diagnostic>> {
    let registry = registry_for(registry)?;
    let lock = Lockfile::read(&Lockfile::path_for(Path::new(path)))
        .map_err(|e| raise(py, &CliError::new("unreadable_input", 3, e), None))?;
    let source = source.strip_prefix('\u{feff}').unwrap_or(source).to_owned();
    let report = py.detach(|| {
        let (checked, _) = ctxpack::check::check_source_with(&source, &registry, lock.as_ref());
        FileReport {
            path: path.to_owned(),
            source,
            diagnostics: checked.diagnostics,
        }
    });
    report
        .located()
        .into_iter()
        .map(|d| Diagnostic::new(py, d))
        .collect()
}

/// Builds the pack at `path` and returns its artifact: the canonical bytes
/// `ctxpack build` writes. Raises `CheckFailed` when the pack has errors. Imports
/// resolve from `registry` and are checked against `ctxpack.lock`, which is never
/// written; with `locked=True` a lockfile that would have to change is an error.
#[pyfunction]
#[pyo3(signature = (path, *, registry = None, locked = false))]
fn build<'py>(
    py: Python<'py>,
    path: &Bound<'_, PyAny>,
    registry: Option<&Bound<'_, PyAny>>,
    locked: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let path = path_arg(path)?;
    let options = BuildOptions {
        registry: registry.map(path_arg).transpose()?,
        locked,
        write_lock: false,
    };
    let built = py.detach(|| {
        ctxpack::build::build_file(&path, &options).map(|b| b.artifact.canonical_bytes())
    });
    match built {
        Ok(bytes) => Ok(PyBytes::new(py, &bytes)),
        Err(
            e @ (BuildError::Unreadable(_)
            | BuildError::Diagnostics(_)
            | BuildError::LockWouldChange(_)),
        ) => Err(raise(py, &build_error(e), None)),
    }
}

/// The number of tokens of `text` under `tokenizer` (`o200k`, `cl100k` or
/// `approx`), exactly as the compiler counts them: ordinary encoding, so
/// special-token text such as `<|endoftext|>` counts as the plain text it is.
#[pyfunction]
#[pyo3(signature = (text, tokenizer = "o200k"))]
fn count_tokens(py: Python<'_>, text: &str, tokenizer: &str) -> PyResult<usize> {
    let Some(kind) = ctxpack::tokens::Tokenizer::parse(tokenizer) else {
        let error = CliError::new(
            "invalid_input",
            4,
            format!("unknown tokenizer `{tokenizer}` (expected o200k, cl100k or approx)"),
        );
        return Err(raise(py, &error, Some("tokenizer")));
    };
    Ok(py.detach(|| ctxpack::tokens::count(kind, text)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CheckFailed", py.get_type::<CheckFailed>())?;
    m.add("Unreadable", py.get_type::<Unreadable>())?;
    m.add("InvalidInput", py.get_type::<InvalidInput>())?;
    m.add("Refused", py.get_type::<Refused>())?;
    m.add_class::<Pack>()?;
    m.add_class::<Compiled>()?;
    m.add_class::<Diagnostic>()?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(build, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    Ok(())
}
