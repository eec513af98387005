//! `ctxpack explain CODE`: the page of a diagnostic code.

use super::exit;
use crate::codes;

pub fn run(code: Option<&str>) -> i32 {
    match code {
        None => {
            for info in codes::CODES {
                println!(
                    "{}  {:<7}  {}",
                    info.code,
                    info.severity.as_str(),
                    info.title
                );
            }
            exit::OK
        }
        Some(code) => match codes::lookup(code) {
            Some(info) => {
                print!("{}", info.page());
                exit::OK
            }
            None => {
                eprintln!("error: unknown diagnostic code `{code}`");
                eprintln!("help: `ctxpack explain` lists every code");
                exit::USAGE
            }
        },
    }
}
