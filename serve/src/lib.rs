//! `ctxpack serve`: a stateless compile service over a registry.
//!
//! `POST /v1/compile` takes `{pack: "scope/name@version", run, request, evidence?,
//! memory?, target?, model?, max_tokens?}` and answers exactly what `ctxpack compile`
//! prints for the same inputs — the same bytes, since both go through
//! [`ctxpack::commands::compile::render_output`] — with the ledger hash in the
//! `x-ctxpack-ledger-hash` header. Failures answer the `--json-errors` object; the
//! status says which family and the object's `kind` which failure (see [`status_of`]).
//!
//! Prepared packs are kept in a bounded least-recently-used cache keyed by the pinned
//! reference (published versions never change, so a reference names one artifact and
//! one digest), and a pack many clients ask for at once is prepared once: the first
//! request loads and prepares it, the others wait for that result. A pack that fails to
//! load or verify is never cached.
//!
//! Metrics (`GET /metrics`, Prometheus text format) take their label values only from
//! packs the registry holds (name, version, declared intents and buckets) and from
//! fixed sets (outcomes, routes), never from request text, so clients cannot grow the
//! label set.

pub mod conn;
pub mod log;
pub mod metrics;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use ctxpack::commands::compile::{render_output, CliError, Target};
use ctxpack::registry::{PackRef, Registry, RegistryError};
use ctxpack::runtime::document::Document;
use ctxpack::runtime::{decode_inputs, CompileInputs, PreparedPack};
use serde_json::Value;
use tokio::sync::{OnceCell, Semaphore};

use metrics::{CompileLabels, Metrics, PackMeters};

/// How the service is set up.
#[derive(Debug, Clone)]
pub struct Config {
    pub registry: PathBuf,
    /// Packs to prepare at start; `/readyz` answers 200 once all are.
    pub preload: Vec<String>,
    /// Compiles admitted at once, running (at most one per core) or waiting for a
    /// core; more are refused with 503 and `Retry-After` (0 refuses every compile, to
    /// drain a replica).
    pub max_concurrency: usize,
    /// The longest a compile request may take once its body is read: a request still
    /// waiting for its turn or its pack then is answered 503 at once, and a compile
    /// that has started is answered 503 when it ends.
    pub timeout: Duration,
    /// The largest request body, in bytes; larger ones are refused with 413.
    pub body_limit: usize,
    /// Prepared packs kept in memory.
    pub cache_size: usize,
    /// How long a client may take to send a request's head, and then its body: a
    /// connection that trickles (or stops) is answered 408 or closed, and holds
    /// nothing after that.
    pub read_timeout: Duration,
}

/// A prepared pack and its identity, for metric labels.
pub struct Prepared {
    pub pack: PreparedPack,
    pub name: String,
    pub version: String,
    pub digest: String,
    /// The pack's metric series, found once (see [`PackMeters`]).
    pub meters: PackMeters,
}

type Loading = Arc<OnceCell<Result<Arc<Prepared>, CliError>>>;

/// The service's state, shared by every request.
pub struct Service {
    config: Config,
    registry: Registry,
    cache: Mutex<lru::LruCache<String, Arc<Prepared>>>,
    /// Packs being prepared, so that concurrent first requests wait for one load.
    loading: Mutex<std::collections::HashMap<String, Loading>>,
    permits: Arc<Semaphore>,
    pub metrics: Metrics,
    ready: Mutex<Readiness>,
}

/// What `/readyz` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Readiness {
    Preloading,
    Ready,
    /// One line per `--preload` pack that could not be prepared.
    Failed(String),
}

impl Service {
    pub fn new(config: Config) -> Arc<Service> {
        let capacity = NonZeroUsize::new(config.cache_size.max(1)).unwrap_or(NonZeroUsize::MIN);
        Arc::new(Service {
            // Held to the trust policy of `$CTXPACK_TRUST` or `./ctxpack.trust.toml`:
            // a pack whose signature fails is never prepared, so never cached.
            registry: Registry::open_trusted(&config.registry),
            cache: Mutex::new(lru::LruCache::new(capacity)),
            loading: Mutex::new(Default::default()),
            permits: Arc::new(Semaphore::new(config.max_concurrency)),
            metrics: Metrics::default(),
            ready: Mutex::new(if config.preload.is_empty() {
                Readiness::Ready
            } else {
                Readiness::Preloading
            }),
            config,
        })
    }

