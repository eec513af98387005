//! Syntax: source text → an owned AST with spans, plus syntax diagnostics.
//!
//! pest stays inside this module: no `Pair` escapes it.

pub mod ast;
pub(crate) mod jsonlex;
mod parser;
mod shift;
pub mod strings;
pub mod template;

pub use parser::{
    doc_above, parse, reparse, reparse_at, reparse_item, skip_string, Kept, ITEM_KEYWORDS,
    MALFORMED_JSON, MAX_NESTING,
};
