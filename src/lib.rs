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
//! The runtime compiler sees only artifacts, never the AST or the IR.
pub mod artifact;
pub mod build;
pub mod check;
pub mod codes;
pub mod commands;
pub mod diagnostic;
pub mod imports;
pub mod ir;
pub mod lower;
pub mod runtime;
pub mod span;
pub mod syntax;
pub mod tokens;