    /// The router: `/v1/compile`, `/metrics`, `/healthz`, `/readyz`.
    pub fn router(self: &Arc<Service>) -> Router {
        Router::new()
            .route("/v1/compile", post(compile))
            .route("/metrics", get(metrics_text))
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(ready))
            .layer(middleware::from_fn_with_state(Arc::clone(self), observe))
            .with_state(Arc::clone(self))
    }

    /// Prepares every `--preload` pack, each even when an earlier one failed.
    /// `/readyz` turns 200 when all succeeded; otherwise it stays 503 and names each
    /// pack that failed and why, and the failures are returned in `--preload` order.
    pub async fn preload(self: &Arc<Service>) -> Vec<(String, CliError)> {
        let mut failed = Vec::new();
        for reference in self.config.preload.clone() {
            let outcome = match parse_ref(&reference) {
                Ok(parsed) => self.prepared(&parsed).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                failed.push((reference, e));
            }
        }
        *lock(&self.ready) = if failed.is_empty() {
            Readiness::Ready
        } else {
            Readiness::Failed(
                failed
                    .iter()
                    .map(|(r, e)| format!("preload failed: {r}: {}: {}\n", e.kind, e.message))
                    .collect(),
            )
        };
        failed
    }

    /// The prepared pack for `reference` if the cache holds it.
    fn cached(&self, reference: &PackRef) -> Option<Arc<Prepared>> {
        lock(&self.cache).get(&reference.to_string()).cloned()
    }

    /// The prepared pack for `reference`: from the cache, or loaded and prepared once
    /// however many requests ask at the same time.
    async fn prepared(&self, reference: &PackRef) -> Result<Arc<Prepared>, CliError> {
        let key = reference.to_string();
        // The cache is read under the lock of the packs being loaded: a load in
        // flight caches its pack before it leaves that table (below), so a request
        // finds the pack in one or the other and never starts a second load.
        let cell = {
            let mut loading = lock(&self.loading);
            if let Some(hit) = lock(&self.cache).get(&key) {
                return Ok(Arc::clone(hit));
            }
            Arc::clone(loading.entry(key.clone()).or_default())
        };
        let result = cell
            .get_or_init(|| async {
                let registry = self.registry.clone();
                let reference = reference.clone();
                let loaded = tokio::task::spawn_blocking(move || load(&registry, &reference))
                    .await
                    .unwrap_or_else(|e| Err(internal(format!("preparing the pack failed: {e}"))));
                self.metrics.record_preparation(loaded.is_ok());
                loaded
            })
            .await
            .clone();
        if let Ok(prepared) = &result {
            let mut cache = lock(&self.cache);
            cache.put(key.clone(), Arc::clone(prepared));
            self.metrics.prepared_packs.set(cache.len() as i64);
        }
        let mut loading = lock(&self.loading);
        if loading.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            loading.remove(&key);
        }
        drop(loading);
        result
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn internal(message: String) -> CliError {
    CliError::new("internal_error", 5, message)
}

/// Loads, verifies and prepares a pinned pack.
fn load(registry: &Registry, reference: &PackRef) -> Result<Arc<Prepared>, CliError> {
    let artifact = registry.load(reference).map_err(|e| registry_error(&e))?;
    let (name, version) = (artifact.name.clone(), artifact.version.clone());
    let digest = artifact.hash.clone().unwrap_or_default();
    let meters = PackMeters::new(&artifact);
    let pack = PreparedPack::new(artifact).map_err(CliError::from)?;
    Ok(Arc::new(Prepared {
        pack,
        name,
        version,
        digest,
        meters,
    }))
}

fn registry_error(e: &RegistryError) -> CliError {
    let kind = match e {
        RegistryError::Unpinned(_) => "unpinned_pack",
        RegistryError::MalformedRef { .. } => "invalid_pack_reference",
        RegistryError::NotFound { .. } => "not_found",
        other => other.kind(),
    };
    CliError::new(kind, e.exit_code(), e.to_string())
}

fn parse_ref(reference: &str) -> Result<PackRef, CliError> {
    PackRef::parse(reference).map_err(|e| registry_error(&e))
}

