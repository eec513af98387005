//! Admission, in process and on one thread, where the order in which requests are
//! polled is fixed: an admitted request holds its compile slot while it waits for its
//! turn on the core, so a second request that arrives meanwhile is over
//! `--max-concurrency` and answered 503; requests that arrive one after another each
//! get the slot.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use ctxpack::registry::Registry;
use ctxpack_serve::{Config, Service};
use serde_json::Value;
use tower::ServiceExt;

mod support;
use support::{basic_body, repo};

/// A service over a registry holding the conformance shop pack, admitting
/// `max_concurrency` compiles.
fn service(dir: &Path, max_concurrency: usize) -> Arc<Service> {
    let registry = Registry::open(dir.join("registry"));
    let built = ctxpack::build::build_file(
        &repo("tests/conformance/packs/shop.ctxpack"),
        &Default::default(),
    )
    .unwrap();
    registry.publish(&built.artifact).unwrap();
    Service::new(Config {
        registry: dir.join("registry"),
        preload: Vec::new(),
        max_concurrency,
        timeout: Duration::from_secs(30),
        body_limit: 8 * 1024 * 1024,
        cache_size: 4,
        read_timeout: Duration::from_secs(30),
    })
}

fn compile_request() -> Request<Body> {
    Request::post("/v1/compile")
        .header("content-type", "application/json")
        .body(Body::from(basic_body().to_string()))
        .unwrap()
}

/// The status, `Retry-After` and error kind of one compile through `router`.
async fn send(router: Router) -> (StatusCode, Option<String>, String) {
    let response = router.oneshot(compile_request()).await.unwrap();
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let kind = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["kind"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, retry, kind)
}

#[test]
fn a_request_waiting_for_its_turn_holds_its_compile_slot() {
    let dir = tempfile::tempdir().unwrap();
    let service = service(dir.path(), 1);
    let router = service.router();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // The first request prepares the pack; after it, the slot is free again.
        let first = send(router.clone()).await;
        assert_eq!(first, (StatusCode::OK, None, String::new()));
        // Both bodies are read in the same turn of the thread: the first request is
        // admitted and waits for its turn on the core, holding the only slot, so the
        // second is refused before the first compiles.
        let (a, b) = tokio::join!(send(router.clone()), send(router.clone()));
        assert_eq!(a, (StatusCode::OK, None, String::new()));
        assert_eq!(
            b,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("1".to_owned()),
                "overloaded".to_owned()
            )
        );
        // The slot is given back once the compile is done.
        let after = send(router.clone()).await;
        assert_eq!(after, (StatusCode::OK, None, String::new()));
    });
    let text = service.metrics.encode();
    assert!(
        text.lines()
            .any(|l| l.starts_with("ctxpack_compiles_total{")
                && l.contains("outcome=\"ok\"")
                && l.ends_with(" 3")),
        "{text}"
    );
}

#[test]
fn two_slots_admit_two_requests_in_the_same_turn() {
    let dir = tempfile::tempdir().unwrap();
    let router = service(dir.path(), 2).router();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ok = (StatusCode::OK, None, String::new());
        assert_eq!(send(router.clone()).await, ok);
        let (a, b, c) = tokio::join!(
            send(router.clone()),
            send(router.clone()),
            send(router.clone())
        );
        assert_eq!((&a, &b), (&ok, &ok));
        assert_eq!(c.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(c.2, "overloaded");
    });
}
