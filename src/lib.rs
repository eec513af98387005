//! ctxpack: a declarative language and compiler for the context of LLM agents.
//!
//! The pipeline, one module per stage, each depending only on those before it:
//!
//! 1. [`syntax`]: source text → AST with spans (parsing never fails; it returns the
//!    tree and its diagnostics).
//! 2. [`ir`]: AST → a resolved, typed pack; `when` conditions lowered to JsonLogic.
//! 3. [`check`]: the semantic checks over the IR, one module per family.
//! 4. [`lower`]: IR → the pinned `ctxpack.pack/v1` [`artifact`].
//!
//! The runtime compiler sees only artifacts, never the AST or the IR. So do the
//! [`registry`] (publishing and loading pinned artifacts) and [`diff`] (the semantic
//! diff of two artifacts).
//!
//! Beside the pipeline, for editors: [`fmt`] is the formatter (tokens plus the item
//! structure; it never touches files with syntax errors), and [`ide`] answers an
//! editor's questions about one document (hover, definition, references, completion,
//! outline, rename, quick fixes) as pure functions of its text. The language server in
//! `lsp/` only converts between these and the protocol.
pub mod analysis;
pub mod artifact;
pub mod build;
pub mod check;
pub mod codes;
pub mod commands;
pub mod diagnostic;
pub mod diff;
pub mod fmt;
pub mod ide;
pub mod imports;
pub mod ir;
pub mod lower;
pub mod registry;
pub mod runtime;
pub mod session;
pub mod signing;
pub mod source;
pub mod span;
pub mod syntax;
pub mod testing;
pub mod tokens;
pub mod yaml;
