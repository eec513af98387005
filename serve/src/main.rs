//! `ctxpack-serve`: the compile service (`ctxpack serve` starts this binary). See the
//! library's docs for the API; `--help` for the flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ctxpack_serve::{Config, Service};

/// A stateless compile service: `POST /v1/compile` answers what `ctxpack compile`
/// prints, `GET /metrics` serves Prometheus metrics, `GET /healthz` and `GET /readyz`
/// answer probes. Scale it by running more replicas behind any load balancer.
#[derive(Debug, Parser)]
#[command(name = "ctxpack serve", bin_name = "ctxpack serve", version)]
struct Args {
    /// The address to listen on (`127.0.0.1:0` picks a free port; the address is
    /// printed on the first line of standard error).
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: SocketAddr,
    /// The registry packs are loaded from [default: $CTXPACK_REGISTRY or .ctxpack/registry].
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// Prepare these packs (`scope/name@version`) at start; `/readyz` answers 200 once
    /// all are prepared. Repeat the flag for several.
    #[arg(long, value_name = "PACK")]
    preload: Vec<String>,
    /// Compiles admitted at once (running, at most one per core, or waiting for a
    /// core); more are answered 503 with `Retry-After`.
    #[arg(long, default_value_t = 64)]
    max_concurrency: usize,
    /// Milliseconds a compile request may take once its body is read; a later answer
    /// is 503 (a compile that has started finishes first, then is answered 503).
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    /// The largest request body in bytes; larger ones are answered 413.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    body_limit: usize,
    /// Prepared packs kept in memory (least recently used are dropped).
    #[arg(long, default_value_t = 64)]
    cache_size: usize,
    /// Milliseconds in-flight requests get to finish after SIGTERM or SIGINT.
    #[arg(long, default_value_t = 10_000)]
    shutdown_deadline_ms: u64,
    /// Milliseconds a client may take to send a request's head, and then its body; a
    /// slower body is answered 408, a slower head closes the connection.
    #[arg(long, default_value_t = 30_000)]
    read_timeout_ms: u64,
}

fn main() {
    let args = Args::parse();
    let runtime = match ctxpack_serve::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(3);
        }
    };
    runtime.block_on(serve(args));
}

async fn serve(args: Args) {
    let registry = ctxpack::registry::Registry::from_env_or(args.registry.as_deref());
    let service = Service::new(Config {
        registry: registry.root().to_path_buf(),
        preload: args.preload.clone(),
        max_concurrency: args.max_concurrency,
        timeout: Duration::from_millis(args.timeout_ms),
        body_limit: args.body_limit,
        cache_size: args.cache_size,
        read_timeout: Duration::from_millis(args.read_timeout_ms.max(1)),
    });
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", args.listen);
            std::process::exit(3);
        }
    };
    let address = listener.local_addr().map_or(args.listen, |a| a);
    eprintln!("{}", serde_json::json!({"listening": address.to_string()}));
    let preloading = std::sync::Arc::clone(&service);
    tokio::spawn(async move {
        for (pack, e) in preloading.preload().await {
            eprintln!(
                "{}",
                serde_json::json!({"preload_failed": e.to_json(), "pack": pack})
            );
        }
    });
    let deadline = Duration::from_millis(args.shutdown_deadline_ms);
    let app = service.router();
    let read_timeout = Duration::from_millis(args.read_timeout_ms.max(1));
    ctxpack_serve::conn::serve(listener, app, read_timeout, async move {
        shutdown_signal().await;
        eprintln!("{}", serde_json::json!({"shutdown": "draining"}));
        // In-flight requests get `deadline` to finish; then the process exits anyway.
        tokio::spawn(async move {
            tokio::time::sleep(deadline).await;
            ctxpack_serve::log::flush();
            eprintln!("{}", serde_json::json!({"shutdown": "deadline reached"}));
            std::process::exit(1);
        });
    })
    .await;
    ctxpack_serve::log::flush();
    eprintln!("{}", serde_json::json!({"shutdown": "done"}));
}

/// SIGTERM or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
}
