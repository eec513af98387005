//! The `ctxpack` command line. Argument parsing and dispatch only: every command's
//! work lives in the library (`ctxpack::commands`).

use clap::{CommandFactory, Parser, Subcommand};
use ctxpack::commands::{
    self, build::BuildArgs, check::CheckArgs, compile::CompileArgs, diff::DiffArgs, exit,
    explain::ExplainArgs, fmt::FmtArgs, lsp::LspArgs, publish::PublishArgs, serve::ServeArgs,
    test::TestArgs, verify::VerifyArgs, versions::VersionsArgs,
};

/// ctxpack — review, version and reproduce the context of LLM agents like code.
///
/// A `.ctxpack` file declares a context pack: typed context, prompts, intents, tools
/// with approval modes, policies, redactors, static blocks and a token budget.
/// `check` validates packs; `explain` documents every diagnostic code; `publish`,
/// `versions` and `diff` work with pinned artifacts and the registry.
#[derive(Debug, Parser)]
#[command(
    name = "ctxpack",
    version,
    propagate_version = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Reach this OCI registry host (`HOST` or `HOST:PORT`) over plain HTTP rather
    /// than HTTPS; repeatable. Loopback hosts always are. Also
    /// `CTXPACK_INSECURE_REGISTRIES` (comma-separated).
    #[arg(long = "insecure-registry", value_name = "HOST", global = true)]
    insecure_registry: Vec<String>,
    /// Print failures as one JSON object on stderr, `{"error": {"kind", "message",
    /// "exit_code", ...}}`, before or after the subcommand's name; for every
    /// subcommand but `lsp` and `serve`, which start servers that report their own
    /// way (the language server over the protocol, the service in JSON responses and
    /// request logs).
    #[arg(long = "json-errors", global = true)]
    json_errors: bool,
}

