//! The CLI's subcommands, as library functions returning an exit code. `main.rs`
//! only parses arguments and dispatches here.

/// `print!` that never panics: a failed write to standard output (a full disk, a
/// broken pipe) ends the process with exit 3 and a message on standard error. (A
/// standard output closed at start is not one: the runtime opens `/dev/null` there
/// before `main`, as for any Rust program.)
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::commands::emit(::std::format_args!($($arg)*))
    };
}

/// `println!` that never panics; see [`out!`].
macro_rules! outln {
    () => {
        $crate::commands::emit(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::commands::emit(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

/// `anstream::print!` (styles stripped where the terminal does not take them) that
/// never panics; see [`out!`].
macro_rules! styled_out {
    ($($arg:tt)*) => {
        $crate::commands::emit_styled(::std::format_args!($($arg)*))
    };
}

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

/// Writes to standard output, or ends the process with exit 3 when it cannot: the
/// output is the command's result, and a result that could not be written must not
/// pass for a success (nor panic).
pub fn emit(args: std::fmt::Arguments<'_>) {
    write_or_exit(std::io::stdout().lock(), args);
}

/// [`emit`] through `anstream`, which strips styles where they are not wanted.
pub fn emit_styled(args: std::fmt::Arguments<'_>) {
    write_or_exit(anstream::stdout().lock(), args);
}

/// [`emit`] for bytes.
pub fn emit_bytes(bytes: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = out.write_all(bytes).and_then(|()| out.flush());
    if let Err(e) = written {
        unwritable(&e);
    }
}

fn write_or_exit(mut out: impl std::io::Write, args: std::fmt::Arguments<'_>) {
    let written = out.write_fmt(args).and_then(|()| out.flush());
    if let Err(e) = written {
        unwritable(&e);
    }
}

fn unwritable(e: &std::io::Error) -> ! {
    eprintln!("error: cannot write to standard output: {e}");
    std::process::exit(exit::UNREADABLE);
}

/// Should output to stderr be colored? Only on a terminal, and never with `NO_COLOR`.
pub fn stderr_color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}