/// The HTTP status of a failure: 400 for a body that is not JSON, 404 for a pack the
/// registry does not have, 413 over the body limit, 422 for invalid input, an unpinned
/// pack or a compile the pack refused, 503 when overloaded or too slow.
pub fn status_of(error: &CliError) -> StatusCode {
    match error.kind {
        "unparseable_input" => StatusCode::BAD_REQUEST,
        "not_found" => StatusCode::NOT_FOUND,
        "payload_too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "request_timeout" => StatusCode::REQUEST_TIMEOUT,
        "overloaded" | "timeout" => StatusCode::SERVICE_UNAVAILABLE,
        "internal_error" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

/// What a compile request was, for the request log and the metrics.
#[derive(Debug, Clone, Default)]
struct Outcome {
    pack: Option<(String, String)>,
    intent: Option<String>,
    outcome: &'static str,
    ledger_hash: Option<String>,
}

fn error_response(error: &CliError, outcome: Outcome) -> Response {
    let mut body = error.to_json().to_string();
    body.push('\n');
    let mut response = (
        status_of(error),
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if status_of(error) == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response.extensions_mut().insert(outcome);
    response
}

async fn compile(
    State(service): State<Arc<Service>>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Response {
    let limit = service.config.body_limit;
    let too_large = || {
        let error = CliError::new(
            "payload_too_large",
            3,
            format!("the request body is over the limit of {limit} bytes"),
        );
        error_response(&error, outcome_of(&error, None))
    };
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let read = tokio::time::timeout(
        service.config.read_timeout,
        axum::body::to_bytes(body, limit),
    );
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if over_limit(&e) => return too_large(),
        Ok(Err(e)) => {
            let error = CliError::new(
                "unparseable_input",
                3,
                format!("cannot read the request body: {e}"),
            );
            return error_response(&error, outcome_of(&error, None));
        }
        Err(_) => {
            let error = CliError::new(
                "request_timeout",
                3,
                format!(
                    "the request body did not arrive within {} ms",
                    service.config.read_timeout.as_millis()
                ),
            );
            return error_response(&error, outcome_of(&error, None));
        }
    };
    let Ok(permit) = Arc::clone(&service.permits).try_acquire_owned() else {
        let error = CliError::new("overloaded", 5, "every compile slot is busy; retry shortly");
        return error_response(&error, outcome_of(&error, None));
    };
    let deadline = service.config.timeout;
    let started = Instant::now();
    // The deadline drops a request still waiting for its turn or for its pack to be
    // prepared. A compile that has started runs to its end (CPU work on this worker,
    // which no timer interrupts) and is answered as late when it ends past the
    // deadline. The timer fires on its next tick, not at the deadline: an answer that
    // came in between is late all the same.
    match tokio::time::timeout(deadline, answer(&service, bytes, permit)).await {
        Ok(response) if started.elapsed() <= deadline => response,
        _ => {
            let error = CliError::new(
                "timeout",
                5,
                format!("the compile took longer than {} ms", deadline.as_millis()),
            );
            error_response(&error, outcome_of(&error, None))
        }
    }
}

/// Whether a body could not be read because it is over the limit (rather than
/// malformed, such as a broken chunked encoding).
fn over_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

fn outcome_of(error: &CliError, pack: Option<&Prepared>) -> Outcome {
    Outcome {
        pack: pack.map(|p| (p.name.clone(), p.version.clone())),
        intent: None,
        outcome: error.kind,
        ledger_hash: None,
    }
}

/// A compile request's fields.
struct CompileRequest {
    pack: String,
    inputs: Inputs,
    target: Target,
    model: Option<String>,
    max_tokens: u32,
}

/// The body as it usually comes: well-formed, decoded straight into the runtime's
/// input types in one pass. Anything this does not accept goes the general way
/// ([`parse_request`]), which reports errors exactly as `ctxpack compile` does.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FastBody {
    pack: String,
    #[serde(deserialize_with = "ctxpack::runtime::object")]
    run: ctxpack::runtime::RunContext,
    #[serde(deserialize_with = "ctxpack::runtime::object")]
    request: ctxpack::runtime::InvokeRequest,
    #[serde(default, deserialize_with = "ctxpack::runtime::objects")]
    evidence: Vec<ctxpack::runtime::Evidence>,
    #[serde(default, deserialize_with = "ctxpack::runtime::objects")]
    memory: Vec<ctxpack::runtime::MemoryItem>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_tokens: Option<u32>,
}

/// The inputs of a compile request, decoded or still to decode.
enum Inputs {
    Decoded(Box<CompileInputs>),
    Documents {
        run: Value,
        request: Value,
        evidence: Option<Value>,
        memory: Option<Value>,
    },
}

fn fast_path(bytes: &Bytes) -> Option<CompileRequest> {
    let body = ctxpack::runtime::from_json_bytes::<ctxpack::runtime::Object<FastBody>>(bytes)?.0;
    let target = match body.target.as_deref() {
        None | Some("raw") => Target::Raw,
        Some("openai") => Target::Openai,
        Some("anthropic") => Target::Anthropic,
        Some(_) => return None,
    };
    Some(CompileRequest {
        pack: body.pack,
        inputs: Inputs::Decoded(Box::new(CompileInputs {
            run: body.run,
            request: body.request.into(),
            evidence: body.evidence.into(),
            memory: body.memory.into(),
        })),
        target,
        model: body.model,
        max_tokens: body.max_tokens.unwrap_or(1024),
    })
}

fn parse_request(bytes: &Bytes) -> Result<CompileRequest, CliError> {
    if let Some(request) = fast_path(bytes) {
        return Ok(request);
    }
    // Read as an input document: a key given twice in one object is refused.
    let body = serde_json::from_slice::<Document>(bytes)
        .map(|d| d.0)
        .map_err(|e| {
            if ctxpack::commands::compile::out_of_range(&e) {
                return ctxpack::commands::compile::json_number_out_of_range("body", &e);
            }
            CliError::new(
                "unparseable_input",
                3,
                format!("the request body is not JSON: {e}"),
            )
        })?;
    let Value::Object(mut body) = body else {
        return Err(invalid("body", "expected an object"));
    };
    const KNOWN: [&str; 8] = [
        "pack",
        "run",
        "request",
        "evidence",
        "memory",
        "target",
        "model",
        "max_tokens",
    ];
    if let Some(unknown) = body.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(invalid(unknown, "unknown member"));
    }
    let pack = match body.remove("pack") {
        Some(Value::String(p)) => p,
        _ => return Err(invalid("pack", "expected `scope/name@version`")),
    };
    let required = |body: &mut serde_json::Map<String, Value>, key: &str| {
        body.remove(key)
            .filter(|v| !v.is_null())
            .ok_or_else(|| invalid(key, "missing"))
    };
    let run = required(&mut body, "run")?;
    let request = required(&mut body, "request")?;
    let optional = |body: &mut serde_json::Map<String, Value>, key: &str| {
        body.remove(key).filter(|v| !v.is_null())
    };
    let evidence = optional(&mut body, "evidence");
    let memory = optional(&mut body, "memory");
    let target = match optional(&mut body, "target") {
        None => Target::Raw,
        Some(Value::String(t)) => match t.as_str() {
            "raw" => Target::Raw,
            "openai" => Target::Openai,
            "anthropic" => Target::Anthropic,
            _ => return Err(invalid("target", "expected `raw`, `openai` or `anthropic`")),
        },
        Some(_) => return Err(invalid("target", "expected a string")),
    };
    let model = match optional(&mut body, "model") {
        None => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => return Err(invalid("model", "expected a string")),
    };
    let max_tokens = match optional(&mut body, "max_tokens") {
        None => 1024,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| invalid("max_tokens", "expected a positive integer"))?,
    };
    Ok(CompileRequest {
        pack,
        inputs: Inputs::Documents {
            run,
            request,
            evidence,
            memory,
        },
        target,
        model,
        max_tokens,
    })
}