impl Command {
    /// Hands the global `--json-errors` to the subcommand's arguments.
    fn set_json_errors(&mut self, on: bool) {
        use commands::session::SessionCommand;
        match self {
            Command::Check(a) => a.json_errors = on,
            Command::Build(a) => a.json_errors = on,
            Command::Verify(a) => a.json_errors = on,
            Command::Compile(a) => a.json_errors = on,
            Command::Test(a) => a.json_errors = on,
            Command::Fmt(a) => a.json_errors = on,
            Command::Explain(a) => a.json_errors = on,
            Command::Publish(a) => a.json_errors = on,
            Command::Versions(a) => a.json_errors = on,
            Command::Diff(a) => a.json_errors = on,
            Command::Init(a) => a.json_errors = on,
            Command::Keygen(a) => a.json_errors = on,
            Command::Sign(a) => a.json_errors = on,
            Command::Session(a) => match &mut a.command {
                SessionCommand::Step(a) => a.json_errors = on,
                SessionCommand::Apply(a) => a.json_errors = on,
                SessionCommand::Conformance(a) => a.json_errors = on,
            },
            Command::Lsp(_) | Command::Serve(_) | Command::Completions { .. } => {}
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check packs for errors and warnings.
    ///
    /// Exit codes: 0 clean, 1 errors found (or warnings with --deny-warnings, or no
    /// `.ctxpack` file at all), 2 usage error, 3 a path could not be read.
    #[command(
        after_help = "Examples:\n  ctxpack check packs/\n  ctxpack check --format json support.ctxpack\n  ctxpack check --deny-warnings --format github packs/"
    )]
    Check(CheckArgs),
    /// Check a pack and lower it to its pinned, hashed artifact.
    ///
    /// Exit codes: 0 built, 1 the pack has errors (or `--locked` and the lock would
    /// change), 2 a usage error (`-o FILE` for several packs), 3 unreadable input or
    /// unwritable output, 4 a malformed `oci://` registry location (an import the
    /// registry holds corrupt is an error in the pack, E0702: exit 1).
    Build(BuildArgs),
    /// Recompute an artifact's hash and refuse a mismatch or an unknown format.
    ///
    /// Exit codes: 0 verified, 3 unreadable or not JSON, 4 hash mismatch or unknown format.
    Verify(VerifyArgs),
    /// Compile a pinned artifact plus one request's inputs into a compiled context.
    ///
    /// Exit codes: 0 compiled (with `--target raw`, even when the pack says to refuse:
    /// the envelope is a control for the host), 2 usage, 3 unreadable input, 4 invalid
    /// input, 5 refused by the pack (policy_eval_error, budget_exhausted, overflow
    /// error, or `refused`: a provider target was asked for and the pack refused, so no
    /// body is printed).
    Compile(CompileArgs),
    /// Run the `*.tests.yaml` cases beside packs and report `N passed, N failed`.
    ///
    /// Exit codes: 0 all passed, 1 a case failed, 3/4 a test file is unreadable or invalid.
    Test(TestArgs),
    /// Rewrite packs in the canonical layout (`--check` only reports).
    ///
    /// Exit codes: 0 formatted, 1 unformatted files with --check or files with syntax
    /// errors (never rewritten), 3 a path could not be read or written.
    #[command(
        after_help = "Examples:\n  ctxpack fmt packs/\n  ctxpack fmt --check .\n  ctxpack fmt - < support.ctxpack"
    )]
    Fmt(FmtArgs),
    /// Run the language server on stdio (starts the `ctxpack-lsp` binary).
    ///
    /// Looks for `ctxpack-lsp` next to this executable, then on PATH.
    Lsp(LspArgs),
    /// Explain a diagnostic code: what it means, why it matters, an example and the fix.
    ///
    /// Without a code, lists every code. With `--tools PACK`, shows for every intent
    /// and safety mode which tools are surfaced, withheld or conditional.
    Explain(ExplainArgs),
    /// Publish an artifact (or a `.ctxpack` source, built first) to the registry under its `scope/name@version`.
    ///
    /// The artifact is verified first. Publishing identical bytes again is a no-op;
    /// a different artifact under a published version is refused (versions are
    /// immutable). Concurrent publishers wait for each other.
    ///
    /// Exit codes: 0 published or already published, 1 a `.ctxpack` source with
    /// errors, 3 the file or registry could not be read or written, 4 the artifact is
    /// invalid or tampered, or its version is already published with a different hash.
    #[command(
        after_help = "Examples:\n  ctxpack publish out/support.json\n  ctxpack publish --registry /mnt/packs out/support.json"
    )]
    Publish(PublishArgs),
    /// List a pack's published versions and their hashes, sorted by semver.
    ///
    /// Exit codes: 0 listed, 3 the pack is not in the registry, 4 a malformed name
    /// or a corrupt index.
    #[command(
        after_help = "Examples:\n  ctxpack versions acme/support\n  ctxpack versions --format json acme/support"
    )]
    Versions(VersionsArgs),
    /// Compare two artifacts: tools, policies, budget, prompts, intents and more,
    /// with safety-relevant changes (approval or risk raised or lowered, policies
    /// removed, tools granted) listed first.
    ///
    /// Exit codes: 0 compared (whether or not they differ; with --exit-code, 1 when
    /// they differ; with --fail-on weakened, 1 when safety is weakened), 1 a
    /// `.ctxpack` source with errors, 3 an input could not be read, 4 an input is
    /// invalid.
    #[command(
        after_help = "Examples:\n  ctxpack diff v1.json v2.json\n  ctxpack diff acme/support@1.0.0 acme/support@1.1.0\n  ctxpack diff --format json --exit-code old.json new.json"
    )]
    Diff(DiffArgs),
    /// Run the compile service: `POST /v1/compile` answers what `compile` prints,
    /// `GET /metrics` serves Prometheus metrics (starts the `ctxpack-serve` binary).
    ///
    /// `ctxpack serve --help` lists the service's flags (listen address, registry,
    /// preloaded packs, concurrency, timeouts, body limit).
    Serve(ServeArgs),
    /// Session directives: the user's explicit constraints ("use podman instead of
    /// docker", "prohibit peanuts") as deterministic state.
    ///
    /// `step` classifies one user input and applies it if it is a directive; `apply`
    /// applies one canonical directive (a repair); both print the decision and the new
    /// state. `conformance` runs fixture files in the context-compiler format.
    Session(commands::session::SessionArgs),
    /// Write a starter project: a pack, its tests, example inputs and a CI workflow.
    ///
    /// Never overwrites: if any file it would write exists, it writes nothing.
    /// Exit codes: 0 written, 1 a file it would write exists (nothing written), 2 a bad
    /// `--name`, 3 a file or directory could not be created.
    #[command(
        after_help = "Examples:\n  ctxpack init\n  ctxpack init agents/support --name acme/support-agent"
    )]
    Init(commands::init::InitArgs),
    /// Write a minisign key pair for signing packs: KEY and KEY.pub.
    ///
    /// The secret key is encrypted with `CTXPACK_KEY_PASSWORD` unless `--unencrypted`.
    /// Never overwrites. The format is the `minisign` tool's.
    Keygen(commands::sign::KeygenArgs),
    /// Sign a published version (`scope/name@version`) or an artifact file.
    ///
    /// The signature covers the canonical bytes, and its trusted comment names the pack,
    /// version and hash. Packs whose scope a trust policy (`ctxpack.trust.toml`)
    /// covers load only with a valid signature by one of its keys.
    Sign(commands::sign::SignArgs),
    /// Print a shell completion script for ctxpack.
    #[command(
        after_help = "Examples:\n  ctxpack completions bash > ~/.local/share/bash-completion/completions/ctxpack\n  ctxpack completions zsh > ~/.zfunc/_ctxpack\n  ctxpack completions fish > ~/.config/fish/completions/ctxpack.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Rust ignores SIGPIPE, so writing to a closed pipe (`ctxpack check … | head`) is an
