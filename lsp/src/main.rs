//! `ctxpack-lsp`: the ctxpack language server, on stdio.
//!
//! Usage: `ctxpack-lsp [--registry DIR] [--stdio]`. `--registry` names the registry
//! that imports are resolved from (default: `$CTXPACK_REGISTRY`, else
//! `.ctxpack/registry`, as for `ctxpack check`); `--stdio` is accepted and ignored,
//! since stdio is the only transport. `ctxpack lsp` starts this binary too.

mod buffer;
mod convert;
mod features;
mod guard;
mod server;
mod workspace;

use std::path::PathBuf;

use tower_lsp_server::{LspService, Server};

/// Each analysis of a large pack allocates and frees hundreds of thousands of small
/// values (its syntax tree, IR and diagnostics): mimalloc does that several times
/// faster than the system allocator, which is time an edit waits for.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: ctxpack-lsp [--registry DIR] [--stdio]\n\n\
The ctxpack language server. It speaks the Language Server Protocol on stdin/stdout.\n\n\
Options:\n  --registry DIR  resolve imports from DIR [default: $CTXPACK_REGISTRY or .ctxpack/registry]\n  \
--stdio         accepted for editor compatibility (stdio is the only transport)\n  \
--version       print the version\n  --help          print this help";

/// Parses the command line: the registry, or an exit code and message.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<PathBuf>, (i32, String)> {
    let mut registry = None;
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stdio" => {}
            "--registry" => match args.next() {
                Some(dir) => registry = Some(PathBuf::from(dir)),
                None => {
                    return Err((
                        2,
                        format!("error: `--registry` needs a directory\n\n{USAGE}"),
                    ))
                }
            },
            "--help" | "-h" => return Err((0, USAGE.to_owned())),
            "--version" | "-V" => {
                return Err((0, format!("ctxpack-lsp {}", env!("CARGO_PKG_VERSION"))))
            }
            other => match other.strip_prefix("--registry=") {
                Some(dir) => registry = Some(PathBuf::from(dir)),
                None => {
                    return Err((
                        2,
                        format!("error: unexpected argument `{other}`\n\n{USAGE}"),
                    ))
                }
            },
        }
    }
    Ok(registry)
}

/// The stack of every runtime thread, the blocking ones that check documents included:
/// the main thread's usual 8 MiB rather than tokio's 2 MiB, so that a pack nested up to
/// the parser's limit (`MAX_NESTING`) is checked on any of them.
const THREAD_STACK: usize = 8 << 20;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(THREAD_STACK)
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(serve()),
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    }
}

async fn serve() {
    let registry = match parse_args(std::env::args().skip(1)) {
        Ok(r) => r,
        Err((code, message)) => {
            if code == 0 {
                println!("{message}");
            } else {
                eprintln!("{message}");
            }
            std::process::exit(code);
        }
    };
    let (service, socket) = LspService::new(|client| server::Backend::new(client, registry));
    // The guard answers malformed frames itself, so one bad message never stops the
    // server (see `guard`).
    guard::run(tokio::io::stdin(), tokio::io::stdout(), |input, output| {
        Server::new(input, output, socket).serve(service)
    })
    .await;
    // The guard keeps a read of stdin pending, in a blocking thread the runtime would
    // wait for at shutdown, while the client may keep stdin open after `exit`. Every
    // reply has been written: leave now, with 0 only after a `shutdown` request (an
    // `exit` without one, or the end of the input, is 1).
    let shut_down = server::SHUT_DOWN.load(std::sync::atomic::Ordering::SeqCst);
    std::process::exit(if shut_down { 0 } else { 1 });
}