fn invalid(member: &str, message: &str) -> CliError {
    CliError::new("invalid_input", 4, format!("{member}: {message}"))
}

type CompileResult = Result<(Vec<u8>, ctxpack::runtime::CompiledContext), CompileFailure>;

/// Decodes and compiles an admitted request on the async worker that read it.
///
/// Decoding and compiling are short CPU work (under a millisecond on the reference
/// workload, about 20 ms for a body at the default limit), so they run where the
/// body arrived instead of being handed to another thread: a hand-over costs two
/// context switches, and the envelope would be freed on another thread's heap. The
/// runtime has one worker per core, so at most one compile per core runs at a time:
/// run all at once on time slices, compiles would evict each other's data from the
/// caches and gain no request anything. `/healthz` and `/metrics` are answered
/// between two compiles.
async fn answer(
    service: &Arc<Service>,
    bytes: Bytes,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    // Behind the requests already ready on this worker: the worker reads them before
    // this one compiles, so the admitted requests beyond one per core wait here,
    // holding their compile slots (counted against `--max-concurrency`), and a
    // timeout while one waits drops it before any work is done.
    tokio::task::yield_now().await;
    let read = parse_request(&bytes).and_then(|request| {
        let reference = parse_ref(&request.pack)?;
        Ok((request, reference))
    });
    let (request, reference) = match read {
        Ok(read) => read,
        Err(e) => return error_response(&e, outcome_of(&e, None)),
    };
    drop(bytes);
    let prepared = match service.cached(&reference) {
        Some(prepared) => prepared,
        // Loaded and prepared off the async threads (it reads the registry).
        None => match service.prepared(&reference).await {
            Ok(prepared) => prepared,
            Err(e) => return error_response(&e, outcome_of(&e, None)),
        },
    };
    guarded(service, &prepared, permit, || {
        run_compile(&prepared, request)
    })
}