/// error that `print!` turns into a panic. A command-line tool should end quietly
/// instead, as `cat` and `grep` do: restore the default action before anything is
/// written.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first in `main`, before any other thread exists; `signal` with
    // `SIG_DFL` installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() {
    restore_sigpipe();
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if !e.use_stderr() {
                // --help and --version.
                let _ = e.print();
                std::process::exit(exit::OK);
            }
            // `--json-errors` promises one JSON object on stderr for every failure,
            // usage errors included.
            if std::env::args_os().any(|a| a == "--json-errors") {
                let text = e.to_string();
                let message = text.trim().trim_start_matches("error: ");
                commands::compile::CliError::new("usage", exit::USAGE, message).report(true);
            } else {
                let _ = e.print();
            }
            std::process::exit(exit::USAGE);
        }
    };
    ctxpack::registry::allow_insecure(cli.insecure_registry.iter().cloned());
    cli.command.set_json_errors(cli.json_errors);
    let code = match &cli.command {
        Command::Check(args) => commands::check::run(args),
        Command::Build(args) => commands::build::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Compile(args) => commands::compile::run(args),
        Command::Test(args) => commands::test::run(args),
        Command::Fmt(args) => commands::fmt::run(args),
        Command::Lsp(args) => commands::lsp::run(args),
        Command::Explain(args) => commands::explain::run_args(args),
        Command::Publish(args) => commands::publish::run(args),
        Command::Versions(args) => commands::versions::run(args),
        Command::Diff(args) => commands::diff::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Session(args) => commands::session::run(args),
        Command::Init(args) => commands::init::run(args),
        Command::Keygen(args) => commands::sign::keygen(args),
        Command::Sign(args) => commands::sign::sign(args),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "ctxpack", &mut script);
            commands::emit_bytes(&script);
            exit::OK
        }
    };
    std::process::exit(code);
}
