//! Session directives: the constraints a user states during a conversation ("use
//! podman instead of docker", "prohibit peanuts", "set premise outdoor event") kept
//! as deterministic, trusted state instead of transcript text.
//!
//! The directive language and the engine follow the context-compiler directive
//! grammar specification (Apache-2.0); `docs/session.md` describes both in full,
//! with the choices made where the specification is silent.
//!
//! ```text
//! raw input ──classify──▶ no directive / directive-shaped invalid ──▶ no_directive
//!                       └▶ canonical directive ──apply──▶ update {changed} | error
//! ```
//!
//! - [`grammar`]: [`classify`] raw input; [`CanonicalDirective`], the only thing that
//!   can change state.
//! - [`state`]: [`State`] (premise and per-item policies), its canonical export and its
//!   all-or-nothing import.
//! - [`engine`]: [`State::step`] (raw input) and [`State::apply`] (a canonical
//!   directive, such as a repair), each returning the decision and the next state;
//!   [`Engine`] wraps a state with the reference implementation's surface.
//! - [`conformance`]: runs one fixture in the cross-implementation fixture format.
//!
//! Pure and deterministic: no I/O, no clock, no randomness; the same inputs give the
//! same decisions and states. No input panics.

pub mod conformance;
pub mod engine;
pub mod grammar;
mod json;
pub mod state;
mod text;

pub use engine::{Applied, Decision, Engine, SemanticError, SemanticFailure};
pub use grammar::{
    classify, CanonicalDirective, Classification, DirectiveError, DirectiveKind,
    DirectiveSyntaxFailure, InvalidDirectiveSyntax,
};
pub use state::{ImportError, ImportErrorKind, Policy, State, SCHEMA_VERSION};

/// The canonical policy identity of an item (what `use Docker` and `use docker` share).
pub fn policy_key(item: &str) -> String {
    text::policy_key(item)
}
