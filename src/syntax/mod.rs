//! Syntax: source text → an owned AST with spans, plus syntax diagnostics.
//!
//! pest stays inside this module: no `Pair` escapes it.

pub mod ast;
mod parser;
pub mod strings;
pub mod template;

pub use parser::{doc_above, parse, skip_string, ITEM_KEYWORDS};
