//! The service's Prometheus metrics (the `prometheus-client` crate), named as the
//! runtime's operators watch them:
//!
//! | metric | labels |
//! | --- | --- |
//! | `ctxpack_compiles_total` | pack, version, intent, outcome |
//! | `ctxpack_compile_duration_seconds` (histogram) | pack, version |
//! | `ctxpack_bucket_truncations_total` | pack, version, intent, bucket |
//! | `ctxpack_dropped_blocks_total` | pack, version, intent, bucket |
//! | `ctxpack_tools_surfaced` (histogram) | pack, version, intent |
//! | `ctxpack_prepared_packs` (gauge) | |
//! | `ctxpack_pack_preparations_total` | outcome (`ok`, `failed`) |
//! | `ctxpack_http_requests_total` | method, route, status |
//! | `ctxpack_http_request_duration_seconds` (histogram) | route |
//!
//! Label values come from the registry's packs (name, version, declared intents and
//! buckets) and fixed sets (outcome kinds, routes, methods, statuses), never from
//! request text. A compile that fails before an intent is resolved is counted with
//! intent `""`.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use ctxpack::artifact::Artifact;
use ctxpack::runtime::CompiledContext;

use crate::Prepared;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CompileLabels {
    pub pack: String,
    pub version: String,
    pub intent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    pack: String,
    version: String,
    intent: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PackLabels {
    pack: String,
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabels {
    pack: String,
    version: String,
    intent: String,
    bucket: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PreparationLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: &'static str,
    route: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

/// A prepared pack's series, kept with the pack: each is looked up in its family
/// (label set built, hashed, found) the first time a compile of the pack records it,
/// and later compiles count on the handle. A series appears in `/metrics` once it is
/// first recorded, as with a lookup per compile. Families never drop a series, so a
/// handle stays the one `/metrics` reads, and a pack prepared again (after it left the
/// cache) finds the same series.
pub struct PackMeters {
    duration: OnceLock<Histogram>,
    /// One per intent the pack declares, in the artifact's order.
    intents: Vec<IntentMeters>,
}

struct IntentMeters {
    name: String,
    ok: OnceLock<Counter>,
    refused: OnceLock<Counter>,
    tools: OnceLock<Histogram>,
    /// One per bucket of the pack's budget, in the artifact's order.
    buckets: Vec<BucketMeters>,
}

struct BucketMeters {
    name: String,
    truncations: OnceLock<Counter>,
    dropped: OnceLock<Counter>,
}

impl PackMeters {
    /// Empty slots for the intents and buckets `artifact` declares.
    pub fn new(artifact: &Artifact) -> PackMeters {
        let buckets = artifact.budget.as_ref().map_or(&[][..], |b| &b.buckets[..]);
        PackMeters {
            duration: OnceLock::new(),
            intents: artifact
                .intents
                .iter()
                .map(|intent| IntentMeters {
                    name: intent.name.clone(),
                    ok: OnceLock::new(),
                    refused: OnceLock::new(),
                    tools: OnceLock::new(),
                    buckets: buckets
                        .iter()
                        .map(|bucket| BucketMeters {
                            name: bucket.name.clone(),
                            truncations: OnceLock::new(),
                            dropped: OnceLock::new(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn intent(&self, name: &str) -> Option<&IntentMeters> {
        self.intents.iter().find(|i| i.name == name)
    }
}

impl IntentMeters {
    fn bucket(&self, name: &str) -> Option<&BucketMeters> {
        self.buckets.iter().find(|b| b.name == name)
    }
}

/// The series in `slot`, looked up in `family` the first time (`slot` is `None`
/// when the pack did not declare the intent or bucket: looked up each time).
fn series<'a, L, M, C>(
    slot: Option<&'a OnceLock<M>>,
    family: &Family<L, M, C>,
    labels: impl FnOnce() -> L,
) -> std::borrow::Cow<'a, M>
where
    L: Clone + std::hash::Hash + Eq,
    M: Clone,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    match slot {
        Some(slot) => {
            std::borrow::Cow::Borrowed(slot.get_or_init(|| family.get_or_create_owned(&labels())))
        }
        None => std::borrow::Cow::Owned(family.get_or_create_owned(&labels())),
    }
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds() -> Histogram {
    // 50 µs to about 3.3 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
}

fn tool_counts() -> Histogram {
    Histogram::new([0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
}

/// Every metric, registered once.
pub struct Metrics {
    registry: Mutex<Registry>,
    compiles: Family<OutcomeLabels, Counter>,
    duration: Histograms<PackLabels>,
    truncations: Family<BucketLabels, Counter>,
    dropped: Family<BucketLabels, Counter>,
    tools: Histograms<CompileLabels>,
    pub prepared_packs: Gauge,
    preparations: Family<PreparationLabels, Counter>,
    http: Family<HttpLabels, Counter>,
    http_duration: Histograms<RouteLabels>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let m = Metrics {
            registry: Mutex::new(Registry::default()),
            compiles: Family::default(),
            duration: Family::new_with_constructor(seconds),
            truncations: Family::default(),
            dropped: Family::default(),
            tools: Family::new_with_constructor(tool_counts),
            prepared_packs: Gauge::default(),
            preparations: Family::default(),
            http: Family::default(),
            http_duration: Family::new_with_constructor(seconds),
        };
        registry.register(
            "ctxpack_compiles",
            "Compiles by pack, version, intent and outcome",
            m.compiles.clone(),
        );
        registry.register(
            "ctxpack_compile_duration_seconds",
            "Time to compile one request (prepared pack), by pack and version",
            m.duration.clone(),
        );
        registry.register(
            "ctxpack_bucket_truncations",
            "Compiles in which a bucket truncated or dropped a block",
            m.truncations.clone(),
        );
        registry.register(
            "ctxpack_dropped_blocks",
            "Blocks dropped from a bucket for lack of budget",
            m.dropped.clone(),
        );
        registry.register(
            "ctxpack_tools_surfaced",
            "Tools surfaced per compile, by pack, version and intent",
            m.tools.clone(),
        );
        registry.register(
            "ctxpack_prepared_packs",
            "Prepared packs held in the cache",
            m.prepared_packs.clone(),
        );
        registry.register(
            "ctxpack_pack_preparations",
            "Packs loaded, verified and prepared, by outcome",
            m.preparations.clone(),
        );
        registry.register(
            "ctxpack_http_requests",
            "HTTP requests by method, route and status",
            m.http.clone(),
        );
        registry.register(
            "ctxpack_http_request_duration_seconds",
            "HTTP request latency by route",
            m.http_duration.clone(),
        );
        *m.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = registry;
        m
    }
}

impl Metrics {
    /// Records one compile of `prepared` (with its envelope when it compiled).
    pub(crate) fn record_compile(
        &self,
        prepared: &Prepared,
        compiled: Option<&CompiledContext>,
        outcome: &'static str,
        elapsed: Duration,
    ) {
        let meters = &prepared.meters;
        let intent = compiled.map_or("", |c| c.intent.name.as_str());
        let slots = meters.intent(intent);
        let outcome_slot = slots.and_then(|s| match outcome {
            "ok" => Some(&s.ok),
            "refused" => Some(&s.refused),
            _ => None,
        });
        series(outcome_slot, &self.compiles, || OutcomeLabels {
            pack: prepared.name.clone(),
            version: prepared.version.clone(),
            intent: intent.to_owned(),
            outcome,
        })
        .inc();
        series(Some(&meters.duration), &self.duration, || PackLabels {
            pack: prepared.name.clone(),
            version: prepared.version.clone(),
        })
        .observe(elapsed.as_secs_f64());
        let Some(cc) = compiled else { return };
        let bucket = |name: &str| BucketLabels {
            pack: prepared.name.clone(),
            version: prepared.version.clone(),
            intent: intent.to_owned(),
            bucket: name.to_owned(),
        };
        let report = &cc.budget_report;
        for (name, truncated) in &report.bucket_truncations {
            if *truncated {
                let slot = slots.and_then(|s| s.bucket(name)).map(|b| &b.truncations);
                series(slot, &self.truncations, || bucket(name)).inc();
            }
        }
        for (name, ids) in &report.dropped_block_ids {
            if !ids.is_empty() {
                let slot = slots.and_then(|s| s.bucket(name)).map(|b| &b.dropped);
                series(slot, &self.dropped, || bucket(name)).inc_by(ids.len() as u64);
            }
        }
        let surfaced = cc
            .manifests
            .tool_manifest
            .iter()
            .filter(|t| t.surfaced)
            .count();
        series(slots.map(|s| &s.tools), &self.tools, || {
            crate::labels(prepared, intent)
        })
        .observe(surfaced as f64);
    }

    pub(crate) fn record_preparation(&self, ok: bool) {
        let outcome = if ok { "ok" } else { "failed" };
        self.preparations
            .get_or_create(&PreparationLabels { outcome })
            .inc();
    }

    pub(crate) fn record_http(
        &self,
        method: &'static str,
        route: &'static str,
        status: u16,
        elapsed: Duration,
    ) {
        self.http
            .get_or_create(&HttpLabels {
                method,
                route,
                status,
            })
            .inc();
        self.http_duration
            .get_or_create(&RouteLabels { route })
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}
