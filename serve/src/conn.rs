//! The connection loop: axum's `serve`, with the settings a service on the open
//! network needs and axum does not expose.
//!
//! - **Half-closed connections are answered.** A client that sends its request and
//!   then closes its side (`shutdown(SHUT_WR)`, as `nc -N` and some proxies do) still
//!   gets the response; hyper's default drops such a connection unanswered.
//! - **The request head has a deadline.** A client that trickles its head (or sends
//!   nothing) is disconnected after the read timeout; the body has the same deadline
//!   in the compile handler. A connection that stalls holds no compile slot and ends.
//! - **Shutdown drains.** The listener closes, every connection finishes the request it
//!   is serving (its body still arriving included) and closes, then the loop returns.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves `router` on `listener` until `shutdown` completes, then drains the
/// connections (see the module docs).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    // Closed (dropped) to tell every connection to finish; each connection holds a
    // receiver of `open`, so `closed()` on its sender waits for all of them.
    let (stop, stopping) = watch::channel(());
    let (open, connection) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) if is_connection_error(&e) => continue,
                // Out of descriptors or memory: wait instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stopping = stopping.clone();
        let connection = connection.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .half_close(true)
                .timer(TokioTimer::new())
                .header_read_timeout(read_timeout);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopping.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(connection);
        });
    }
    drop(listener);
    drop(stop);
    drop(connection);
    open.closed().await;
}

fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