/// Runs `work`, a compile, and answers it. A defect that panics answers 500
/// (`internal_error`, counted in the metrics) and leaves the worker serving, as a task
/// that panicked on another thread did; either way the compile slot is given back.
fn guarded(
    service: &Service,
    prepared: &Arc<Prepared>,
    permit: tokio::sync::OwnedSemaphorePermit,
    work: impl FnOnce() -> CompileResult,
) -> Response {
    let started = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    let elapsed = started.elapsed();
    drop(permit);
    match result {
        Ok(result) => respond(service, prepared, result, elapsed),
        Err(_) => {
            let e = internal("the compile failed: it panicked".into());
            service
                .metrics
                .record_compile(prepared, None, e.kind, elapsed);
            error_response(&e, outcome_of(&e, Some(prepared)))
        }
    }
}

/// The response to a compile, and its metrics.
fn respond(
    service: &Service,
    prepared: &Arc<Prepared>,
    result: CompileResult,
    elapsed: Duration,
) -> Response {
    match result {
        Ok((body, compiled)) => {
            let outcome = if compiled.runtime_controls.must_refuse {
                "refused"
            } else {
                "ok"
            };
            service
                .metrics
                .record_compile(prepared, Some(&compiled), outcome, elapsed);
            let ledger = compiled.context_ledger.hash.clone();
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response();
            if let Ok(value) = HeaderValue::from_str(&ledger) {
                response
                    .headers_mut()
                    .insert("x-ctxpack-ledger-hash", value);
            }
            response.extensions_mut().insert(Outcome {
                pack: Some((prepared.name.clone(), prepared.version.clone())),
                intent: Some(compiled.intent.name.clone()),
                outcome,
                ledger_hash: Some(ledger),
            });
            response
        }
        Err(failure) => {
            let (error, compiled) = *failure;
            let kind = if error.kind == "refused" {
                "refused"
            } else {
                error.kind
            };
            service
                .metrics
                .record_compile(prepared, compiled.as_ref(), kind, elapsed);
            let mut outcome = outcome_of(&error, Some(prepared));
            outcome.intent = compiled.map(|c| c.intent.name);
            error_response(&error, outcome)
        }
    }
}

type CompileFailure = Box<(CliError, Option<ctxpack::runtime::CompiledContext>)>;

