//! Path resolution: `ctx.*` against the pack's context schema, `request.*` and
//! `run.*` against the built-ins.

use super::{Pack, Ty};

/// The built-in fields, always present.
pub const BUILTINS: &[(&str, BuiltinTy, bool)] = &[
    ("request.intent", BuiltinTy::String, false),
    ("request.message", BuiltinTy::String, false),
    ("request.channel", BuiltinTy::String, false),
    ("request.locale", BuiltinTy::String, false),
    ("run.id", BuiltinTy::String, false),
    ("run.tenant", BuiltinTy::String, true),
    ("run.user.id", BuiltinTy::String, true),
    ("run.user.roles", BuiltinTy::StringList, false),
    ("run.safety_mode", BuiltinTy::SafetyMode, false),
];

#[derive(Debug, Clone, Copy)]
pub enum BuiltinTy {
    String,
    StringList,
    SafetyMode,
}

impl BuiltinTy {
    fn ty(self) -> Ty {
        match self {
            BuiltinTy::String => Ty::String,
            BuiltinTy::StringList => Ty::List(Box::new(Ty::String)),
            BuiltinTy::SafetyMode => Ty::Enum(
                ["autonomous", "supervised", "reviewed"]
                    .map(String::from)
                    .into(),
            ),
        }
    }
}

/// A resolved path: its type and whether it may be absent.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub ty: Ty,
    pub optional: bool,
    /// `Some(path below ctx)` for context fields.
    pub field: Option<String>,
}

/// The paths a pack with `session directives` may read.
pub const SESSION_PATHS: &[&str] = &["session.premise", "session.use", "session.prohibit"];

/// Resolves a full path (`ctx.user.tier`, `request.locale`, and with `session
/// directives`, `session.premise`, `session.use`, `session.prohibit`).
pub fn resolve(pack: &Pack, path: &str) -> Option<Resolved> {
    if let Some(rest) = path.strip_prefix("ctx.") {
        return pack.field(rest).map(|f| Resolved {
            ty: f.ty.clone(),
            optional: f.optional,
            field: Some(rest.to_owned()),
        });
    }
    if pack.session.is_some() {
        let session = match path {
            "session.premise" => Some((Ty::String, true)),
            "session.use" | "session.prohibit" => Some((Ty::List(Box::new(Ty::String)), false)),
            _ => None,
        };
        if let Some((ty, optional)) = session {
            return Some(Resolved {
                ty,
                optional,
                field: None,
            });
        }
    }
    BUILTINS
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, ty, optional)| Resolved {
            ty: ty.ty(),
            optional: *optional,
            field: None,
        })
}

/// Every path an expression may name, for "did you mean" help and completion.
pub fn all_paths(pack: &Pack) -> Vec<String> {
    let mut paths: Vec<String> = pack
        .fields
        .iter()
        .map(|f| format!("ctx.{}", f.path))
        .collect();
    paths.extend(BUILTINS.iter().map(|(p, _, _)| (*p).to_owned()));
    if pack.session.is_some() {
        paths.extend(SESSION_PATHS.iter().map(|p| (*p).to_owned()));
    }
    paths
}
