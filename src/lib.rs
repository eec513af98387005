//! ctxpack: a declarative language and compiler for the context of LLM agents.
pub mod artifact;
pub mod commands;
pub mod runtime;
pub mod tokens;
