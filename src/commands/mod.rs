//! The CLI's subcommands, as library functions returning an exit code. `main.rs`
//! only parses arguments and dispatches here.

pub mod build;
pub mod check;
pub mod compile;
pub mod diff;
pub mod error;
pub mod explain;
pub mod files;
pub mod fmt;
pub mod init;
pub mod lsp;
pub mod publish;
pub mod serve;
pub mod session;
pub mod sibling;
pub mod sign;
pub mod test;
pub mod verify;
pub mod versions;

pub use error::{CliError, Failures};

/// Exit codes shared by every subcommand (see the runtime spec).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const UNREADABLE: i32 = 3;
    pub const INVALID: i32 = 4;
    pub const REFUSED: i32 = 5;
}

/// Should output to stderr be colored? Only on a terminal, and never with `NO_COLOR`.
pub fn stderr_color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}