/// Decodes the inputs, compiles and renders, as `ctxpack compile` does.
fn run_compile(prepared: &Prepared, request: CompileRequest) -> CompileResult {
    let inputs = match request.inputs {
        Inputs::Decoded(inputs) => *inputs,
        Inputs::Documents {
            run,
            request,
            evidence,
            memory,
        } => decode_inputs(run, request, evidence, memory)
            .map_err(|e| Box::new((CliError::from(e), None)))?,
    };
    if request.target == Target::Raw {
        // The envelope serialized once, for its ledger hash and the body.
        let (compiled, bytes) = prepared
            .pack
            .compile_canonical(&inputs)
            .map_err(|e| Box::new((CliError::from(e), None)))?;
        // Sent as the bytes they are: the serializer writes UTF-8 only.
        return Ok((bytes, compiled));
    }
    let compiled = prepared
        .pack
        .compile(&inputs)
        .map_err(|e| Box::new((CliError::from(e), None)))?;
    match render_output(
        &compiled,
        request.target,
        request.model.as_deref(),
        request.max_tokens,
    ) {
        Ok(body) => Ok((body.into_bytes(), compiled)),
        Err(e) => Err(Box::new((e, Some(compiled)))),
    }
}

async fn metrics_text(State(service): State<Arc<Service>>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        service.metrics.encode(),
    )
        .into_response()
}

