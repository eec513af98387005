//! `ctxpack serve`: the compile service. It lives in its own crate and binary,
//! `ctxpack-serve` (an HTTP stack is no part of the library), which this command starts
//! with every argument passed on (see [`super::sibling`]); `ctxpack serve --help` is
//! the service's own help.

use std::ffi::OsString;

#[derive(Debug, Clone, clap::Args)]
#[command(disable_help_flag = true)]
pub struct ServeArgs {
    /// The service's flags (`ctxpack serve --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

pub fn run(args: &ServeArgs) -> i32 {
    super::sibling::exec("ctxpack-serve", &args.args, "serve")
}
