//! Subcommands as library functions. `main.rs` parses arguments with clap and calls
//! `run`, which prints and returns the process exit code.

pub mod compile;
pub mod test;