async fn ready(State(service): State<Arc<Service>>) -> Response {
    let readiness = lock(&service.ready).clone();
    match readiness {
        Readiness::Ready => (StatusCode::OK, "ready\n").into_response(),
        Readiness::Preloading => (StatusCode::SERVICE_UNAVAILABLE, "preloading\n").into_response(),
        Readiness::Failed(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// Counts and times every request, and logs one JSON line for it: route, status,
/// duration, and for compiles the pack, version, intent, outcome and ledger hash —
/// never prompt text or evidence.
async fn observe(State(service): State<Arc<Service>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // A bounded set: any other method token a client sends is `other`.
    let method = match request.method().as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "HEAD" => "HEAD",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    let route = match request.uri().path() {
        "/v1/compile" => "/v1/compile",
        "/metrics" => "/metrics",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        _ => "other",
    };
    let response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    service.metrics.record_http(method, route, status, elapsed);
    let outcome = response.extensions().get::<Outcome>();
    let pack = outcome.and_then(|o| o.pack.as_ref());
    log::line(&log::Line {
        duration_ms: (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
        intent: outcome.and_then(|o| o.intent.as_deref()),
        ledger_hash: outcome.and_then(|o| o.ledger_hash.as_deref()),
        method,
        outcome: outcome.map(|o| o.outcome),
        pack: pack.map(|(name, _)| name.as_str()),
        route,
        status,
        version: pack.map(|(_, version)| version.as_str()),
    });
    response
}

/// The runtime the service runs on: one worker per core (the cores the process may
/// run on, after its CPU affinity and cgroup quota; `TOKIO_WORKER_THREADS` sets
/// another count), whose workers write out the pending request log when they go idle
/// and when they stop (see [`log`]).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(log::flush)
        .on_thread_stop(log::flush)
        .build()
}

/// Labels of a compile, from the prepared pack and the compiled context.
pub(crate) fn labels(prepared: &Prepared, intent: &str) -> CompileLabels {
    CompileLabels {
        pack: prepared.name.clone(),
        version: prepared.version.clone(),
        intent: intent.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service (over an empty registry) admitting one compile, and the conformance
    /// shop pack prepared.
    fn service_and_pack() -> (tempfile::TempDir, Arc<Service>, Arc<Prepared>) {
        let dir = tempfile::tempdir().unwrap();
        let service = Service::new(Config {
            registry: dir.path().join("registry"),
            preload: Vec::new(),
            max_concurrency: 1,
            timeout: Duration::from_secs(30),
            body_limit: 1 << 20,
            cache_size: 1,
            read_timeout: Duration::from_secs(30),
        });
        let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/conformance/packs/shop.ctxpack");
        let built = ctxpack::build::build_file(&source, &Default::default()).unwrap();
        let prepared = Arc::new(Prepared {
            name: built.artifact.name.clone(),
            version: built.artifact.version.clone(),
            digest: String::new(),
            meters: PackMeters::new(&built.artifact),
            pack: PreparedPack::new(built.artifact).unwrap(),
        });
        (dir, service, prepared)
    }

    /// The value of the sample `name{...}` whose labels include each of `labels`.
    fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .find(|l| labels.iter().all(|label| l.contains(label)))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn a_packs_series_are_found_once_and_count_where_metrics_reads_them() {
        let (_dir, service, prepared) = service_and_pack();
        let case: Value = serde_json::from_slice(
            &std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/conformance/basic_supervised_refund/case.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let inputs =
            decode_inputs(case["run"].clone(), case["request"].clone(), None, None).unwrap();
        let mut compiled = prepared.pack.compile(&inputs).unwrap();
        let report = &mut compiled.budget_report;
        // A declared bucket (a slot of the pack's meters) and a name the pack does not
        // declare (looked up in the family each time) both count.
        for bucket in ["evidence", "undeclared"] {
            report.bucket_truncations.insert(bucket.into(), true);
            report
                .dropped_block_ids
                .insert(bucket.into(), vec!["a".into(), "b".into()]);
        }
        let metrics = &service.metrics;
        let elapsed = Duration::from_millis(1);
        metrics.record_compile(&prepared, Some(&compiled), "ok", elapsed);
        metrics.record_compile(&prepared, Some(&compiled), "refused", elapsed);
        // The same pack prepared again (after it left the cache) has new slots, which
        // find the same series.
        let again = Prepared {
            pack: PreparedPack::new(prepared.pack.artifact().clone()).unwrap(),
            name: prepared.name.clone(),
            version: prepared.version.clone(),
            digest: String::new(),
            meters: PackMeters::new(prepared.pack.artifact()),
        };
        metrics.record_compile(&again, Some(&compiled), "ok", elapsed);
        metrics.record_compile(&again, None, "invalid_input", elapsed);
        let text = metrics.encode();
        let pack = "pack=\"conformance/shop\"";
        let intent = "intent=\"refund\"";
        let at = |name: &str, labels: &[&str]| sample(&text, name, labels);
        assert_eq!(
            at("ctxpack_compiles_total", &[pack, intent, "outcome=\"ok\""]),
            Some(2.0),
            "{text}"
        );
        assert_eq!(
            at(
                "ctxpack_compiles_total",
                &[pack, intent, "outcome=\"refused\""]
            ),
            Some(1.0)
        );
        assert_eq!(
            at(
                "ctxpack_compiles_total",
                &[pack, "intent=\"\"", "outcome=\"invalid_input\""]
            ),
            Some(1.0)
        );
        assert_eq!(
            at("ctxpack_compile_duration_seconds_count", &[pack]),
            Some(4.0)
        );
        assert_eq!(
            at("ctxpack_tools_surfaced_count", &[pack, intent]),
            Some(3.0)
        );
        for bucket in ["bucket=\"evidence\"", "bucket=\"undeclared\""] {
            assert_eq!(
                at("ctxpack_bucket_truncations_total", &[pack, intent, bucket]),
                Some(3.0),
                "{text}"
            );
            assert_eq!(
                at("ctxpack_dropped_blocks_total", &[pack, intent, bucket]),
                Some(6.0)
            );
        }
        // A series appears once it is first recorded, not when the pack is prepared.
        assert_eq!(
            at("ctxpack_bucket_truncations_total", &["bucket=\"policy\""]),
            None
        );
        assert_eq!(
            at(
                "ctxpack_compiles_total",
                &[intent, "outcome=\"internal_error\""]
            ),
            None
        );
    }

    #[test]
    fn a_compile_that_panics_answers_500_and_gives_its_slot_back() {
        let (_dir, service, prepared) = service_and_pack();
        let permit = Arc::clone(&service.permits).try_acquire_owned().unwrap();
        assert_eq!(service.permits.available_permits(), 0);
        let response = guarded(&service, &prepared, permit, || panic!("a defect"));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let outcome = response.extensions().get::<Outcome>().unwrap();
        assert_eq!(outcome.outcome, "internal_error");
        assert_eq!(
            outcome.pack,
            Some((prepared.name.clone(), prepared.version.clone()))
        );
        // The slot is free again: the next request is admitted.
        assert_eq!(service.permits.available_permits(), 1);
        let body = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
            .unwrap();
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["kind"], "internal_error");
        assert_eq!(error["error"]["exit_code"], 5);
        let metrics = service.metrics.encode();
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("ctxpack_compiles_total{")
                    && l.contains("outcome=\"internal_error\"")
                    && l.ends_with(" 1")),
            "{metrics}"
        );
    }
}
